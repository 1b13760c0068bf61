package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/server"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// received is one request as an upstream got it: its method, and the
// traceparent of its _meta and of its HTTP headers.
type received struct{ method, name, meta, header string }

// receivedBy records what an mcptest HTTP server receives.
type receivedBy struct {
	mu   sync.Mutex
	reqs []received
}

func (rb *receivedBy) record(h http.Header, body []byte) {
	m, err := jsonrpc.Decode(body)
	if err != nil || m.Method == "" {
		return
	}
	var p struct {
		Name string `json:"name"`
		Meta struct {
			Traceparent string `json:"traceparent"`
		} `json:"_meta"`
	}
	_ = json.Unmarshal(m.Params, &p)
	rb.mu.Lock()
	defer rb.mu.Unlock()
	rb.reqs = append(rb.reqs, received{m.Method, p.Name, p.Meta.Traceparent, h.Get("Traceparent")})
}

// traceparents returns the traceparents (of _meta and headers, which
// must agree) of the requests of method and name received so far.
func (rb *receivedBy) traceparents(t *testing.T, method, name string) []string {
	t.Helper()
	rb.mu.Lock()
	defer rb.mu.Unlock()
	var out []string
	for _, r := range rb.reqs {
		if r.method == method && r.name == name {
			if r.meta != r.header {
				t.Errorf("%s %s: traceparent %q in _meta, %q in the headers", method, name, r.meta, r.header)
			}
			out = append(out, r.meta)
		}
	}
	return out
}

func traceparentOf(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID())
}

