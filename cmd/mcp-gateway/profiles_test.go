package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

// TestProfilesEndToEnd: two profiles on their own paths give Go SDK
// clients of each era different catalogs: coding lists alpha's tools,
// chat (search mode) finds and calls beta's; a tool of the other profile
// is unknown on each path by every route. Teams still apply on top: the
// data team on chat reaches only what both allow. A name that is not a
// profile cannot be connected to, and a legacy session is unknown on
// another profile's path.
func TestProfilesEndToEnd(t *testing.T) {
	cfg := config.Default()
	cfg.Upstreams = []config.Upstream{stdioUpstream("alpha", "echo", map[string]string{"WHO": "alpha"}), stdioUpstream("beta", "echo-legacy", map[string]string{"WHO": "beta"})}
	cfg.Auth.Mode = config.AuthAPIKey
	const allKey, dataKey = "all-team-key-0123456789", "data-team-key-0123456789"
	cfg.Teams = []config.Team{
		{Name: "all", APIKeys: []string{allKey}},
		{Name: "data", APIKeys: []string{dataKey}, Allow: []string{"alpha__*", "beta__echo"}},
	}
	cfg.Profiles = []config.Profile{
		{Name: "coding", Allow: []string{"alpha__*"}, Deny: []string{"alpha__exit"}},
		{Name: "chat", Allow: []string{"beta__*"}, Mode: config.ModeSearch},
	}
	url, g := startGateway(t, cfg)
	direct := viewNames(t, g, "all") // the team's catalog on the main endpoint

	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			on := func(profile, key string) *mcp.ClientSession {
				t.Helper()
				cs, err := connectAs(t, url+"/"+profile, era, key)
				if err != nil {
					t.Fatalf("connecting to %s: %v", profile, err)
				}
				return cs
			}
			coding, chat := on("coding", allKey), on("chat", allKey)

			codingTools := listNames(ctx, t, coding)
			var want []string
			for _, n := range direct {
				if strings.HasPrefix(n, "alpha__") && n != "alpha__exit" {
					want = append(want, n)
				}
			}
			if diff := cmp.Diff(want, codingTools); diff != "" || len(want) < 2 {
				t.Errorf("coding tools (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(searchTools, listNames(ctx, t, chat)); diff != "" {
				t.Errorf("chat tools (-want +got):\n%s", diff)
			}
			if text, err := callText(ctx, coding, "alpha__getenv", map[string]any{"name": "WHO"}); err != nil || text != "alpha" {
				t.Errorf("coding calling alpha__getenv: %q, %v", text, err)
			}
			if text, err := callText(ctx, chat, "call_tool", map[string]any{"name": "beta__getenv", "arguments": map[string]any{"name": "WHO"}}); err != nil || text != "beta" {
				t.Errorf("chat calling beta__getenv through call_tool: %q, %v", text, err)
			}
			got := find(ctx, t, chat, map[string]any{"query": "read an environment variable", "limit": 20})
			if len(got) == 0 || got[0] != "beta__getenv" || slices.ContainsFunc(got, func(n string) bool { return !strings.HasPrefix(n, "beta__") }) {
				t.Errorf("chat found %v, want beta__getenv first and beta's tools only", got)
			}

			// The other profile's tools are unknown, by every route.
			for _, name := range []string{"beta__echo", "beta__getenv", "alpha__exit", "echo"} {
				if _, err := coding.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"text": "x"}}); err == nil || !strings.Contains(err.Error(), "Unknown tool: "+name) {
					t.Errorf("coding calling %s: %v, want the unknown-tool error", name, err)
				}
			}
			for _, name := range []string{"alpha__echo", "alpha__getenv"} {
				if _, err := chat.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"text": "x"}}); err == nil || !strings.Contains(err.Error(), "Unknown tool: "+name) {
					t.Errorf("chat calling %s directly: %v, want the unknown-tool error", name, err)
				}
				if _, err := chat.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": name, "arguments": map[string]any{"text": "x"}}}); err == nil || !strings.Contains(err.Error(), "Unknown tool: "+name) {
					t.Errorf("chat calling %s through call_tool: %v, want the unknown-tool error", name, err)
				}
				if res, err := chat.CallTool(ctx, &mcp.CallToolParams{Name: "describe_tool", Arguments: map[string]any{"name": name}}); err == nil && !res.IsError {
					t.Errorf("chat described %s: %+v", name, res.Content)
				}
			}

			// A team narrows the profile: data allows beta__echo only.
			dataChat := on("chat", dataKey)
			if got := find(ctx, t, dataChat, map[string]any{"query": "returns its text argument environment variable add", "limit": 20}); !cmp.Equal(got, []string{"beta__echo"}) {
				t.Errorf("data on chat found %v, want beta__echo alone", got)
			}
			if _, err := dataChat.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": "beta__getenv", "arguments": map[string]any{"name": "WHO"}}}); err == nil {
				t.Error("data on chat called beta__getenv, which its team does not allow")
			}

			if _, err := connectAs(t, url+"/nope", era, allKey); err == nil || !strings.Contains(err.Error(), "404") && !strings.Contains(strings.ToLower(err.Error()), "not found") {
				t.Errorf("connecting to a name that is not a profile: %v, want 404", err)
			}
			if era != "2025-11-25" {
				return
			}
			// The coding session's id on chat's path and the main
			// endpoint: unknown there, and still alive on its own.
			for _, path := range []string{"/chat", ""} {
				req, _ := http.NewRequest("POST", url+path, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Authorization", "Bearer "+allKey)
				req.Header.Set("Mcp-Session-Id", coding.ID())
				req.Header.Set("MCP-Protocol-Version", era)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusNotFound {
					t.Errorf("the coding session on %q: %d, want 404", path, resp.StatusCode)
				}
			}
			if diff := cmp.Diff(codingTools, listNames(ctx, t, coding)); diff != "" {
				t.Errorf("coding after its id was tried elsewhere (-before +after):\n%s", diff)
			}
		})
	}
}

