package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/namespace"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeUpstream is an in-memory upstream whose catalog and answers a test
// scripts. It records every call it receives.
type fakeUpstream struct {
	version      string
	capabilities string
	instructions string
	lists        map[string][]string // list method -> raw items
	startErr     error
	// startGate, when set, holds Start until it is closed or ctx ends;
	// listGate holds every List until it is closed, and listEntered (if
	// set) gets a token as a List arrives there.
	startGate, listGate, listEntered chan struct{}
	// answer produces the response to a call; nil echoes the params.
	answer func(method string, params json.RawMessage) (*jsonrpc.Message, error)
	// answerCtx, when set, is answer with the call's context.
	answerCtx func(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error)

	// closedCh, when set, is closed by the first Close.
	closedCh chan struct{}

	mu       sync.Mutex
	calls    []recordedCall
	lists_   int // List calls
	closed   bool
	handlers Handlers
	// state is what State reports: Idle, then Starting during Start, and
	// Ready (generation 1) or Failed after it, Stopped after Close,
	// unless a test set it (setState).
	state upstream.State
	// onState is the router's state callback (ConnectOptions.OnState),
	// through which setState plays a supervised client's state changes.
	onState func(upstream.State)
}

// setState makes st the fake's state and tells the router, as a
// supervised client does.
func (f *fakeUpstream) setState(st upstream.State) {
	f.mu.Lock()
	f.state = st
	onState := f.onState
	f.mu.Unlock()
	onState(st)
}

func (f *fakeUpstream) State() upstream.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state
}

func (f *fakeUpstream) setPhase(p upstream.Phase, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state = upstream.State{Phase: p, Err: err}
	if p == upstream.Ready {
		f.state.Generation = 1
	}
}

// connect is an UpstreamConfig.Connect that hands out the fake and keeps
// the router's handlers, through which a test plays the server's own
// messages.
func (f *fakeUpstream) connect(o ConnectOptions) (Upstream, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handlers = o.Handlers
	f.onState = o.OnState
	return f, nil
}

type recordedCall struct {
	Method string
	Params string
}

func (f *fakeUpstream) Start(ctx context.Context) error {
	f.setPhase(upstream.Starting, nil)
	if f.startGate != nil {
		select {
		case <-f.startGate:
		case <-ctx.Done():
			f.setPhase(upstream.Failed, ctx.Err())
			return ctx.Err()
		}
	}
	if f.startErr != nil {
		f.setPhase(upstream.Failed, f.startErr)
		return f.startErr
	}
	f.setPhase(upstream.Ready, nil)
	return nil
}

func (f *fakeUpstream) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state = upstream.State{Phase: upstream.Stopped}
	if !f.closed && f.closedCh != nil {
		close(f.closedCh)
	}
	f.closed = true
	return nil
}

func (f *fakeUpstream) Send(ctx context.Context, req *jsonrpc.Outgoing) (*jsonrpc.Message, error) {
	method, params := req.Method, req.Params()
	f.mu.Lock()
	f.calls = append(f.calls, recordedCall{method, string(params)})
	f.mu.Unlock()
	if f.answerCtx != nil {
		m, err := f.answerCtx(ctx, method, params)
		if err != nil {
			return nil, err
		}
		return decoded(m), nil
	}
	if f.answer == nil {
		return decoded(&jsonrpc.Message{ID: json.RawMessage("1"), Result: json.RawMessage(`{"echo":` + string(params) + `}`)}), nil
	}
	m, err := f.answer(method, params)
	if err != nil {
		return nil, err
	}
	return decoded(m), nil
}

// decoded is m as an upstream client returns it: decoded from the wire,
// with what the decoder notes of a result.
func decoded(m *jsonrpc.Message) *jsonrpc.Message {
	if m.Result == nil {
		return m
	}
	d, err := jsonrpc.Decode(jsonrpc.AppendResult(nil, json.RawMessage("1"), m.Result))
	if err != nil {
		panic(err)
	}
	return d
}