// TestEveryUpstreamPathObserved: each kind of request the gateway sends
// an upstream gets a client span, and the upstream receives that span's
// traceparent in _meta and in the HTTP headers: a call, a modern host's
// call to a legacy upstream (parked while the host answers an
// elicitation), the retries of a legacy host's call to a modern upstream
// that asks for input, logging/setLevel, resources/subscribe,
// completion/complete, lists and a modern upstream's subscriptions/listen.
// Those a host's request causes are children of its server span.
func TestEveryUpstreamPathObserved(t *testing.T) {
	var oldGot, newGot receivedBy
	old := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: mcptest.ServerOptions{Name: "old", Versions: mcptest.LegacyVersions()}, Received: oldGot.record})
	modern := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Stateless: true, Server: mcptest.ServerOptions{Name: "new"}, Received: newGot.record})
	spans := tracetest.NewSpanRecorder()
	tel, err := telemetry.New(context.Background(), telemetry.Options{SpanProcessor: spans, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	cfg := config.Default()
	cfg.Upstreams = []config.Upstream{relaying(httpUpstream("old", old.URL)), relaying(httpUpstream("new", modern.URL))}
	var audit bytes.Buffer
	url, _, stop := startGatewayWith(t, cfg, recorders{tel: tel, audit: telemetry.NewAudit(&audit, false)})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	elicit := func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "ada"}}, nil
	}
	host := func(era string, tp hostTrace) *mcp.ClientSession {
		client := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: elicit})
		hc := &http.Client{Transport: headerTransport{http.Header{"Traceparent": {tp.traceparent()}}}}
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: era})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	legacyTrace, modernTrace := newHostTrace(), newHostTrace()
	legacy, mod := host("2025-11-25", legacyTrace), host("2026-07-28", modernTrace)
	mustText := func(cs *mcp.ClientSession, tool string, args map[string]any, want string) {
		t.Helper()
		got, err := callAll(ctx, cs, tool, args)
		if err != nil || !strings.Contains(got, want) {
			t.Fatalf("%s: %q, %v; want %q", tool, got, err, want)
		}
	}
	mustText(legacy, "old__echo", map[string]any{"text": "hi"}, "hi")
	mustText(mod, "old__elicit", map[string]any{"message": "name?"}, "ada")
	mustText(legacy, "new__ask", map[string]any{"message": "name?"}, "ada")
	if err := legacy.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	if err := legacy.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://static/hello"}); err != nil {
		t.Fatal(err)
	}
	_, _ = legacy.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "old__greet"}, Argument: mcp.CompleteParamsArgument{Name: "name", Value: "a"}})
	stop() // every span has ended once the gateway has stopped

	ended := spans.Ended()
	server := func(tr hostTrace, name string) []trace.SpanContext {
		var out []trace.SpanContext
		for _, s := range ended {
			if s.SpanKind() == trace.SpanKindServer && s.Name() == name && s.SpanContext().TraceID() == trace.TraceID(tr.traceID) {
				out = append(out, s.SpanContext())
			}
		}
		if len(out) == 0 {
			t.Errorf("no server span %q in the host's trace; spans: %v", name, describeSpans(ended))
		}
		return out
	}
	// client returns the client spans of name on upstream whose parent
	// is one of parents (or that have no parent, when parents is nil).
	client := func(name, upstream string, parents []trace.SpanContext) []trace.SpanContext {
		var out []trace.SpanContext
		for _, s := range ended {
			if s.SpanKind() != trace.SpanKindClient || s.Name() != name {
				continue
			}
			up := ""
			for _, kv := range s.Attributes() {
				if kv.Key == telemetry.AttrUpstream {
					up = kv.Value.AsString()
				}
			}
			if up != upstream {
				continue
			}
			matches := parents == nil && !s.Parent().IsValid()
			for _, p := range parents {
				matches = matches || s.Parent().SpanID() == p.SpanID()
			}
			if matches {
				out = append(out, s.SpanContext())
			}
		}
		return out
	}
	for _, tt := range []struct {
		path, serverSpan, clientSpan, upstream string
		trace                                  hostTrace
		got                                    *receivedBy
		method, name                           string
		calls                                  int // client spans (and requests) the path makes
	}{
		{"call", "tools/call old__echo", "tools/call echo", "old", legacyTrace, &oldGot, "tools/call", "echo", 1},
		{"parked call", "tools/call old__elicit", "tools/call elicit", "old", modernTrace, &oldGot, "tools/call", "elicit", 1},
		{"multi round-trip retry", "tools/call new__ask", "tools/call ask", "new", legacyTrace, &newGot, "tools/call", "ask", 2},
		{"logging/setLevel", "logging/setLevel", "logging/setLevel", "old", legacyTrace, &oldGot, "logging/setLevel", "", 1},
		{"resources/subscribe", "resources/subscribe", "resources/subscribe", "old", legacyTrace, &oldGot, "resources/subscribe", "", 1},
		{"completion/complete", "completion/complete", "completion/complete", "old", legacyTrace, &oldGot, "completion/complete", "", 1},
	} {
		t.Run(tt.path, func(t *testing.T) {
			cs := client(tt.clientSpan, tt.upstream, server(tt.trace, tt.serverSpan))
			if len(cs) != tt.calls {
				t.Fatalf("%d client spans %q on %s under the server span %q, want %d; spans: %v", len(cs), tt.clientSpan, tt.upstream, tt.serverSpan, tt.calls, describeSpans(ended))
			}
			got := tt.got.traceparents(t, tt.method, tt.name)
			for _, sc := range cs {
				want := traceparentOf(sc)
				if !strings.Contains(strings.Join(got, " "), want) {
					t.Errorf("the upstream received traceparents %q, want the client span's %s", got, want)
				}
			}
		})
	}
	t.Run("lists and listen", func(t *testing.T) {
		for _, up := range []string{"old", "new"} {
			if len(client("tools/list", up, nil)) == 0 {
				t.Errorf("no client span of %s's tools/list", up)
			}
		}
		if len(client("subscriptions/listen", "new", nil)) == 0 {
			t.Errorf("no client span of the modern upstream's subscriptions/listen; spans: %v", describeSpans(ended))
		}
	})
	t.Run("audit", func(t *testing.T) {
		for _, want := range []string{`"name":"old__elicit","upstream":"old","upstream_name":"elicit"`, `"name":"new__ask","upstream":"new","upstream_name":"ask"`} {
			if !strings.Contains(audit.String(), want) {
				t.Errorf("the audit log lacks %s:\n%s", want, audit.String())
			}
		}
	})
}

func describeSpans(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name()+" ("+s.SpanKind().String()+")")
	}
	return out
}

// fakeClient is an upstream that answers from memory: tools "echo"
// (whose result echoes the params it was sent), "fail" (a tool error),
// "slow" (which waits for release) and "panic" (whose call panics).
type fakeClient struct {
	mu      sync.Mutex
	sent    []string // the params of each tools/call
	arrived chan struct{}
	release chan struct{}
}

