package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/server"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// otlpReceiver is an OTLP/HTTP collector in the test process: it takes
// the protobuf bodies POSTed to /v1/traces and /v1/metrics and keeps the
// spans and the names of the metrics.
type otlpReceiver struct {
	*httptest.Server
	mu      sync.Mutex // guards the fields below
	spans   []*recordedSpan
	metrics map[string]bool
	// discard drops what arrives without decoding it (benchmarks).
	discard bool
}

// recordedSpan is a span with the service.name of its resource.
type recordedSpan struct {
	*tracepb.Span
	service string
}

func newOTLPReceiver(t testing.TB, discard bool) *otlpReceiver {
	t.Helper()
	rcv := &otlpReceiver{metrics: map[string]bool{}, discard: discard}
	rcv.Server = httptest.NewServer(http.HandlerFunc(rcv.serve))
	t.Cleanup(rcv.Close)
	return rcv
}

func (rcv *otlpReceiver) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var resp proto.Message
	switch r.URL.Path {
	case "/v1/traces":
		resp = &coltracepb.ExportTraceServiceResponse{}
		if rcv.discard {
			break
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(data, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rcv.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			service := attrString(rs.GetResource().GetAttributes(), "service.name")
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					rcv.spans = append(rcv.spans, &recordedSpan{Span: sp, service: service})
				}
			}
		}
		rcv.mu.Unlock()
	case "/v1/metrics":
		resp = &colmetricpb.ExportMetricsServiceResponse{}
		if rcv.discard {
			break
		}
		var req colmetricpb.ExportMetricsServiceRequest
		if err := proto.Unmarshal(data, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rcv.mu.Lock()
		for _, rm := range req.GetResourceMetrics() {
			for _, sm := range rm.GetScopeMetrics() {
				for _, m := range sm.GetMetrics() {
					rcv.metrics[m.GetName()] = true
				}
			}
		}
		rcv.mu.Unlock()
	default:
		http.NotFound(w, r)
		return
	}
	out, _ := proto.Marshal(resp)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// trace returns the spans received in trace id.
func (rcv *otlpReceiver) trace(id []byte) []*recordedSpan {
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	var out []*recordedSpan
	for _, s := range rcv.spans {
		if bytes.Equal(s.GetTraceId(), id) {
			out = append(out, s)
		}
	}
	return out
}

func (rcv *otlpReceiver) metricNames() map[string]bool {
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	out := map[string]bool{}
	for k := range rcv.metrics {
		out[k] = true
	}
	return out
}

func attrString(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// describe lists spans for a failure message.
func describe(spans []*recordedSpan) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "\n  %q kind=%v span=%x parent=%x upstream=%q", s.GetName(), s.GetKind(), s.GetSpanId(), s.GetParentSpanId(),
			attrString(s.GetAttributes(), string(telemetry.AttrUpstream)))
	}
	return b.String()
}

