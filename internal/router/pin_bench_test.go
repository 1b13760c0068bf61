package router_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/pin"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
)

// Pinning is applied when the catalog is built, not per call: the
// tools/call benchmark compares a call with pinning off and on (every
// tool pinned, one quarantined), and the rebuild benchmark says what
// vetting 200 tools adds to a catalog build (each upstream list). Run:
//
//	go test -run '^$' -bench Pinning -benchmem ./internal/router

func pinnedBenchRouter(b *testing.B, pinned bool) *router.Router {
	b.Helper()
	var ups []router.UpstreamConfig
	for i := range 20 {
		u := &benchUpstream{result: benchResult(1 << 10)}
		for j := range 10 {
			u.tools = append(u.tools, json.RawMessage(fmt.Sprintf(
				`{"name":"tool_%d","description":"Tool %d of upstream %d.","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}}}`, j, j, i)))
		}
		ups = append(ups, router.UpstreamConfig{
			Name:    fmt.Sprintf("up%d", i),
			Connect: func(router.ConnectOptions) (router.Upstream, error) { return u, nil },
		})
	}
	opts := &router.Options{Upstreams: ups, ListWait: -1}
	var guard *pin.Guard
	if pinned {
		guard = pin.NewGuard(nil, pin.Options{Mode: pin.ModeEnforce})
		opts.Pins = guard
	}
	r, err := router.New(opts)
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
	if pinned {
		defs := r.Definitions()
		defs[0].Raw = json.RawMessage(`{"name":"tool_0","description":"pinned before a change"}`)
		lock, _, err := pin.Pin(nil, defs, "bench", time.Unix(0, 0))
		if err != nil {
			b.Fatal(err)
		}
		guard.SetLock(lock)
		r.Rebuild()
		if n := len(guard.Report().Quarantined); n != 1 {
			b.Fatalf("%d quarantined, want 1", n)
		}
	}
	return r
}

func BenchmarkPinningToolsCall(b *testing.B) {
	for _, pinned := range []bool{false, true} {
		b.Run(fmt.Sprintf("pinned=%v", pinned), func(b *testing.B) {
			r := pinnedBenchRouter(b, pinned)
			caller := &router.Caller{ProtocolVersion: "2025-11-25", Session: "s1", Capabilities: json.RawMessage(`{}`)}
			body := jsonrpc.AppendRequest(nil, json.RawMessage(`"host-1"`), "tools/call", json.RawMessage(`{"name":"up17__tool_7","arguments":{"q":"hello"}}`))
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				req, err := jsonrpc.DecodeRequest(body)
				if err != nil {
					b.Fatal(err)
				}
				if reply := r.Dispatch(ctx, caller, req); reply.Error != nil {
					b.Fatal(reply.Error)
				}
			}
		})
	}
}

func BenchmarkPinningRebuild(b *testing.B) {
	for _, pinned := range []bool{false, true} {
		b.Run(fmt.Sprintf("pinned=%v", pinned), func(b *testing.B) {
			r := pinnedBenchRouter(b, pinned)
			b.ReportAllocs()
			for b.Loop() {
				r.Rebuild()
			}
		})
	}
}