func (f *fakeClient) Start(context.Context) error { return nil }
func (f *fakeClient) Close() error                { return nil }
func (f *fakeClient) Send(ctx context.Context, req *jsonrpc.Outgoing) (*jsonrpc.Message, error) {
	name, _ := req.StringParam("name")
	f.mu.Lock()
	f.sent = append(f.sent, string(req.Params()))
	f.mu.Unlock()
	result := `{"content":[{"type":"text","text":"ok"}]}`
	switch name {
	case "fail":
		result = `{"content":[],"isError":true}`
	case "slow":
		f.arrived <- struct{}{}
		<-f.release
	case "panic":
		panic("the fake upstream client panicked")
	}
	return jsonrpc.Decode(jsonrpc.AppendResult(nil, json.RawMessage("1"), json.RawMessage(result)))
}
func (f *fakeClient) List(_ context.Context, method, _ string) ([]json.RawMessage, error) {
	if method != "tools/list" {
		return nil, nil
	}
	var out []json.RawMessage
	for _, n := range []string{"echo", "fail", "slow", "panic"} {
		out = append(out, json.RawMessage(`{"name":"`+n+`","description":"the `+n+` tool","inputSchema":{"type":"object"}}`))
	}
	return out, nil
}
func (f *fakeClient) ProtocolVersion() string       { return "2025-11-25" }
func (f *fakeClient) Capabilities() json.RawMessage { return json.RawMessage(`{"tools":{}}`) }
func (f *fakeClient) Instructions() string          { return "" }
func (f *fakeClient) State() upstream.State {
	return upstream.State{Phase: upstream.Ready, Generation: 1, Breaker: upstream.BreakerClosed}
}
func (f *fakeClient) Subscribe(context.Context, upstream.Subscriptions) error { return nil }

