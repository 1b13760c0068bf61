package mcptest

import (
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPOptions configures NewStreamableServer. The zero value serves a
// dual-era server with legacy sessions and SSE responses.
//
// Common profiles:
//
//   - dual-era: Stateless (modern requests need it in the SDK; legacy
//     clients still initialize, without a session).
//   - legacy only: Server.Versions = LegacyVersions(), not Stateless (legacy
//     sessions with Mcp-Session-Id and a GET stream).
//   - modern only: Server.Versions = ModernVersions(), Stateless.
type HTTPOptions struct {
	// Server configures the served NewServer.
	Server ServerOptions
	// Stateless serves without sessions. The SDK accepts modern
	// (2026-07-28) requests only on stateless handlers.
	Stateless bool
	// JSONResponse answers with application/json instead of an SSE stream.
	JSONResponse bool
	// Inspect, if set, sees every request before the handler does. It
	// must not read the body.
	Inspect func(*http.Request)
	// Received, if set, gets each POST's headers and body, as the server
	// received them, before the handler serves it.
	Received func(header http.Header, body []byte)
	// TLS, if set, serves HTTPS with this configuration (its
	// Certificates, and ClientAuth for mutual TLS).
	TLS *tls.Config
}

// NewStreamableServer serves NewServer(&opts.Server) over Streamable HTTP
// at the returned server's URL (the root path). opts may be nil. The server
// and every SDK session it opened are closed when the test ends.
func NewStreamableServer(t testing.TB, opts *HTTPOptions) *httptest.Server {
	t.Helper()
	var o HTTPOptions
	if opts != nil {
		o = *opts
	}
	s, g := newServer(&o.Server)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{
		Stateless:                    o.Stateless,
		JSONResponse:                 o.JSONResponse,
		PropagateRequestCancellation: true,
	})
	return serve(t, s, g, h, o.Inspect, o.Received, o.TLS)
}

// NewSSEServer serves NewServer(opts) over the deprecated HTTP+SSE
// transport (2024-11-05) at the returned server's URL: GET opens the
// stream, whose first event names the POST endpoint. opts may be nil.
func NewSSEServer(t testing.TB, opts *ServerOptions) *httptest.Server {
	t.Helper()
	s, g := newServer(opts)
	h := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil)
	return serve(t, s, g, h, nil, nil, nil)
}

func serve(t testing.TB, s *mcp.Server, g *gates, h http.Handler, inspect func(*http.Request), received func(http.Header, []byte), tlsConfig *tls.Config) *httptest.Server {
	inner := h
	h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if inspect != nil {
			inspect(r)
		}
		if r.Method == http.MethodPost {
			// The cancellations tool needs the JSON-RPC ids, which the SDK
			// keeps to itself.
			body, err := io.ReadAll(r.Body)
			r.Body.Close()
			if err != nil {
				http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
				return
			}
			g.note(body)
			if received != nil {
				received(r.Header, body)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		inner.ServeHTTP(w, r)
	})
	srv := httptest.NewUnstartedServer(h)
	if tlsConfig != nil {
		srv.TLS = tlsConfig
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(func() {
		g.stop() // calls still waiting would hold their sessions open
		srv.CloseClientConnections()
		srv.Close()
		// Sessions a client did not end (with DELETE) would keep their
		// goroutines past the test.
		for ss := range s.Sessions() {
			_ = ss.Close()
		}
	})
	return srv
}