func (f *fakeUpstream) List(_ context.Context, method, _ string) ([]json.RawMessage, error) {
	if f.listGate != nil {
		select {
		case f.listEntered <- struct{}{}:
		default:
		}
		<-f.listGate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists_++
	var out []json.RawMessage
	for _, s := range f.lists[method] {
		out = append(out, json.RawMessage(s))
	}
	return out, nil
}

func (f *fakeUpstream) ProtocolVersion() string {
	if f.version == "" {
		return "2025-11-25"
	}
	return f.version
}

func (f *fakeUpstream) Capabilities() json.RawMessage {
	if f.capabilities == "" {
		return json.RawMessage(`{"tools":{},"prompts":{},"resources":{}}`)
	}
	return json.RawMessage(f.capabilities)
}

func (f *fakeUpstream) Instructions() string { return f.instructions }

func (f *fakeUpstream) recorded() []recordedCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recordedCall(nil), f.calls...)
}

func tools(names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, fmt.Sprintf(`{"name":%q,"description":"the %s tool","inputSchema":{"type":"object"}}`, n, n))
	}
	return out
}

// relayAll relays every server request: config's default for an HTTP
// upstream.
var relayAll = config.RelayCapabilities

// startRouter starts a router over the fakes and waits for their first
// start; Close runs at cleanup.
func startRouter(t testing.TB, opts Options, fakes map[string]*fakeUpstream, order ...string) *Router {
	t.Helper()
	for _, name := range order {
		opts.Upstreams = append(opts.Upstreams, UpstreamConfig{Name: name, Connect: fakes[name].connect, Timeout: 5 * time.Second, Relay: relayAll})
	}
	opts.ListWait = -1
	r, err := New(&opts)
	if err != nil {
		t.Fatal(err)
	}
	r.Start(context.Background())
	t.Cleanup(func() { _ = r.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitStarted(ctx); err != nil {
		t.Fatalf("WaitStarted: %v", err)
	}
	return r
}

var legacyCaller = &Caller{ProtocolVersion: "2025-11-25", Session: "s1"}
var modernCaller = &Caller{ProtocolVersion: ModernVersion}

// request decodes a host's request as the server does.
func request(method, params string) *jsonrpc.Request {
	req, err := jsonrpc.DecodeRequest(jsonrpc.AppendRequest(nil, json.RawMessage(`"host-1"`), method, json.RawMessage(params)))
	if err != nil {
		panic(err)
	}
	return req
}

func listNames(t *testing.T, reply *Reply, key string) []string {
	t.Helper()
	if reply.Error != nil {
		t.Fatalf("list error: %v", reply.Error)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(reply.Result, &body); err != nil {
		t.Fatalf("list result %s: %v", reply.Result, err)
	}
	var items []struct {
		Name string `json:"name"`
		URI  string `json:"uri"`
	}
	if err := json.Unmarshal(body[key], &items); err != nil {
		t.Fatalf("list items %s: %v", body[key], err)
	}
	var names []string
	for _, it := range items {
		names = append(names, it.Name+it.URI)
	}
	return names
}

func TestMergePrefixesAndRoutes(t *testing.T) {
	a := &fakeUpstream{lists: map[string][]string{"tools/list": tools("echo", "add")}}
	b := &fakeUpstream{lists: map[string][]string{"tools/list": tools("echo", "search.web")}}
	for _, mode := range []namespace.Mode{namespace.ModeAlways, namespace.ModeOnConflict} {
		t.Run(string(mode), func(t *testing.T) {
			r := startRouter(t, Options{Namespace: namespace.Options{Mode: mode}}, map[string]*fakeUpstream{"a": a, "b": b}, "a", "b")
			got := listNames(t, r.Dispatch(context.Background(), legacyCaller, request("tools/list", `{}`)), "tools")
			want := map[namespace.Mode][]string{
				namespace.ModeAlways:     {"a__echo", "a__add", "b__echo", "b__search_web"},
				namespace.ModeOnConflict: {"a__echo", "add", "b__echo", "search_web"},
			}[mode]
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("tools/list names (-want +got):\n%s", diff)
			}
			exposedWeb := want[3]
			reply := r.Dispatch(context.Background(), legacyCaller, request("tools/call", `{"name":"`+exposedWeb+`","arguments":{"q":"x y"}}`))
			if reply.Error != nil {
				t.Fatalf("tools/call: %v", reply.Error)
			}
			if want := `{"echo":{"name":"search.web","arguments":{"q":"x y"}}}`; string(reply.Result) != want {
				t.Errorf("result = %s, want the upstream's bytes %s", reply.Result, want)
			}
			if !reply.LacksResultType {
				t.Error("a legacy upstream's result is not marked as lacking resultType")
			}
		})
	}
	if n := len(a.recorded()); n != 0 {
		t.Errorf("upstream a got %d calls, want 0: %v", n, a.recorded())
	}
	if got := b.recorded(); len(got) != 2 || got[0].Method != "tools/call" {
		t.Errorf("upstream b calls = %v, want two tools/call", got)
	}
}

func TestUnknownAndHiddenToolsAreNotCallable(t *testing.T) {
	files := &fakeUpstream{lists: map[string][]string{"tools/list": tools("read_file", "write_file", "delete")}}
	r := startRouter(t, Options{Rules: policy.Rules{Upstreams: map[string]policy.UpstreamRules{
		"files": {Deny: []string{"write_*", "delete"}},
	}}}, map[string]*fakeUpstream{"files": files}, "files")

	if diff := cmp.Diff([]string{"files__read_file"}, listNames(t, r.Dispatch(context.Background(), legacyCaller, request("tools/list", `{}`)), "tools")); diff != "" {
		t.Errorf("visible tools (-want +got):\n%s", diff)
	}
	for _, name := range []string{"files__write_file", "write_file", "files__delete", "files__", "nope"} {
		reply := r.Dispatch(context.Background(), legacyCaller, request("tools/call", `{"name":"`+name+`"}`))
		if reply.Error == nil || reply.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(reply.Error.Message, name) {
			t.Errorf("tools/call %q: reply %+v, want -32602 naming the tool", name, reply.Error)
		}
	}
	if calls := files.recorded(); len(calls) != 0 {
		t.Errorf("the upstream received %v; hidden and unknown tools must never reach it", calls)
	}
}

func TestFailedUpstreamLeavesOthersWorking(t *testing.T) {
	good := &fakeUpstream{lists: map[string][]string{"tools/list": tools("ok")}}
	dead := &fakeUpstream{startErr: errors.New("exec: npx-missing: not found")}
	slow := &fakeUpstream{startGate: make(chan struct{})} // never released: times out
	opts := Options{}
	opts.Upstreams = []UpstreamConfig{
		{Name: "dead", Connect: dead.connect, Required: false},
		{Name: "slow", Connect: slow.connect, Timeout: 50 * time.Millisecond},
		{Name: "good", Connect: good.connect, Required: true},
	}
	r := startRouter(t, opts, nil)

	if diff := cmp.Diff([]string{"good__ok"}, listNames(t, r.Dispatch(context.Background(), legacyCaller, request("tools/list", `{}`)), "tools")); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if reply := r.Dispatch(context.Background(), legacyCaller, request("tools/call", `{"name":"good__ok"}`)); reply.Error != nil {
		t.Errorf("call to the good upstream: %v", reply.Error)
	}
	states := map[string]UpstreamStatus{}
	for _, s := range r.Status() {
		states[s.Name] = s
	}
	if s := states["dead"]; s.State != PhaseFailed || !strings.Contains(s.Error, "npx-missing") {
		t.Errorf("dead upstream status = %+v, want failed with the reason", s)
	}
	if s := states["slow"]; s.State != PhaseFailed || !strings.Contains(s.Error, "deadline") {
		t.Errorf("slow upstream status = %+v, want failed by its timeout", s)
	}
	if s := states["good"]; s.State != PhaseReady || s.Tools != 1 {
		t.Errorf("good upstream status = %+v, want ready with 1 tool", s)
	}
	if !r.Ready() {
		t.Error("Ready() = false, but the only required upstream is ready")
	}
}

func TestTransportFailureBecomesToolError(t *testing.T) {
	flaky := &fakeUpstream{
		lists: map[string][]string{"tools/list": tools("fetch")},
		answer: func(string, json.RawMessage) (*jsonrpc.Message, error) {
			return nil, fmt.Errorf("upstream flaky: tools/call: %w", upstream.ErrTimeout)
		},
	}
	r := startRouter(t, Options{}, map[string]*fakeUpstream{"flaky": flaky}, "flaky")
	reply := r.Dispatch(context.Background(), legacyCaller, request("tools/call", `{"name":"flaky__fetch"}`))
	if reply.Error != nil {
		t.Fatalf("got a JSON-RPC error %v, want a tool result with isError", reply.Error)
	}
	var res struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
	}
	if err := json.Unmarshal(reply.Result, &res); err != nil {
		t.Fatal(err)
	}
	if !res.IsError || len(res.Content) != 1 || !strings.Contains(res.Content[0].Text, `"flaky" did not answer within 5s`) {
		t.Errorf("result = %s, want isError and a sentence naming the timeout", reply.Result)
	}
}

func TestUpstreamErrorPassesThrough(t *testing.T) {
	up := &fakeUpstream{
		lists: map[string][]string{"tools/list": tools("strict")},
		answer: func(string, json.RawMessage) (*jsonrpc.Message, error) {
			return &jsonrpc.Message{ID: json.RawMessage("9"), Error: &jsonrpc.Error{Code: -32602, Message: "bad arguments", Data: json.RawMessage(`{"field":"q"}`)}}, nil
		},
	}
	r := startRouter(t, Options{}, map[string]*fakeUpstream{"up": up}, "up")
	reply := r.Dispatch(context.Background(), legacyCaller, request("tools/call", `{"name":"up__strict"}`))
	want := &jsonrpc.Error{Code: -32602, Message: "bad arguments", Data: json.RawMessage(`{"field":"q"}`)}
	if diff := cmp.Diff(want, reply.Error); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}

func TestModernCallerListsCarryCacheHints(t *testing.T) {
	up := &fakeUpstream{lists: map[string][]string{"tools/list": tools("a")}}
	r := startRouter(t, Options{ListTTL: 30 * time.Second}, map[string]*fakeUpstream{"up": up}, "up")
	reply := r.Dispatch(context.Background(), modernCaller, request("tools/list", `{}`))
	var body struct {
		ResultType string `json:"resultType"`
		TTL        *int   `json:"ttlMs"`
		Scope      string `json:"cacheScope"`
	}
	if err := json.Unmarshal(reply.Result, &body); err != nil {
		t.Fatal(err)
	}
	if body.ResultType != "complete" || body.TTL == nil || *body.TTL != 30000 || body.Scope != "public" {
		t.Errorf("modern tools/list = %s, want resultType, ttlMs 30000 and cacheScope public", reply.Result)
	}
	legacy := r.Dispatch(context.Background(), legacyCaller, request("tools/list", `{}`))
	if strings.Contains(string(legacy.Result), "ttlMs") {
		t.Errorf("legacy tools/list = %s carries modern cache hints", legacy.Result)
	}
	if reply := r.Dispatch(context.Background(), legacyCaller, request("tools/list", `{"cursor":"abc"}`)); reply.Error == nil || reply.Error.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("foreign cursor: %+v, want -32602", reply.Error)
	}
}

