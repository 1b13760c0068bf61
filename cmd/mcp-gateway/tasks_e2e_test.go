package main

import (
	"bufio"
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

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
)

// taskHost is a host that speaks tasks in raw JSON-RPC over the
// gateway's endpoint, in one era: the Go SDK client has no task API.
type taskHost struct {
	t       *testing.T
	url     string
	key     string // API key, "" without
	modern  bool
	session string // legacy
	caps    string
	mu      sync.Mutex
	id      int
}

// newTaskHost connects a host. A legacy host declares the tasks
// capability; a modern one the tasks extension, unless caps says
// otherwise.
func newTaskHost(ctx context.Context, t *testing.T, url, key string, modern bool, caps string) *taskHost {
	t.Helper()
	h := &taskHost{t: t, url: url, key: key, modern: modern, caps: caps}
	if modern {
		return h
	}
	status, header, m := postRaw(ctx, t, url, h.headers("", ""), `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"clientInfo":{"name":"task-host","version":"1"}}}`)
	if status != http.StatusOK || m.Error != nil {
		t.Fatalf("initialize: %d %v", status, m.Error)
	}
	h.session = header.Get("Mcp-Session-Id")
	return h
}

func (h *taskHost) headers(method, name string) map[string]string {
	hd := map[string]string{}
	if h.key != "" {
		hd["Authorization"] = "Bearer " + h.key
	}
	if h.modern {
		hd["MCP-Protocol-Version"] = "2026-07-28"
		hd["Mcp-Method"] = method
		if name != "" {
			hd["Mcp-Name"] = name
		}
	} else if h.session != "" {
		hd["Mcp-Session-Id"] = h.session
		hd["MCP-Protocol-Version"] = "2025-11-25"
	}
	return hd
}

