package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
)

// The interop tests run the gateway against the reference servers from
// npm and the TypeScript SDK client, installed by interop/setup.sh into
// interop/node_modules (./test.sh runs it first).

// Without them a test skips, so that go test ./... passes on a fresh
// clone; ./test.sh installs them and sets MCP_GATEWAY_TEST_PEERS=require,
// which turns such a skip into a failure.
func interopDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../interop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "node", "bin", "node")); err != nil {
		if os.Getenv("MCP_GATEWAY_TEST_PEERS") == "require" {
			t.Fatalf("the npm test peers are not installed (interop/setup.sh): %v", err)
		}
		t.Skipf("the npm test peers are not installed: run ./test.sh, which installs them (%v)", err)
	}
	return dir
}

func node(dir string) string { return filepath.Join(dir, "node_modules", "node", "bin", "node") }

func npmServer(dir, pkg string) string {
	return filepath.Join(dir, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startEverythingHTTP runs server-everything over Streamable HTTP and
// returns its endpoint once it says it listens.
func startEverythingHTTP(t *testing.T, dir string) string {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(node(dir), npmServer(dir, "server-everything"), "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on port") {
				close(listening)
				break
			}
		}
		for sc.Scan() { // drain, so the child never blocks on stderr
		}
	}()
	select {
	case <-listening:
	case <-time.After(60 * time.Second):
		t.Fatal("server-everything (streamableHttp) did not start listening")
	}
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
}

func nodeUpstream(name, dir string, args []string, env map[string]string) config.Upstream {
	u := config.DefaultUpstream()
	u.Name, u.Command, u.Args, u.Env = name, node(dir), args, env
	u.Transport, u.TransportInferred = config.TransportStdio, true
	u.Required = true
	return u
}

// TestReferenceServersThroughTheGateway puts server-everything (over stdio
// and over Streamable HTTP), server-memory and server-filesystem behind
// one gateway, and uses them from the Go SDK client in both eras and from
// the TypeScript SDK client.
func TestReferenceServersThroughTheGateway(t *testing.T) {
	dir := interopDir(t)
	files := t.TempDir()
	if err := os.WriteFile(filepath.Join(files, "note.txt"), []byte("a note for the gateway"), 0o644); err != nil {
		t.Fatal(err)
	}
	httpURL := startEverythingHTTP(t, dir)

	cfg := config.Default()
	everythingHTTP := httpUpstream("everything-http", httpURL)
	everythingHTTP.Required = true
	cfg.Upstreams = []config.Upstream{
		nodeUpstream("everything", dir, []string{npmServer(dir, "server-everything"), "stdio"}, nil),
		everythingHTTP,
		nodeUpstream("memory", dir, []string{npmServer(dir, "server-memory")}, map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")}),
		nodeUpstream("files", dir, []string{npmServer(dir, "server-filesystem"), files}, nil),
	}
	url, g := startGateway(t, cfg)
	if !g.router.Ready() {
		t.Fatalf("not every upstream is ready: %+v", g.router.Status())
	}
	for _, s := range g.router.Status() {
		if s.State != router.PhaseReady || s.Tools == 0 {
			t.Errorf("upstream %s: %s, %d tools, %s", s.Name, s.State, s.Tools, s.Error)
		}
	}

	for i, era := range eras {
		t.Run("go-sdk-"+era, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cs := connect(t, url, era)
			res, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]bool{}
			for _, tool := range res.Tools {
				names[tool.Name] = true
			}
			for _, want := range []string{"everything__echo", "everything-http__echo", "memory__create_entities", "files__read_text_file"} {
				if !names[want] {
					t.Errorf("tools/list lacks %s", want)
				}
			}
			if got, err := callText(ctx, cs, "everything__echo", map[string]any{"message": "stdio " + era}); err != nil || got != "Echo: stdio "+era {
				t.Errorf("everything__echo = %q, %v", got, err)
			}
			if got, err := callText(ctx, cs, "everything-http__get-sum", map[string]any{"a": 40, "b": 2}); err != nil || !strings.Contains(got, "42") {
				t.Errorf("everything-http__get-sum = %q, %v", got, err)
			}
			entity := fmt.Sprintf("gateway-%d", i)
			if _, err := callText(ctx, cs, "memory__create_entities", map[string]any{"entities": []map[string]any{{"name": entity, "entityType": "test", "observations": []string{"seen"}}}}); err != nil {
				t.Errorf("memory__create_entities: %v", err)
			}
			res2, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "memory__read_graph", Arguments: map[string]any{}})
			if err != nil || res2.IsError || !strings.Contains(fmt.Sprint(res2.Content[0].(*mcp.TextContent).Text), entity) {
				t.Errorf("memory__read_graph does not show %s: %v", entity, err)
			}
			if got, err := callText(ctx, cs, "files__read_text_file", map[string]any{"path": filepath.Join(files, "note.txt")}); err != nil || got != "a note for the gateway" {
				t.Errorf("files__read_text_file = %q, %v", got, err)
			}
			prompts, err := cs.ListPrompts(ctx, nil)
			if err != nil || len(prompts.Prompts) == 0 {
				t.Errorf("prompts/list: %d prompts, %v", len(prompts.Prompts), err)
			}
			resources, err := cs.ListResources(ctx, nil)
			if err != nil || len(resources.Resources) == 0 {
				t.Fatalf("resources/list: %v", err)
			}
			read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: resources.Resources[0].URI})
			if err != nil || len(read.Contents) == 0 {
				t.Errorf("reading %s: %v", resources.Resources[0].URI, err)
			}
		})
	}

	t.Run("typescript-sdk", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, node(dir), filepath.Join(dir, "ts-client.mjs"),
			"--url", url, "--tool", "everything__echo", "--args", `{"message":"from typescript"}`).Output()
		if err != nil {
			t.Fatalf("ts-client: %v\n%s", err, out)
		}
		var summary struct {
			OK              bool
			ProtocolVersion string
			Tools           []string
			Call            struct {
				Result struct {
					Content []struct{ Text string }
				}
			}
		}
		if err := json.Unmarshal(out, &summary); err != nil {
			t.Fatalf("ts-client output %s: %v", out, err)
		}
		if !summary.OK || len(summary.Tools) < 30 || len(summary.Call.Result.Content) != 1 || summary.Call.Result.Content[0].Text != "Echo: from typescript" {
			t.Errorf("ts-client summary: %s", out)
		}
	})
}

