package router_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
)

// BenchmarkSearchMode: a view in search mode over benchRouter's 200
// tools. direct and call_tool are the same tools/call, by its exposed
// name and through call_tool (which reads its own arguments and builds
// the direct call's request once); find_tools is a search with the index built. Run:
//
//	go test -run '^$' -bench SearchMode -benchmem ./internal/router
func BenchmarkSearchMode(b *testing.B) {
	r := benchRouterWith(b, benchResult(1<<10), policy.Rules{Mode: config.ModeSearch})
	caller := &router.Caller{ProtocolVersion: "2025-11-25", Session: "s1", Capabilities: json.RawMessage(`{}`)}
	for _, bc := range []struct{ name, params string }{
		{"direct", `{"name":"up17__tool_7","arguments":{"q":"hello"}}`},
		{"call_tool", `{"name":"call_tool","arguments":{"name":"up17__tool_7","arguments":{"q":"hello"}}}`},
		{"find_tools", `{"name":"find_tools","arguments":{"query":"tool 7 of upstream 17"}}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			body := jsonrpc.AppendRequest(nil, json.RawMessage(`"host-1"`), "tools/call", json.RawMessage(bc.params))
			call := func() {
				req, err := jsonrpc.DecodeRequest(body)
				if err != nil {
					b.Fatal(err)
				}
				if reply := r.Dispatch(context.Background(), caller, req); reply.Error != nil || reply.ToolError {
					b.Fatalf("reply: %v %s", reply.Error, reply.Result)
				}
			}
			call()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				call()
			}
		})
	}
}

// BenchmarkSearchModeExposed: find_tools and tools/list in a view in
// search mode, with expose_found off and on (the caller's list then
// holds what it found: five tools). Run:
//
//	go test -run '^$' -bench SearchModeExposed -benchmem ./internal/router
func BenchmarkSearchModeExposed(b *testing.B) {
	for _, expose := range []bool{false, true} {
		r := benchRouterWith(b, benchResult(1<<10), policy.Rules{Mode: config.ModeSearch, ExposeFound: expose})
		caller := &router.Caller{ProtocolVersion: "2025-11-25", Session: "s1", Capabilities: json.RawMessage(`{}`)}
		for _, bc := range []struct{ name, method, params string }{
			{"find_tools", "tools/call", `{"name":"find_tools","arguments":{"query":"tool 7 of upstream 17"}}`},
			{"tools_list", "tools/list", `{}`},
		} {
			name := bc.name + map[bool]string{false: "/off", true: "/on"}[expose]
			b.Run(name, func(b *testing.B) {
				body := jsonrpc.AppendRequest(nil, json.RawMessage(`"host-1"`), bc.method, json.RawMessage(bc.params))
				call := func() {
					req, err := jsonrpc.DecodeRequest(body)
					if err != nil {
						b.Fatal(err)
					}
					if reply := r.Dispatch(context.Background(), caller, req); reply.Error != nil || reply.ToolError {
						b.Fatalf("reply: %v %s", reply.Error, reply.Result)
					}
				}
				call()
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					call()
				}
			})
		}
	}
}