// request sends method with params (a JSON object's members, without
// braces) and returns the answer; name goes to Mcp-Name.
func (h *taskHost) request(ctx context.Context, method, name, members string) *jsonrpc.Message {
	h.t.Helper()
	h.mu.Lock()
	h.id++
	id := h.id
	h.mu.Unlock()
	if h.modern {
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + h.caps + `}`
		if members == "" {
			members = meta
		} else {
			members += "," + meta
		}
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s}}`, id, method, members)
	_, _, m := postRaw(ctx, h.t, h.url, h.headers(method, name), body)
	return m
}

func (h *taskHost) callTool(ctx context.Context, name, args, extra string) *jsonrpc.Message {
	members := fmt.Sprintf(`"name":%q,"arguments":%s`, name, args)
	if extra != "" {
		members += "," + extra
	}
	return h.request(ctx, "tools/call", name, members)
}

func (h *taskHost) task(ctx context.Context, method, id string) *jsonrpc.Message {
	return h.request(ctx, method, id, fmt.Sprintf(`"taskId":%q`, id))
}

// awaitTask polls tasks/get until the task is in a terminal status, and
// returns the last answer.
func (h *taskHost) awaitTask(ctx context.Context, id string) json.RawMessage {
	h.t.Helper()
	for {
		m := h.task(ctx, "tasks/get", id)
		if m.Error != nil {
			h.t.Fatalf("tasks/get %s: %v", id, m.Error)
		}
		switch status, _ := jsonrpc.StringField(m.Result, "status"); status {
		case "completed", "failed", "cancelled":
			return m.Result
		case "working", "input_required":
		default:
			h.t.Fatalf("tasks/get %s: status %q in %s", id, status, m.Result)
		}
		select {
		case <-ctx.Done():
			h.t.Fatalf("task %s did not end: %v", id, ctx.Err())
		case <-time.After(100 * time.Millisecond): // the polling interval of a real host
		}
	}
}

// createdTask returns the gateway's task id of a tools/call answered with
// a task, in the host's era.
func createdTask(t *testing.T, m *jsonrpc.Message, modern bool) string {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("tools/call: %v", m.Error)
	}
	task := m.Result
	if modern {
		if rt, _ := jsonrpc.StringField(m.Result, "resultType"); rt != "task" {
			t.Fatalf("modern tools/call: resultType %q, want task, in %s", rt, m.Result)
		}
	} else {
		task, _ = jsonrpc.Field(m.Result, "task")
		if _, ok := jsonrpc.Field(m.Result, "resultType"); ok {
			t.Errorf("a legacy host got resultType: %s", m.Result)
		}
	}
	id, _ := jsonrpc.StringField(task, "taskId")
	if !strings.HasPrefix(id, "gw-task-") {
		t.Fatalf("task id %q is not the gateway's, in %s", id, m.Result)
	}
	return id
}

// unknownTask checks that a task request is answered as for a task that
// does not exist.
func unknownTask(t *testing.T, who string, m *jsonrpc.Message) {
	t.Helper()
	if m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(m.Error.Message, "Task not found") {
		t.Errorf("%s: %+v %s, want -32602 Task not found", who, m.Error, m.Result)
	}
}

const (
	taskKeyAlice = "alice-key-0123456789abcdef"
	taskKeyBob   = "bob-key-0123456789abcdef01"
)

// TestEverythingResearchTaskThroughTheGateway runs server-everything's
// simulate-research-query (execution.taskSupport "required", a task of
// about four seconds) through the gateway: a legacy host (raw, and the
// TypeScript SDK's task client) and a modern host with the tasks
// extension get the gateway's task ids, poll them to the report, and
// cancel one upstream; a modern host answers the research's clarifying
// elicitation through tasks/update; the Go SDK hosts of both eras, which
// have no task API, get the report as a plain call's answer; another
// identity neither sees nor reaches the tasks.
func TestEverythingResearchTaskThroughTheGateway(t *testing.T) {
	dir := interopDir(t)
	cfg := config.Default()
	asks := nodeUpstream("asks", dir, []string{npmServer(dir, "server-everything"), "stdio"}, nil)
	asks.Relay = []string{"elicitation"} // its research asks for clarification
	cfg.Upstreams = []config.Upstream{nodeUpstream("everything", dir, []string{npmServer(dir, "server-everything"), "stdio"}, nil), asks}
	cfg.Auth.Mode = config.AuthAPIKey
	cfg.Teams = []config.Team{{Name: "t", APIKeys: []string{taskKeyAlice, taskKeyBob}, Allow: []string{"*"}}}
	url, _ := startGateway(t, cfg)
	const tool = "everything__simulate-research-query"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	wg.Go(func() {
		alice := newTaskHost(ctx, t, url, taskKeyAlice, false, `{"tasks":{"list":{},"cancel":{}}}`)
		bob := newTaskHost(ctx, t, url, taskKeyBob, false, `{"tasks":{"list":{},"cancel":{}}}`)
		id := createdTask(t, alice.callTool(ctx, tool, `{"topic":"legacy gateways"}`, `"task":{"ttl":60000}`), false)
		unknownTask(t, "another identity's tasks/get", bob.task(ctx, "tasks/get", id))
		unknownTask(t, "another identity's tasks/result", bob.task(ctx, "tasks/result", id))
		unknownTask(t, "another identity's tasks/cancel", bob.task(ctx, "tasks/cancel", id))
		if m := bob.request(ctx, "tasks/list", "", ""); m.Error != nil || strings.Contains(string(m.Result), id) {
			t.Errorf("another identity's tasks/list: %v %s", m.Error, m.Result)
		}
		if m := alice.request(ctx, "tasks/list", "", ""); m.Error != nil || !strings.Contains(string(m.Result), id) {
			t.Errorf("tasks/list lacks the task: %v %s", m.Error, m.Result)
		}
		if final := alice.awaitTask(ctx, id); !strings.Contains(string(final), `"status":"completed"`) {
			t.Errorf("legacy task ended as %s", final)
		}
		res := alice.task(ctx, "tasks/result", id)
		if res.Error != nil || !strings.Contains(string(res.Result), "Research Report: legacy gateways") {
			t.Fatalf("tasks/result: %v %s", res.Error, res.Result)
		}
		meta, _ := jsonrpc.Field(res.Result, "_meta")
		related, _ := jsonrpc.Field(meta, "io.modelcontextprotocol/related-task")
		if got, _ := jsonrpc.StringField(related, "taskId"); got != id {
			t.Errorf("tasks/result related-task = %s, want the gateway's id %s", related, id)
		}

		// Cancelled upstream: the status comes from server-everything's
		// own answer to tasks/cancel.
		id2 := createdTask(t, alice.callTool(ctx, tool, `{"topic":"cancelled"}`, `"task":{}`), false)
		c := alice.task(ctx, "tasks/cancel", id2)
		if c.Error != nil || !strings.Contains(string(c.Result), `"status":"cancelled"`) || !strings.Contains(string(c.Result), id2) {
			t.Errorf("tasks/cancel: %v %s", c.Error, c.Result)
		}
		if again := alice.task(ctx, "tasks/cancel", id2); again.Error == nil || again.Error.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("cancelling a cancelled task: %+v, want -32602", again.Error)
		}
		if g := alice.task(ctx, "tasks/get", id2); g.Error != nil || !strings.Contains(string(g.Result), `"status":"cancelled"`) {
			t.Errorf("tasks/get after cancel: %v %s", g.Error, g.Result)
		}
	})
	wg.Go(func() {
		ext := `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
		alice := newTaskHost(ctx, t, url, taskKeyAlice, true, ext)
		bob := newTaskHost(ctx, t, url, taskKeyBob, true, ext)
		id := createdTask(t, alice.callTool(ctx, tool, `{"topic":"modern gateways"}`, ""), true)
		unknownTask(t, "another identity's modern tasks/get", bob.task(ctx, "tasks/get", id))
		final := alice.awaitTask(ctx, id)
		if rt, _ := jsonrpc.StringField(final, "resultType"); rt != "complete" || !strings.Contains(string(final), `"status":"completed"`) {
			t.Errorf("modern task ended as %s", final)
		}
		result, _ := jsonrpc.Field(final, "result")
		if !strings.Contains(string(result), "Research Report: modern gateways") {
			t.Errorf("modern task result = %s", result)
		}
		for _, member := range []string{`"ttl"`, `"pollInterval"`} {
			if strings.Contains(string(final), member+":") {
				t.Errorf("a modern host got the legacy %s: %s", member, final)
			}
		}
		if m := alice.task(ctx, "tasks/result", id); m.Error == nil || m.Error.Code != jsonrpc.CodeMethodNotFound {
			t.Errorf("modern tasks/result: %+v, want -32601", m.Error)
		}
		// A legacy upstream's task that needs input: its elicitation,
		// sent on the tasks/result the gateway opens, is the modern
		// host's inputRequests, answered with tasks/update.
		asker := newTaskHost(ctx, t, url, taskKeyAlice, true, `{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`)
		id = createdTask(t, asker.callTool(ctx, "asks__simulate-research-query", `{"topic":"python","ambiguous":true}`, ""), true)
		var key string
		for key == "" {
			m := asker.task(ctx, "tasks/get", id)
			if m.Error != nil {
				t.Fatalf("tasks/get: %v", m.Error)
			}
			status, _ := jsonrpc.StringField(m.Result, "status")
			if status == "completed" || status == "failed" {
				t.Fatalf("the ambiguous research ended without asking: %s", m.Result)
			}
			if requests, ok := jsonrpc.Field(m.Result, "inputRequests"); ok && status == "input_required" {
				var asked map[string]struct{ Method string }
				if err := json.Unmarshal(requests, &asked); err != nil || len(asked) != 1 {
					t.Fatalf("inputRequests = %s", requests)
				}
				for k, a := range asked {
					if a.Method != "elicitation/create" || strings.Contains(string(requests), `"taskId":"`) && !strings.Contains(string(requests), id) {
						t.Errorf("input request %s: %s", k, requests)
					}
					key = k
				}
				continue
			}
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
		if m := asker.request(ctx, "tasks/update", id, fmt.Sprintf(`"taskId":%q,"inputResponses":{%q:{"action":"accept","content":{"interpretation":"programming"}}}`, id, key)); m.Error != nil || string(m.Result) != `{"resultType":"complete"}` {
			t.Errorf("tasks/update: %v %s", m.Error, m.Result)
		}
		final = asker.awaitTask(ctx, id)
		if !strings.Contains(string(final), "Research Report: python (programming)") {
			t.Errorf("the clarified research ended as %s", final)
		}

		noExt := newTaskHost(ctx, t, url, taskKeyAlice, true, `{}`)
		if m := noExt.task(ctx, "tasks/get", id); m.Error == nil || m.Error.Code != jsonrpc.CodeMissingRequiredClientCapability {
			t.Errorf("tasks/get without the extension: %+v, want -32021", m.Error)
		}
	})
	wg.Go(func() {
		// The TypeScript SDK's own task client (callToolStream).
		ts := func(args ...string) (tsTaskSummary, error) {
			cmd := exec.CommandContext(ctx, node(dir), append([]string{filepath.Join(dir, "ts-client.mjs"), "--url", url}, args...)...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				err = fmt.Errorf("%w: %s", err, stderr.String())
			}
			var s tsTaskSummary
			if jerr := json.Unmarshal(out, &s); jerr != nil {
				return s, fmt.Errorf("ts-client output %q: %v (exit: %v)", out, jerr, err)
			}
			return s, err
		}
		alice, bob := "Authorization: Bearer "+taskKeyAlice, "Authorization: Bearer "+taskKeyBob
		s, err := ts("--header", alice, "--tool", tool, "--args", `{"topic":"typescript gateways"}`, "--task", "--list-tasks")
		if err != nil {
			t.Errorf("ts-client --task: %v %+v", err, s)
			return
		}
		id := s.Call.Task.TaskID
		if !strings.HasPrefix(id, "gw-task-") || len(s.Call.Task.Statuses) == 0 || s.Call.Task.Statuses[len(s.Call.Task.Statuses)-1] != "completed" ||
			len(s.Call.Result.Content) == 0 || !strings.Contains(s.Call.Result.Content[0].Text, "Research Report: typescript gateways") {
			t.Errorf("ts-client task: %+v", s.Call)
		}
		if !slices.ContainsFunc(s.Tasks, func(tk tsTask) bool { return tk.TaskID == id && tk.Status == "completed" }) {
			t.Errorf("ts-client tasks/list = %+v, want %s completed", s.Tasks, id)
		}
		if s, _ := ts("--header", bob, "--get-task", id); s.GetTask.Error == nil || s.GetTask.Error.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("another identity's ts-client tasks/get: %+v", s.GetTask)
		}
		s, err = ts("--header", alice, "--tool", tool, "--args", `{"topic":"to cancel"}`, "--task", "--cancel-after-created")
		if err != nil || s.Call.Task.Cancel.Result.Status != "cancelled" || s.Call.Task.Cancel.AfterGet.Status != "cancelled" {
			t.Errorf("ts-client --cancel-after-created: %v %+v", err, s.Call.Task.Cancel)
		}
	})
	for _, era := range eras {
		wg.Go(func() {
			// The Go SDK has no task API: the gateway waits for the
			// upstream's task and answers with its result.
			cs, err := connectAs(t, url, era, taskKeyAlice)
			if err != nil {
				t.Errorf("connect: %v", err)
				return
			}
			got, err := callText(ctx, cs, tool, map[string]any{"topic": "sdk gateways " + era})
			if err != nil || !strings.Contains(got, "Research Report: sdk gateways "+era) {
				t.Errorf("Go SDK host of %s: %q, %v", era, got, err)
			}
		})
	}
	wg.Wait()
}