// headerTransport adds fixed headers to every request of a host.
type headerTransport struct {
	header http.Header
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.header {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// connectWith connects a Go SDK client of the given era through hc.
func connectWith(t testing.TB, url, version string, hc *http.Client) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "telemetry-e2e", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting in era %s: %v", version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// hostTrace is the trace context a host sends: a trace id and the id of
// the host's own span.
type hostTrace struct {
	traceID [16]byte
	spanID  [8]byte
}

func newHostTrace() hostTrace {
	var h hostTrace
	_, _ = rand.Read(h.traceID[:])
	_, _ = rand.Read(h.spanID[:])
	return h
}

func (h hostTrace) traceparent() string {
	return fmt.Sprintf("00-%x-%x-01", h.traceID, h.spanID)
}

// parseTraceparent splits a W3C traceparent into its trace and parent ids.
func parseTraceparent(tp string) (traceID, spanID string, ok bool) {
	parts := strings.Split(tp, "-")
	if len(parts) != 4 || parts[0] != "00" || len(parts[1]) != 32 || len(parts[2]) != 16 {
		return "", "", false
	}
	return parts[1], parts[2], true
}

// TestTelemetryEndToEnd: a Go SDK host of each era sends a trace context
// (legacy: the traceparent HTTP header; modern: _meta.traceparent) with
// tool calls to an HTTP and a stdio upstream. The gateway exports, over
// OTLP/HTTP to a receiver in the test, a server span for each host
// request that is the child of the host's span, and a client span for
// each upstream request that is the child of the server span; the HTTP
// upstream receives a traceparent header and the stdio upstream a
// _meta.traceparent, both naming the client span in the host's trace.
func TestTelemetryEndToEnd(t *testing.T) {
	rcv := newOTLPReceiver(t, false)
	var (
		webMu      sync.Mutex
		webParents []string // traceparent headers of the tools/call POSTs
	)
	web := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{
		Stateless: true,
		Server:    mcptest.ServerOptions{Name: "web"},
		Inspect: func(r *http.Request) {
			if r.Header.Get("Mcp-Method") == "tools/call" {
				webMu.Lock()
				webParents = append(webParents, r.Header.Get("Traceparent"))
				webMu.Unlock()
			}
		},
	})
	cfg := config.Default()
	cfg.Upstreams = []config.Upstream{stdioUpstream("alpha", "echo", nil), httpUpstream("web", web.URL)}
	cfg.Telemetry.OTLPEndpoint = rcv.URL
	log := testLogger()
	rec, flush, err := newRecorders(context.Background(), cfg, log, io.Discard, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(flush)
	url, _, stop := startGatewayWith(t, cfg, rec)

	type sent struct {
		era       string
		host      hostTrace
		stdioMeta string // the _meta the stdio upstream received
	}
	var calls []sent
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, era := range eras {
		host := newHostTrace()
		hc := http.DefaultClient
		var meta mcp.Meta
		if era == "2025-11-25" {
			hc = &http.Client{Transport: headerTransport{http.Header{"Traceparent": {host.traceparent()}}}}
		} else {
			meta = mcp.Meta{"traceparent": host.traceparent()}
		}
		cs := connectWith(t, url, era, hc)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Meta: meta, Name: "web__echo", Arguments: map[string]any{"text": "hi"}})
		if err != nil || res.IsError {
			t.Fatalf("%s: web__echo: %v %v", era, err, res)
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Meta: meta, Name: "alpha__meta", Arguments: map[string]any{}})
		if err != nil || res.IsError || len(res.Content) != 1 {
			t.Fatalf("%s: alpha__meta: %v %v", era, err, res)
		}
		calls = append(calls, sent{era: era, host: host, stdioMeta: res.Content[0].(*mcp.TextContent).Text})
		_ = cs.Close()
	}
	// Every span has ended once the gateway has stopped; the flush
	// exports them.
	stop()
	flush()

	webMu.Lock()
	gotWeb := append([]string(nil), webParents...)
	webMu.Unlock()
	for i, c := range calls {
		t.Run(c.era, func(t *testing.T) {
			spans := rcv.trace(c.host.traceID[:])
			if len(spans) == 0 {
				t.Fatalf("the receiver got no span in the host's trace %x", c.host.traceID)
			}
			for _, s := range spans {
				if s.service != "mcp-gateway" {
					t.Errorf("span %q has service.name %q, want mcp-gateway", s.GetName(), s.service)
				}
			}
			for _, tt := range []struct {
				upstream, exposed, original string
				received                    func(t *testing.T) string // the traceparent the upstream received
			}{
				{"web", "web__echo", "echo", func(t *testing.T) string {
					if len(gotWeb) != len(calls) {
						t.Fatalf("the HTTP upstream got %d tools/call, want %d", len(gotWeb), len(calls))
					}
					return gotWeb[i]
				}},
				{"alpha", "alpha__meta", "meta", func(t *testing.T) string {
					var m struct {
						Traceparent string `json:"traceparent"`
					}
					if err := json.Unmarshal([]byte(c.stdioMeta), &m); err != nil {
						t.Fatalf("the stdio upstream's _meta %q: %v", c.stdioMeta, err)
					}
					return m.Traceparent
				}},
			} {
				server := findSpan(spans, func(s *recordedSpan) bool {
					return s.GetKind() == tracepb.Span_SPAN_KIND_SERVER && s.GetName() == "tools/call "+tt.exposed
				})
				if server == nil {
					t.Errorf("no server span %q in the host's trace; got:%s", "tools/call "+tt.exposed, describe(spans))
					continue
				}
				if !bytes.Equal(server.GetParentSpanId(), c.host.spanID[:]) {
					t.Errorf("server span %q has parent %x, want the host's span %x", server.GetName(), server.GetParentSpanId(), c.host.spanID)
				}
				for key, want := range map[string]string{
					string(telemetry.AttrMethod):   "tools/call",
					string(telemetry.AttrToolName): tt.exposed,
					string(telemetry.AttrUpstream): tt.upstream,
					string(telemetry.AttrOutcome):  telemetry.OutcomeOK,
				} {
					if got := attrString(server.GetAttributes(), key); got != want {
						t.Errorf("server span %q: %s = %q, want %q", server.GetName(), key, got, want)
					}
				}
				client := findSpan(spans, func(s *recordedSpan) bool {
					return s.GetKind() == tracepb.Span_SPAN_KIND_CLIENT && bytes.Equal(s.GetParentSpanId(), server.GetSpanId())
				})
				if client == nil {
					t.Errorf("no client span under server span %q; got:%s", server.GetName(), describe(spans))
					continue
				}
				for key, want := range map[string]string{
					string(telemetry.AttrMethod):   "tools/call",
					string(telemetry.AttrToolName): tt.original,
					string(telemetry.AttrUpstream): tt.upstream,
					string(telemetry.AttrOutcome):  telemetry.OutcomeOK,
				} {
					if got := attrString(client.GetAttributes(), key); got != want {
						t.Errorf("client span %q: %s = %q, want %q", client.GetName(), key, got, want)
					}
				}
				if client.GetStartTimeUnixNano() < server.GetStartTimeUnixNano() || client.GetEndTimeUnixNano() > server.GetEndTimeUnixNano() {
					t.Errorf("client span %q does not lie within its server span", client.GetName())
				}
				tp := tt.received(t)
				traceID, parent, ok := parseTraceparent(tp)
				switch {
				case !ok:
					t.Errorf("upstream %s received traceparent %q, want one in the host's trace", tt.upstream, tp)
				case traceID != hex.EncodeToString(c.host.traceID[:]):
					t.Errorf("upstream %s received trace id %s, want the host's %x", tt.upstream, traceID, c.host.traceID)
				case parent != hex.EncodeToString(client.GetSpanId()):
					t.Errorf("upstream %s received parent %s, want the gateway's client span %x", tt.upstream, parent, client.GetSpanId())
				}
			}
		})
	}

	names := rcv.metricNames()
	for _, want := range []string{"mcp.server.operation.duration", "mcp.client.operation.duration"} {
		if !names[want] {
			t.Errorf("the receiver got no metric %s over OTLP; got %v", want, names)
		}
	}
}

