package mcptest_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
)

func TestMain(m *testing.M) {
	mcptest.MaybeServeStdio()
	os.Exit(m.Run())
}

// The fakes must be faithful: the official SDK client talks to them.

func checkEcho(t *testing.T, ctx context.Context, transport mcp.Transport) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "sdk-client", Version: "1"}, nil)
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "hi" {
		t.Errorf("echo = %q", got)
	}
	n := 0
	for _, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("listing tools: %v", err)
		}
		n++
	}
	if n < 12 {
		t.Errorf("%d tools listed, want at least 12", n)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestStdioFakes(t *testing.T) {
	for _, name := range []string{"echo", "echo-legacy", "echo-paged"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			command, args, env := mcptest.StdioCommand(name)
			cmd := exec.Command(command, args...)
			cmd.Env = os.Environ()
			for k, v := range env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			checkEcho(t, testCtx(t), &mcp.CommandTransport{Command: cmd})
		})
	}
}

func TestHTTPFakes(t *testing.T) {
	t.Run("streamable", func(t *testing.T) {
		srv := mcptest.NewStreamableServer(t, nil)
		checkEcho(t, testCtx(t), &mcp.StreamableClientTransport{Endpoint: srv.URL})
	})
	t.Run("streamable stateless json", func(t *testing.T) {
		srv := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Stateless: true, JSONResponse: true})
		checkEcho(t, testCtx(t), &mcp.StreamableClientTransport{Endpoint: srv.URL})
	})
	t.Run("sse", func(t *testing.T) {
		srv := mcptest.NewSSEServer(t, nil)
		checkEcho(t, testCtx(t), &mcp.SSEClientTransport{Endpoint: srv.URL})
	})
}

// TestLiveTools drives the tools that exercise live traffic with the SDK
// client, over a legacy session (the only era where servers send requests).
func TestLiveTools(t *testing.T) {
	ctx := testCtx(t)
	srv := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{
		Server: mcptest.ServerOptions{Versions: mcptest.LegacyVersions()},
	})
	listChanged := make(chan struct{}, 10)
	updated := make(chan string, 10)
	client := mcp.NewClient(&mcp.Implementation{Name: "sdk-client", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			text := req.Params.Messages[0].Content.(*mcp.TextContent).Text
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "re: " + text}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { listChanged <- struct{}{} },
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			updated <- req.Params.URI
		},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	wait := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("no %s", what)
		}
	}
	call := func(name string, args map[string]any) string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	if got := call("sample", map[string]any{"text": "hi"}); got != "re: hi" {
		t.Errorf("sample = %q", got)
	}
	if got := call("elicit", map[string]any{"message": "name?"}); got != `accept {"name":"Ada"}` {
		t.Errorf("elicit = %q", got)
	}
	if got := call("capabilities", nil); !strings.Contains(got, `"elicitation"`) || !strings.Contains(got, `"sampling"`) {
		t.Errorf("capabilities = %q", got)
	}
	call("addtool", map[string]any{"name": "late"})
	wait("tools/list_changed after addtool", listChanged)
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://static/hello"}); err != nil {
		t.Fatal(err)
	}
	call("touch", map[string]any{"uri": "test://static/hello"})
	select {
	case uri := <-updated:
		if uri != "test://static/hello" {
			t.Errorf("updated %q", uri)
		}
	case <-ctx.Done():
		t.Fatal("no resources/updated")
	}

	// A cancelled block call: the SDK client sends notifications/cancelled.
	bctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(bctx, &mcp.CallToolParams{Name: "block", Arguments: map[string]any{"key": "k"}})
		errc <- err
	}()
	call("waiting", map[string]any{"key": "k", "n": 1})
	cancel()
	<-errc
	call("aborted", map[string]any{"key": "k", "n": 1})
	var got struct{ Block, Cancelled []json.RawMessage }
	if err := json.Unmarshal([]byte(call("cancellations", map[string]any{"key": "k"})), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Block) != 1 || len(got.Cancelled) != 1 || string(got.Block[0]) != string(got.Cancelled[0]) {
		t.Errorf("cancellations: block %s, cancelled %s", got.Block, got.Cancelled)
	}
}