func TestDescriptionTrimAndLimits(t *testing.T) {
	long := `{"name":"long","description":"This tool does a great many things that take a long time to describe"}`
	a := &fakeUpstream{lists: map[string][]string{"tools/list": append([]string{long}, tools("a2", "a3")...)}}
	b := &fakeUpstream{lists: map[string][]string{"tools/list": tools("b1", "b2")}}
	r := startRouter(t, Options{Rules: policy.Rules{
		MaxTools: 3, DescriptionMaxChars: 30,
		Upstreams: map[string]policy.UpstreamRules{"a": {MaxTools: 2}},
	}}, map[string]*fakeUpstream{"a": a, "b": b}, "a", "b")
	reply := r.Dispatch(context.Background(), legacyCaller, request("tools/list", `{}`))
	if diff := cmp.Diff([]string{"a__long", "a__a2", "b__b1"}, listNames(t, reply, "tools")); diff != "" {
		t.Errorf("limited tools (-want +got):\n%s", diff)
	}
	if !strings.Contains(string(reply.Result), `"description":"This tool does a great many…"`) {
		t.Errorf("description not trimmed at a word boundary: %s", reply.Result)
	}
}

func TestResourcesRouteByURIAndTemplate(t *testing.T) {
	docs := &fakeUpstream{lists: map[string][]string{
		"resources/list":           {`{"uri":"docs://readme","name":"readme"}`},
		"resources/templates/list": {`{"uriTemplate":"docs://page/{id}","name":"page"}`},
	}}
	mem := &fakeUpstream{lists: map[string][]string{
		"resources/list": {`{"uri":"mem://graph","name":"graph"}`, `{"uri":"docs://readme","name":"shadowed"}`},
	}}
	r := startRouter(t, Options{}, map[string]*fakeUpstream{"docs": docs, "mem": mem}, "docs", "mem")

	// mem's docs://readme collides with docs's: it is exposed in gateway form.
	if diff := cmp.Diff([]string{"readmedocs://readme", "graphmem://graph", "shadowedmcpgw://mem/docs://readme"}, listNames(t, r.Dispatch(context.Background(), legacyCaller, request("resources/list", `{}`)), "resources")); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	for uri, want := range map[string]*fakeUpstream{"docs://readme": docs, "mem://graph": mem, "docs://page/42": docs} {
		before := len(want.recorded())
		if reply := r.Dispatch(context.Background(), legacyCaller, request("resources/read", `{"uri":"`+uri+`"}`)); reply.Error != nil {
			t.Errorf("read %s: %v", uri, reply.Error)
		}
		if len(want.recorded()) != before+1 {
			t.Errorf("read %s did not reach the upstream that owns it", uri)
		}
	}
	for caller, code := range map[*Caller]int64{legacyCaller: -32002, modernCaller: -32602} {
		reply := r.Dispatch(context.Background(), caller, request("resources/read", `{"uri":"nowhere://x"}`))
		if reply.Error == nil || reply.Error.Code != code {
			t.Errorf("%s caller, unknown resource: %+v, want code %d", caller.ProtocolVersion, reply.Error, code)
		}
	}
}

