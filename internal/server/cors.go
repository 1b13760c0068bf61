package server

import (
	"net/http"
	"net/textproto"
	"strings"

	"github.com/mcp-gateway/mcp-gateway/internal/mcpheader"
)

// CORS for browser hosts (a web app at an origin listed in
// allowed_origins): without these headers a browser lets such a page
// neither send the MCP headers (Authorization, Mcp-Session-Id, ...) nor
// read the answers. CORS is off unless allowed_origins lists origins,
// and only those listed get it: the loopback origins a loopback
// listener also accepts get none, and any other origin is refused (403)
// before this. No Access-Control-Allow-Credentials: hosts send their
// token in Authorization, never in cookies.
const (
	corsEndpointMethods = "POST, GET, DELETE, OPTIONS"
	corsMetadataMethods = "GET, HEAD, OPTIONS"
	// corsHeaders are the request headers the endpoint reads; the
	// Mcp-Param-* headers of tools (x-mcp-header) are allowed as a
	// preflight names them.
	corsHeaders = "Content-Type, Authorization, Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method, Mcp-Name, Last-Event-ID"
	// corsExposed are the response headers a page may read: the session
	// id, and the challenge that names the resource metadata.
	corsExposed = "Mcp-Session-Id, WWW-Authenticate"
	// corsMaxAge lets a browser keep a preflight's answer for 10 minutes
	// (browsers cap it at 2 hours or less).
	corsMaxAge = "600"
)

// cors adds the CORS headers of a request whose Origin passed the
// Origin check, and answers it when it is a preflight; it reports
// whether it did.
func (s *Server) cors(w http.ResponseWriter, r *http.Request) bool {
	if len(s.origins) == 0 {
		return false
	}
	methods, ok := s.corsPath(r.URL.Path)
	if !ok {
		return false
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	if origin == "" || !s.origins[strings.TrimSuffix(strings.ToLower(origin), "/")] {
		return false
	}
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Expose-Headers", corsExposed)
		return false
	}
	// A preflight. The endpoint's Host check applies to it as to what
	// follows it; the metadata answers any Host.
	if methods == corsEndpointMethods && !s.hostAllowed(r.Host) {
		s.foreignHost(w, r)
		return true
	}
	h.Add("Vary", "Access-Control-Request-Method")
	h.Add("Vary", "Access-Control-Request-Headers")
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Methods", methods)
	h.Set("Access-Control-Allow-Headers", corsHeaders+paramHeaders(r.Header.Values("Access-Control-Request-Headers"), methods == corsEndpointMethods))
	h.Set("Access-Control-Max-Age", corsMaxAge)
	w.WriteHeader(http.StatusNoContent)
	return true
}

// corsPath returns the methods of a path that has CORS: the MCP
// endpoint, each profile's path, and the protected resource metadata.
func (s *Server) corsPath(path string) (string, bool) {
	switch {
	case path == s.opts.Endpoint:
		return corsEndpointMethods, true
	case strings.HasPrefix(path, s.profileBase) && s.isProfile(path[len(s.profileBase):]):
		return corsEndpointMethods, true
	case path == metadataPath || strings.HasPrefix(path, metadataPath+"/"):
		return corsMetadataMethods, true
	}
	return "", false
}

// paramHeaders lists, each after ", ", the Mcp-Param-* headers a
// preflight asks for (on the endpoint only), in their canonical form.
func paramHeaders(requested []string, endpoint bool) string {
	if !endpoint {
		return ""
	}
	var b strings.Builder
	for _, line := range requested {
		for name := range strings.SplitSeq(line, ",") {
			name = strings.TrimSpace(name)
			if len(name) > len(mcpheader.ParamPrefix) && strings.EqualFold(name[:len(mcpheader.ParamPrefix)], mcpheader.ParamPrefix) && isHeaderToken(name) {
				b.WriteString(", ")
				b.WriteString(textproto.CanonicalMIMEHeaderKey(name))
			}
		}
	}
	return b.String()
}

// isHeaderToken reports whether s is an HTTP token (RFC 9110 §5.6.2), the
// syntax of a header name.
func isHeaderToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}