func findSpan(spans []*recordedSpan, ok func(*recordedSpan) bool) *recordedSpan {
	for _, s := range spans {
		if ok(s) {
			return s
		}
	}
	return nil
}

// sample is one line of Prometheus text.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var (
	sampleRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)`)
	labelRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

func parseMetrics(text string) []sample {
	var out []sample
	for _, line := range strings.Split(text, "\n") {
		m := sampleRE.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		s := sample{name: m[1], labels: map[string]string{}, value: v}
		for _, l := range labelRE.FindAllStringSubmatch(m[2], -1) {
			s.labels[l[1]] = l[2]
		}
		out = append(out, s)
	}
	return out
}

// sum adds the values of the samples called name whose labels include
// want; n is how many there were.
func sum(samples []sample, name string, want map[string]string) (total float64, n int) {
next:
	for _, s := range samples {
		if s.name != name {
			continue
		}
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		total += s.value
		n++
	}
	return total, n
}

// TestMetricsEndpoint: after a few calls in both eras, GET /metrics shows
// the request counts and durations of both sides, the upstreams' states,
// each view's tools and tokens, and the sessions, with bounded labels.
func TestMetricsEndpoint(t *testing.T) {
	web := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Stateless: true, Server: mcptest.ServerOptions{Name: "web"}})
	cfg := config.Default()
	cfg.Upstreams = []config.Upstream{stdioUpstream("alpha", "echo", nil), httpUpstream("web", web.URL)}
	rec, flush, err := newRecorders(context.Background(), cfg, testLogger(), io.Discard, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(flush)
	if rec.tel.MetricsHandler() == nil {
		t.Fatal("telemetry.metrics is on, but there is no metrics handler")
	}
	url, _, _ := startGatewayWith(t, cfg, rec)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	changed := make(chan struct{}, 1)
	legacy := mcp.NewClient(&mcp.Implementation{Name: "metrics", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	var legacySession *mcp.ClientSession
	for _, era := range eras {
		var cs *mcp.ClientSession
		if era == "2025-11-25" {
			// Open until the test ends: one legacy session, which hears
			// of list changes.
			var err error
			if cs, err = legacy.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: era}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cs.Close() })
			legacySession = cs
		} else {
			cs = connect(t, url, era)
		}
		for _, name := range []string{"web__echo", "alpha__echo", "web__echo"} {
			if _, err := callText(ctx, cs, name, map[string]any{"text": "hi"}); err != nil {
				t.Fatalf("%s: %s: %v", era, name, err)
			}
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nosuch__tool"}); err == nil {
			t.Fatalf("%s: an unknown tool was called", era)
		}
	}
	// A new tool upstream: the legacy host is sent list_changed.
	if _, err := callText(ctx, legacySession, "alpha__addtool", map[string]any{"name": "added"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("the legacy host was not sent tools/list_changed")
	}

	metricsURL := strings.TrimSuffix(url, cfg.Endpoint) + "/metrics"
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	text := string(body)
	samples := parseMetrics(text)
	if testing.Verbose() {
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, "mcp") {
				t.Log(line)
			}
		}
	}

	check := func(what, name string, labels map[string]string, ok func(v float64, n int) bool) {
		t.Helper()
		v, n := sum(samples, name, labels)
		if !ok(v, n) {
			t.Errorf("%s: %s%v = %v over %d series", what, name, labels, v, n)
		}
	}
	atLeast := func(min float64) func(float64, int) bool {
		return func(v float64, n int) bool { return n > 0 && v >= min }
	}
	present := func(v float64, n int) bool { return n > 0 }

	// Host side: 3 routed calls and 1 unknown tool per era.
	check("host tools/call ok", "mcp_server_operation_duration_seconds_count",
		map[string]string{"mcp_method_name": "tools/call", "mcp_gateway_outcome": "ok"}, atLeast(6))
	check("host tools/call of web__echo", "mcp_server_operation_duration_seconds_count",
		map[string]string{"mcp_method_name": "tools/call", "gen_ai_tool_name": "web__echo", "mcp_gateway_upstream": "web"}, atLeast(4))
	check("host tools/call unknown", "mcp_server_operation_duration_seconds_count",
		map[string]string{"mcp_method_name": "tools/call", "mcp_gateway_outcome": "error", "error_type": "-32602"}, atLeast(2))
	check("host histogram buckets", "mcp_server_operation_duration_seconds_bucket",
		map[string]string{"mcp_method_name": "tools/call", "le": "+Inf"}, atLeast(8))
	// Upstream side.
	check("upstream tools/call to web", "mcp_client_operation_duration_seconds_count",
		map[string]string{"mcp_method_name": "tools/call", "mcp_gateway_upstream": "web", "mcp_gateway_outcome": "ok"}, atLeast(4))
	check("upstream tools/call to alpha", "mcp_client_operation_duration_seconds_count",
		map[string]string{"mcp_method_name": "tools/call", "mcp_gateway_upstream": "alpha", "gen_ai_tool_name": "echo"}, atLeast(2))
	// The gateway's own share: host time includes upstream time.
	hostSum, _ := sum(samples, "mcp_server_operation_duration_seconds_sum", map[string]string{"mcp_method_name": "tools/call"})
	upSum, _ := sum(samples, "mcp_client_operation_duration_seconds_sum", map[string]string{"mcp_method_name": "tools/call"})
	if hostSum < upSum || upSum <= 0 {
		t.Errorf("tools/call durations: host side %vs, upstream side %vs; want 0 < upstream <= host", hostSum, upSum)
	}
	check("requests in progress", "mcp_gateway_server_active_requests", map[string]string{"mcp_method_name": "tools/call"},
		func(v float64, n int) bool { return n > 0 && v == 0 })
	// State.
	for _, up := range []string{"alpha", "web"} {
		check("upstream state", "mcp_gateway_upstream_state",
			map[string]string{"mcp_gateway_upstream": up, "mcp_gateway_state": "ready"}, func(v float64, n int) bool { return n == 1 && v == 1 })
		check("upstream restarts", "mcp_gateway_upstream_restarts_total",
			map[string]string{"mcp_gateway_upstream": up}, func(v float64, n int) bool { return n == 1 && v == 0 })
	}
	check("tools in the default view", "mcp_gateway_view_tools", map[string]string{"mcp_gateway_view": "default"}, atLeast(20))
	check("tokens of the default view", "mcp_gateway_view_tokens", map[string]string{"mcp_gateway_view": "default"}, atLeast(100))
	check("list_changed sent", "mcp_gateway_list_changed_sent_total",
		map[string]string{"mcp_method_name": "notifications/tools/list_changed"}, atLeast(1))
	check("legacy sessions", "mcp_gateway_sessions", map[string]string{"mcp_gateway_era": "legacy"}, atLeast(1))
	check("modern streams", "mcp_gateway_sessions", map[string]string{"mcp_gateway_era": "modern"}, present)
	// The process collectors of the gateway's own registry.
	check("go runtime", "go_goroutines", nil, atLeast(1))

	// Bounded labels: no session ids, request ids, arguments or URIs.
	for _, s := range samples {
		for _, bad := range []string{"mcp_session_id", "jsonrpc_request_id", "mcp_resource_uri"} {
			if _, ok := s.labels[bad]; ok {
				t.Errorf("series %s has the unbounded label %s", s.name, bad)
			}
		}
	}
	if strings.Contains(text, `"hi"`) || strings.Contains(text, "nosuch__tool") {
		t.Errorf("/metrics shows argument values or unknown names")
	}
}

// TestAuditLog: with telemetry.audit on, each tools/call, prompts/get and
// resources/read appends one JSON record to the audit file (mode 0600)
// naming the caller's key id and team, the exposed and upstream names,
// the outcome, the duration and the result size, with a hash of the
// arguments and never the arguments themselves; other requests have no
// record. It holds with and without metrics exporters.
func TestAuditLog(t *testing.T) {
	const key = "audit-team-key-0123456789"
	for _, metrics := range []bool{true, false} {
		t.Run(fmt.Sprintf("metrics=%v", metrics), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			cfg := config.Default()
			cfg.Upstreams = []config.Upstream{stdioUpstream("alpha", "echo", nil)}
			cfg.Auth.Mode = config.AuthAPIKey
			cfg.Teams = []config.Team{{Name: "data", APIKeys: []string{key}}}
			cfg.Telemetry.Metrics = metrics
			cfg.Telemetry.Audit = config.Audit{Enabled: true, Path: path, Arguments: config.AuditHash}
			rec, flush, err := newRecorders(context.Background(), cfg, testLogger(), io.Discard, true)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(flush)
			url, _, stop := startGatewayWith(t, cfg, rec)

			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			hc := &http.Client{Transport: headerTransport{http.Header{"Authorization": {"Bearer " + key}}}}
			cs := connectWith(t, url, "2025-11-25", hc)
			if _, err := callText(ctx, cs, "alpha__echo", map[string]any{"text": "secret-argument"}); err != nil {
				t.Fatal(err)
			}
			if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "alpha__greet", Arguments: map[string]string{"name": "Ada"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://static/hello"}); err != nil {
				t.Fatal(err)
			}
			if _, err := cs.ListTools(ctx, nil); err != nil {
				t.Fatal(err)
			}
			_ = cs.Close()
			stop()
			flush()

			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if mode := fi.Mode().Perm(); mode != 0o600 {
				t.Errorf("audit file mode %v, want 0600", mode)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(data), "secret-argument") || strings.Contains(string(data), key) {
				t.Errorf("the audit log holds an argument value or the key:\n%s", data)
			}
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			if len(lines) != 3 {
				t.Fatalf("%d audit records, want 3:\n%s", len(lines), data)
			}
			keySum := sha256.Sum256([]byte(key))
			argSum := sha256.Sum256([]byte(`{"text":"secret-argument"}`))
			wants := []map[string]any{
				{"method": "tools/call", "name": "alpha__echo", "upstream": "alpha", "upstream_name": "echo",
					"arguments_sha256": hex.EncodeToString(argSum[:])},
				{"method": "prompts/get", "name": "alpha__greet", "upstream": "alpha", "upstream_name": "greet"},
				{"method": "resources/read", "name": "test://static/hello", "upstream": "alpha"},
			}
			for i, line := range lines {
				var got map[string]any
				if err := json.Unmarshal([]byte(line), &got); err != nil {
					t.Fatalf("record %d is not JSON: %v\n%s", i, err, line)
				}
				want := wants[i]
				want["msg"] = "audit"
				want["team"] = "data"
				want["identity"] = "sha256:" + hex.EncodeToString(keySum[:6])
				want["outcome"] = telemetry.OutcomeOK
				want["protocol_version"] = "2025-11-25"
				for k, v := range want {
					if got[k] != v {
						t.Errorf("record %d: %s = %v, want %v", i, k, got[k], v)
					}
				}
				if d, ok := got["duration_ms"].(float64); !ok || d <= 0 {
					t.Errorf("record %d: duration_ms = %v, want > 0", i, got["duration_ms"])
				}
				if n, ok := got["result_bytes"].(float64); !ok || n <= 0 {
					t.Errorf("record %d: result_bytes = %v, want > 0", i, got["result_bytes"])
				}
				if _, ok := got["time"].(string); !ok {
					t.Errorf("record %d has no time", i)
				}
				if s, _ := got["session"].(string); s == "" {
					t.Errorf("record %d has no legacy session id", i)
				}
			}
		})
	}
}

// benchTelemetry are the telemetry settings the benchmarks compare:
// off (Disabled), Prometheus metrics only, spans recorded and dropped
// (no metrics, no export), and traces and metrics exported over OTLP
// (the batching span processor and periodic reader of production) to a
// receiver in the process that discards them.
func benchTelemetry(b *testing.B) []benchCase {
	rcv := newOTLPReceiver(b, true)
	return []benchCase{
		{"off", nil},
		{"prometheus", &telemetry.Options{Prometheus: true}},
		{"spans", &telemetry.Options{SpanProcessor: dropSpans{}}},
		{"otlp", &telemetry.Options{OTLPEndpoint: rcv.URL}},
	}
}

// dropSpans is a span processor that drops every span: the cost of
// recording spans on the hot path, without any export.
type dropSpans struct{}

func (dropSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (dropSpans) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (dropSpans) Shutdown(context.Context) error                  { return nil }
func (dropSpans) ForceFlush(context.Context) error                { return nil }

type benchCase struct {
	name string
	opts *telemetry.Options // nil: Disabled
}

// telemetry builds the case's Telemetry, shut down when b ends.
func (c benchCase) telemetry(b *testing.B) *telemetry.Telemetry {
	if c.opts == nil {
		return telemetry.Disabled()
	}
	tel, err := telemetry.New(context.Background(), *c.opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	return tel
}

// runCases runs each case as a sub-benchmark, the first ("off") first,
// and reports each one's time per operation as a multiple of the first's
// (the x_off metric), so that one run shows the ratios.
func runCases(b *testing.B, cases []benchCase, run func(b *testing.B, tel *telemetry.Telemetry)) {
	var base time.Duration
	for i, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			run(b, c.telemetry(b))
			if b.N == 0 {
				return
			}
			perOp := b.Elapsed() / time.Duration(b.N)
			if i == 0 {
				base = perOp
			}
			if base > 0 {
				b.ReportMetric(float64(perOp)/float64(base), "x_off")
			}
		})
	}
}

// discardLogger is the benchmarks' logger, -v or not.
var discardLogger = telemetry.NewLogger(io.Discard, nil)

// BenchmarkTelemetryToolsCall measures a tools/call from a Go SDK host
// (a legacy session) over loopback HTTP through the gateway to an
// in-process Streamable HTTP upstream, for each setting of
// benchTelemetry: the whole round trip a host sees.
func BenchmarkTelemetryToolsCall(b *testing.B) {
	// A legacy upstream with sessions: the SDK's stateless handler
	// builds a session per request, which would drown the rest.
	web := mcptest.NewStreamableServer(b, &mcptest.HTTPOptions{JSONResponse: true, Server: mcptest.ServerOptions{Name: "web", Versions: mcptest.LegacyVersions()}})
	runCases(b, benchTelemetry(b), func(b *testing.B, tel *telemetry.Telemetry) {
		ctx := context.Background()
		cfg := config.Default()
		cfg.Upstreams = []config.Upstream{httpUpstream("web", web.URL)}
		url, _, _ := startGatewayWith(b, cfg, recorders{log: discardLogger, tel: tel})
		cs := connectWith(b, url, "2025-11-25", nil)
		params := &mcp.CallToolParams{Name: "web__echo", Arguments: map[string]any{"text": "hi"}}
		b.ReportAllocs()
		for b.Loop() {
			res, err := cs.CallTool(ctx, params)
			if err != nil || res.IsError {
				b.Fatalf("web__echo: %v %v", err, res)
			}
		}
	})
}

// benchUpstream is an upstream in the process that answers every call
// at once: what is left to measure is the gateway itself.
type benchUpstream struct{}

func (benchUpstream) Start(context.Context) error { return nil }
func (benchUpstream) Close() error                { return nil }
func (benchUpstream) State() upstream.State {
	return upstream.State{Phase: upstream.Ready, Generation: 1}
}
func (benchUpstream) Send(context.Context, *jsonrpc.Outgoing) (*jsonrpc.Message, error) {
	return &jsonrpc.Message{ID: json.RawMessage("1"), Result: json.RawMessage(`{"content":[{"type":"text","text":"hi"}]}`)}, nil
}
func (benchUpstream) List(_ context.Context, method, _ string) ([]json.RawMessage, error) {
	if method == "tools/list" {
		return []json.RawMessage{json.RawMessage(`{"name":"echo","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}`)}, nil
	}
	return nil, nil
}
func (benchUpstream) ProtocolVersion() string       { return "2026-07-28" }
func (benchUpstream) Capabilities() json.RawMessage { return json.RawMessage(`{"tools":{}}`) }
func (benchUpstream) Instructions() string          { return "" }
func (benchUpstream) Subscribe(context.Context, upstream.Subscriptions) error {
	return nil
}

