package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-gateway/mcp-gateway/internal/policy"
)

// TestCORS: for an origin listed in allowed_origins, a browser host's
// preflight on the MCP endpoint and on the protected resource metadata
// is answered with that origin only, the endpoint's methods and the
// headers it accepts (Mcp-Param-* as asked), and actual responses let
// the page read Mcp-Session-Id and WWW-Authenticate; an origin not
// listed gets no CORS header (the Origin check answers 403), and
// without allowed_origins there is no CORS at all.
func TestCORS(t *testing.T) {
	const app = "https://app.example.com"
	md := &ResourceMetadata{Resource: "http://gw.example.com/mcp", AuthorizationServers: []string{"https://idp.example.com"}}
	ts, _ := newTestServer(t, &Options{
		AllowedOrigins:   []string{app, "https://other.example.com"},
		AllowedHosts:     []string{"gw.example.com"},
		ResourceMetadata: md,
		Identify: func(token string) (policy.Identity, error) {
			if token != "good" {
				return policy.Identity{}, policy.ErrInvalidCredentials
			}
			return policy.Identity{ID: "k", Key: "k"}, nil
		},
	})
	send := func(method, path, origin string, headers map[string]string) *http.Response {
		t.Helper()
		body := ""
		if method == http.MethodPost {
			body = initBody
		}
		req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "gw.example.com"
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	cors := func(resp *http.Response) map[string]string {
		out := map[string]string{}
		for k, v := range resp.Header {
			if strings.HasPrefix(k, "Access-Control-") {
				out[k] = strings.Join(v, ", ")
			}
		}
		return out
	}
	preflight := func(path, origin, method, headers string) *http.Response {
		t.Helper()
		return send(http.MethodOptions, path, origin, map[string]string{
			"Access-Control-Request-Method": method, "Access-Control-Request-Headers": headers,
		})
	}

	resp := preflight("/mcp", app, "POST", "content-type,authorization,mcp-protocol-version,mcp-method,mcp-name,mcp-param-region,x-evil")
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("preflight on the endpoint: %d, want 204", resp.StatusCode)
	}
	want := map[string]string{
		"Access-Control-Allow-Origin":  app,
		"Access-Control-Allow-Methods": "POST, GET, DELETE, OPTIONS",
		"Access-Control-Allow-Headers": "Content-Type, Authorization, Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method, Mcp-Name, Last-Event-ID, Mcp-Param-Region",
		"Access-Control-Max-Age":       "600",
	}
	if diff := cmp.Diff(want, cors(resp)); diff != "" {
		t.Errorf("preflight on the endpoint (-want +got):\n%s", diff)
	}
	if v := resp.Header.Values("Vary"); !strings.Contains(strings.Join(v, ","), "Origin") {
		t.Errorf("Vary %v lacks Origin", v)
	}

	for _, path := range []string{metadataPath, metadataPath + "/mcp"} {
		resp = preflight(path, "https://other.example.com", "GET", "")
		want := map[string]string{
			"Access-Control-Allow-Origin":  "https://other.example.com",
			"Access-Control-Allow-Methods": "GET, HEAD, OPTIONS",
			"Access-Control-Allow-Headers": "Content-Type, Authorization, Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method, Mcp-Name, Last-Event-ID",
			"Access-Control-Max-Age":       "600",
		}
		if diff := cmp.Diff(want, cors(resp)); resp.StatusCode != http.StatusNoContent || diff != "" {
			t.Errorf("preflight on %s: %d (-want +got):\n%s", path, resp.StatusCode, diff)
		}
		resp = send(http.MethodGet, path, app, nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != app {
			t.Errorf("GET %s: %d, Allow-Origin %q", path, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	}

	// Actual responses: a 401 whose challenge the page may read, and a
	// session whose id it may read.
	exposed := map[string]string{"Access-Control-Allow-Origin": app, "Access-Control-Expose-Headers": "Mcp-Session-Id, WWW-Authenticate"}
	resp = send(http.MethodPost, "/mcp", app, map[string]string{"Content-Type": "application/json", "Authorization": "Bearer bad"})
	if diff := cmp.Diff(exposed, cors(resp)); resp.StatusCode != http.StatusUnauthorized || diff != "" {
		t.Errorf("401: %d (-want +got):\n%s", resp.StatusCode, diff)
	}
	resp = send(http.MethodPost, "/mcp", app, map[string]string{"Content-Type": "application/json", "Authorization": "Bearer good", "Accept": "application/json, text/event-stream"})
	if diff := cmp.Diff(exposed, cors(resp)); resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" || diff != "" {
		t.Errorf("initialize: %d (-want +got):\n%s", resp.StatusCode, diff)
	}

	// An origin not listed: 403, and nothing that would let its page in.
	for _, method := range []string{http.MethodOptions, http.MethodPost} {
		resp = send(method, "/mcp", "https://evil.example", map[string]string{"Access-Control-Request-Method": "POST"})
		if resp.StatusCode != http.StatusForbidden || len(cors(resp)) != 0 {
			t.Errorf("%s from a foreign origin: %d %v, want 403 without CORS headers", method, resp.StatusCode, cors(resp))
		}
	}
	// Preflight for a foreign Host of the endpoint is refused.
	req, _ := http.NewRequest(http.MethodOptions, ts.URL+"/mcp", nil)
	req.Host = "attacker.example"
	req.Header.Set("Origin", app)
	req.Header.Set("Access-Control-Request-Method", "POST")
	if resp, err := ts.Client().Do(req); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusForbidden || len(cors(resp)) != 0 {
		t.Errorf("preflight with a foreign Host: %d %v, want 403 without CORS headers", resp.StatusCode, cors(resp))
	}
	// Elsewhere (/healthz) there is no CORS.
	if resp = preflight("/healthz", app, "GET", ""); len(cors(resp)) != 0 {
		t.Errorf("preflight on /healthz: %d %v, want no CORS headers", resp.StatusCode, cors(resp))
	}
}

// TestNoCORSByDefault: without allowed_origins, even a loopback origin
// that the Origin check accepts on a loopback listener gets no CORS
// header, and OPTIONS is not a method of the endpoint.
// With allowed_origins, such an origin still gets none: only the listed
// ones do.
func TestNoCORSByDefault(t *testing.T) {
	for _, origins := range [][]string{nil, {"https://app.example.com"}} {
		ts, _ := newTestServer(t, &Options{Loopback: true, AllowedOrigins: origins})
		req, _ := http.NewRequest(http.MethodOptions, ts.URL+"/mcp", nil)
		req.Header.Set("Origin", "http://localhost:3000")
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("allowed_origins %v: preflight from a loopback origin: %d, Allow-Origin %q; want 405 and none", origins, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	}
}
