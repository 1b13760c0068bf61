package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
)

const modernListBody = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`

// TestProfilePathsSelectTheirView: each profile's path serves the
// endpoint for both eras in the caller's team's view narrowed by the
// profile; the main endpoint keeps the team's view; a name that is not a
// profile gets 404 with a JSON-RPC error for every method, and so does a
// profile a reload removed.
func TestProfilePathsSelectTheirView(t *testing.T) {
	keys, err := policy.NewAPIKeys(map[string][]string{"red": {"red-key-one-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var admitted, quotas []policy.Identity
	ts, d, s := newTestServerWith(t, &Options{Identify: keys.Identify, Profiles: []string{"a", "b"},
		Admit: func(who policy.Identity) (string, time.Duration, bool) {
			mu.Lock()
			defer mu.Unlock()
			admitted = append(admitted, who)
			return "", 0, true
		},
		Quotas: func(who policy.Identity) (int, int) {
			mu.Lock()
			defer mu.Unlock()
			quotas = append(quotas, who)
			return 0, 0
		},
	})
	auth := func(h map[string]string) map[string]string {
		h["Authorization"] = "Bearer red-key-one-0123456789"
		return h
	}
	for _, tc := range []struct{ path, view string }{{"/mcp", "red"}, {"/mcp/a", "red/a"}, {"/mcp/b", "red/b"}} {
		if r := doAt(t, ts, tc.path, "POST", auth(modernHeaders("tools/list", "")), modernListBody); r.status != 200 {
			t.Fatalf("modern tools/list on %s: %d %s", tc.path, r.status, r.body)
		}
		if c := d.lastCaller(); c.View != tc.view {
			t.Errorf("modern request on %s: view %q, want %q", tc.path, c.View, tc.view)
		}
		r := doAt(t, ts, tc.path, "POST", auth(map[string]string{}), initBody)
		sid := r.header.Get("Mcp-Session-Id")
		if r.status != 200 || sid == "" {
			t.Fatalf("initialize on %s: %d %s", tc.path, r.status, r.body)
		}
		if r := doAt(t, ts, tc.path, "POST", auth(map[string]string{"Mcp-Session-Id": sid}), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); r.status != 200 {
			t.Fatalf("legacy tools/list on %s: %d %s", tc.path, r.status, r.body)
		}
		if c := d.lastCaller(); c.View != tc.view {
			t.Errorf("legacy request on %s: view %q, want %q", tc.path, c.View, tc.view)
		}
	}
	// Rate limits and quotas are the team's on every path: a profile
	// is no way around them.
	mu.Lock()
	for _, who := range append(admitted, quotas...) {
		if who.Team != "red" {
			t.Errorf("limits asked for %+v, want team red", who)
		}
	}
	mu.Unlock()

	for _, method := range []string{"POST", "GET", "DELETE"} {
		r := doAt(t, ts, "/mcp/nope", method, auth(map[string]string{"Accept": "application/json, text/event-stream"}), initBody)
		wantError(t, r, 404, jsonrpc.CodeInvalidRequest, `no profile "nope"`)
	}
	// Before authentication: a host without credentials learns the
	// same, not a challenge for a resource that does not exist.
	wantError(t, doAt(t, ts, "/mcp/nope", "POST", nil, initBody), 404, jsonrpc.CodeInvalidRequest, `no profile "nope"`)
	wantError(t, doAt(t, ts, "/mcp/a", "POST", nil, initBody), 401, jsonrpc.CodeInvalidRequest, "Unauthorized")

	s.SetProfiles([]string{"b"})
	wantError(t, doAt(t, ts, "/mcp/a", "POST", auth(modernHeaders("tools/list", "")), modernListBody), 404, jsonrpc.CodeInvalidRequest, `no profile "a"`)
	if r := doAt(t, ts, "/mcp/b", "POST", auth(modernHeaders("tools/list", "")), modernListBody); r.status != 200 {
		t.Errorf("a profile the reload kept: %d %s", r.status, r.body)
	}
}

// TestSessionBoundToItsPath: a legacy session opened on a profile's path
// is unknown (404) on the main endpoint and on another profile's path,
// for POST, GET and DELETE, and those requests neither reach the router
// nor end it: on its own path it goes on. The reverse holds too.
func TestSessionBoundToItsPath(t *testing.T) {
	ts, d := newTestServer(t, &Options{Profiles: []string{"a", "b"}})
	for _, tc := range []struct {
		home   string
		others []string
	}{{"/mcp/a", []string{"/mcp", "/mcp/b"}}, {"/mcp", []string{"/mcp/a"}}} {
		sid := doAt(t, ts, tc.home, "POST", nil, initBody).header.Get("Mcp-Session-Id")
		if sid == "" {
			t.Fatalf("initialize on %s: no session", tc.home)
		}
		h := map[string]string{"Mcp-Session-Id": sid}
		get := map[string]string{"Mcp-Session-Id": sid, "Accept": "text/event-stream"}
		d.mu.Lock()
		calls := len(d.callers)
		d.mu.Unlock()
		for _, other := range tc.others {
			wantError(t, doAt(t, ts, other, "POST", h, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a"}}`),
				404, jsonrpc.CodeInvalidRequest, "Session not found on this path")
			wantError(t, doAt(t, ts, other, "POST", h, `{"jsonrpc":"2.0","id":"gw-1","result":{}}`),
				404, jsonrpc.CodeInvalidRequest, "Session not found on this path")
			wantError(t, doAt(t, ts, other, "GET", get, ""), 404, jsonrpc.CodeInvalidRequest, "Session not found on this path")
			wantError(t, doAt(t, ts, other, "DELETE", h, ""), 404, jsonrpc.CodeInvalidRequest, "Session not found on this path")
		}
		d.mu.Lock()
		if len(d.callers) != calls {
			t.Errorf("session of %s: the router was asked from another path", tc.home)
		}
		d.mu.Unlock()
		if r := doAt(t, ts, tc.home, "POST", h, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`); r.status != 200 {
			t.Errorf("session of %s on its own path after the others: %d %s", tc.home, r.status, r.body)
		}
		if r := doAt(t, ts, tc.home, "DELETE", h, ""); r.status != 204 {
			t.Errorf("DELETE on its own path: %d", r.status)
		}
	}
}

// TestProfileResourceMetadata: under OAuth each profile's path has its
// own protected resource metadata, whose resource is that path's URL,
// and its 401 and 403 challenges name that document; a name that is not
// a profile has none.
func TestProfileResourceMetadata(t *testing.T) {
	ts, _, _ := newTestServerWith(t, &Options{Identify: oauthIdentify, ResourceMetadata: testMetadata, Profiles: []string{"coding"}})
	const profileMetadata = "https://gw.example.com/.well-known/oauth-protected-resource/mcp/coding"
	for _, tc := range []struct{ path, want string }{{"/mcp", metadataURL}, {"/mcp/coding", profileMetadata}} {
		r := doAt(t, ts, tc.path, "POST", nil, initBody)
		if got, want := r.header.Get("WWW-Authenticate"), `Bearer resource_metadata="`+tc.want+`", scope="mcp:tools"`; r.status != 401 || got != want {
			t.Errorf("401 on %s: %d, WWW-Authenticate %q, want %q", tc.path, r.status, got, want)
		}
		if !strings.Contains(r.body, tc.want+")") {
			t.Errorf("401 on %s: message %s does not name %s", tc.path, r.body, tc.want)
		}
		r = doAt(t, ts, tc.path, "POST", map[string]string{"Authorization": "Bearer no-scope"}, initBody)
		if got := r.header.Get("WWW-Authenticate"); r.status != 403 || !strings.HasSuffix(got, `resource_metadata="`+tc.want+`"`) {
			t.Errorf("403 on %s: %d, WWW-Authenticate %q, want it to name %s", tc.path, r.status, got, tc.want)
		}
	}
	get := func(path string) (int, map[string]any) {
		t.Helper()
		resp, err := ts.Client().Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		return resp.StatusCode, body
	}
	if status, body := get("/.well-known/oauth-protected-resource/mcp/coding"); status != 200 || body["resource"] != "https://gw.example.com/mcp/coding" {
		t.Errorf("profile metadata: %d %v, want resource https://gw.example.com/mcp/coding", status, body)
	}
	if status, body := get("/.well-known/oauth-protected-resource/mcp"); status != 200 || body["resource"] != "https://gw.example.com/mcp" {
		t.Errorf("endpoint metadata: %d %v", status, body)
	}
	if status, _ := get("/.well-known/oauth-protected-resource/mcp/nope"); status != 404 {
		t.Errorf("metadata of a name that is not a profile: %d, want 404", status)
	}
}

// TestProfileCORS: a profile's path answers a listed origin's preflight
// like the endpoint; a name that is not a profile gets no CORS.
func TestProfileCORS(t *testing.T) {
	const app = "https://app.example.com"
	ts, _ := newTestServer(t, &Options{AllowedOrigins: []string{app}, Profiles: []string{"a"}})
	preflight := func(path string) *http.Response {
		req, _ := http.NewRequest(http.MethodOptions, ts.URL+path, nil)
		req.Header.Set("Origin", app)
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := preflight("/mcp/a"); resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != app ||
		resp.Header.Get("Access-Control-Allow-Methods") != corsEndpointMethods {
		t.Errorf("preflight on a profile: %d %v", resp.StatusCode, resp.Header)
	}
	if resp := preflight("/mcp/nope"); resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight on a name that is not a profile got CORS: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestProfileTokenOpensItsPathOnly: an OAuth token whose audience is a
// profile's path is let in there only: on the main endpoint and another
// profile it gets 401 invalid_token naming that path's metadata, in both
// eras.
func TestProfileTokenOpensItsPathOnly(t *testing.T) {
	identify := func(token string) (policy.Identity, error) {
		if token == "coding-token" {
			return policy.Identity{Team: "red", Key: "sub:alice@idp", ID: "oauth:https://idp#alice", Audience: "coding "}, nil
		}
		return oauthIdentify(token)
	}
	ts, d := newTestServer(t, &Options{Identify: identify, ResourceMetadata: testMetadata, Profiles: []string{"coding", "chat"}})
	for _, era := range []string{"legacy", "modern"} {
		headers := func() map[string]string {
			h := map[string]string{}
			if era == "modern" {
				h = modernHeaders("tools/list", "")
			}
			h["Authorization"] = "Bearer coding-token"
			return h
		}
		body := initBody
		if era == "modern" {
			body = modernListBody
		}
		if r := doAt(t, ts, "/mcp/coding", "POST", headers(), body); r.status != 200 {
			t.Errorf("%s: the token on its own path: %d %s", era, r.status, r.body)
		} else if era == "modern" {
			if c := d.lastCaller(); c.View != "red/coding" {
				t.Errorf("%s: view %q, want red/coding", era, c.View)
			}
		}
		for path, md := range map[string]string{"/mcp": metadataURL, "/mcp/chat": "https://gw.example.com/.well-known/oauth-protected-resource/mcp/chat"} {
			r := doAt(t, ts, path, "POST", headers(), body)
			wantError(t, r, 401, jsonrpc.CodeInvalidRequest, "the token is not valid")
			if got := r.header.Get("WWW-Authenticate"); !strings.Contains(got, `error="invalid_token"`) || !strings.Contains(got, `resource_metadata="`+md+`"`) {
				t.Errorf("%s on %s: WWW-Authenticate %q, want invalid_token naming %s", era, path, got, md)
			}
		}
	}
}

// TestProfileListChangedReachesItsPath: a list change of a profile's
// view reaches the GET streams of sessions on that path only.
func TestProfileListChangedReachesItsPath(t *testing.T) {
	ts, _, s := newTestServerWith(t, &Options{Profiles: []string{"a"}})
	open := func(path string) *sseStream {
		t.Helper()
		sid := doAt(t, ts, path, "POST", nil, initBody).header.Get("Mcp-Session-Id")
		req, _ := http.NewRequest("GET", ts.URL+path, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		return openStream(t, req)
	}
	onA, onMain := open("/mcp/a"), open("/mcp")
	s.Deliver(router.Change{Method: "notifications/tools/list_changed", View: "/a"})
	s.Deliver(router.Change{Method: "notifications/prompts/list_changed", View: ""})
	if m := onA.next(); m.Method != "notifications/tools/list_changed" {
		t.Errorf("the /mcp/a session heard %s first, want its tools/list_changed", m.Method)
	}
	if m := onMain.next(); m.Method != "notifications/prompts/list_changed" {
		t.Errorf("the /mcp session heard %s first, want only its own prompts/list_changed", m.Method)
	}
}

// TestRemovedProfileDuringAReload: while a reload that removed a profile
// has not reached SetProfiles, the router finds no view for its path
// (NoView): the request gets the 404 of a path that is not a profile,
// in both eras, not an internal error.
func TestRemovedProfileDuringAReload(t *testing.T) {
	ts, d := newTestServer(t, &Options{Profiles: []string{"a"}})
	sid := doAt(t, ts, "/mcp/a", "POST", nil, initBody).header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatal("initialize: no session")
	}
	d.mu.Lock()
	d.replies["tools/list"] = &router.Reply{NoView: true, Error: jsonrpc.NewError(jsonrpc.CodeInvalidRequest, `Not found: no profile "a"`)}
	d.mu.Unlock()
	wantError(t, doAt(t, ts, "/mcp/a", "POST", modernHeaders("tools/list", ""), modernListBody), 404, jsonrpc.CodeInvalidRequest, `no profile "a"`)
	wantError(t, doAt(t, ts, "/mcp/a", "POST", map[string]string{"Mcp-Session-Id": sid}, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`),
		404, jsonrpc.CodeInvalidRequest, `no profile "a"`)
}

