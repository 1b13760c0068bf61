package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
)

// TestRequestStateBoundToIdentity: a modern host's input_required
// result carries a requestState only its own key can continue, end to
// end: for a call parked on a legacy upstream (which asked for the input
// with elicitation/create) and for a modern upstream's own input_required
// (whose state the gateway wraps). Another key of the same team, and the
// upstream's bare state, get -32602; the right key's retry completes.
func TestRequestStateBoundToIdentity(t *testing.T) {
	legacyUp := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: mcptest.ServerOptions{Versions: mcptest.LegacyVersions()}})
	modernUp := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Stateless: true})
	cfg := config.Default()
	cfg.Upstreams = []config.Upstream{relaying(httpUpstream("old", legacyUp.URL)), relaying(httpUpstream("new", modernUp.URL))}
	const alice, bob = "team-key-alice-0123456789", "team-key-bob-0123456789"
	cfg.Auth.Mode = config.AuthAPIKey
	cfg.Teams = []config.Team{{Name: "t", APIKeys: []string{alice, bob}, Allow: []string{"*"}}}
	url, _ := startGateway(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	call := func(key, tool, extra string) *jsonrpc.Message {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"message":"name?"},` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}` + extra + `}}`
		_, _, m := postRaw(ctx, t, url, map[string]string{"Authorization": "Bearer " + key, "MCP-Protocol-Version": "2026-07-28",
			"Mcp-Method": "tools/call", "Mcp-Name": tool}, body)
		return m
	}
	for _, tool := range []string{"old__ask", "new__ask"} {
		t.Run(tool, func(t *testing.T) {
			first := call(alice, tool, "")
			var ir struct {
				ResultType    string                     `json:"resultType"`
				InputRequests map[string]json.RawMessage `json:"inputRequests"`
				RequestState  string                     `json:"requestState"`
			}
			if first.Error != nil || json.Unmarshal(first.Result, &ir) != nil || ir.ResultType != "input_required" || len(ir.InputRequests) != 1 {
				t.Fatalf("first call: %v %s, want input_required with one input request", first.Error, first.Result)
			}
			if !strings.HasPrefix(ir.RequestState, "mcpgw2.") {
				t.Errorf("requestState %q is not the gateway's sealed state", ir.RequestState)
			}
			var key string
			for k := range ir.InputRequests {
				key = k
			}
			retry := func(state string) string {
				return `,"requestState":` + string(jsonrpc.String(state)) + `,"inputResponses":{"` + key + `":{"action":"accept","content":{"name":"Ada"}}}`
			}
			refused := func(what string, m *jsonrpc.Message) {
				t.Helper()
				if m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(m.Error.Message, "requestState") {
					t.Errorf("%s: %v %s, want -32602 refusing the requestState", what, m.Error, m.Result)
				}
			}
			refused("bob replaying alice's state", call(bob, tool, retry(ir.RequestState)))
			refused("the upstream's own state, bare", call(alice, tool, retry("ask-state-name?")))
			done := call(alice, tool, retry(ir.RequestState))
			if done.Error != nil || !strings.Contains(string(done.Result), "Ada") {
				t.Fatalf("alice's retry: %v %s, want the upstream's answer", done.Error, done.Result)
			}
			if tool == "new__ask" && !strings.Contains(string(done.Result), "state=ask-state-name?") {
				t.Errorf("the modern upstream did not get its own state back: %s", done.Result)
			}
		})
	}
}
