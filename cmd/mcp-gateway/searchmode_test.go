package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

// searchTools are the names a view in search mode lists.
var searchTools = []string{"find_tools", "call_tool", "describe_tool"}

// listNames lists the session's tools.
func listNames(ctx context.Context, t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	return names
}

// find calls find_tools and returns the names it found, from its
// structuredContent (and checks that its text says the same).
func find(ctx context.Context, t *testing.T, cs *mcp.ClientSession, args map[string]any) []string {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "find_tools", Arguments: args})
	if err != nil || res.IsError || len(res.Content) != 1 {
		t.Fatalf("find_tools %v: %+v, %v", args, res, err)
	}
	var structured, text struct {
		Tools []struct {
			Name        string `json:"name"`
			InputSchema any    `json:"inputSchema"`
		} `json:"tools"`
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &structured); err != nil {
		t.Fatalf("find_tools structuredContent %s: %v", raw, err)
	}
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &text); err != nil {
		t.Fatalf("find_tools text: %v", err)
	}
	if diff := cmp.Diff(text, structured); diff != "" {
		t.Errorf("find_tools text and structuredContent differ (-text +structured):\n%s", diff)
	}
	var names []string
	for _, f := range structured.Tools {
		if f.InputSchema == nil {
			t.Errorf("found %s without its inputSchema", f.Name)
		}
		names = append(names, f.Name)
	}
	return names
}