func TestCompletionRewritesPromptRef(t *testing.T) {
	up := &fakeUpstream{lists: map[string][]string{"prompts/list": {`{"name":"greet"}`}}}
	r := startRouter(t, Options{}, map[string]*fakeUpstream{"up": up}, "up")
	reply := r.Dispatch(context.Background(), legacyCaller, request("completion/complete", `{"ref":{"type":"ref/prompt","name":"up__greet"},"argument":{"name":"n","value":"a"}}`))
	if reply.Error != nil {
		t.Fatal(reply.Error)
	}
	calls := up.recorded()
	if len(calls) != 1 || calls[0].Params != `{"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"n","value":"a"}}` {
		t.Errorf("upstream got %v, want the original prompt name in ref", calls)
	}
}

func TestInitializeAndDiscoverResults(t *testing.T) {
	up := &fakeUpstream{instructions: "Use echo to test."}
	r := startRouter(t, Options{ServerInfo: Implementation{Name: "mcp-gateway", Version: "test"}}, map[string]*fakeUpstream{"up": up}, "up")
	var init struct {
		ProtocolVersion string
		ServerInfo      Implementation
		Instructions    string
		Capabilities    map[string]any
	}
	if err := json.Unmarshal(r.InitializeResult("2025-06-18"), &init); err != nil {
		t.Fatal(err)
	}
	if init.ProtocolVersion != "2025-06-18" || init.ServerInfo.Name != "mcp-gateway" || init.Instructions != "## up\nUse echo to test." || init.Capabilities["tools"] == nil {
		t.Errorf("initialize result = %+v", init)
	}
	var disc struct {
		ResultType        string
		SupportedVersions []string
		Meta              map[string]Implementation `json:"_meta"`
	}
	if err := json.Unmarshal(r.DiscoverResult(), &disc); err != nil {
		t.Fatal(err)
	}
	if disc.ResultType != "complete" || disc.SupportedVersions[0] != ModernVersion || disc.Meta["io.modelcontextprotocol/serverInfo"].Name != "mcp-gateway" {
		t.Errorf("discover result = %+v", disc)
	}
	if got := NegotiateLegacy("1999-01-01"); got != "2025-11-25" {
		t.Errorf("NegotiateLegacy(unknown) = %s, want the newest legacy version", got)
	}
}

