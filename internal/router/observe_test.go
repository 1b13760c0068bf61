package router

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

// observedRouter starts a router over fakes with spans recorded, metrics
// read by hand and the audit log in a buffer.
func observedRouter(t *testing.T, fakes map[string]*fakeUpstream, order ...string) (*Router, *tracetest.SpanRecorder, *sdkmetric.ManualReader, *bytes.Buffer) {
	t.Helper()
	spans := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	tel, err := telemetry.New(context.Background(), telemetry.Options{SpanProcessor: spans, MetricReader: reader, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	var audit bytes.Buffer
	r := startRouter(t, Options{Telemetry: tel, Audit: telemetry.NewAudit(&audit, true)}, fakes, order...)
	return r, spans, reader, &audit
}

// metricPoints returns the data points of the named metric.
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
	a := &fakeUpstream{lists: map[string][]string{"tools/list": tools("echo", "fail")}}
	a.answer = func(method string, params json.RawMessage) (*jsonrpc.Message, error) {
		if name, _ := jsonrpc.StringField(params, "name"); name == "fail" {
			return &jsonrpc.Message{Result: json.RawMessage(`{"content":[],"isError":true}`)}, nil
		}
		return &jsonrpc.Message{Result: json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)}, nil
	}
	r, spans, reader, audit := observedRouter(t, map[string]*fakeUpstream{"a": a}, "a")

	const hostTrace = "0af7651916cd43dd8448eb211c80319c"
	params := `{"name":"a__echo","arguments":{"secret":"s3cr3t"},"_meta":{"traceparent":"00-` + hostTrace + `-00f067aa0ba902b7-01"}}`
	caller := &Caller{ProtocolVersion: "2025-11-25", Session: "sess-1", View: "", Identity: "sha256:abc"}
	if reply := r.Dispatch(context.Background(), caller, request("tools/call", params)); reply.Error != nil {
		t.Fatalf("tools/call: %v", reply.Error)
	}
	if reply := r.Dispatch(context.Background(), caller, request("tools/call", `{"name":"a__fail"}`)); !isToolError(reply.Result) {
		t.Fatalf("a__fail: %s", reply.Result)
	}
	if reply := r.Dispatch(context.Background(), caller, request("tools/call", `{"name":"nope"}`)); reply.Error == nil {
		t.Fatal("an unknown tool was answered")
	}

	ended := spans.Ended()
	var server, client, clientParent trace.SpanContext
	var serverAttrs, clientAttrs map[string]string
	for _, s := range ended {
		switch {
		case s.Name() == "tools/call a__echo" && s.SpanKind() == trace.SpanKindServer:
			server = s.SpanContext()
			serverAttrs = map[string]string{}
			for _, kv := range s.Attributes() {
				serverAttrs[string(kv.Key)] = kv.Value.String()
			}
			if s.Parent().TraceID().String() != hostTrace {
				t.Errorf("server span's parent %v, want the host's trace", s.Parent())
			}
		case s.Name() == "tools/call echo" && s.SpanKind() == trace.SpanKindClient:
			client = s.SpanContext()
			clientAttrs = map[string]string{}
			for _, kv := range s.Attributes() {
				clientAttrs[string(kv.Key)] = kv.Value.String()
			}
			clientParent = s.Parent()
		}
	}
	if !server.IsValid() || !client.IsValid() {
		t.Fatalf("spans: want a server span and a client span, got %d spans: %v", len(ended), spanNames(ended))
	}
	if clientParent.SpanID() != server.SpanID() {
		t.Errorf("client span's parent %v, want the server span %v", clientParent.SpanID(), server.SpanID())
	}
	if server.TraceID().String() != hostTrace || client.TraceID() != server.TraceID() {
		t.Errorf("trace ids: server %s, client %s, want the host's %s", server.TraceID(), client.TraceID(), hostTrace)
	}
	for k, want := range map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "a__echo", "mcp.session.id": "sess-1", "mcp_gateway.upstream": "a", "mcp_gateway.outcome": "ok", "gen_ai.operation.name": "execute_tool"} {
		if serverAttrs[k] != want {
			t.Errorf("server span %s = %q, want %q", k, serverAttrs[k], want)
		}
	}
	if clientAttrs["gen_ai.tool.name"] != "echo" || clientAttrs["mcp_gateway.upstream"] != "a" {
		t.Errorf("client span attributes %v", clientAttrs)
	}
	for _, s := range ended {
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.String(), "s3cr3t") {
				t.Errorf("span %q carries an argument value in %s", s.Name(), kv.Key)
			}
		}
	}
	// The upstream got the client span's context in _meta.
	sent := a.recorded()[0].Params
	if !strings.Contains(sent, `"traceparent":"00-`+hostTrace+`-`+client.SpanID().String()) {
		t.Errorf("the upstream's params %s lack the client span's traceparent", sent)
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
	client2, ok := data["mcp.client.operation.duration"].(metricdata.Histogram[float64])
	if !ok || len(client2.DataPoints) != 2 {
		t.Errorf("mcp.client.operation.duration: %+v, want two series (echo ok, fail tool_error)", data["mcp.client.operation.duration"])
	}
	tools, ok := data["mcp_gateway.view.tools"].(metricdata.Gauge[int64])
	if !ok || len(tools.DataPoints) != 1 || tools.DataPoints[0].Value != 2 {
		t.Errorf("mcp_gateway.view.tools: %+v, want 2 in the default view", data["mcp_gateway.view.tools"])
	}
	if tokens, ok := data["mcp_gateway.view.tokens"].(metricdata.Gauge[int64]); !ok || tokens.DataPoints[0].Value <= 0 {
		t.Errorf("mcp_gateway.view.tokens: %+v", data["mcp_gateway.view.tokens"])
	}
	state, ok := data["mcp_gateway.upstream.state"].(metricdata.Gauge[int64])
	if !ok || len(state.DataPoints) != 1 || attrsOf(state.DataPoints[0].Attributes)["mcp_gateway.state"] != "ready" {
		t.Errorf("mcp_gateway.upstream.state: %+v", data["mcp_gateway.upstream.state"])
	}

	// One audit line per call, with a digest of the arguments only.
	lines := strings.Split(strings.TrimSpace(audit.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("audit lines: %d, want 3:\n%s", len(lines), audit)
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

func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name()+" ("+s.SpanKind().String()+")")
	}
	return out
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
// after it; hosts' arbitrary method names cannot grow the series past
// maxActiveSeries.
func TestActiveRequestsObserved(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	a := &fakeUpstream{lists: map[string][]string{"tools/list": tools("slow")}}
	a.answer = func(method string, params json.RawMessage) (*jsonrpc.Message, error) {
		arrived <- struct{}{}
		<-release
		return &jsonrpc.Message{Result: json.RawMessage(`{"content":[]}`)}, nil
	}
	r, _, reader, _ := observedRouter(t, map[string]*fakeUpstream{"a": a}, "a")
	caller := &Caller{ProtocolVersion: "2025-11-25", Session: "s"}
	done := make(chan *Reply)
	go func() { done <- r.Dispatch(context.Background(), caller, request("tools/call", `{"name":"a__slow"}`)) }()
	<-arrived
	data := collect(t, reader)
	if v, _ := activeValue(t, data, "mcp_gateway.server.active_requests", map[string]string{"mcp.method.name": "tools/call"}); v != 1 {
		t.Errorf("host requests in progress during the call: %d, want 1", v)
	}
	if v, _ := activeValue(t, data, "mcp_gateway.client.active_requests", map[string]string{"mcp.method.name": "tools/call", "mcp_gateway.upstream": "a"}); v != 1 {
		t.Errorf("upstream requests in progress during the call: %d, want 1", v)
	}
	close(release)
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

	for i := range maxActiveSeries + 10 {
		r.Dispatch(context.Background(), caller, request("made/up/"+strconv.Itoa(i), `{}`))
	}
	data = collect(t, reader)
	v, series := activeValue(t, data, "mcp_gateway.server.active_requests", map[string]string{"otel.metric.overflow": "true"})
	if v != 0 || series != maxActiveSeries+1 {
		t.Errorf("after %d methods: %d series, overflow series %d; want %d series and an overflow series at 0", maxActiveSeries+10, series, v, maxActiveSeries+1)
	}
}