// TestSearchModeBothEras: a gateway in search mode lists only its three
// tools to a Go SDK client of each era; find_tools finds the view's
// tools, and not one the policy hides; call_tool runs a found tool as a
// direct call would, and a hidden one gets the direct call's error.
func TestSearchModeBothEras(t *testing.T) {
	cfg := config.Default()
	cfg.Policy.Mode = config.ModeSearch
	beta := stdioUpstream("beta", "echo-legacy", map[string]string{"WHO": "beta"})
	beta.Tools.Deny = []string{"getenv"}
	cfg.Upstreams = []config.Upstream{stdioUpstream("alpha", "echo", map[string]string{"WHO": "alpha"}), beta}
	url, _ := startGateway(t, cfg)

	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cs := connect(t, url, era)
			if diff := cmp.Diff(searchTools, listNames(ctx, t, cs)); diff != "" {
				t.Errorf("tools/list (-want +got):\n%s", diff)
			}
			got := find(ctx, t, cs, map[string]any{"query": "read an environment variable"})
			if len(got) == 0 || got[0] != "alpha__getenv" || slices.Contains(got, "beta__getenv") {
				t.Errorf("find environment variable: %v, want alpha__getenv first and never the hidden beta__getenv", got)
			}
			if got := find(ctx, t, cs, map[string]any{"query": "beta__getenv", "upstream": "beta", "limit": 20}); slices.Contains(got, "beta__getenv") {
				t.Errorf("find by the hidden tool's name: %v", got)
			}
			if got := find(ctx, t, cs, map[string]any{"query": "returns its text argument", "upstream": "beta"}); len(got) == 0 || got[0] != "beta__echo" {
				t.Errorf("find echo in beta: %v", got)
			}
			if text, err := callText(ctx, cs, "call_tool", map[string]any{"name": "alpha__getenv", "arguments": map[string]any{"name": "WHO"}}); err != nil || text != "alpha" {
				t.Errorf("call_tool alpha__getenv = %q, %v", text, err)
			}
			if text, err := callText(ctx, cs, "call_tool", map[string]any{"name": "beta__echo", "arguments": map[string]any{"text": "through call_tool"}}); err != nil || text != "through call_tool" {
				t.Errorf("call_tool beta__echo = %q, %v", text, err)
			}
			_, viaErr := cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": "beta__getenv", "arguments": map[string]any{"name": "WHO"}}})
			_, directErr := cs.CallTool(ctx, &mcp.CallToolParams{Name: "beta__getenv", Arguments: map[string]any{"name": "WHO"}})
			if viaErr == nil || directErr == nil || viaErr.Error() != directErr.Error() {
				t.Errorf("hidden tool: through call_tool %v, directly %v; want the same error", viaErr, directErr)
			}
			// A host that knows a name calls it directly.
			if text, err := callText(ctx, cs, "alpha__echo", map[string]any{"text": "direct"}); err != nil || text != "direct" {
				t.Errorf("alpha__echo = %q, %v", text, err)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "describe_tool", Arguments: map[string]any{"name": "alpha__echo"}})
			if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `"name":"alpha__echo"`) {
				t.Errorf("describe_tool alpha__echo: %+v, %v", res, err)
			}
		})
	}

	// /readyz says what the view's list costs, next to its catalog.
	resp, err := http.Get(strings.TrimSuffix(url, "/mcp") + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ready struct {
		Views []struct {
			Mode         string `json:"mode"`
			Tools        int    `json:"tools"`
			Tokens       int    `json:"tokens"`
			ListedTokens int    `json:"listed_tokens"`
		} `json:"views"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ready); err != nil {
		t.Fatal(err)
	}
	if v := ready.Views; len(v) != 1 || v[0].Mode != "search" || v[0].Tools < 2 || v[0].Tokens <= 0 || v[0].ListedTokens < 100 || v[0].ListedTokens == v[0].Tokens {
		t.Errorf("/readyz views %+v, want the search view's catalog and the gateway tools' tokens", v)
	}
}

// listTokens is the size, as `mcp-gateway tools` counts it (each
// definition on its own, policy.Tokens), of the tools/list the router
// gives a legacy host of the default view.
func listTokens(t *testing.T, g *gateway) (int, []string) {
	t.Helper()
	reply := g.router.Dispatch(context.Background(), &router.Caller{ProtocolVersion: "2025-11-25"}, hostRequest(t, "tools/list", `{}`))
	if reply.Error != nil {
		t.Fatal(reply.Error)
	}
	var list struct{ Tools []json.RawMessage }
	if err := json.Unmarshal(reply.Result, &list); err != nil {
		t.Fatal(err)
	}
	total, names := 0, []string{}
	for _, def := range list.Tools {
		total += policy.Tokens(def)
		var d struct{ Name string }
		_ = json.Unmarshal(def, &d)
		names = append(names, d.Name)
	}
	return total, names
}

// TestSearchModeCostsATenthOfTheReferenceServers puts the reference
// servers behind a gateway in each mode: search mode's tools/list costs
// at most a tenth of the full catalog's tokens, and every tool of the
// catalog is found by its name, described and callable through it.
func TestSearchModeCostsATenthOfTheReferenceServers(t *testing.T) {
	dir := interopDir(t)
	files := t.TempDir()
	cfg := config.Default()
	cfg.Upstreams = []config.Upstream{
		nodeUpstream("everything", dir, []string{npmServer(dir, "server-everything"), "stdio"}, nil),
		nodeUpstream("memory", dir, []string{npmServer(dir, "server-memory")}, map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")}),
		nodeUpstream("files", dir, []string{npmServer(dir, "server-filesystem"), files}, nil),
		nodeUpstream("thinking", dir, []string{npmServer(dir, "server-sequential-thinking")}, nil),
	}
	_, full := startGateway(t, cfg)
	fullTokens, catalog := listTokens(t, full)

	cfg.Policy.Mode = config.ModeSearch
	url, search := startGateway(t, cfg)
	searchTokens, listed := listTokens(t, search)
	t.Logf("tools/list: full catalog %d tools, %d tokens; search mode %d tokens (%.1f%%)", len(catalog), fullTokens, searchTokens, 100*float64(searchTokens)/float64(fullTokens))
	if !cmp.Equal(listed, searchTools) {
		t.Fatalf("search mode lists %v", listed)
	}
	if searchTokens*10 > fullTokens {
		t.Errorf("search mode's tools/list costs %d tokens, over a tenth of the full catalog's %d", searchTokens, fullTokens)
	}

	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cs := connect(t, url, era)
			for _, name := range catalog {
				if got := find(ctx, t, cs, map[string]any{"query": name, "limit": 20}); !slices.Contains(got, name) {
					t.Errorf("find_tools by the name %s: %v", name, got)
				}
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "describe_tool", Arguments: map[string]any{"name": name}})
				if err != nil || res.IsError {
					t.Errorf("describe_tool %s: %+v, %v", name, res, err)
				}
			}
			if text, err := callText(ctx, cs, "call_tool", map[string]any{"name": "everything__echo", "arguments": map[string]any{"message": "hi"}}); err != nil || !strings.Contains(text, "hi") {
				t.Errorf("call_tool everything__echo = %q, %v", text, err)
			}
		})
	}

	// The TypeScript SDK client validates structuredContent against the
	// listed outputSchema.
	t.Run("typescript-sdk", func(t *testing.T) {
		ts := func(tool, args string) (tools []string, text string) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, node(dir), filepath.Join(dir, "ts-client.mjs"), "--url", url, "--tool", tool, "--args", args).Output()
			if err != nil {
				t.Fatalf("ts-client %s: %v\n%s", tool, err, out)
			}
			var summary struct {
				OK    bool
				Tools []string
				Call  struct {
					Result struct{ Content []struct{ Text string } }
				}
			}
			if err := json.Unmarshal(out, &summary); err != nil || !summary.OK || len(summary.Call.Result.Content) != 1 {
				t.Fatalf("ts-client %s output %s: %v", tool, out, err)
			}
			return summary.Tools, summary.Call.Result.Content[0].Text
		}
		tools, text := ts("find_tools", `{"query":"echo a message"}`)
		if !cmp.Equal(tools, searchTools) || !strings.Contains(text, `"name":"everything__echo"`) {
			t.Errorf("find_tools: tools %v, found %s", tools, text)
		}
		if _, text := ts("call_tool", `{"name":"everything__echo","arguments":{"message":"from typescript"}}`); text != "Echo: from typescript" {
			t.Errorf("call_tool everything__echo: %q", text)
		}
	})
}

// TestCallToolRelaysServerRequests: a tool that asks its host for input
// (elicitation) works through call_tool in all four pairs of eras: a
// legacy upstream's request on the legacy host's session or as a modern
// host's input_required, and a modern upstream's input_required answered
// by the gateway for a legacy host or retried by a modern one.
func TestCallToolRelaysServerRequests(t *testing.T) {
	old := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: mcptest.ServerOptions{Name: "old", Versions: mcptest.LegacyVersions()}})
	modern := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Stateless: true, Server: mcptest.ServerOptions{Name: "new"}})
	cfg := config.Default()
	cfg.Policy.Mode = config.ModeSearch
	cfg.Upstreams = []config.Upstream{relaying(httpUpstream("old", old.URL)), relaying(httpUpstream("new", modern.URL))}
	url, _ := startGateway(t, cfg)
	elicit := func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "ada"}}, nil
	}
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			client := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: elicit})
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: era})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			for _, tool := range []string{"old__elicit", "new__ask"} {
				got, err := callAll(ctx, cs, "call_tool", map[string]any{"name": tool, "arguments": map[string]any{"message": "name?"}})
				if err != nil || !strings.Contains(got, "ada") {
					t.Errorf("call_tool %s: %q, %v; want the host's answer", tool, got, err)
				}
			}
		})
	}
}

// TestToolsCommandSearchMode: `mcp-gateway tools` says what the view's
// tools/list costs in its mode (the configured one, or --mode's) next to
// its catalog, which it still lists.
func TestToolsCommandSearchMode(t *testing.T) {
	path := writeConfig(t, map[string]any{"policy": map[string]any{"mode": "search"}}, "echo")
	type listing struct {
		Mode         string
		Tools        []struct{ Name string }
		TokensAfter  int `json:"tokens_after"`
		ListedTokens int `json:"listed_tokens"`
	}
	toolsJSON := func(args ...string) listing {
		t.Helper()
		code, out, errOut := runCLI(t, append([]string{"tools", "--config", path, "--json"}, args...)...)
		if code != exitOK {
			t.Fatalf("tools %v: exit %d, stderr %s", args, code, errOut)
		}
		var l listing
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("tools %v --json output %q: %v", args, out, err)
		}
		return l
	}
	search := toolsJSON() // the configured mode
	if search.Mode != "search" || len(search.Tools) < 2 || search.ListedTokens < 100 || search.ListedTokens == search.TokensAfter {
		t.Errorf("tools in search mode: %+v, want mode search, the catalog, and the gateway tools' tokens apart from the catalog's", search)
	}
	full := toolsJSON("--mode", "full")
	if full.Mode != "full" || full.ListedTokens != full.TokensAfter || full.TokensAfter != search.TokensAfter {
		t.Errorf("tools --mode full: %+v, want mode full, listing the catalog's %d tokens", full, search.TokensAfter)
	}
	if again := toolsJSON("--mode", "search"); again.Mode != "search" || again.ListedTokens != search.ListedTokens {
		t.Errorf("tools --mode search: %+v, want %+v", again, search)
	}

	code, out, errOut := runCLI(t, "tools", "--config", path)
	want := fmt.Sprintf("search mode: tools/list holds 3 gateway tools, %d tokens (", search.ListedTokens)
	if code != exitOK || !strings.Contains(out, want) || !strings.Contains(out, fmt.Sprintf("of the catalog's %d)", search.TokensAfter)) || !strings.Contains(out, "echo__echo") {
		t.Errorf("tools table: exit %d, want %q\nstdout:\n%s\nstderr:\n%s", code, want, out, errOut)
	}
	// Mode auto lists the view in the mode its budget puts it in.
	for budget, want := range map[int]string{100: "search", 1 << 20: "full"} {
		path := writeConfig(t, map[string]any{"policy": map[string]any{"max_tokens": budget}}, "echo")
		code, out, errOut := runCLI(t, "tools", "--config", path, "--json", "--mode", "auto")
		var l listing
		if err := json.Unmarshal([]byte(out), &l); code != exitOK || err != nil || l.Mode != want || len(l.Tools) != len(search.Tools) {
			t.Errorf("tools --mode auto with max_tokens %d: exit %d, %+v, stderr %s; want mode %s and the whole catalog", budget, code, l, errOut, want)
		}
	}

	// A team's view, with its own mode.
	teams := writeConfig(t, map[string]any{"auth": map[string]any{"mode": "api_key"},
		"teams": []any{map[string]any{"name": "t", "api_keys": []any{"team-key-0123456789abcdef0123456789"}, "mode": "search"}}}, "echo")
	for _, tc := range []struct{ args, want string }{{"", "search"}, {"--mode full", "full"}} {
		args := append([]string{"tools", "--config", teams, "--json", "--team", "t"}, strings.Fields(tc.args)...)
		code, out, errOut := runCLI(t, args...)
		var l listing
		if err := json.Unmarshal([]byte(out), &l); code != exitOK || err != nil || l.Mode != tc.want || (l.Mode == "search") != (l.ListedTokens == search.ListedTokens) {
			t.Errorf("tools --team t %s: exit %d, %+v, stderr %s; want mode %s", tc.args, code, l, errOut, tc.want)
		}
	}
	for _, bad := range []struct{ mode, want string }{
		{"frugal", "--mode must be full, search or auto"},
		{"auto", "policy.mode: auto needs policy.max_tokens"},
	} {
		if code, _, errOut := runCLI(t, "tools", "--config", path, "--mode", bad.mode); code != exitUsage || !strings.Contains(errOut, bad.want) {
			t.Errorf("tools --mode %s: exit %d, stderr %q, want %q", bad.mode, code, errOut, bad.want)
		}
	}
}

// TestSearchModeTokenGauges: the token gauge keeps each view's catalog
// size; the listed-tokens gauge says what its tools/list costs, the
// gateway's tools in search mode.
func TestSearchModeTokenGauges(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	tel, err := telemetry.New(context.Background(), telemetry.Options{MetricReader: reader, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	obs, err := telemetry.NewObserver(tel, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(obs.Close)
	fake := &fakeClient{arrived: make(chan struct{}), release: make(chan struct{})}
	rt, err := router.New(&router.Options{ListWait: -1,
		Rules: policy.Rules{Teams: []policy.Team{{Name: "s", Mode: config.ModeSearch}}},
		Upstreams: []router.UpstreamConfig{{Name: "a",
			Connect: func(router.ConnectOptions) (router.Upstream, error) { return fake, nil }}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := observeState(obs, rt); err != nil {
		t.Fatal(err)
	}
	rt.Start(context.Background())
	t.Cleanup(func() { _ = rt.Close() })
	if err := rt.WaitStarted(context.Background()); err != nil {
		t.Fatal(err)
	}
	info, _ := rt.Tools("s")
	searchTokens := 0
	for _, def := range info.Listed {
		searchTokens += policy.Tokens(def)
	}
	data := collect(t, reader)
	gauge := func(name string) map[string]int64 {
		g, ok := data[name].(metricdata.Gauge[int64])
		if !ok {
			t.Fatalf("no %s gauge: %v", name, data[name])
		}
		out := map[string]int64{}
		for _, p := range g.DataPoints {
			out[attrsOf(p.Attributes)["mcp_gateway.view"]] = p.Value
		}
		return out
	}
	tokens, listed := gauge("mcp_gateway.view.tokens"), gauge("mcp_gateway.view.listed_tokens")
	catalog := tokens["default"]
	if catalog <= 0 || tokens["s"] != catalog || searchTokens < 100 || int64(searchTokens) == catalog {
		t.Fatalf("view tokens %v, search tools %d: want both views' catalogs the same, apart from the search tools'", tokens, searchTokens)
	}
	if want := map[string]int64{"default": catalog, "s": int64(searchTokens)}; !cmp.Equal(listed, want) {
		t.Errorf("mcp_gateway.view.listed_tokens %v, want %v", listed, want)
	}
}

// TestCallToolSmuggling: through call_tool, in both host eras, over HTTP
// to the Go SDK server: call_tool arguments that repeat name or
// arguments, or whose tool arguments repeat a member, get 400 -32600; a
// bound argument (the SDK server's "headers" binds region to
// Mcp-Param-Region) spelled twice gets the direct call's -32600; tool
// arguments that are not an object and a call_tool of call_tool get an
// isError result. Only the plain calls reach the upstream.
func TestCallToolSmuggling(t *testing.T) {
	var mu sync.Mutex
	var regions []string
	server := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Stateless: true, Inspect: func(r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tools/call" {
			mu.Lock()
			defer mu.Unlock()
			regions = append(regions, r.Header.Get("Mcp-Name")+" "+r.Header.Get("Mcp-Param-Region"))
		}
	}})
	cfg := config.Default()
	cfg.Policy.Mode = config.ModeSearch
	cfg.Upstreams = []config.Upstream{httpUpstream("sdk", server.URL)}
	url, _ := startGateway(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, h, _ := postRaw(ctx, t, url, nil, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}`)
	legacy := map[string]string{"Mcp-Session-Id": h.Get("Mcp-Session-Id"), "MCP-Protocol-Version": "2025-11-25"}
	modern := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "call_tool"}
	const meta = `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	for _, era := range []struct {
		name    string
		headers map[string]string
		meta    string
	}{{"legacy", legacy, ""}, {"modern", modern, meta}} {
		call := func(args string) *jsonrpc.Message {
			t.Helper()
			_, _, m := postRaw(ctx, t, url, era.headers, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"call_tool","arguments":`+args+era.meta+`}}`)
			return m
		}
		for args, want := range map[string]string{
			`{"name":"sdk__headers","name":"sdk__echo","arguments":{"region":"us-east"}}`:              `member "name" appears more than once in params.arguments`,
			`{"name":"sdk__headers","arguments":{"region":"us-east"},"\u0061rguments":{"region":"x"}}`: `member "arguments" appears more than once in params.arguments`,
			`{"name":"sdk__headers","arguments":{"region":"us-east","region":"eu-west"}}`:              `member "region" appears more than once in params.arguments.arguments`,
			`{"name":"sdk__headers","arguments":{"region":"us-east","Region":"eu-west"}}`:              "two spellings",
		} {
			if m := call(args); m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidRequest || !strings.Contains(m.Error.Message, want) {
				t.Errorf("%s call_tool %s: %v %s, want -32600 saying %q", era.name, args, m.Error, m.Result, want)
			}
		}
		for args, want := range map[string]string{
			`{"name":"sdk__headers","arguments":["us-east"]}`:                         "must be an object",
			`{"name":"call_tool","arguments":{"name":"sdk__headers","arguments":{}}}`: "the gateway's own tool",
			`{"Name":"sdk__headers","arguments":{"region":"us-east"}}`:                `no argument \"Name\"`,
		} {
			if m := call(args); m.Error != nil || !strings.Contains(string(m.Result), `"isError":true`) || !strings.Contains(string(m.Result), want) {
				t.Errorf("%s call_tool %s: %v %s, want an isError result saying %q", era.name, args, m.Error, m.Result, want)
			}
		}
		if m := call(`{"name":"sdk__headers","arguments":{"region":"us-east"}}`); m.Error != nil || !strings.Contains(string(m.Result), "us-east") {
			t.Errorf("%s: the plain call_tool: %v %s", era.name, m.Error, m.Result)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"headers us-east", "headers us-east"}; !cmp.Equal(regions, want) {
		t.Errorf("the upstream got tools/calls %q (Mcp-Name, Mcp-Param-Region), want %q: the two plain calls only", regions, want)
	}
}

