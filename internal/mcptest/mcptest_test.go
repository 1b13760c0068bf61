package mcptest_test

import (
	"context"
	"os"
	"os/exec"
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
