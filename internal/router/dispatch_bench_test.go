package router_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// Benchmarks of Router.Dispatch for tools/call with upstreams that answer
// at once from memory, so that only the gateway's own work is measured:
// the strict decode of the host's request, the lookup of the exposed name
// among 20 upstreams of 10 tools each, the rewrite of params.name, the
// progress token remapped when the host sent one, the request encoded
// once for the upstream, and the result handed back. Run:
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
func (u *benchUpstream) State() upstream.State {
	return upstream.State{Phase: upstream.Ready, Generation: 1}
}

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
func benchRouter(b *testing.B, result json.RawMessage) *router.Router {
	b.Helper()
	return benchRouterWith(b, result, policy.Rules{})
}

// benchRouterWith is benchRouter with rules.
func benchRouterWith(b *testing.B, result json.RawMessage, rules policy.Rules) *router.Router {
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
	r, err := router.New(&router.Options{Upstreams: ups, ListWait: -1, Rules: rules})
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

// BenchmarkDispatchToolsCall: a host's tools/call from its bytes to the
// bytes sent upstream: the strict decode, Dispatch (lookup, rewrite,
// progress token) and the upstream's one encode (benchUpstream.Send).
func BenchmarkDispatchToolsCall(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"1KiB", 1 << 10}, {"1MiB", 1 << 20}} {
		result := benchResult(size.n)
		for _, variant := range []string{"", "progress-token", "profile"} {
			name := size.name
			params := `{"name":"up17__tool_7","arguments":{"q":"hello"}}`
			switch variant {
			case "progress-token":
				name += "/progress-token"
				params = `{"name":"up17__tool_7","arguments":{"q":"hello"},"_meta":{"progressToken":"host-token-1"}}`
			case "profile":
				// The same call on a profile's path (/mcp/p): its own
				// view, with the profile's allow list.
				name += "/profile"
			}
			b.Run(name, func(b *testing.B) {
				var rules policy.Rules
				caller := &router.Caller{ProtocolVersion: "2025-11-25", Session: "s1", Capabilities: json.RawMessage(`{}`)}
				if variant == "profile" {
					rules.Profiles = []policy.Team{{Name: "p", Allow: []string{"up1*"}}}
					caller.View = policy.ViewKey("", "p")
				}
				r := benchRouterWith(b, result, rules)
				body := jsonrpc.AppendRequest(nil, json.RawMessage(`"host-1"`), "tools/call", json.RawMessage(params))
				ctx := context.Background()
				call := func() {
					req, err := jsonrpc.DecodeRequest(body)
					if err != nil {
						b.Fatal(err)
					}
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