// TestToolsCommandProfile: mcp-gateway tools --profile shows the view as
// served on the profile's path: its own allow list and mode, and a
// profile not in the config is a usage error.
func TestToolsCommandProfile(t *testing.T) {
	path := writeConfig(t, map[string]any{"profiles": []any{
		map[string]any{"name": "none", "allow": []any{"nothing__*"}},
		map[string]any{"name": "finder", "mode": "search"},
	}}, "echo")
	list := func(args ...string) (mode string, tools int) {
		t.Helper()
		code, out, errOut := runCLI(t, append([]string{"tools", "--config", path, "--json"}, args...)...)
		if code != exitOK {
			t.Fatalf("tools %v: exit %d, stderr %s", args, code, errOut)
		}
		var l struct {
			View  string
			Mode  string
			Tools []struct{ Name string }
		}
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("tools %v --json output %q: %v", args, out, err)
		}
		return l.Mode, len(l.Tools)
	}
	if mode, n := list(); mode != "full" || n == 0 {
		t.Fatalf("tools on the endpoint: mode %s, %d tools", mode, n)
	}
	if _, n := list("--profile", "none"); n != 0 {
		t.Errorf("tools --profile none: %d tools, want none (its allow list matches nothing)", n)
	}
	if mode, n := list("--profile", "finder"); mode != "search" || n == 0 {
		t.Errorf("tools --profile finder: mode %s, %d tools, want search mode over the catalog", mode, n)
	}
	if mode, _ := list("--profile", "finder", "--mode", "full"); mode != "full" {
		t.Errorf("tools --profile finder --mode full: mode %s", mode)
	}
	if code, _, errOut := runCLI(t, "tools", "--config", path, "--profile", "nope"); code != exitUsage || !strings.Contains(errOut, `no profile "nope"`) {
		t.Errorf("tools --profile nope: exit %d, stderr %s", code, errOut)
	}
}
