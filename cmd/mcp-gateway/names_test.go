package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
)

// TestClaudeDesktopKeysAsWritten: a claude_desktop_config.json whose
// mcpServers keys hold spaces and dots works as it is: each server's
// tools are exposed under a prefix derived from its key, they answer, and
// /readyz names the key.
func TestClaudeDesktopKeysAsWritten(t *testing.T) {
	command, args, env := mcptest.StdioCommand("echo")
	servers := map[string]any{}
	for _, key := range []string{"my.server with spaces", "files (local)"} {
		servers[key] = map[string]any{"command": command, "args": args, "env": env}
	}
	raw, _ := json.Marshal(map[string]any{"mcpServers": servers})
	path := filepath.Join(t.TempDir(), "claude_desktop_config.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(path, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	url, g := startGateway(t, cfg)
	cs := connect(t, url, eras[0])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := toolNames(ctx, t, cs, "the servers' tools")
	for _, tool := range []string{"my_server_with_spaces__echo", "files_local__echo"} {
		if !slices.Contains(names, tool) {
			t.Errorf("%s not listed: %v", tool, names)
			continue
		}
		if got, err := callText(ctx, cs, tool, map[string]any{"text": "hi"}); err != nil || got != "hi" {
			t.Errorf("%s: %q, %v", tool, got, err)
		}
	}
	if s := statusOf(g, "my_server_with_spaces"); s.Key != "my.server with spaces" {
		t.Errorf("status %+v, want the key as written", s)
	}
}
