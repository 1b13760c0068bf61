package server

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
)

// TestOwnListChanges: a change of one caller's own tools/list (search
// mode's exposed tools) reaches that legacy session's GET stream only,
// or that identity's listen streams only: not another session of the
// same identity, nor another identity's streams of the same view.
func TestOwnListChanges(t *testing.T) {
	const one, two = "red-key-one-0123456789", "red-key-two-0123456789"
	keys, err := policy.NewAPIKeys(map[string][]string{"red": {one, two}})
	if err != nil {
		t.Fatal(err)
	}
	ts, d, s := newTestServerWith(t, &Options{Identify: keys.Identify})
	bearer := func(key string, h map[string]string) map[string]string {
		out := map[string]string{"Authorization": "Bearer " + key}
		for k, v := range h {
			out[k] = v
		}
		return out
	}
	session := func(key string) (string, *sseStream) {
		t.Helper()
		r := do(t, ts, "POST", bearer(key, nil), initBody)
		sid := r.header.Get("Mcp-Session-Id")
		if r.status != 200 || sid == "" {
			t.Fatalf("initialize with %s: %d %s", key, r.status, r.body)
		}
		req, err := http.NewRequest("GET", ts.URL+"/mcp", nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range bearer(key, map[string]string{"Accept": "text/event-stream", "Mcp-Session-Id": sid}) {
			req.Header.Set(k, v)
		}
		return sid, openStream(t, req)
	}
	listen := func(key string) (string, *sseStream) {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{` + modernMeta + `,"notifications":{"toolsListChanged":true,"promptsListChanged":true}}}`
		l := openStream(t, post(t, ts, bearer(key, modernHeaders("subscriptions/listen", "")), body))
		if ack := l.next(); ack.Method != "notifications/subscriptions/acknowledged" {
			t.Fatalf("listen with %s: %s", key, ack.Method)
		}
		list := `{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{` + modernMeta + `}}`
		if r := do(t, ts, "POST", bearer(key, modernHeaders("tools/list", "")), list); r.status != 200 {
			t.Fatalf("tools/list with %s: %d %s", key, r.status, r.body)
		}
		return d.lastCaller().Principal, l
	}
	sidA, getA := session(one)
	_, getB := session(one)
	principalOne, listenOne := listen(one)
	principalTwo, listenTwo := listen(two)
	if principalOne == principalTwo || principalOne == "" {
		t.Fatalf("principals %q and %q", principalOne, principalTwo)
	}

	s.Deliver(router.Change{Method: "notifications/tools/list_changed", View: "red", Session: sidA})
	s.Deliver(router.Change{Method: "notifications/tools/list_changed", View: "red", ForPrincipal: true, Principal: principalOne})
	// A view-wide change of another list marks where each stream is.
	s.Deliver(router.Change{Method: "notifications/prompts/list_changed", View: "red"})

	for _, tt := range []struct {
		name   string
		stream *sseStream
		want   []string
	}{
		{"session a", getA, []string{"notifications/tools/list_changed", "notifications/prompts/list_changed"}},
		{"session b of the same key", getB, []string{"notifications/prompts/list_changed"}},
		{"key one's listen stream", listenOne, []string{"notifications/tools/list_changed", "notifications/prompts/list_changed"}},
		{"key two's listen stream", listenTwo, []string{"notifications/prompts/list_changed"}},
	} {
		for _, want := range tt.want {
			if m := tt.stream.next(); m.Method != want {
				t.Errorf("%s got %s, want %s", tt.name, m.Method, want)
			}
		}
	}
}

// TestStdioOwnListChanges: the stdio host's legacy session hears of a
// change of its own list, not of another session's nor of a modern
// identity's.
func TestStdioOwnListChanges(t *testing.T) {
	d := &fakeDispatcher{replies: map[string]*router.Reply{"tools/list": {Result: json.RawMessage(`{"tools":[]}`)}}}
	h := newStdioHost(t, d, nil)
	defer h.close()
	h.send(initBody)
	if m := h.next(); string(m.ID) != "1" {
		t.Fatalf("initialize: %+v", m)
	}
	h.st.Deliver(router.Change{Method: "notifications/tools/list_changed", Session: "another-session"})
	h.st.Deliver(router.Change{Method: "notifications/tools/list_changed", ForPrincipal: true})
	h.st.Deliver(router.Change{Method: "notifications/prompts/list_changed"})
	h.st.Deliver(router.Change{Method: "notifications/tools/list_changed", Session: stdioSession})
	for _, want := range []string{"notifications/prompts/list_changed", "notifications/tools/list_changed"} {
		if m := h.next(); m.Method != want {
			t.Errorf("got %s, want %s", m.Method, want)
		}
	}
}