// viewNames are the names of the tools the router lists to a legacy host
// of view.
func viewNames(t *testing.T, g *gateway, view string) []string {
	t.Helper()
	reply := g.router.Dispatch(context.Background(), &router.Caller{ProtocolVersion: "2025-11-25", View: view}, hostRequest(t, "tools/list", `{}`))
	if reply.Error != nil {
		t.Fatal(reply.Error)
	}
	var list struct{ Tools []struct{ Name string } }
	if err := json.Unmarshal(reply.Result, &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// TestProfilesReload: a reload that adds a profile serves its path at
// once, in its view; one that removes a profile answers its path 404.
func TestProfilesReload(t *testing.T) {
	write := func(path string, profiles ...string) {
		var list []any
		for _, p := range profiles {
			list = append(list, map[string]any{"name": p, "allow": []string{"echo__echo"}})
		}
		raw, err := os.ReadFile(writeConfig(t, map[string]any{"profiles": list}, "echo"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "gateway.json")
	write(path, "a")
	var logs mcptest.LogBuffer
	current, err := loadConfig(path, &logs)
	if err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	log := telemetry.NewLogger(&logs, nil)
	url, g, _ := startGatewayWith(t, current, recorders{log: log})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list := func(profile string) (int, []string) {
		status, _, msg := postRaw(ctx, t, url+"/"+profile, map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"},
			`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
		var res struct{ Tools []struct{ Name string } }
		_ = json.Unmarshal(msg.Result, &res)
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		return status, names
	}
	if status, names := list("a"); status != 200 || !cmp.Equal(names, []string{"echo__echo"}) {
		t.Fatalf("profile a: %d %v", status, names)
	}
	if status, _ := list("b"); status != 404 {
		t.Errorf("profile b before the reload: %d, want 404", status)
	}
	write(path, "b")
	g.reload(path, current, log)
	if status, names := list("b"); status != 200 || !cmp.Equal(names, []string{"echo__echo"}) {
		t.Errorf("profile b after the reload: %d %v\n%s", status, names, logs.String())
	}
	if status, _ := list("a"); status != 404 {
		t.Errorf("profile a after the reload removed it: %d, want 404", status)
	}
}