// TestTasksAfter: with tasks.after 2s, a ten-second call of a server
// without task support completes as a task for a modern host with the
// tasks extension and for a legacy host that asked for one, and as a
// plain (long) call for a host that takes no tasks. A task the gateway
// runs is cancelled upstream by tasks/cancel.
func TestTasksAfter(t *testing.T) {
	web := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: mcptest.ServerOptions{Versions: mcptest.LegacyVersions()}})
	cfg := config.Default()
	cfg.Upstreams = []config.Upstream{httpUpstream("slow", web.URL)}
	cfg.Tasks.After = 2 * time.Second
	url, _ := startGateway(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const ten = `{"ms":10000}`

	var wg sync.WaitGroup
	wg.Go(func() {
		h := newTaskHost(ctx, t, url, "", true, `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`)
		start := time.Now()
		id := createdTask(t, h.callTool(ctx, "slow__sleep", ten, ""), true)
		if waited := time.Since(start); waited >= 10*time.Second {
			t.Errorf("the handle came after %s, when the call had ended", waited)
		}
		final := h.awaitTask(ctx, id)
		result, _ := jsonrpc.Field(final, "result")
		if !strings.Contains(string(final), `"status":"completed"`) || !strings.Contains(string(result), "slept 10000 ms") {
			t.Errorf("modern task ended as %s", final)
		}
	})
	wg.Go(func() {
		h := newTaskHost(ctx, t, url, "", false, `{"tasks":{"list":{},"cancel":{}}}`)
		tools := h.request(ctx, "tools/list", "", "")
		if !strings.Contains(string(tools.Result), `"taskSupport":"optional"`) {
			t.Errorf("a legacy host that takes tasks does not see taskSupport optional: %s", tools.Result)
		}
		id := createdTask(t, h.callTool(ctx, "slow__sleep", ten, `"task":{"ttl":120000}`), false)
		res := h.task(ctx, "tasks/result", id) // waits for the end
		if res.Error != nil || !strings.Contains(string(res.Result), "slept 10000 ms") {
			t.Errorf("legacy tasks/result: %v %s", res.Error, res.Result)
		}
		if final := h.task(ctx, "tasks/get", id); !strings.Contains(string(final.Result), `"status":"completed"`) {
			t.Errorf("legacy task ended as %s", final.Result)
		}

		// A task the gateway runs is cancelled upstream.
		id2 := createdTask(t, h.callTool(ctx, "slow__block", `{"key":"task"}`, `"task":{}`), false)
		plain := newTaskHost(ctx, t, url, "", false, `{}`)
		if m := plain.callTool(ctx, "slow__waiting", `{"key":"task","n":1}`, ""); m.Error != nil {
			t.Fatalf("waiting: %v", m.Error)
		}
		if c := h.task(ctx, "tasks/cancel", id2); c.Error != nil || !strings.Contains(string(c.Result), `"status":"cancelled"`) {
			t.Errorf("tasks/cancel: %v %s", c.Error, c.Result)
		}
		if m := plain.callTool(ctx, "slow__waiting", `{"key":"task","n":0}`, ""); m.Error != nil {
			t.Errorf("the cancelled task's call still runs upstream: %v", m.Error)
		}
		if m := plain.callTool(ctx, "slow__sleep", `{"ms":1}`, `"task":{}`); m.Error == nil {
			// A host that declared no tasks may still augment: the
			// gateway honours what it advertised to others.
			createdTask(t, m, false)
		}
	})
	wg.Go(func() {
		cs := connect(t, url, "2026-07-28")
		got, err := callText(ctx, cs, "slow__sleep", map[string]any{"ms": 10000})
		if err != nil || got != "slept 10000 ms" {
			t.Errorf("a host without tasks: %q, %v", got, err)
		}
	})
	wg.Wait()
}