// TestProfileResourceMetadataOfAnyResource: whatever path
// auth.oauth.resource has (none, "/", the endpoint's, with or without a
// trailing "/"), a profile's resource is the URL of the path hosts use,
// <scheme://host><endpoint>/<name> (RFC 9728 §3.3: the client checks it
// against the URL it used), its 401 names the metadata at
// /.well-known/oauth-protected-resource<that path>, and that document is
// served there; the main endpoint's metadata is the resource's, as
// configured.
func TestProfileResourceMetadataOfAnyResource(t *testing.T) {
	const (
		profileMetadata = "https://gw.example.com/.well-known/oauth-protected-resource/mcp/coding"
		profileResource = "https://gw.example.com/mcp/coding"
	)
	for _, tc := range []struct{ resource, mainMetadata string }{
		{"https://gw.example.com", "https://gw.example.com/.well-known/oauth-protected-resource"},
		{"https://gw.example.com/", "https://gw.example.com/.well-known/oauth-protected-resource"},
		{"https://gw.example.com/mcp", "https://gw.example.com/.well-known/oauth-protected-resource/mcp"},
		{"https://gw.example.com/mcp/", "https://gw.example.com/.well-known/oauth-protected-resource/mcp"},
	} {
		t.Run(tc.resource, func(t *testing.T) {
			md := *testMetadata
			md.Resource = tc.resource
			ts, _, _ := newTestServerWith(t, &Options{Identify: oauthIdentify, ResourceMetadata: &md, Profiles: []string{"coding"}})
			get := func(url string) (int, any) {
				t.Helper()
				resp, err := ts.Client().Get(ts.URL + strings.TrimPrefix(url, "https://gw.example.com"))
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var body map[string]any
				_ = json.NewDecoder(resp.Body).Decode(&body)
				return resp.StatusCode, body["resource"]
			}
			for _, p := range []struct{ path, metadata, resource string }{
				{"/mcp/coding", profileMetadata, profileResource},
				{"/mcp", tc.mainMetadata, tc.resource},
			} {
				r := doAt(t, ts, p.path, "POST", nil, initBody)
				if got, want := r.header.Get("WWW-Authenticate"), `Bearer resource_metadata="`+p.metadata+`", scope="mcp:tools"`; r.status != 401 || got != want {
					t.Errorf("401 on %s: %d, WWW-Authenticate %q, want %q", p.path, r.status, got, want)
				}
				if status, resource := get(p.metadata); status != 200 || resource != p.resource {
					t.Errorf("metadata of %s at %s: %d, resource %v, want 200 and %s", p.path, p.metadata, status, resource, p.resource)
				}
			}
			if status, _ := get("/.well-known/oauth-protected-resource/coding"); status != 404 {
				t.Errorf("metadata at a path that is no profile's: %d, want 404", status)
			}
		})
	}
}

