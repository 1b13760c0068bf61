package telemetry

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// BenchmarkMetricRecording measures six metric recordings per tools/call
// (server and client active requests, +1 and -1 each, and two duration
// histograms) with the attributes built into a new set on every call,
// and with sets built once and reused (metric.WithAttributeSet), as the
// Observer's cache keyed by (method, upstream, tool, outcome, view) does.
// The Observer records only the two histograms per call; the active
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

// TestNoURIInMetrics: a resource's URI labels no metric, on either side
// and for any method that names one; a routed tool does.
func TestNoURIInMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	tel, err := New(context.Background(), Options{MetricReader: reader, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	o, err := NewObserver(tel, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	ctx := context.Background()
	for _, method := range []string{"resources/read", "resources/subscribe", "resources/unsubscribe"} {
		_, up := o.Upstream(ctx, UpstreamRequest{Method: method, Upstream: "a", Target: "file:///secret/path"})
		up.End(ctx, OutcomeOK, "", nil)
		_, host := o.Host(ctx, &HostRequest{Method: method, Target: "file:///secret/path"})
		host.End(ctx, HostResult{Outcome: OutcomeOK, Upstream: "a"})
	}
	_, host := o.Host(ctx, &HostRequest{Method: "tools/call", Target: "a__echo"})
	host.End(ctx, HostResult{Outcome: OutcomeOK, Upstream: "a"})

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	tools := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				continue
			}
			for _, p := range h.DataPoints {
				for _, kv := range p.Attributes.ToSlice() {
					if strings.Contains(kv.Value.Emit(), "file://") {
						t.Errorf("%s carries the URI in %s", m.Name, kv.Key)
					}
					if kv.Key == AttrToolName && kv.Value.AsString() == "a__echo" {
						tools++
					}
				}
			}
		}
	}
	if tools != 1 {
		t.Errorf("the routed tool labels %d series, want 1", tools)
	}
}
