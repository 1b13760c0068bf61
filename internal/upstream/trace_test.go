package upstream_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
)

// traceHeaders records, for each JSON-RPC method the client POSTed, the
// trace headers of the last such POST, as they left the client.
type traceHeaders struct {
	base http.RoundTripper
	mu   sync.Mutex
	got  map[string]http.Header
}

func (th *traceHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && r.GetBody != nil {
		if body, err := r.GetBody(); err == nil {
			data, _ := io.ReadAll(body)
			if m, err := jsonrpc.Decode(data); err == nil && m.Method != "" {
				h := http.Header{}
				for _, k := range []string{"Traceparent", "Tracestate", "Baggage"} {
					if v, ok := r.Header[k]; ok {
						h[k] = v
					}
				}
				th.mu.Lock()
				th.got[m.Method] = h
				th.mu.Unlock()
			}
		}
	}
	return th.base.RoundTrip(r)
}

func (th *traceHeaders) of(method string) http.Header {
	th.mu.Lock()
	defer th.mu.Unlock()
	return th.got[method]
}

// TestTraceContextHeaders: a call made with a span in its context carries
// that span's W3C trace context (and the context's baggage) in the
// headers of the HTTP request that carries it, on every HTTP transport;
// requests made without a span, and clients without a Propagator, carry
// none.
func TestTraceContextHeaders(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
		TraceState: func() trace.TraceState { ts, _ := trace.ParseTraceState("vendor=abc"); return ts }(),
	})
	member, _ := baggage.NewMember("team", "data")
	bag, _ := baggage.New(member)
	propagator := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	want := http.Header{
		"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		"Tracestate":  {"vendor=abc"},
		"Baggage":     {"team=data"},
	}

	tests := []struct {
		name       string
		url        func(t *testing.T) string
		transport  string
		propagator propagation.TextMapPropagator
		want       http.Header
	}{
		{"streamable modern", func(t *testing.T) string {
			return mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Stateless: true}).URL
		}, "streamable-http", propagator, want},
		{"streamable legacy", func(t *testing.T) string {
			return mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: mcptest.ServerOptions{Versions: mcptest.LegacyVersions()}}).URL
		}, "streamable-http", propagator, want},
		{"sse", func(t *testing.T) string { return mcptest.NewSSEServer(t, nil).URL }, "sse", propagator, want},
		{"no propagator", func(t *testing.T) string {
			return mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Stateless: true}).URL
		}, "streamable-http", nil, http.Header{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			th := &traceHeaders{base: http.DefaultTransport, got: map[string]http.Header{}}
			o := httpOptions(tt.url(t))
			o.Transport = tt.transport
			o.Propagator = tt.propagator
			o.HTTPClient = &http.Client{Transport: th}
			c := start(t, o)

			ctx := baggage.ContextWithBaggage(trace.ContextWithRemoteSpanContext(testCtx(t), sc), bag)
			resp, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"echo","arguments":{"text":"hi"}}`))
			if err != nil || resp.Error != nil {
				t.Fatalf("tools/call: %v %v", err, resp.Error)
			}
			if diff := cmp.Diff(tt.want, th.of("tools/call")); diff != "" {
				t.Errorf("trace headers of tools/call (-want +got):\n%s", diff)
			}
			// A request made without a span carries no trace context.
			if _, err := c.Call(testCtx(t), "tools/list", nil); err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			if diff := cmp.Diff(http.Header{}, th.of("tools/list")); diff != "" {
				t.Errorf("trace headers of tools/list made without a span (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTraceContextMeta: a call made with a span in its context carries
// that span's trace context in params._meta (replacing the host's, whose
// tracestate and baggage go with it), on stdio as on HTTP; a call made
// without one passes the host's own _meta as it was sent.
func TestTraceContextMeta(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:  trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: trace.FlagsSampled,
	})
	o := stdioOptions("echo")
	o.Propagator = propagation.TraceContext{}
	c := start(t, o)
	hostMeta := `{"name":"meta","_meta":{"traceparent":"00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-01","tracestate":"host=1","keep":"x"}}`
	meta := func(ctx context.Context) map[string]any {
		t.Helper()
		resp, err := c.Call(ctx, "tools/call", json.RawMessage(hostMeta))
		if err != nil || resp.Error != nil {
			t.Fatalf("meta: %v %v", err, resp.Error)
		}
		var res struct{ Content []struct{ Text string } }
		var m map[string]any
		if json.Unmarshal(resp.Result, &res) != nil || len(res.Content) == 0 || json.Unmarshal([]byte(res.Content[0].Text), &m) != nil {
			t.Fatalf("meta result %s", resp.Result)
		}
		return m
	}
	got := meta(trace.ContextWithRemoteSpanContext(testCtx(t), sc))
	if got["traceparent"] != "00-0102030405060708090a0b0c0d0e0f10-0102030405060708-01" || got["tracestate"] != nil || got["keep"] != "x" {
		t.Errorf("_meta with a span: %v, want the span's traceparent, no host tracestate, the rest kept", got)
	}
	got = meta(testCtx(t))
	if got["traceparent"] != "00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-01" || got["tracestate"] != "host=1" {
		t.Errorf("_meta without a span: %v, want the host's as sent", got)
	}
}