func TestRemovedMethodsAndLogLevel(t *testing.T) {
	logs := &fakeUpstream{capabilities: `{"tools":{},"logging":{}}`, lists: map[string][]string{"tools/list": tools("echo")}}
	quiet := &fakeUpstream{capabilities: `{"tools":{}}`}
	r := startRouter(t, Options{}, map[string]*fakeUpstream{"logs": logs, "quiet": quiet}, "logs", "quiet")
	for _, method := range []string{"ping", "logging/setLevel", "resources/subscribe", "initialize"} {
		reply := r.Dispatch(context.Background(), modernCaller, request(method, `{}`))
		if reply.Error == nil || reply.Error.Code != jsonrpc.CodeMethodNotFound {
			t.Errorf("modern %s: %+v, want -32601 (removed in 2026-07-28)", method, reply.Error)
		}
	}
	if reply := r.Dispatch(context.Background(), legacyCaller, request("ping", `{}`)); reply.Error != nil || string(reply.Result) != `{}` {
		t.Errorf("legacy ping: %+v", reply)
	}
	if reply := r.Dispatch(context.Background(), legacyCaller, request("logging/setLevel", `{"level":"loud"}`)); reply.Error == nil || reply.Error.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("bad level: %+v, want -32602", reply.Error)
	}
	if reply := r.Dispatch(context.Background(), legacyCaller, request("logging/setLevel", `{"level":"debug"}`)); reply.Error != nil {
		t.Fatalf("setLevel: %v", reply.Error)
	}
	want := []recordedCall{{"logging/setLevel", `{"level":"debug"}`}}
	if diff := cmp.Diff(want, logs.recorded()); diff != "" {
		t.Errorf("upstream with logging (-want +got):\n%s", diff)
	}
	if got := quiet.recorded(); len(got) != 0 {
		t.Errorf("upstream without logging got %v", got)
	}
}

// TestCallWaitsForFirstStart: a host that calls a tool it remembers while
// the gateway is still starting gets an answer, not "unknown tool".
func TestCallWaitsForFirstStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		up := &fakeUpstream{startGate: gate, lists: map[string][]string{"tools/list": tools("late")}}
		r, err := New(&Options{Upstreams: []UpstreamConfig{{Name: "up", Connect: up.connect}}, ListWait: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		r.Start(context.Background())
		defer r.Close()

		done := make(chan *Reply, 1)
		go func() {
			done <- r.Dispatch(context.Background(), legacyCaller, request("tools/call", `{"name":"up__late"}`))
		}()
		synctest.Wait()
		select {
		case reply := <-done:
			t.Fatalf("the call returned before the upstream started: %+v", reply.Error)
		default:
		}
		close(gate)
		if reply := <-done; reply.Error != nil {
			t.Errorf("call after the first start: %v", reply.Error)
		}
	})
}
