package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/gorilla/mux"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// metadataPath is where RFC 9728 puts protected resource metadata.
const metadataPath = "/.well-known/oauth-protected-resource"

// ResourceMetadata is the gateway's OAuth 2.0 protected resource
// metadata (RFC 9728), which tells a host where to get a token for it.
type ResourceMetadata struct {
	// Resource is the gateway's canonical resource URL (RFC 8707), the
	// audience its tokens carry.
	Resource string
	// AuthorizationServers are the issuers whose tokens are accepted.
	AuthorizationServers []string
	// ScopesSupported are the scopes listed in the metadata.
	ScopesSupported []string
	// RequiredScopes are named in a 401's challenge (scope), so that a
	// host asks for them at once.
	RequiredScopes []string
}

// URL returns where the metadata of Resource is (RFC 9728 §3.1): the
// well-known path inserted between the host and the resource's path.
func (m *ResourceMetadata) URL() string {
	u, err := url.Parse(m.Resource)
	if err != nil || u.Host == "" {
		return metadataPath
	}
	u.Path = metadataPath + strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	u.Fragment = ""
	return u.String()
}

// path is the resource URL's path, without a trailing "/".
func (m *ResourceMetadata) path() string {
	u, err := url.Parse(m.Resource)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(u.Path, "/")
}

// forProfile returns the metadata of a profile's path under endpoint:
// the resource is that path's URL, Resource's scheme and host with
// <endpoint>/<profile> (config.ProfileResource), so that a host that
// reaches the gateway there asks for a token for it (RFC 9728 §3.3: the
// resource in the document is the URL the host used), and the document
// is at /.well-known/oauth-protected-resource<endpoint>/<profile>,
// whatever path Resource has. m itself for "" (the main endpoint); nil
// for a nil m.
func (m *ResourceMetadata) forProfile(endpoint, profile string) *ResourceMetadata {
	if m == nil || profile == "" {
		return m
	}
	c := *m
	c.Resource = config.ProfileResource(m.Resource, endpoint, profile)
	return &c
}

// resourceMetadata serves the metadata (of a profile's path under its
// path-suffixed form); 404 without OAuth and for a name that is not a
// profile.
func (s *Server) resourceMetadata(w http.ResponseWriter, r *http.Request) {
	md := s.meta.Load()
	profile := mux.Vars(r)["profile"]
	if md == nil || profile != "" && !s.isProfile(profile) {
		http.NotFound(w, r)
		return
	}
	md = md.forProfile(s.opts.Endpoint, profile)
	body := struct {
		Resource               string   `json:"resource"`
		AuthorizationServers   []string `json:"authorization_servers"`
		ScopesSupported        []string `json:"scopes_supported,omitempty"`
		BearerMethodsSupported []string `json:"bearer_methods_supported"`
	}{md.Resource, md.AuthorizationServers, md.ScopesSupported, []string{"header"}}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "max-age=300")
	_ = json.NewEncoder(w).Encode(body)
}

// SetResourceMetadata replaces Options.ResourceMetadata (a reloaded
// config's); nil stops serving it. The paths it is served at are those
// of the start.
func (s *Server) SetResourceMetadata(md *ResourceMetadata) { s.meta.Store(md) }

// SetProfiles replaces Options.Profiles (a reloaded config's): requests
// on the path of a profile no longer listed get 404 from then on.
func (s *Server) SetProfiles(names []string) {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	s.profiles.Store(&set)
}

func (s *Server) isProfile(name string) bool { return (*s.profiles.Load())[name] }

// profileOf returns the profile whose path r came on; "" for the main
// endpoint. The routes guarantee that any other path is the profile
// base and one segment (onProfile checked it names a profile).
func (s *Server) profileOf(r *http.Request) string {
	if r.URL.Path == s.opts.Endpoint {
		return ""
	}
	return strings.TrimPrefix(r.URL.Path, s.profileBase)
}

// onProfile serves a profile's path with next, or answers 404 with a
// JSON-RPC error for a name that is not a profile.
func (s *Server) onProfile(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.isProfile(mux.Vars(r)["profile"]) {
			s.notAProfile(w, r)
			return
		}
		next(w, r)
	}
}

// notAProfile answers a request on the path of a name that is not a
// profile: one never configured, or one a reload removed (the router
// found no view for it, router.Reply.NoView, before SetProfiles ran).
func (s *Server) notAProfile(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, nil, jsonrpc.NewError(jsonrpc.CodeInvalidRequest,
		"Not found: %s is not an MCP endpoint of this gateway (no profile %q; the endpoint is %s)", r.URL.Path, s.profileOf(r), s.opts.Endpoint))
}
