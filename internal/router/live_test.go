package router

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// recordingHost is a router.Host that records what reaches it and
// answers requests with a fixed result.
type recordingHost struct {
	mu       sync.Mutex
	notes    []string
	requests []string
	answer   json.RawMessage
}

func (h *recordingHost) Notify(method string, params json.RawMessage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.notes = append(h.notes, method+" "+string(params))
}

func (h *recordingHost) Request(_ context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.requests = append(h.requests, method)
	return &jsonrpc.Message{Result: h.answer}, nil
}

func (h *recordingHost) got() ([]string, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.notes...), append([]string(nil), h.requests...)
}

// blockingUpstream holds every tools/call until release is closed, and
// reports each call's params on arrived.
func blockingUpstream() (*fakeUpstream, chan json.RawMessage, chan struct{}) {
	arrived := make(chan json.RawMessage, 16)
	release := make(chan struct{})
	f := &fakeUpstream{lists: map[string][]string{"tools/list": tools("work")}}
	f.answer = func(method string, params json.RawMessage) (*jsonrpc.Message, error) {
		arrived <- append(json.RawMessage(nil), params...)
		<-release
		return &jsonrpc.Message{ID: json.RawMessage("1"), Result: json.RawMessage(`{"content":[]}`)}, nil
	}
	return f, arrived, release
}

func TestProgressTokensAreRemappedPerCall(t *testing.T) {
	up, arrived, release := blockingUpstream()
	r := startRouter(t, Options{}, map[string]*fakeUpstream{"up": up}, "up")
	hosts := []*recordingHost{{}, {}}
	var wg sync.WaitGroup
	for _, h := range hosts {
		wg.Go(func() {
			c := &Caller{ProtocolVersion: "2025-11-25", Host: h}
			r.Dispatch(context.Background(), c, request("tools/call", `{"name":"up__work","_meta":{"progressToken":1}}`))
		})
	}
	// Both calls reach the upstream with distinct gateway tokens.
	var tokens []string
	for range hosts {
		params := <-arrived
		meta, _ := jsonrpc.Field(params, "_meta")
		tok, _ := jsonrpc.StringField(meta, "progressToken")
		tokens = append(tokens, tok)
	}
	if tokens[0] == tokens[1] || !strings.HasPrefix(tokens[0], "gw-") {
		t.Fatalf("upstream tokens %v, want two distinct gateway tokens", tokens)
	}
	// The upstream reports progress on the shared connection; each host
	// gets only its own, under its own token.
	for i, tok := range tokens {
		up.handlers.Notify(&jsonrpc.Message{Method: "notifications/progress",
			Params: json.RawMessage(`{"progressToken":"` + tok + `","progress":` + string(rune('1'+i)) + `}`)})
	}
	close(release)
	wg.Wait()
	var all []string
	for _, h := range hosts {
		notes, _ := h.got()
		if len(notes) != 1 || !strings.HasPrefix(notes[0], `notifications/progress {"progressToken":1,`) {
			t.Errorf("host got %v, want one progress notification with its own token", notes)
		}
		all = append(all, notes...)
	}
	if len(all) == 2 && all[0] == all[1] {
		t.Errorf("both hosts got the same progress: %v", all)
	}
	// After the calls, a late progress notification reaches nobody.
	up.handlers.Notify(&jsonrpc.Message{Method: "notifications/progress", Params: json.RawMessage(`{"progressToken":"` + tokens[0] + `","progress":9}`)})
	if notes, _ := hosts[0].got(); len(notes) != 1 {
		t.Errorf("a progress notification after the call reached the host: %v", notes)
	}
}

