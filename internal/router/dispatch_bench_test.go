package router_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

// Benchmarks of Router.Dispatch for tools/call with upstreams that answer
// at once from memory, so that only the router's work is measured: the
// lookup of the exposed name among 20 upstreams of 10 tools each, the
// rewrite of params.name, the progress token remapped when the host sent
// one, and the result handed back. Run:
//
//	go test -run '^$' -bench Dispatch -benchmem ./internal/router
//
// alloc/result is the bytes allocated per call divided by the result's
// size: how many result-sized buffers a call costs (0 means the result is
// passed through without a copy).

// benchUpstream answers every call with the same result.
type benchUpstream struct {
	tools  []json.RawMessage
	result json.RawMessage
}

func (u *benchUpstream) Start(context.Context) error { return nil }
func (u *benchUpstream) Close() error                { return nil }

// Send encodes the request, as a client does (once, into a new buffer).
func (u *benchUpstream) Send(_ context.Context, req *jsonrpc.Outgoing) (*jsonrpc.Message, error) {
	_ = req.AppendRequest(make([]byte, 0, req.SizeHint()+64), json.RawMessage("1"))
	if req.Method != "tools/call" {
		return &jsonrpc.Message{ID: json.RawMessage("1"), Result: json.RawMessage(`{}`)}, nil
	}
	return &jsonrpc.Message{ID: json.RawMessage("1"), Result: u.result}, nil
}
func (u *benchUpstream) List(_ context.Context, method, _ string) ([]json.RawMessage, error) {
	if method == "tools/list" {
		return u.tools, nil
	}
	return nil, nil
}
func (u *benchUpstream) ProtocolVersion() string       { return "2025-11-25" }
func (u *benchUpstream) Capabilities() json.RawMessage { return json.RawMessage(`{"tools":{}}`) }
func (u *benchUpstream) Instructions() string          { return "" }

// benchRouter starts a router over 20 upstreams of 10 tools each whose
// calls return result.
func benchRouter(b *testing.B, result json.RawMessage, tel *telemetry.Telemetry) *router.Router {
	b.Helper()
	var ups []router.UpstreamConfig
	for i := range 20 {
		u := &benchUpstream{result: result}
		for j := range 10 {
			u.tools = append(u.tools, json.RawMessage(fmt.Sprintf(
				`{"name":"tool_%d","description":"Tool %d of upstream %d.","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}}}`, j, j, i)))
		}
		ups = append(ups, router.UpstreamConfig{
			Name:    fmt.Sprintf("up%d", i),
			Connect: func(router.ConnectOptions) (router.Upstream, error) { return u, nil },
		})
	}
	r, err := router.New(&router.Options{Upstreams: ups, ListWait: -1, Telemetry: tel})
	if err != nil {
		b.Fatal(err)
	}
	r.Start(context.Background())
	b.Cleanup(func() { _ = r.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitStarted(ctx); err != nil {
		b.Fatal(err)
	}
	return r
}

func benchResult(size int) json.RawMessage {
	return json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("x", size) + `"}],"isError":false}`)
}

func BenchmarkDispatchToolsCall(b *testing.B) {
	metered, err := telemetry.New(context.Background(), telemetry.Options{Prometheus: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = metered.Shutdown(context.Background()) })
	for _, size := range []struct {
		name string
		n    int
	}{{"1KiB", 1 << 10}, {"1MiB", 1 << 20}} {
		result := benchResult(size.n)
		for _, tc := range []struct {
			name string
			tel  *telemetry.Telemetry
		}{{"plain", nil}, {"metrics", metered}} {
			for _, progress := range []bool{false, true} {
				name := size.name + "/" + tc.name
				params := `{"name":"up17__tool_7","arguments":{"q":"hello"}}`
				if progress {
					name += "/progress-token"
					params = `{"name":"up17__tool_7","arguments":{"q":"hello"},"_meta":{"progressToken":"host-token-1"}}`
				}
				b.Run(name, func(b *testing.B) {
					r := benchRouter(b, result, tc.tel)
					caller := &router.Caller{ProtocolVersion: "2025-11-25", Session: "s1", Capabilities: json.RawMessage(`{}`)}
					req, err := jsonrpc.DecodeRequest(jsonrpc.AppendRequest(nil, json.RawMessage(`"host-1"`), "tools/call", json.RawMessage(params)))
					if err != nil {
						b.Fatal(err)
					}
					ctx := context.Background()
					call := func() {
						reply := r.Dispatch(ctx, caller, req)
						if reply.Error != nil || len(reply.Result) != len(result) {
							b.Fatalf("reply: %v, %d bytes", reply.Error, len(reply.Result))
						}
					}
					call()
					b.ReportAllocs()
					var before, after runtime.MemStats
					runtime.ReadMemStats(&before)
					b.ResetTimer()
					for range b.N {
						call()
					}
					b.StopTimer()
					runtime.ReadMemStats(&after)
					b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/float64(len(result)), "alloc/result")
				})
			}
		}
	}
}

