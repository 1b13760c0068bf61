package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// copyMsg copies the parts of a message the tests look at: delivered
// messages alias read buffers.
func copyMsg(m *jsonrpc.Message) *jsonrpc.Message {
	return &jsonrpc.Message{
		ID:     append(json.RawMessage(nil), m.ID...),
		Method: m.Method,
		Params: append(json.RawMessage(nil), m.Params...),
	}
}

// inbox collects messages and lets a test wait for them.
type inbox struct {
	mu      sync.Mutex
	msgs    []*jsonrpc.Message
	changed chan struct{}
}

func newInbox() *inbox { return &inbox{changed: make(chan struct{})} }

func (b *inbox) add(m *jsonrpc.Message) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.msgs = append(b.msgs, copyMsg(m))
	close(b.changed)
	b.changed = make(chan struct{})
}

func (b *inbox) all() []*jsonrpc.Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.msgs)
}

// methods returns the methods of the messages received, in order.
func (b *inbox) methods() []string {
	var out []string
	for _, m := range b.all() {
		out = append(out, m.Method)
	}
	return out
}

// wait returns the first message that satisfies ok, waiting for it until
// ctx is done.
func (b *inbox) wait(ctx context.Context, ok func(*jsonrpc.Message) bool) (*jsonrpc.Message, error) {
	for {
		b.mu.Lock()
		msgs, changed := b.msgs, b.changed
		b.mu.Unlock()
		for _, m := range msgs {
			if ok(m) {
				return m, nil
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("no such message among %d received", len(msgs))
		}
	}
}

func method(name string) func(*jsonrpc.Message) bool {
	return func(m *jsonrpc.Message) bool { return m.Method == name }
}

// handler is a CallHandler that records what it gets and answers requests
// with answer.
type handler struct {
	notes, reqs *inbox
	answer      func(ctx context.Context, req *jsonrpc.Message) *jsonrpc.Message
}

func newHandler() *handler {
	return &handler{notes: newInbox(), reqs: newInbox(), answer: answerSampling}
}

func (h *handler) Notify(n *jsonrpc.Message) { h.notes.add(n) }

func (h *handler) Request(ctx context.Context, req *jsonrpc.Message) *jsonrpc.Message {
	h.reqs.add(req)
	return h.answer(ctx, req)
}

// answerSampling answers sampling/createMessage with "answer to <the
// prompt>", roots/list with one root, and the rest with an error.
func answerSampling(_ context.Context, req *jsonrpc.Message) *jsonrpc.Message {
	switch req.Method {
	case "sampling/createMessage":
		text := samplingText(req)
		res, _ := json.Marshal(map[string]any{
			"role":    "assistant",
			"model":   "test-model",
			"content": map[string]string{"type": "text", "text": "answer to " + text},
		})
		return &jsonrpc.Message{Result: res}
	case "roots/list":
		return &jsonrpc.Message{Result: json.RawMessage(`{"roots":[{"uri":"file:///handler","name":"h"}]}`)}
	}
	return &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "no %s here", req.Method)}
}

// samplingText returns the text of the first message of a sampling
// request.
func samplingText(req *jsonrpc.Message) string {
	var p struct {
		Messages []struct {
			Content struct{ Text string }
		}
	}
	if json.Unmarshal(req.Params, &p) != nil || len(p.Messages) == 0 {
		return ""
	}
	return p.Messages[0].Content.Text
}

// withOptionsInboxes makes opts record what reaches its callbacks.
func withOptionsInboxes(opts *upstream.Options) (notes, reqs *inbox) {
	notes, reqs = newInbox(), newInbox()
	opts.OnNotification = notes.add
	opts.OnRequest = func(ctx context.Context, req *jsonrpc.Message) *jsonrpc.Message {
		reqs.add(req)
		return answerSampling(ctx, req)
	}
	return notes, reqs
}

func progressToken(m *jsonrpc.Message) string {
	tok, _ := jsonrpc.StringField(m.Params, "progressToken")
	return tok
}

