package server

import (
	"testing"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
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
// nor delete it. A reload that moves the key to another team ends it.
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
	s.SetIdentify(moved.Identify)
	wantError(t, do(t, ts, "POST", one, `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`), 404, jsonrpc.CodeInvalidRequest, "team changed")
	wantError(t, do(t, ts, "POST", one, `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`), 404, jsonrpc.CodeInvalidRequest, "Session not found")
}