// observedFake is a router over one fakeClient called "a", observed as
// the gateway observes: spans recorded, metrics read by hand, the audit
// log (with argument digests) in a buffer.
func observedFake(t *testing.T) (server.Dispatcher, *fakeClient, *tracetest.SpanRecorder, *sdkmetric.ManualReader, *mcptest.LogBuffer) {
	t.Helper()
	spans, reader := tracetest.NewSpanRecorder(), sdkmetric.NewManualReader()
	tel, err := telemetry.New(context.Background(), telemetry.Options{SpanProcessor: spans, MetricReader: reader, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	var audit mcptest.LogBuffer
	obs, err := telemetry.NewObserver(tel, telemetry.NewAudit(&audit, true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(obs.Close)
	fake := &fakeClient{arrived: make(chan struct{}), release: make(chan struct{})}
	rt, err := router.New(&router.Options{ListWait: -1, Upstreams: []router.UpstreamConfig{{Name: "a",
		Connect: func(router.ConnectOptions) (router.Upstream, error) { return observed(fake, "a", obs), nil }}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := observeState(obs, rt); err != nil {
		t.Fatal(err)
	}
	rt.Start(context.Background())
	t.Cleanup(func() { _ = rt.Close() })
	if err := rt.WaitStarted(context.Background()); err != nil {
		t.Fatal(err)
	}
	return dispatcher(rt, obs, nil), fake, spans, reader, &audit
}

func hostRequest(t *testing.T, method, params string) *jsonrpc.Request {
	t.Helper()
	req, err := jsonrpc.DecodeRequest(jsonrpc.AppendRequest(nil, json.RawMessage(`"h-1"`), method, json.RawMessage(params)))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

func attrsOf(set attribute.Set) map[string]string {
	out := map[string]string{}
	for _, kv := range set.ToSlice() {
		out[string(kv.Key)] = kv.Value.String()
	}
	return out
}

// TestTelemetryOfAToolCall: a host request carrying a traceparent in
// _meta becomes a server span in that trace, with a client span for the
// upstream call as its child; the upstream receives the client span's
// traceparent in _meta; the duration histograms, the gauges and the audit
// record say what happened, without argument values.
func TestTelemetryOfAToolCall(t *testing.T) {
	d, fake, spans, reader, audit := observedFake(t)
	const hostTrace = "0af7651916cd43dd8448eb211c80319c"
	params := `{"name":"a__echo","arguments":{"secret":"s3cr3t"},"_meta":{"traceparent":"00-` + hostTrace + `-00f067aa0ba902b7-01"}}`
	caller := &router.Caller{ProtocolVersion: "2025-11-25", Session: "sess-1", Identity: "sha256:abc"}
	if reply := d.Dispatch(context.Background(), caller, hostRequest(t, "tools/call", params)); reply.Error != nil {
		t.Fatalf("tools/call: %v", reply.Error)
	}
	if reply := d.Dispatch(context.Background(), caller, hostRequest(t, "tools/call", `{"name":"a__fail"}`)); !reply.ToolError {
		t.Fatalf("a__fail: %s", reply.Result)
	}
	if reply := d.Dispatch(context.Background(), caller, hostRequest(t, "tools/call", `{"name":"nope"}`)); reply.Error == nil {
		t.Fatal("an unknown tool was answered")
	}

	ended := spans.Ended()
	var server, client, clientParent trace.SpanContext
	serverAttrs, clientAttrs := map[string]string{}, map[string]string{}
	for _, s := range ended {
		switch {
		case s.Name() == "tools/call a__echo" && s.SpanKind() == trace.SpanKindServer:
			server = s.SpanContext()
			serverAttrs = attrsOf(attribute.NewSet(s.Attributes()...))
			if s.Parent().TraceID().String() != hostTrace {
				t.Errorf("server span's parent %v, want the host's trace", s.Parent())
			}
		case s.Name() == "tools/call echo" && s.SpanKind() == trace.SpanKindClient:
			client, clientParent = s.SpanContext(), s.Parent()
			clientAttrs = attrsOf(attribute.NewSet(s.Attributes()...))
		}
	}
	if !server.IsValid() || !client.IsValid() {
		t.Fatalf("spans: want a server span and a client span, got %v", describeSpans(ended))
	}
	if clientParent.SpanID() != server.SpanID() || server.TraceID().String() != hostTrace || client.TraceID() != server.TraceID() {
		t.Errorf("client span %v (parent %v), server span %v; want one trace, the host's, client under server", client, clientParent, server)
	}
	for k, want := range map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "a__echo", "mcp.session.id": "sess-1",
		"mcp_gateway.upstream": "a", "mcp_gateway.outcome": "ok", "gen_ai.operation.name": "execute_tool"} {
		if serverAttrs[k] != want {
			t.Errorf("server span %s = %q, want %q", k, serverAttrs[k], want)
		}
	}
	if clientAttrs["gen_ai.tool.name"] != "echo" || clientAttrs["mcp_gateway.upstream"] != "a" {
		t.Errorf("client span attributes %v", clientAttrs)
	}
	for _, s := range ended {
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.Emit(), "s3cr3t") {
				t.Errorf("span %q carries an argument value in %s", s.Name(), kv.Key)
			}
		}
	}
	// (The upstream client writes the client span's trace context into
	// the request; TestEveryUpstreamPathObserved checks that on real
	// clients. This fake only records what it was sent.)
	fake.mu.Lock()
	sent := fake.sent[0]
	fake.mu.Unlock()
	if !strings.Contains(sent, `"name":"echo"`) {
		t.Errorf("the upstream's params %s", sent)
	}

	data := collect(t, reader)
	hist, ok := data["mcp.server.operation.duration"].(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("no mcp.server.operation.duration histogram: %v", data)
	}
	byOutcome := map[string]uint64{}
	for _, p := range hist.DataPoints {
		at := attrsOf(p.Attributes)
		byOutcome[at["mcp_gateway.outcome"]+" "+at["gen_ai.tool.name"]] += p.Count
		if _, ok := at["mcp.session.id"]; ok {
			t.Errorf("a metric carries the session id: %v", at)
		}
	}
	for k, want := range map[string]uint64{"ok a__echo": 1, "tool_error a__fail": 1, "error ": 1} {
		if byOutcome[k] != want {
			t.Errorf("server durations by outcome and tool: %v, want %s = %d", byOutcome, k, want)
		}
	}
	if c, ok := data["mcp.client.operation.duration"].(metricdata.Histogram[float64]); !ok || len(c.DataPoints) < 2 {
		t.Errorf("mcp.client.operation.duration: %+v, want series for echo (ok) and fail (tool_error)", data["mcp.client.operation.duration"])
	}
	if tools, ok := data["mcp_gateway.view.tools"].(metricdata.Gauge[int64]); !ok || len(tools.DataPoints) != 1 || tools.DataPoints[0].Value != 4 {
		t.Errorf("mcp_gateway.view.tools: %+v, want 4 in the default view", data["mcp_gateway.view.tools"])
	}
	if tokens, ok := data["mcp_gateway.view.tokens"].(metricdata.Gauge[int64]); !ok || tokens.DataPoints[0].Value <= 0 {
		t.Errorf("mcp_gateway.view.tokens: %+v", data["mcp_gateway.view.tokens"])
	}
	if state, ok := data["mcp_gateway.upstream.state"].(metricdata.Gauge[int64]); !ok || len(state.DataPoints) != 1 || attrsOf(state.DataPoints[0].Attributes)["mcp_gateway.state"] != "ready" {
		t.Errorf("mcp_gateway.upstream.state: %+v", data["mcp_gateway.upstream.state"])
	}

	// One audit line per call, with a digest of the arguments only.
	lines := strings.Split(strings.TrimSpace(audit.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("audit lines: %d, want 3:\n%s", len(lines), audit.String())
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"msg": "audit", "method": "tools/call", "name": "a__echo", "upstream": "a", "upstream_name": "echo", "identity": "sha256:abc", "outcome": "ok", "session": "sess-1"} {
		if first[k] != want {
			t.Errorf("audit %s = %v, want %v (%s)", k, first[k], want, lines[0])
		}
	}
	if first["arguments_sha256"] == nil || strings.Contains(audit.String(), "s3cr3t") {
		t.Errorf("audit arguments: %s", lines[0])
	}
}

// activeValue returns the value of the active-requests series whose
// attributes include want, and how many series the metric has.
func activeValue(t *testing.T, data map[string]metricdata.Aggregation, name string, want map[string]string) (int64, int) {
	t.Helper()
	sum, ok := data[name].(metricdata.Sum[int64])
	if !ok || sum.IsMonotonic {
		t.Fatalf("%s: %+v, want a non-monotonic sum", name, data[name])
	}
	var v int64 = -1
	for _, p := range sum.DataPoints {
		at := attrsOf(p.Attributes)
		match := true
		for k, w := range want {
			match = match && at[k] == w
		}
		if match {
			v = p.Value
		}
	}
	return v, len(sum.DataPoints)
}

// TestActiveRequestsObserved: the requests in progress are counted on
// both sides while a call waits on its upstream and are back to zero
// after it, and after a call whose client panicked; hosts' arbitrary
// method names and unknown tool names make no series and no span names
// of their own.
func TestActiveRequestsObserved(t *testing.T) {
	d, fake, spans, reader, _ := observedFake(t)
	caller := &router.Caller{ProtocolVersion: "2025-11-25", Session: "s"}
	done := make(chan *router.Reply)
	go func() {
		done <- d.Dispatch(context.Background(), caller, hostRequest(t, "tools/call", `{"name":"a__slow"}`))
	}()
	<-fake.arrived
	data := collect(t, reader)
	if v, _ := activeValue(t, data, "mcp_gateway.server.active_requests", map[string]string{"mcp.method.name": "tools/call"}); v != 1 {
		t.Errorf("host requests in progress during the call: %d, want 1", v)
	}
	if v, _ := activeValue(t, data, "mcp_gateway.client.active_requests", map[string]string{"mcp.method.name": "tools/call", "mcp_gateway.upstream": "a"}); v != 1 {
		t.Errorf("upstream requests in progress during the call: %d, want 1", v)
	}
	close(fake.release)
	if reply := <-done; reply.Error != nil {
		t.Fatal(reply.Error)
	}
	data = collect(t, reader)
	if v, _ := activeValue(t, data, "mcp_gateway.server.active_requests", map[string]string{"mcp.method.name": "tools/call"}); v != 0 {
		t.Errorf("host requests in progress after the call: %d, want 0", v)
	}
	if v, _ := activeValue(t, data, "mcp_gateway.client.active_requests", map[string]string{"mcp_gateway.upstream": "a"}); v != 0 {
		t.Errorf("upstream requests in progress after the call: %d, want 0", v)
	}

	// A panic in the upstream client reaches the caller, and leaves
	// nothing counted in progress and no span open.
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the client's panic did not reach the caller")
			}
		}()
		d.Dispatch(context.Background(), caller, hostRequest(t, "tools/call", `{"name":"a__panic"}`))
	}()
	data = collect(t, reader)
	if v, _ := activeValue(t, data, "mcp_gateway.server.active_requests", map[string]string{"mcp.method.name": "tools/call"}); v != 0 {
		t.Errorf("host requests in progress after a panic: %d, want 0", v)
	}
	if v, _ := activeValue(t, data, "mcp_gateway.client.active_requests", map[string]string{"mcp_gateway.upstream": "a"}); v != 0 {
		t.Errorf("upstream requests in progress after a panic: %d, want 0", v)
	}
	var panicked []string
	for _, s := range spans.Ended() {
		at := attrsOf(attribute.NewSet(s.Attributes()...))
		if s.Status().Code == codes.Error && strings.HasSuffix(at["gen_ai.tool.name"], "panic") {
			panicked = append(panicked, s.SpanKind().String()+" "+at["error.type"])
		}
	}
	if want := []string{"client panic", "server -32603"}; !slices.Equal(panicked, want) {
		t.Errorf("spans of the panicked call ended as %v, want %v", panicked, want)
	}

	const methods = 20
	for i := range methods {
		d.Dispatch(context.Background(), caller, hostRequest(t, "made/up/"+strconv.Itoa(i), `{}`))
		d.Dispatch(context.Background(), caller, hostRequest(t, "tools/call", `{"name":"made_up_`+strconv.Itoa(i)+`"}`))
	}
	data = collect(t, reader)
	if v, series := activeValue(t, data, "mcp_gateway.server.active_requests", map[string]string{"mcp.method.name": "_OTHER"}); v != 0 || series != 2 {
		t.Errorf("after %d made-up methods: %d series, _OTHER at %d; want 2 series (tools/call, _OTHER) at 0", methods, series, v)
	}
	hist := data["mcp.server.operation.duration"].(metricdata.Histogram[float64])
	for _, p := range hist.DataPoints {
		at := attrsOf(p.Attributes)
		if m := at["mcp.method.name"]; m != "tools/call" && m != "_OTHER" {
			t.Errorf("a duration series of the method %q", m)
		}
		if strings.Contains(at["gen_ai.tool.name"], "made_up") {
			t.Errorf("a duration series of the unknown tool %q", at["gen_ai.tool.name"])
		}
	}
	names := map[string]int{}
	for _, s := range spans.Ended() {
		names[s.Name()]++
	}
	// (and one more tools/call: the panicked call, which no upstream
	// answered)
	if names["_OTHER"] != methods || names["tools/call"] != methods+1 {
		t.Errorf("span names %v, want %d of _OTHER and %d of tools/call (unrouted)", names, methods, methods+1)
	}
}

// TestUpstreamOutcome: a deadline is a timeout, an error; only the
// host's cancelling is "cancelled". On the host side too, a deadline is
// the error the router answered with.
func TestUpstreamOutcome(t *testing.T) {
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	for _, tt := range []struct {
		name             string
		ctx              context.Context
		outcome, errType string
	}{
		{"deadline", expired, telemetry.OutcomeError, "timeout"},
		{"cancelled", cancelled, telemetry.OutcomeCancelled, "cancelled"},
		{"ok", context.Background(), telemetry.OutcomeOK, ""},
	} {
		outcome, errType := upstreamOutcome(tt.ctx, "tools/call", nil, nil)
		if outcome != tt.outcome || errType != tt.errType {
			t.Errorf("%s: %s %q, want %s %q", tt.name, outcome, errType, tt.outcome, tt.errType)
		}
	}
	timedOut := &router.Reply{Error: jsonrpc.NewError(jsonrpc.CodeInternalError, "timed out")}
	if res := hostResult(expired, hostRequest(t, "tools/call", `{"name":"a__x"}`), timedOut); res.Outcome != telemetry.OutcomeError || res.Code != jsonrpc.CodeInternalError {
		t.Errorf("a host request past its deadline: %+v, want the router's error", res)
	}
	if res := hostResult(cancelled, hostRequest(t, "tools/call", `{"name":"a__x"}`), timedOut); res.Outcome != telemetry.OutcomeCancelled {
		t.Errorf("a cancelled host request: %+v, want cancelled", res)
	}
}