func TestCallHandler(t *testing.T) {
	legacy := mcptest.ServerOptions{Versions: mcptest.LegacyVersions()}
	tests := []struct {
		name string
		opts func(t *testing.T) *upstream.Options
		// toHandler: the call's own messages reach the handler, not the
		// Options callbacks.
		toHandler bool
		// requests: the server may send requests (legacy).
		requests bool
	}{
		{"legacy http sse", func(t *testing.T) *upstream.Options {
			return httpOptions(mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: legacy}).URL)
		}, true, true},
		{"modern http sse", func(t *testing.T) *upstream.Options {
			return httpOptions(mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Stateless: true}).URL)
		}, true, false},
		// With JSON responses the SDK sends what relates to a call on the
		// session's GET stream: no longer the call's own.
		{"legacy http json", func(t *testing.T) *upstream.Options {
			return httpOptions(mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: legacy, JSONResponse: true}).URL)
		}, false, true},
		{"legacy stdio", func(*testing.T) *upstream.Options { return stdioOptions("echo-legacy") }, false, true},
		{"deprecated sse", func(t *testing.T) *upstream.Options {
			o := httpOptions(mcptest.NewSSEServer(t, nil).URL)
			o.Transport = "sse"
			return o
		}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			opts := tt.opts(t)
			optNotes, optReqs := withOptionsInboxes(opts)
			c := start(t, opts)
			h := newHandler()
			hctx := upstream.WithCallHandler(ctx, h)

			res, err := c.Call(hctx, "tools/call", json.RawMessage(`{"name":"progress","arguments":{"text":"p1"},"_meta":{"progressToken":"tok-1"}}`))
			if err != nil || res.Error != nil {
				t.Fatalf("progress = %v %v", err, res)
			}
			want, other := h.notes, optNotes
			if !tt.toHandler {
				want, other = optNotes, h.notes
			}
			n, err := want.wait(ctx, method("notifications/progress"))
			if err != nil {
				t.Fatalf("progress notification: %v", err)
			}
			if progressToken(n) != "tok-1" {
				t.Errorf("progress params %s", n.Params)
			}
			if tt.toHandler && len(want.all()) != 1 {
				// The handler's messages are all delivered before Call returns.
				t.Errorf("handler got %v", want.methods())
			}
			if got := other.methods(); len(got) != 0 {
				t.Errorf("the other side got %v", got)
			}

			if !tt.requests {
				return
			}
			if got := callTool(t, hctx, c, "sample", `{"text":"what is 2+2"}`); got != "answer to what is 2+2" {
				t.Errorf("sample = %q", got)
			}
			if got := callTool(t, hctx, c, "roots", `{}`); !strings.Contains(got, "file:///handler") {
				t.Errorf("roots = %q", got)
			}
			wantReqs, otherReqs := h.reqs, optReqs
			if !tt.toHandler {
				wantReqs, otherReqs = optReqs, h.reqs
			}
			if diff := cmp.Diff([]string{"sampling/createMessage", "roots/list"}, wantReqs.methods()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if got := otherReqs.methods(); len(got) != 0 {
				t.Errorf("the other side got requests %v", got)
			}
		})
	}
}