// BenchmarkMetricRecording measures six metric recordings per tools/call
// (server and client active requests, +1 and -1 each, and two duration
// histograms) with the attributes built into a new set on every call,
// and with sets built once and reused (metric.WithAttributeSet), as the
// router's cache keyed by (method, upstream, tool, outcome, view) does.
// The router now records only the two histograms per call; the active
// requests are atomic counters observed at collection (observe.go).
func BenchmarkMetricRecording(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m := mp.Meter("bench")
	serverDur, _ := m.Float64Histogram("server.duration")
	clientDur, _ := m.Float64Histogram("client.duration")
	serverActive, _ := m.Int64UpDownCounter("server.active")
	clientActive, _ := m.Int64UpDownCounter("client.active")
	ctx := context.Background()
	method := attribute.String("mcp.method.name", "tools/call")
	up := attribute.String("mcp_gateway.upstream", "up17")
	serverAttrs := func() []attribute.KeyValue {
		return []attribute.KeyValue{method, attribute.String("mcp_gateway.outcome", "ok"), attribute.String("mcp_gateway.team", "default"),
			up, attribute.String("gen_ai.tool.name", "up17__tool_7")}
	}
	clientAttrs := func() []attribute.KeyValue {
		return []attribute.KeyValue{method, up, attribute.String("mcp_gateway.outcome", "ok"), attribute.String("gen_ai.tool.name", "tool_7")}
	}
	b.Run("new-sets", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			serverActive.Add(ctx, 1, metric.WithAttributes(method))
			clientActive.Add(ctx, 1, metric.WithAttributes(method, up))
			clientActive.Add(ctx, -1, metric.WithAttributes(method, up))
			clientDur.Record(ctx, 0.001, metric.WithAttributes(clientAttrs()...))
			serverActive.Add(ctx, -1, metric.WithAttributes(method))
			serverDur.Record(ctx, 0.001, metric.WithAttributes(serverAttrs()...))
		}
	})
	b.Run("cached-sets", func(b *testing.B) {
		methodSet := metric.WithAttributeSet(attribute.NewSet(method))
		clientSet := metric.WithAttributeSet(attribute.NewSet(method, up))
		clientDone := metric.WithAttributeSet(attribute.NewSet(clientAttrs()...))
		serverDone := metric.WithAttributeSet(attribute.NewSet(serverAttrs()...))
		b.ReportAllocs()
		for b.Loop() {
			serverActive.Add(ctx, 1, methodSet)
			clientActive.Add(ctx, 1, clientSet)
			clientActive.Add(ctx, -1, clientSet)
			clientDur.Record(ctx, 0.001, clientDone)
			serverActive.Add(ctx, -1, methodSet)
			serverDur.Record(ctx, 0.001, serverDone)
		}
	})
}