// tsTaskSummary is what interop/ts-client.mjs prints of its task options.
type tsTaskSummary struct {
	Call struct {
		Task struct {
			TaskID   string
			Statuses []string
			Cancel   struct{ Result, AfterGet tsTask }
		}
		Result struct{ Content []struct{ Text string } }
	}
	Tasks   []tsTask
	GetTask struct {
		Result tsTask
		Error  *jsonrpc.Error
	}
}

type tsTask struct{ TaskID, Status string }

// TestTaskAsksAfterTheHandle: a call the gateway made a task asks its
// host for input after the host got its task (the upstream elicits once
// released). A modern host finds the request in tasks/get's
// inputRequests and answers with tasks/update; a legacy host is asked on
// its tasks/result, the request naming the gateway's task. Both calls
// then complete with the answer.
func TestTaskAsksAfterTheHandle(t *testing.T) {
	web := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: mcptest.ServerOptions{Versions: mcptest.LegacyVersions()}})
	cfg := config.Default()
	cfg.Upstreams = []config.Upstream{httpUpstream("up", web.URL)}
	cfg.Tasks.After = 300 * time.Millisecond
	url, _ := startGateway(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	plain := newTaskHost(ctx, t, url, "", false, `{}`)
	release := func(key string) {
		if m := plain.callTool(ctx, "up__waiting", fmt.Sprintf(`{"key":%q,"n":1}`, key), ""); m.Error != nil {
			t.Fatalf("waiting: %v", m.Error)
		}
		if m := plain.callTool(ctx, "up__release", fmt.Sprintf(`{"key":%q}`, key), ""); m.Error != nil || !strings.Contains(string(m.Result), `"1"`) {
			t.Fatalf("release: %v %s", m.Error, m.Result)
		}
	}

	t.Run("modern", func(t *testing.T) {
		h := newTaskHost(ctx, t, url, "", true, `{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`)
		id := createdTask(t, h.callTool(ctx, "up__elicit", `{"message":"who?","after_key":"modern"}`, ""), true)
		release("modern")
		var key string
		for key == "" {
			m := h.task(ctx, "tasks/get", id)
			if status, _ := jsonrpc.StringField(m.Result, "status"); status == "input_required" {
				requests, _ := jsonrpc.Field(m.Result, "inputRequests")
				var asked map[string]struct{ Method string }
				if err := json.Unmarshal(requests, &asked); err != nil || len(asked) != 1 {
					t.Fatalf("inputRequests = %s", m.Result)
				}
				for k := range asked {
					key = k
				}
				continue
			} else if status != "working" {
				t.Fatalf("tasks/get: %v %s", m.Error, m.Result)
			}
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(50 * time.Millisecond): // a host's polling interval
			}
		}
		if m := h.request(ctx, "tasks/update", id, fmt.Sprintf(`"taskId":%q,"inputResponses":{%q:{"action":"accept","content":{"name":"Ada"}}}`, id, key)); m.Error != nil {
			t.Fatalf("tasks/update: %v", m.Error)
		}
		final := h.awaitTask(ctx, id)
		if !strings.Contains(string(final), `accept {\"name\":\"Ada\"}`) {
			t.Errorf("modern task ended as %s", final)
		}
	})
	t.Run("legacy", func(t *testing.T) {
		h := newTaskHost(ctx, t, url, "", false, `{"elicitation":{},"tasks":{"list":{},"cancel":{}}}`)
		id := createdTask(t, h.callTool(ctx, "up__elicit", `{"message":"who?","after_key":"legacy"}`, `"task":{}`), false)
		release("legacy")
		// tasks/result: the elicitation comes on its stream, and the
		// answer goes back as a POST of its own.
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":99,"method":"tasks/result","params":{"taskId":%q}}`, id)
		resp := postResponse(ctx, t, url, h.headers("", ""), body)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		var result *jsonrpc.Message
		for result == nil && sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			m, err := jsonrpc.Decode([]byte(data))
			if err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			switch {
			case m.Method == "elicitation/create":
				meta, _ := jsonrpc.Field(m.Params, "_meta")
				related, _ := jsonrpc.Field(meta, "io.modelcontextprotocol/related-task")
				if got, _ := jsonrpc.StringField(related, "taskId"); got != id {
					t.Errorf("the elicitation names task %s, want the gateway's %s", related, id)
				}
				answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"name":"Grace"}}}`, m.ID)
				ack := postResponse(ctx, t, url, h.headers("", ""), answer)
				ack.Body.Close()
				if ack.StatusCode != http.StatusAccepted {
					t.Fatalf("answering the elicitation: %d", ack.StatusCode)
				}
			case m.Method == "":
				result = m
			}
		}
		if result == nil || result.Error != nil || !strings.Contains(string(result.Result), `accept {\"name\":\"Grace\"}`) {
			t.Fatalf("tasks/result = %+v (scan: %v)", result, sc.Err())
		}
	})
}
