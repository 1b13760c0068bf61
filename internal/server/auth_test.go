package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
)

func TestAPIKeyAuthentication(t *testing.T) {
	keys, err := policy.NewAPIKeys(map[string][]string{"red": {"red-key-0123456789"}, "blue": {"blue-key-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	ts, d, _ := newTestServerWith(t, &Options{Identify: keys.Identify})
	bearer := func(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }
	modern := func(key string) map[string]string {
		h := modernHeaders("tools/list", "")
		if key != "" {
			h["Authorization"] = "Bearer " + key
		}
		return h
	}
	modernList := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`

	// No key and a wrong key: 401 with a challenge, in both eras.
	for name, tc := range map[string]struct {
		headers   map[string]string
		body      string
		challenge string
	}{
		"legacy, no key":    {nil, initBody, `Bearer realm="mcp-gateway"`},
		"legacy, wrong key": {bearer("nope"), initBody, `Bearer realm="mcp-gateway", error="invalid_token"`},
		"modern, no key":    {modern(""), modernList, `Bearer realm="mcp-gateway"`},
		"modern, wrong key": {modern("nope"), modernList, `Bearer realm="mcp-gateway", error="invalid_token"`},
		"basic auth":        {map[string]string{"Authorization": "Basic cmVkOmtleQ=="}, initBody, `Bearer realm="mcp-gateway"`},
	} {
		t.Run(name, func(t *testing.T) {
			r := do(t, ts, "POST", tc.headers, tc.body)
			wantError(t, r, 401, jsonrpc.CodeInvalidRequest, "Unauthorized")
			if got := r.header.Get("WWW-Authenticate"); got != tc.challenge {
				t.Errorf("WWW-Authenticate = %q, want %q", got, tc.challenge)
			}
		})
	}

	// A team's key selects its view, in both eras.
	r := do(t, ts, "POST", bearer("red-key-0123456789"), initBody)
	sid := r.header.Get("Mcp-Session-Id")
	if r.status != 200 || sid == "" {
		t.Fatalf("initialize with red's key: %d %s", r.status, r.body)
	}
	red := bearer("red-key-0123456789")
	red["Mcp-Session-Id"] = sid
	if r := do(t, ts, "POST", red, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); r.status != 200 || d.lastCaller().View != "red" {
		t.Errorf("red's list: %d, view %q", r.status, d.lastCaller().View)
	}
	if r := do(t, ts, "POST", modern("blue-key-0123456789"), modernList); r.status != 200 || d.lastCaller().View != "blue" {
		t.Errorf("blue's modern list: %d, view %q", r.status, d.lastCaller().View)
	}
	// Another team's key on red's session is refused; so is none.
	blueOnRed := bearer("blue-key-0123456789")
	blueOnRed["Mcp-Session-Id"] = sid
	wantError(t, do(t, ts, "POST", blueOnRed, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`), 403, jsonrpc.CodeInvalidRequest, "another identity")
	wantError(t, do(t, ts, "POST", map[string]string{"Mcp-Session-Id": sid}, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`), 401, jsonrpc.CodeInvalidRequest, "Unauthorized")
	wantError(t, do(t, ts, "DELETE", blueOnRed, ""), 403, jsonrpc.CodeInvalidRequest, "another identity")
	if r := do(t, ts, "DELETE", red, ""); r.status != 204 {
		t.Errorf("red deleting its own session: %d", r.status)
	}
	// Health endpoints need no key.
	resp, err := ts.Client().Get(ts.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/healthz with auth on: %d", resp.StatusCode)
	}
}

// TestSessionBoundToItsKey: a legacy session belongs to the key that
// opened it: another key of the same team can neither call on it, nor
// answer the requests the gateway sends on it, nor open its GET stream,
// nor delete it. A reload that moves the key to another team ends it at once.
func TestSessionBoundToItsKey(t *testing.T) {
	keys, err := policy.NewAPIKeys(map[string][]string{"red": {"red-key-one-0123456789", "red-key-two-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	ts, d, s := newTestServerWith(t, &Options{Identify: keys.Identify})
	with := func(key, sid string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + key, "Mcp-Session-Id": sid}
	}
	r := do(t, ts, "POST", map[string]string{"Authorization": "Bearer red-key-one-0123456789"}, initBody)
	sid := r.header.Get("Mcp-Session-Id")
	if r.status != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", r.status, r.body)
	}
	one, two := with("red-key-one-0123456789", sid), with("red-key-two-0123456789", sid)
	if r := do(t, ts, "POST", one, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); r.status != 200 {
		t.Fatalf("the opening key's request: %d %s", r.status, r.body)
	}
	if c := d.lastCaller(); c.Principal == "" || c.Identity == "" || c.View != "red" {
		t.Errorf("caller %+v, want the key's principal, audit id and team", c)
	}
	calls := len(d.callers)
	wantError(t, do(t, ts, "POST", two, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`), 403, jsonrpc.CodeInvalidRequest, "another identity")
	wantError(t, do(t, ts, "POST", two, `{"jsonrpc":"2.0","id":"gw-1","result":{"action":"accept"}}`), 403, jsonrpc.CodeInvalidRequest, "another identity")
	wantError(t, do(t, ts, "POST", two, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`), 403, jsonrpc.CodeInvalidRequest, "another identity")
	get := map[string]string{"Accept": "text/event-stream"}
	for k, v := range two {
		get[k] = v
	}
	wantError(t, do(t, ts, "GET", get, ""), 403, jsonrpc.CodeInvalidRequest, "another identity")
	wantError(t, do(t, ts, "DELETE", two, ""), 403, jsonrpc.CodeInvalidRequest, "another identity")
	if len(d.callers) != calls {
		t.Errorf("the router was asked for the other key")
	}

	// The key moves to another team: the session in the old view ends.
	moved, err := policy.NewAPIKeys(map[string][]string{"blue": {"red-key-one-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	s.SetIdentify(moved.Identify, moved.Team)
	wantError(t, do(t, ts, "POST", one, `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`), 404, jsonrpc.CodeInvalidRequest, "Session not found")
	if r := do(t, ts, "POST", map[string]string{"Authorization": "Bearer red-key-one-0123456789"}, initBody); r.status != 200 {
		t.Fatalf("a new session for the moved key: %d %s", r.status, r.body)
	}
}

// TestReloadEndsStaleSessionsAndStreams: a reload that changes who may
// call ends, at once, the legacy sessions, their GET streams and the
// listen streams whose credentials it no longer accepts (a key removed,
// authentication turned on or off); the others go on.
func TestReloadEndsStaleSessionsAndStreams(t *testing.T) {
	ts, _, s := newTestServerWith(t, nil)
	const one, two = "red-key-one-0123456789", "red-key-two-0123456789"
	withKey := func(key string, h map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range h {
			out[k] = v
		}
		if key != "" {
			out["Authorization"] = "Bearer " + key
		}
		return out
	}
	open := func(key string) (sid string, getStream, listen *sseStream) {
		t.Helper()
		r := do(t, ts, "POST", withKey(key, nil), initBody)
		sid = r.header.Get("Mcp-Session-Id")
		if r.status != 200 || sid == "" {
			t.Fatalf("initialize with key %q: %d %s", key, r.status, r.body)
		}
		req, err := http.NewRequest("GET", ts.URL+"/mcp", nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range withKey(key, map[string]string{"Accept": "text/event-stream", "Mcp-Session-Id": sid}) {
			req.Header.Set(k, v)
		}
		getStream = openStream(t, req)
		body := `{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{` + modernMeta + `,"notifications":{"toolsListChanged":true}}}`
		listen = openStream(t, post(t, ts, withKey(key, modernHeaders("subscriptions/listen", "")), body))
		if ack := listen.next(); ack.Method != "notifications/subscriptions/acknowledged" {
			t.Fatalf("listen with key %q: %s", key, ack.Method)
		}
		return sid, getStream, listen
	}
	list := func(key, sid string) response {
		return do(t, ts, "POST", withKey(key, map[string]string{"Mcp-Session-Id": sid}), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	}
	keys := func(k ...string) *policy.APIKeys {
		t.Helper()
		table, err := policy.NewAPIKeys(map[string][]string{"red": k})
		if err != nil {
			t.Fatal(err)
		}
		return table
	}

	// Authentication turned on: what was opened without a key ends.
	anonSID, anonGet, anonListen := open("")
	both := keys(one, two)
	s.SetIdentify(both.Identify, both.Team)
	wantEnded(t, "the keyless GET stream", anonGet)
	wantListenEnded(t, "the keyless listen stream", anonListen)
	wantError(t, list(one, anonSID), 404, jsonrpc.CodeInvalidRequest, "Session not found")

	// A key removed: its session and streams end, the other key's go on.
	oneSID, oneGet, oneListen := open(one)
	twoSID, _, twoListen := open(two)
	left := keys(two)
	s.SetIdentify(left.Identify, left.Team)
	wantEnded(t, "the removed key's GET stream", oneGet)
	wantListenEnded(t, "the removed key's listen stream", oneListen)
	wantError(t, list(one, oneSID), 401, jsonrpc.CodeInvalidRequest, "Unauthorized")
	if r := list(two, twoSID); r.status != 200 {
		t.Errorf("the kept key's session after the reload: %d %s", r.status, r.body)
	}
	s.Deliver(router.Change{Method: "notifications/tools/list_changed", View: "red"})
	if m := twoListen.next(); m.Method != "notifications/tools/list_changed" {
		t.Errorf("the kept key's listen stream got %s, want the list change", m.Method)
	}

	// Authentication turned off: the keyed session ends too.
	s.SetIdentify(nil, nil)
	wantListenEnded(t, "the keyed listen stream", twoListen)
	wantError(t, list("", twoSID), 404, jsonrpc.CodeInvalidRequest, "Session not found")
}

// wantEnded waits for the gateway to end an SSE stream (its body reaches
// EOF); the test's deadline bounds the wait.
func wantEnded(t *testing.T, what string, s *sseStream) {
	t.Helper()
	for s.sc.Scan() {
		if data, ok := strings.CutPrefix(s.sc.Text(), "data: "); ok && strings.TrimSpace(data) != "" {
			t.Errorf("%s: got %s, want its end", what, data)
		}
	}
	if err := s.sc.Err(); err != nil {
		t.Errorf("%s did not end cleanly: %v", what, err)
	}
}

// wantListenEnded waits for a listen stream's closing result, then its end.
func wantListenEnded(t *testing.T, what string, s *sseStream) {
	t.Helper()
	if m := s.next(); m.Method != "" || m.Result == nil {
		t.Errorf("%s: got %s %s %s, want the subscription's closing result", what, m.Method, m.Params, m.Error)
	}
	wantEnded(t, what, s)
}

// TestBearerSchemeIsCaseInsensitive: the auth scheme is a token matched
// without regard to case (RFC 9110 §11.1), so "bearer" and "BEARER" are
// the same scheme as "Bearer"; the key itself stays exact.
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	keys, err := policy.NewAPIKeys(map[string][]string{"red": {"red-key-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	ts, d, _ := newTestServerWith(t, &Options{Identify: keys.Identify})
	modernList := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`
	for _, auth := range []string{"Bearer red-key-0123456789", "bearer red-key-0123456789", "BEARER red-key-0123456789", "bEaReR   red-key-0123456789"} {
		h := modernHeaders("tools/list", "")
		h["Authorization"] = auth
		r := do(t, ts, "POST", h, modernList)
		if r.status != 200 {
			t.Errorf("Authorization %q: status %d %s, want 200", auth, r.status, r.body)
		} else if v := d.lastCaller().View; v != "red" {
			t.Errorf("Authorization %q: view %q, want red", auth, v)
		}
	}
	for _, auth := range []string{"bearer RED-KEY-0123456789", "Bearerred-key-0123456789", "Basic red-key-0123456789"} {
		wantError(t, do(t, ts, "POST", map[string]string{"Authorization": auth}, initBody), 401, jsonrpc.CodeInvalidRequest, "Unauthorized")
	}
}

// TestTwoAuthorizationHeaders: a request with more than one
// Authorization header is refused (401 invalid_token), whatever they
// hold: the field is a singleton (RFC 9110 §11.6.2), and a proxy in front
// that reads the other copy than the gateway would authenticate one
// identity while the gateway serves another.
func TestTwoAuthorizationHeaders(t *testing.T) {
	keys, err := policy.NewAPIKeys(map[string][]string{"red": {"red-key-0123456789"}, "blue": {"blue-key-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	ts, _, _ := newTestServerWith(t, &Options{Identify: keys.Identify})
	for name, values := range map[string][]string{
		"the same key twice": {"Bearer red-key-0123456789", "Bearer red-key-0123456789"},
		"two teams' keys":    {"Bearer red-key-0123456789", "Bearer blue-key-0123456789"},
		"a key, then junk":   {"Bearer red-key-0123456789", "Bearer nope"},
	} {
		req, err := http.NewRequest("POST", ts.URL+"/mcp", strings.NewReader(initBody))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header["Authorization"] = values
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Errorf("%s: status %d, WWW-Authenticate %q, want 401 invalid_token", name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
}