// TestToolsReportsTrimmedTokens runs `mcp-gateway tools` on the reference
// servers with description_max_chars: 200 (the README's table): every
// tool has token figures before and after, the totals add up, and the
// trim shrinks the long description of sequential-thinking.
func TestToolsReportsTrimmedTokens(t *testing.T) {
	dir := interopDir(t)
	files := t.TempDir()
	cfg := map[string]any{
		"policy": map[string]any{"description_max_chars": 200},
		"upstreams": []map[string]any{
			{"name": "everything", "command": node(dir), "args": []string{npmServer(dir, "server-everything"), "stdio"}},
			{"name": "memory", "command": node(dir), "args": []string{npmServer(dir, "server-memory")}, "env": map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "m.jsonl")}},
			{"name": "files", "command": node(dir), "args": []string{npmServer(dir, "server-filesystem"), files}},
			{"name": "thinking", "command": node(dir), "args": []string{npmServer(dir, "server-sequential-thinking")}},
		},
	}
	raw, _ := json.Marshal(cfg)
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "tools", "--config", path, "--json")
	if code != exitOK {
		t.Fatalf("tools: exit %d: %s", code, errOut)
	}
	var listing struct {
		Tools []struct {
			Name         string
			Upstream     string
			TokensBefore int `json:"tokens_before"`
			TokensAfter  int `json:"tokens_after"`
		}
		TokensBefore int `json:"tokens_before"`
		TokensAfter  int `json:"tokens_after"`
	}
	if err := json.Unmarshal([]byte(out), &listing); err != nil {
		t.Fatal(err)
	}
	upstreams := map[string]int{}
	before, after := 0, 0
	for _, tl := range listing.Tools {
		upstreams[tl.Upstream]++
		before += tl.TokensBefore
		after += tl.TokensAfter
		if tl.TokensBefore <= 0 || tl.TokensAfter <= 0 {
			t.Errorf("%s: tokens %d -> %d", tl.Name, tl.TokensBefore, tl.TokensAfter)
		}
		if tl.Name == "thinking__sequentialthinking" && tl.TokensAfter >= tl.TokensBefore/2 {
			t.Errorf("trimming to 200 characters left sequentialthinking at %d of %d tokens", tl.TokensAfter, tl.TokensBefore)
		}
	}
	if len(upstreams) != 4 {
		t.Errorf("tools from %v, want all four servers", upstreams)
	}
	if before != listing.TokensBefore || after != listing.TokensAfter || after >= before {
		t.Errorf("totals %d -> %d, rows sum %d -> %d", listing.TokensBefore, listing.TokensAfter, before, after)
	}
}