func TestUpstreamRequestsGoToTheOnlyHostThatCanAnswer(t *testing.T) {
	up, arrived, release := blockingUpstream()
	r := startRouter(t, Options{}, map[string]*fakeUpstream{"up": up}, "up")
	sampling := json.RawMessage(`{"sampling":{}}`)
	sampler := &recordingHost{answer: json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}`)}
	plain := &recordingHost{}
	call := func(h *recordingHost, caps json.RawMessage) {
		r.Dispatch(context.Background(), &Caller{ProtocolVersion: "2025-11-25", Host: h, Capabilities: caps}, request("tools/call", `{"name":"up__work"}`))
	}
	var wg sync.WaitGroup
	wg.Go(func() { call(sampler, sampling) })
	wg.Go(func() { call(plain, nil) })
	<-arrived
	<-arrived

	ask := func() *jsonrpc.Message {
		return up.handlers.Request(context.Background(), &jsonrpc.Message{ID: json.RawMessage("7"), Method: "sampling/createMessage", Params: json.RawMessage(`{"messages":[]}`)})
	}
	if resp := ask(); resp.Error != nil || !strings.Contains(string(resp.Result), `"text":"hi"`) {
		t.Errorf("sampling with one capable host: %+v", resp)
	}
	if _, reqs := plain.got(); len(reqs) != 0 {
		t.Errorf("the host without sampling was asked: %v", reqs)
	}
	if resp := up.handlers.Request(context.Background(), &jsonrpc.Message{ID: json.RawMessage("8"), Method: "roots/list"}); resp.Error == nil {
		t.Error("roots/list with no host declaring roots was answered, want an error at once")
	}

	// A second capable host makes the request ambiguous: an error at once,
	// never a guess.
	second := &recordingHost{}
	wg.Go(func() { call(second, sampling) })
	<-arrived
	if resp := ask(); resp.Error == nil {
		t.Errorf("ambiguous sampling request answered: %s", resp.Result)
	}
	close(release)
	wg.Wait()
	if _, reqs := second.got(); len(reqs) != 0 {
		t.Errorf("the second host was asked: %v", reqs)
	}
}

func TestListChangedRelistsAndNotifies(t *testing.T) {
	var mu sync.Mutex
	var changes []string
	changed := make(chan struct{}, 8)
	up := &fakeUpstream{lists: map[string][]string{"tools/list": tools("a")}}
	r := startRouter(t, Options{OnChange: func(c Change) {
		mu.Lock()
		changes = append(changes, c.Method)
		mu.Unlock()
		changed <- struct{}{}
	}}, map[string]*fakeUpstream{"up": up}, "up")
	<-changed // the first start added the tool
	mu.Lock()
	changes = nil
	mu.Unlock()

	up.mu.Lock()
	up.lists = map[string][]string{"tools/list": tools("a", "b")}
	up.mu.Unlock()
	up.handlers.Notify(&jsonrpc.Message{Method: "notifications/tools/list_changed"})
	<-changed
	got := listNames(t, r.Dispatch(context.Background(), legacyCaller, request("tools/list", `{}`)), "tools")
	if diff := cmp.Diff([]string{"up__a", "up__b"}, got); diff != "" {
		t.Errorf("tools after list_changed (-want +got):\n%s", diff)
	}
	mu.Lock()
	if diff := cmp.Diff([]string{"notifications/tools/list_changed"}, changes); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	mu.Unlock()
}

// TestNotificationsOnACallStream: what an upstream sends on a call's own
// stream that is not about the call (a resources/updated, as the Go SDK
// sends there when the calling session subscribed; another call's
// progress) goes where it would have gone on the connection's stream.
func TestNotificationsOnACallStream(t *testing.T) {
	changes := make(chan Change, 4)
	up := &fakeUpstream{capabilities: `{"tools":{},"resources":{"subscribe":true}}`, lists: map[string][]string{
		"tools/list": tools("work"), "resources/list": {`{"uri":"test://a","name":"a"}`},
	}}
	r := startRouter(t, Options{OnChange: func(c Change) { changes <- c }}, map[string]*fakeUpstream{"up": up}, "up")
	if e := r.SubscribeResource(context.Background(), legacyCaller, "s1", "test://a"); e != nil {
		t.Fatal(e)
	}
	mine, other := &recordingHost{}, &recordingHost{}
	u := r.upstreams()[0]
	otherCall := r.startCall(&Caller{ProtocolVersion: "2025-11-25", Session: "s2", Host: other}, u, &u.calls,
		request("tools/call", `{"name":"up__work","_meta":{"progressToken":"theirs"}}`), jsonrpc.NewOutgoing("tools/call", nil))
	defer otherCall.end()
	cl := r.startCall(&Caller{ProtocolVersion: "2025-11-25", Session: "s3", Host: mine}, u, &u.calls,
		request("tools/call", `{"name":"up__work","_meta":{"progressToken":"mine"}}`), jsonrpc.NewOutgoing("tools/call", nil))
	defer cl.end()
	// A call on another connection to the same upstream (a per-client
	// session of another host): this connection cannot reach it.
	elsewhere, onOther := &recordingHost{}, &callSet{}
	farCall := r.startCall(&Caller{ProtocolVersion: "2025-11-25", Session: "s4", Host: elsewhere}, u, onOther,
		request("tools/call", `{"name":"up__work","_meta":{"progressToken":"far"}}`), jsonrpc.NewOutgoing("tools/call", nil))
	defer farCall.end()

	cl.Notify(&jsonrpc.Message{Method: "notifications/resources/updated", Params: json.RawMessage(`{"uri":"test://a"}`)})
	for updated := false; !updated; {
		select {
		case c := <-changes:
			if updated = c.Method == "notifications/resources/updated"; updated && (len(c.Subscribers) != 1 || c.Subscribers[0] != "s1") {
				t.Errorf("change %+v, want the update for its subscriber", c)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a resources/updated on a call's stream was dropped")
		}
	}
	cl.Notify(&jsonrpc.Message{Method: "notifications/progress", Params: json.RawMessage(`{"progressToken":"` + otherCall.token + `","progress":1}`)})
	cl.Notify(&jsonrpc.Message{Method: "notifications/progress", Params: json.RawMessage(`{"progressToken":"` + cl.token + `","progress":2}`)})
	cl.Notify(&jsonrpc.Message{Method: "notifications/progress", Params: json.RawMessage(`{"progressToken":"` + farCall.token + `","progress":3}`)})
	r.upstreamNotification(u, &u.calls, &jsonrpc.Message{Method: "notifications/progress", Params: json.RawMessage(`{"progressToken":"` + farCall.token + `","progress":4}`)})
	if got, _ := elsewhere.got(); len(got) != 0 {
		t.Errorf("a call on another connection got %q from this one", got)
	}
	if got, _ := other.got(); len(got) != 1 || !strings.Contains(got[0], `"progressToken":"theirs"`) {
		t.Errorf("the other call's host got %q, want its own progress", got)
	}
	if got, _ := mine.got(); len(got) != 1 || !strings.Contains(got[0], `"progressToken":"mine"`) {
		t.Errorf("this call's host got %q, want only its own progress", got)
	}
}

// TestRelayKeyEnforced: a server request of a capability the upstream's
// relay key does not list gets an error naming the key, even when the
// host declared it, and never reaches the host; one it lists does. A
// per-client session declares to the upstream only what is relayed, and
// a modern upstream's input_required asking for what is not relayed is
// an error.
func TestRelayKeyEnforced(t *testing.T) {
	up, arrived, release := blockingUpstream()
	r := startRouter(t, Options{Upstreams: []UpstreamConfig{{Name: "up", Connect: up.connect, Timeout: 5 * time.Second, Relay: []string{"sampling"}}}}, nil)
	host := &recordingHost{answer: json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}`)}
	caps := json.RawMessage(`{"sampling":{},"elicitation":{},"roots":{}}`)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Dispatch(context.Background(), &Caller{ProtocolVersion: "2025-11-25", Host: host, Capabilities: caps}, request("tools/call", `{"name":"up__work"}`))
	}()
	<-arrived
	for _, method := range []string{"elicitation/create", "roots/list"} {
		resp := up.handlers.Request(context.Background(), &jsonrpc.Message{ID: json.RawMessage("7"), Method: method, Params: json.RawMessage(`{}`)})
		if resp.Error == nil || !strings.Contains(resp.Error.Message, `relay key in gateway.yaml does not list`) {
			t.Errorf("%s, not relayed: %+v, want an error naming the relay key", method, resp)
		}
	}
	if _, reqs := host.got(); len(reqs) != 0 {
		t.Errorf("the host was asked %v, which the relay key does not list", reqs)
	}
	if resp := up.handlers.Request(context.Background(), &jsonrpc.Message{ID: json.RawMessage("8"), Method: "sampling/createMessage", Params: json.RawMessage(`{"messages":[]}`)}); resp.Error != nil {
		t.Errorf("sampling, relayed: %v", resp.Error)
	}
	close(release)
	<-done

	u := r.upstreams()[0]
	if got := string(u.relayedCapabilities(json.RawMessage(`{"sampling":{"context":{}},"elicitation":{},"roots":{"listChanged":true},"experimental":{"x":{}}}`))); got != `{"experimental":{"x":{}},"sampling":{"context":{}}}` {
		t.Errorf("capabilities declared for a per-client session: %s", got)
	}
	for _, tt := range []struct{ name, requests, want string }{
		{"an elicitation", `{"a":{"method":"sampling/createMessage","params":{}},"b":{"method":"elicitation/create","params":{}}}`, "elicitation/create"},
		{"an ask the map decode would fail on", `{"a":{"method":"elicitation/create","params":{}},"b":5}`, "cannot read"},
		{"a method in another case after a harmless one", `{"a":{"method":"sampling/createMessage","METHOD":"elicitation/create"}}`, "elicitation/create"},
		{"a harmless method after the withheld one", `{"a":{"method":"elicitation/create","Method":"sampling/createMessage"}}`, "elicitation/create"},
		{"an escaped name", `{"a":{"\u006dethod":"roots/list"}}`, "roots/list"},
		{"a repeated ask", `{"a":{"method":"sampling/createMessage"},"a":{"method":"roots/list"}}`, "roots/list"},
		{"a method that is not a string", `{"a":{"method":7}}`, "cannot read"},
	} {
		ask := decoded(&jsonrpc.Message{Result: json.RawMessage(`{"resultType":"input_required","inputRequests":` + tt.requests + `}`)})
		if e := u.unrelayedInput(ask); e == nil || !strings.Contains(e.Message, tt.want) {
			t.Errorf("an input_required with %s: %v, want an error saying %q", tt.name, e, tt.want)
		}
	}
	ok := decoded(&jsonrpc.Message{Result: json.RawMessage(`{"resultType":"input_required","inputRequests":{"a":{"method":"sampling/createMessage","params":{}}}}`)})
	if e := u.unrelayedInput(ok); e != nil {
		t.Errorf("an input_required asking only for sampling, relayed: %v", e)
	}
}