// TestCallHandlersConcurrent runs two calls at once, each with its own
// handler, on one legacy session: each handler gets its own call's
// messages only.
func TestCallHandlersConcurrent(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: mcptest.ServerOptions{Versions: mcptest.LegacyVersions()}})
	opts := httpOptions(srv.URL)
	optNotes, optReqs := withOptionsInboxes(opts)
	c := start(t, opts)

	// Both sampling requests must be in the handlers at once before either
	// is answered: the calls are in flight together.
	var arrived sync.WaitGroup
	arrived.Add(2)
	both := make(chan struct{})
	go func() {
		arrived.Wait()
		close(both)
	}()
	handlers := []*handler{newHandler(), newHandler()}
	results := make([]string, 2)
	var wg sync.WaitGroup
	for i, h := range handlers {
		h.answer = func(ctx context.Context, req *jsonrpc.Message) *jsonrpc.Message {
			arrived.Done()
			select {
			case <-both:
			case <-ctx.Done():
				return &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeInternalError, "gave up")}
			}
			return answerSampling(ctx, req)
		}
		wg.Go(func() {
			hctx := upstream.WithCallHandler(ctx, h)
			tok := fmt.Sprintf("tok-%d", i)
			res, err := c.Call(hctx, "tools/call", json.RawMessage(`{"name":"progress","arguments":{"text":"x"},"_meta":{"progressToken":"`+tok+`"}}`))
			if err != nil || res.Error != nil {
				t.Errorf("progress %d: %v %v", i, err, res)
				return
			}
			results[i] = callTool(t, hctx, c, "sample", fmt.Sprintf(`{"text":"call %d"}`, i))
		})
	}
	wg.Wait()
	for i, h := range handlers {
		if want := fmt.Sprintf("answer to call %d", i); results[i] != want {
			t.Errorf("call %d: sample = %q, want %q", i, results[i], want)
		}
		notes := h.notes.all()
		if len(notes) != 1 || progressToken(notes[0]) != fmt.Sprintf("tok-%d", i) {
			t.Errorf("handler %d notifications: %v", i, notes)
		}
		reqs := h.reqs.all()
		if len(reqs) != 1 || samplingText(reqs[0]) != fmt.Sprintf("call %d", i) {
			t.Errorf("handler %d requests: %v", i, reqs)
		}
	}
	if len(optNotes.all()) != 0 || len(optReqs.all()) != 0 {
		t.Errorf("Options callbacks got %v and %v", optNotes.methods(), optReqs.methods())
	}
}

type ctxKey struct{}

func TestCallHandlerRequestContext(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: mcptest.ServerOptions{Versions: mcptest.LegacyVersions()}})
	c := start(t, httpOptions(srv.URL))
	h := newHandler()
	var got any
	h.answer = func(ctx context.Context, req *jsonrpc.Message) *jsonrpc.Message {
		got = ctx.Value(ctxKey{})
		return answerSampling(ctx, req)
	}
	hctx := upstream.WithCallHandler(context.WithValue(ctx, ctxKey{}, "host-7"), h)
	callTool(t, hctx, c, "sample", `{"text":"x"}`)
	if got != "host-7" {
		t.Errorf("the handler's context has %v, want the call's value", got)
	}
}

