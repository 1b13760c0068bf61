package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// awaitAsk polls a modern host's tasks/get until the task waits for input
// with one input request, and returns that request's key.
func (h *taskHost) awaitAsk(ctx context.Context, id string) string {
	h.t.Helper()
	for {
		m := h.task(ctx, "tasks/get", id)
		if m.Error != nil {
			h.t.Fatalf("tasks/get %s: %v", id, m.Error)
		}
		status, _ := jsonrpc.StringField(m.Result, "status")
		if status != "working" && status != "input_required" {
			h.t.Fatalf("task %s ended without asking: %s", id, m.Result)
		}
		if requests, ok := jsonrpc.Field(m.Result, "inputRequests"); ok && status == "input_required" {
			var asked map[string]json.RawMessage
			if err := json.Unmarshal(requests, &asked); err != nil || len(asked) != 1 {
				h.t.Fatalf("task %s: inputRequests = %s", id, requests)
			}
			for k := range asked {
				return k
			}
		}
		select {
		case <-ctx.Done():
			h.t.Fatalf("task %s did not ask: %v", id, ctx.Err())
		case <-time.After(100 * time.Millisecond): // a real host's polling interval
		}
	}
}

// TestLegacyTasksAskAtOnce: two tasks of one legacy stdio upstream
// (interop/task-fixtures.mjs's confirm_delete) wait for a modern host's
// input at the same time. The gateway then has a tasks/result open
// upstream for each, and the upstream's elicitations arrive on its one
// stdio stream; each names its task (related-task), and must reach that
// task's inputRequests rather than be refused as having no single host.
func TestLegacyTasksAskAtOnce(t *testing.T) {
	dir := interopDir(t)
	cfg := config.Default()
	fx := nodeUpstream("fx", dir, []string{filepath.Join(dir, "task-fixtures.mjs")}, nil)
	fx.Relay = []string{"elicitation"}
	cfg.Upstreams = []config.Upstream{fx}
	url, _ := startGateway(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	host := newTaskHost(ctx, t, url, "", true, `{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`)
	ids := map[string]string{}
	keys := map[string]string{}
	// One after the other: the first task's tasks/result is open upstream
	// when the second one asks.
	for _, file := range []string{"a.txt", "b.txt"} {
		ids[file] = createdTask(t, host.callTool(ctx, "fx__confirm_delete", fmt.Sprintf(`{"filename":%q}`, file), ""), true)
		keys[file] = host.awaitAsk(ctx, ids[file])
	}
	for _, file := range []string{"b.txt", "a.txt"} {
		id := ids[file]
		m := host.request(ctx, "tasks/update", id, fmt.Sprintf(`"taskId":%q,"inputResponses":{%q:{"action":"accept","content":{"confirm":true}}}`, id, keys[file]))
		if m.Error != nil || string(m.Result) != `{"resultType":"complete"}` {
			t.Errorf("tasks/update %s: %v %s", file, m.Error, m.Result)
		}
	}
	for _, file := range []string{"a.txt", "b.txt"} {
		final := host.awaitTask(ctx, ids[file])
		if !strings.Contains(string(final), `"status":"completed"`) || !strings.Contains(string(final), "Deleted "+file) {
			t.Errorf("task of %s ended as %s", file, final)
		}
	}
}