// TestProfileProbeByRebinding: a request with a Host that is not allowed
// (a DNS-rebinding page, whose same-origin GET carries no Origin) gets
// the same 403 on the path of a profile and of a name that is not one,
// so that it cannot tell which profiles exist; with an allowed Host the
// name that is not a profile gets 404, before authentication.
func TestProfileProbeByRebinding(t *testing.T) {
	keys, err := policy.NewAPIKeys(map[string][]string{"red": {"red-key-one-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	ts, _, _ := newTestServerWith(t, &Options{Identify: keys.Identify, Profiles: []string{"a"}})
	send := func(method, path, host string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(initBody))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Content-Type", "application/json")
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, method := range []string{"GET", "POST", "DELETE"} {
		status, body := send(method, "/mcp/a", "rebind.attacker.example:8080")
		otherStatus, otherBody := send(method, "/mcp/nope", "rebind.attacker.example:8080")
		if status != 403 || otherStatus != status || otherBody != body {
			t.Errorf("%s with a foreign Host: the profile's path %d %s, another name's %d %s; want the same 403", method, status, body, otherStatus, otherBody)
		}
		if status, body := send(method, "/mcp/nope", "localhost"); status != 404 || !strings.Contains(body, `no profile \"nope\"`) {
			t.Errorf("%s of a name that is not a profile: %d %s, want 404", method, status, body)
		}
	}
}