func TestCallHandlerAnswersElicitation(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: mcptest.ServerOptions{Versions: mcptest.LegacyVersions()}})
	opts := httpOptions(srv.URL)
	opts.Capabilities = json.RawMessage(`{"elicitation":{}}`)
	c := start(t, opts)
	h := newHandler()
	h.answer = func(_ context.Context, req *jsonrpc.Message) *jsonrpc.Message {
		if msg, _ := jsonrpc.StringField(req.Params, "message"); req.Method != "elicitation/create" || msg != "who are you?" {
			return &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeInvalidParams, "unexpected %s %s", req.Method, req.Params)}
		}
		return &jsonrpc.Message{Result: json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`)}
	}
	got := callTool(t, upstream.WithCallHandler(ctx, h), c, "elicit", `{"message":"who are you?"}`)
	if got != `accept {"name":"Ada"}` {
		t.Errorf("elicit = %q", got)
	}
}

func TestCapabilitiesDeclared(t *testing.T) {
	legacyHTTP := func(t *testing.T) *upstream.Options {
		return httpOptions(mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: mcptest.ServerOptions{Versions: mcptest.LegacyVersions()}}).URL)
	}
	legacyStdio := func(*testing.T) *upstream.Options { return stdioOptions("echo-legacy") }
	tests := []struct {
		name string
		opts func(*testing.T) *upstream.Options
		caps string
		// want: the capabilities the server saw; elicit: the start of the
		// elicit tool's answer.
		want, elicit string
	}{
		{"http declared", legacyHTTP, `{"sampling":{},"elicitation":{},"roots":{"listChanged":true}}`, `{"roots":{"listChanged":true},"sampling":{},"elicitation":{}}`, "decline"},
		{"http none", legacyHTTP, "", `{}`, "error: client does not support elicitation"},
		{"stdio declared", legacyStdio, `{"elicitation":{}}`, `{"elicitation":{}}`, "decline"},
		{"stdio none", legacyStdio, "", `{}`, "error: client does not support elicitation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			opts := tt.opts(t)
			if tt.caps != "" {
				opts.Capabilities = json.RawMessage(tt.caps)
			}
			opts.OnRequest = func(context.Context, *jsonrpc.Message) *jsonrpc.Message {
				return &jsonrpc.Message{Result: json.RawMessage(`{"action":"decline"}`)}
			}
			c := start(t, opts)
			var got, want map[string]any
			if err := json.Unmarshal([]byte(callTool(t, ctx, c, "capabilities", `{}`)), &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tt.want), &want); err != nil {
				t.Fatal(err)
			}
			if r, ok := got["roots"].(map[string]any); ok && len(r) == 0 {
				delete(got, "roots") // the SDK always reports a roots object
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("capabilities the server saw (-want +got):\n%s", diff)
			}
			if got := callTool(t, ctx, c, "elicit", `{"message":"m"}`); !strings.HasPrefix(got, tt.elicit) {
				t.Errorf("elicit = %q, want %q...", got, tt.elicit)
			}
		})
	}
}

// TestNotificationRightAfterInitialized: servers may announce
// list_changed as soon as the client has sent notifications/initialized.
func TestNotificationRightAfterInitialized(t *testing.T) {
	tests := []struct {
		name string
		opts func(*testing.T) *upstream.Options
	}{
		{"stdio", func(*testing.T) *upstream.Options { return stdioOptions("announce") }},
		{"legacy http", func(t *testing.T) *upstream.Options {
			return httpOptions(mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{
				Server: mcptest.ServerOptions{Versions: mcptest.LegacyVersions(), NotifyOnInitialized: true},
			}).URL)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			opts := tt.opts(t)
			notes, _ := withOptionsInboxes(opts)
			c := start(t, opts)
			if c.Era() != upstream.EraLegacy {
				t.Fatalf("era %v", c.Era())
			}
			if _, err := notes.wait(ctx, method("notifications/tools/list_changed")); err != nil {
				t.Fatalf("list_changed sent right after initialized: %v", err)
			}
		})
	}
}

// TestLegacyGETStreamBeforeInitialized checks the order: the GET stream
// is open (answered) before notifications/initialized is sent.
func TestLegacyGETStreamBeforeInitialized(t *testing.T) {
	t.Parallel()
	s := mcptest.NewScripted(t)
	s.On(mcptest.Route{Method: "POST", RPC: "server/discover", Reply: mcptest.ReplyStatus(400, "")})
	var mu sync.Mutex
	var order []string
	note := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, what)
	}
	s.On(mcptest.Route{Method: "POST", RPC: "initialize", Times: 1,
		Reply: mcptest.ReplyResult(`{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}`, "Mcp-Session-Id", "o")})
	s.On(mcptest.Route{Method: "GET", Session: "o", Times: 1, Reply: func(w http.ResponseWriter, r *mcptest.Request) {
		note("GET answered") // before the client can see the answer
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context.Done()
	}})
	s.On(mcptest.Route{Method: "POST", RPC: "notifications/initialized", Session: "o", Times: 1, Reply: func(w http.ResponseWriter, _ *mcptest.Request) {
		note("initialized")
		w.WriteHeader(http.StatusAccepted)
	}})
	s.On(mcptest.Route{Method: "DELETE", Optional: true, Reply: mcptest.ReplyStatus(204, "")})
	start(t, httpOptions(s.URL))
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"GET answered", "initialized"}, order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

// listenRequests returns the server-side contexts of the
// subscriptions/listen POSTs a server received, in order.
type listenLog struct {
	mu   sync.Mutex
	ctxs []context.Context
	got  chan struct{}
}

func newListenLog() *listenLog { return &listenLog{got: make(chan struct{}, 100)} }

func (l *listenLog) inspect(r *http.Request) {
	if r.Header.Get("Mcp-Method") != "subscriptions/listen" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ctxs = append(l.ctxs, r.Context())
	l.got <- struct{}{}
}

func (l *listenLog) all() []context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ctxs)
}

func hasSubscriptionID(m *jsonrpc.Message) bool {
	return strings.Contains(string(m.Params), "subscriptionId")
}

func TestSubscribe(t *testing.T) {
	tests := []struct {
		name string
		opts func(*testing.T, *listenLog) *upstream.Options
	}{
		{"http", func(t *testing.T, l *listenLog) *upstream.Options {
			return httpOptions(mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{
				Stateless: true,
				Server:    mcptest.ServerOptions{Versions: mcptest.ModernVersions()},
				Inspect:   l.inspect,
			}).URL)
		}},
		{"stdio", func(*testing.T, *listenLog) *upstream.Options { return stdioOptions("echo-modern") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			listens := newListenLog()
			opts := tt.opts(t, listens)
			notes, _ := withOptionsInboxes(opts)
			c := start(t, opts)
			if c.Era() != upstream.EraModern {
				t.Fatalf("era %v", c.Era())
			}
			err := c.Subscribe(ctx, upstream.Subscriptions{ToolsListChanged: true, ResourceURIs: []string{"test://static/hello"}})
			if err != nil {
				t.Fatalf("Subscribe: %v", err)
			}

			callTool(t, ctx, c, "addtool", `{"name":"late"}`)
			n, err := notes.wait(ctx, method("notifications/tools/list_changed"))
			if err != nil {
				t.Fatalf("tools/list_changed: %v", err)
			}
			if hasSubscriptionID(n) {
				t.Errorf("the subscription id was passed on: %s", n.Params)
			}
			callTool(t, ctx, c, "touch", `{"uri":"test://static/hello"}`)
			n, err = notes.wait(ctx, method("notifications/resources/updated"))
			if err != nil {
				t.Fatalf("resources/updated: %v", err)
			}
			if uri, _ := jsonrpc.StringField(n.Params, "uri"); uri != "test://static/hello" || hasSubscriptionID(n) {
				t.Errorf("resources/updated params %s", n.Params)
			}
			for _, m := range notes.all() {
				if m.Method == "notifications/subscriptions/acknowledged" {
					t.Error("the acknowledgement was passed on")
				}
			}

			// An empty filter closes the stream.
			if err := c.Subscribe(ctx, upstream.Subscriptions{}); err != nil {
				t.Fatalf("Subscribe(empty): %v", err)
			}
			if tt.name == "stdio" {
				// The server saw notifications/cancelled for the listen
				// request.
				got := callTool(t, ctx, c, "cancellations", `{"key":"none"}`)
				var r struct{ Cancelled []json.RawMessage }
				if err := json.Unmarshal([]byte(got), &r); err != nil || len(r.Cancelled) != 1 {
					t.Errorf("cancellations = %s", got)
				}
				return
			}
			ls := listens.all()
			if len(ls) != 1 {
				t.Fatalf("%d listen requests, want 1", len(ls))
			}
			select {
			case <-ls[0].Done():
			case <-ctx.Done():
				t.Fatal("the listen stream is still open on the server")
			}
		})
	}
}

func TestSubscribeReplaces(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	listens := newListenLog()
	srv := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Stateless: true, Inspect: listens.inspect})
	opts := httpOptions(srv.URL)
	notes, _ := withOptionsInboxes(opts)
	c := start(t, opts)
	// The same filter twice (URIs are a set) is one stream.
	for _, uris := range [][]string{{"test://static/hello", "test://items/1"}, {"test://items/1", "test://static/hello", "test://items/1"}} {
		if err := c.Subscribe(ctx, upstream.Subscriptions{ToolsListChanged: true, ResourceURIs: uris}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Subscribe(ctx, upstream.Subscriptions{ResourceURIs: []string{"test://static/world"}}); err != nil {
		t.Fatal(err)
	}
	ls := listens.all()
	if len(ls) != 2 {
		t.Fatalf("%d listen requests, want 2", len(ls))
	}
	select {
	case <-ls[0].Done():
	case <-ctx.Done():
		t.Fatal("the first stream is still open on the server")
	}
	if ls[1].Err() != nil {
		t.Error("the second stream is closed")
	}
	callTool(t, ctx, c, "touch", `{"uri":"test://static/world"}`)
	if _, err := notes.wait(ctx, method("notifications/resources/updated")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case <-ls[1].Done():
	case <-ctx.Done():
		t.Fatal("Close left the stream open")
	}
}

func TestSubscribeLegacyDoesNothing(t *testing.T) {
	t.Parallel()
	s := mcptest.NewScripted(t)
	scriptLegacy(s, "l") // a listen request would be unexpected
	c := start(t, httpOptions(s.URL))
	if err := c.Subscribe(testCtx(t), upstream.Subscriptions{ToolsListChanged: true}); err != nil {
		t.Errorf("Subscribe on a legacy server = %v", err)
	}
	c2 := newClient(t, httpOptions(s.URL))
	if err := c2.Subscribe(testCtx(t), upstream.Subscriptions{ToolsListChanged: true}); !errors.Is(err, upstream.ErrNotReady) {
		t.Errorf("Subscribe before Start = %v, want ErrNotReady", err)
	}
}

const ackEvent = `data: {"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":$ID},"notifications":{"toolsListChanged":true,"resourceSubscriptions":["r://a"]}}}`

// replyAckThen acknowledges a listen request, sends events, and then
// holds the stream open until the client closes it.
func replyAckThen(events ...string) func(http.ResponseWriter, *mcptest.Request) {
	return func(w http.ResponseWriter, r *mcptest.Request) {
		mcptest.ReplySSE(append([]string{ackEvent}, events...)...)(w, r)
		<-r.Context.Done()
	}
}

func TestSubscribeReconnects(t *testing.T) {
	tests := []struct {
		name  string
		first func(http.ResponseWriter, *mcptest.Request)
	}{
		{"stream drops", mcptest.ReplySSE(ackEvent)},
		{"server ends it", mcptest.ReplySSE(ackEvent, `data: {"jsonrpc":"2.0","id":$ID,"result":{"resultType":"complete"}}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			s := mcptest.NewScripted(t)
			scriptModern(s)
			s.On(mcptest.Route{Method: "POST", RPC: "subscriptions/listen", Times: 1, Reply: tt.first})
			s.On(mcptest.Route{Method: "POST", RPC: "subscriptions/listen", Times: 1, Reply: replyAckThen(
				`data: {"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"r://a","_meta":{"io.modelcontextprotocol/subscriptionId":$ID,"k":"v"}}}`)})
			opts := httpOptions(s.URL)
			rec := newRecorder()
			opts.Logger = slog.New(rec)
			notes, _ := withOptionsInboxes(opts)
			c := start(t, opts)
			if err := c.Subscribe(ctx, upstream.Subscriptions{ToolsListChanged: true, PromptsListChanged: true, ResourceURIs: []string{"r://a"}}); err != nil {
				t.Fatal(err)
			}
			r, err := rec.wait(ctx, msgIs("honours only part"))
			if err != nil || r.attrs["granted"] != `{"toolsListChanged":true,"resourceSubscriptions":["r://a"]}` {
				t.Errorf("partial acknowledgement log: %v %v", r.attrs, err)
			}
			// After the second stream's acknowledgement, what it carries is
			// reported once as changed, then its own notification.
			if _, err := notes.wait(ctx, func(m *jsonrpc.Message) bool { return strings.Contains(string(m.Params), `"k"`) }); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range notes.all() {
				got = append(got, m.Method+" "+string(m.Params))
			}
			want := []string{
				"notifications/tools/list_changed ", // what the server granted: not prompts
				`notifications/resources/updated {"uri":"r://a"}`,
				`notifications/resources/updated {"uri":"r://a","_meta":{"k":"v"}}`,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("notifications (-want +got):\n%s", diff)
			}
			var sent []string
			for _, r := range s.Requests() {
				if r.Msg != nil && r.Msg.Method == "subscriptions/listen" {
					f, _ := jsonrpc.Field(r.Msg.Params, "notifications")
					sent = append(sent, string(f))
				}
			}
			f := `{"toolsListChanged":true,"promptsListChanged":true,"resourceSubscriptions":["r://a"]}`
			if diff := cmp.Diff([]string{f, f}, sent); diff != "" {
				t.Errorf("listen filters (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSubscribeStdioServerEnds: over stdio a server ends a subscription
// with notifications/cancelled naming the listen request; the Client
// listens again.
func TestSubscribeStdioServerEnds(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	opts := stdioOptions("listen-ends")
	notes, _ := withOptionsInboxes(opts)
	c := start(t, opts)
	if c.Era() != upstream.EraModern {
		t.Fatalf("era %v", c.Era())
	}
	if err := c.Subscribe(ctx, upstream.Subscriptions{ToolsListChanged: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := notes.wait(ctx, func(m *jsonrpc.Message) bool { return strings.Contains(string(m.Params), `"n"`) }); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range notes.all() {
		got = append(got, m.Method+" "+string(m.Params))
	}
	want := []string{
		"notifications/tools/list_changed ", // reported after the second acknowledgement
		`notifications/tools/list_changed {"_meta":{"n":2}}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("notifications (-want +got):\n%s", diff)
	}
}

func TestSubscribeErrors(t *testing.T) {
	tests := []struct {
		name    string
		reply   func(http.ResponseWriter, *mcptest.Request)
		wantErr error
	}{
		{"rpc error", mcptest.ReplyError(404, jsonrpc.CodeMethodNotFound, "no subscriptions here", ""), &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound}},
		{"no acknowledgement", mcptest.ReplyNever, upstream.ErrTimeout},
		{"ended before the acknowledgement", mcptest.ReplyResult(`{}`), upstream.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mcptest.NewScripted(t)
			scriptModern(s)
			s.On(mcptest.Route{Method: "POST", RPC: "subscriptions/listen", Times: 1, Reply: tt.reply})
			opts := httpOptions(s.URL)
			opts.Timeout = 300 * time.Millisecond
			c := start(t, opts)
			err := c.Subscribe(testCtx(t), upstream.Subscriptions{ToolsListChanged: true})
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Subscribe = %v, want %v", err, tt.wantErr)
			}
			if n := len(s.Requests()); n != 2 { // discover and one listen: no retry
				t.Errorf("%d requests, want 2", n)
			}
		})
	}
}

// TestCancellation cancels a blocked call's context: the server must see
// the cancellation, by the call's id where the transport needs one.
func TestCancellation(t *testing.T) {
	tests := []struct {
		name         string
		opts         func(*testing.T) *upstream.Options
		notification bool // a notifications/cancelled is expected
	}{
		{"stdio modern", func(*testing.T) *upstream.Options { return stdioOptions("echo-modern") }, true},
		{"stdio legacy", func(*testing.T) *upstream.Options { return stdioOptions("echo-legacy") }, true},
		{"legacy http", func(t *testing.T) *upstream.Options {
			return httpOptions(mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: mcptest.ServerOptions{Versions: mcptest.LegacyVersions()}}).URL)
		}, true},
		{"modern http", func(t *testing.T) *upstream.Options {
			return httpOptions(mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Stateless: true, Server: mcptest.ServerOptions{Versions: mcptest.ModernVersions()}}).URL)
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			c := start(t, tt.opts(t))
			cctx, cancel := context.WithCancel(ctx)
			errc := make(chan error, 1)
			go func() {
				_, err := c.Call(cctx, "tools/call", json.RawMessage(`{"name":"block","arguments":{"key":"k"}}`))
				errc <- err
			}()
			callTool(t, ctx, c, "waiting", `{"key":"k","n":1}`)
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled call = %v, want context.Canceled", err)
			}
			// The server's handler saw its context end.
			callTool(t, ctx, c, "aborted", `{"key":"k","n":1}`)
			if !tt.notification {
				return
			}
			var got struct{ Block, Cancelled []json.RawMessage }
			if err := json.Unmarshal([]byte(callTool(t, ctx, c, "cancellations", `{"key":"k"}`)), &got); err != nil {
				t.Fatal(err)
			}
			if len(got.Block) != 1 || len(got.Cancelled) != 1 || string(got.Block[0]) != string(got.Cancelled[0]) {
				t.Errorf("block call ids %s, cancelled request ids %s: want the one id in both", got.Block, got.Cancelled)
			}
		})
	}
}