// BenchmarkTelemetryGateway measures the gateway's own work on a modern
// host's tools/call, for each setting of benchTelemetry: the request is
// served by the gateway's handler in the process (no socket) and the
// upstream answers at once (benchUpstream), so the telemetry's share is
// not hidden by I/O.
func BenchmarkTelemetryGateway(b *testing.B) {
	const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"web__echo","arguments":{"text":"hi"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	runCases(b, benchTelemetry(b), func(b *testing.B, tel *telemetry.Telemetry) {
		cfg := config.Default()
		cfg.Upstreams = []config.Upstream{httpUpstream("web", "http://127.0.0.1:1/mcp")}
		// Wired as newGateway wires it: the observer's decorators around
		// the router and the upstream client.
		rec := recorders{log: discardLogger, tel: tel}
		if _, err := rec.observer(); err != nil {
			b.Fatal(err)
		}
		var srv *server.Server
		opts := routerOptions(cfg, rec, func(c router.Change) { srv.Deliver(c) })
		opts.Upstreams[0].Connect = func(router.ConnectOptions) (router.Upstream, error) {
			return observed(benchUpstream{}, "web", rec.obs), nil
		}
		rt, err := router.New(opts)
		if err != nil {
			b.Fatal(err)
		}
		srv = server.New(dispatcher(rt, rec.obs, nil), &server.Options{Endpoint: cfg.Endpoint, Loopback: true, Telemetry: tel, Logger: rec.log})
		ctx := context.Background()
		rt.Start(ctx)
		b.Cleanup(func() {
			srv.Close()
			_ = rt.Close()
		})
		if err := rt.WaitStarted(ctx); err != nil {
			b.Fatal(err)
		}
		h := srv.Handler()
		b.ReportAllocs()
		for b.Loop() {
			req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/mcp", strings.NewReader(body))
			req.RemoteAddr = "127.0.0.1:40000"
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("MCP-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", "tools/call")
			req.Header.Set("Mcp-Name", "web__echo")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"hi"`) {
				b.Fatalf("tools/call: %d %s", w.Code, w.Body)
			}
		}
	})
}

// TestReloadKeepsTelemetry: the telemetry is built once, at start. A
// reload that changes telemetry settings keeps the running ones, says so,
// and applies the rest; the gateway goes on recording with the same
// providers and serving the same /metrics.
func TestReloadKeepsTelemetry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.json")
	write := func(upstreams []string, tel map[string]any, extra map[string]any) {
		var ups []map[string]any
		for _, name := range upstreams {
			command, args, env := mcptest.StdioCommand("echo")
			ups = append(ups, map[string]any{"name": name, "command": command, "args": args, "env": env})
		}
		file := map[string]any{"upstreams": ups, "telemetry": tel}
		maps.Copy(file, extra)
		raw, _ := json.Marshal(file)
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write([]string{"alpha"}, map[string]any{"metrics": true}, nil)
	var logs mcptest.LogBuffer
	current, err := loadConfig(path, &logs)
	if err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	log := telemetry.NewLogger(&logs, nil)
	rec, flush, err := newRecorders(context.Background(), current, log, &logs, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(flush)
	url, g, _ := startGatewayWith(t, current, rec)
	cs, changed := listChanges(t, url)

	write([]string{"alpha", "beta"}, map[string]any{"metrics": false, "audit": map[string]any{"enabled": true}},
		map[string]any{"allowed_hosts": []string{"gw.example.com"}, "limits": map[string]any{"max_sessions": 5}})
	next := g.reload(path, current, log)
	if next.Telemetry != current.Telemetry {
		t.Errorf("telemetry after reload = %+v, want the running %+v", next.Telemetry, current.Telemetry)
	}
	if len(next.AllowedHosts) != 0 {
		t.Errorf("allowed_hosts after reload = %v, want the running (none)", next.AllowedHosts)
	}
	for _, warning := range []string{"allowed_origins and allowed_hosts changes take effect at the next start", "limits changes (limits, teams[].limits, tools.rate) take effect at the next start"} {
		if !strings.Contains(logs.String(), warning) {
			t.Errorf("no warning %q:\n%s", warning, logs.String())
		}
	}
	if len(next.Upstreams) != 2 {
		t.Errorf("reload applied %d upstreams, want 2", len(next.Upstreams))
	}
	if !strings.Contains(logs.String(), "telemetry changes take effect at the next start") {
		t.Errorf("no warning that telemetry changes wait for a restart:\n%s", logs.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	awaitTools(ctx, t, cs, changed, "the new upstream's tools", func(names []string) bool { return slices.Contains(names, "beta__echo") })
	if _, err := callText(ctx, cs, "beta__echo", map[string]any{"text": "hi"}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(strings.TrimSuffix(url, "/mcp") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if n, _ := sum(parseMetrics(string(body)), "mcp_client_operation_duration_seconds_count", map[string]string{"mcp_gateway_upstream": "beta"}); n == 0 {
		t.Errorf("/metrics after the reload has no call to the new upstream")
	}
}
