package router

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// legacyTaskUpstream is a 2025-11-25 upstream whose tools "job" and
// "must" run as a task (taskSupport optional and required) with the
// upstream's id "up-task-7", which is done once polled, and whose tool
// "plain" does not.
func legacyTaskUpstream() *fakeUpstream {
	f := &fakeUpstream{
		capabilities: `{"tools":{},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}}`,
		lists: map[string][]string{"tools/list": {
			`{"name":"job","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}}`,
			`{"name":"must","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}}`,
			`{"name":"plain","inputSchema":{"type":"object"}}`,
		}},
	}
	var mu sync.Mutex
	status := "working"
	f.answer = func(method string, params json.RawMessage) (*jsonrpc.Message, error) {
		task := func(s string) string {
			return `{"taskId":"up-task-7","status":"` + s + `","createdAt":"2025-11-25T10:00:00Z","lastUpdatedAt":"2025-11-25T10:00:00Z","ttl":60000,"pollInterval":250}`
		}
		mu.Lock()
		defer mu.Unlock()
		switch method {
		case "tools/call":
			if _, ok := jsonrpc.Field(params, "task"); ok {
				status = "working"
				return &jsonrpc.Message{Result: json.RawMessage(`{"task":` + task("working") + `,"_meta":{"io.modelcontextprotocol/model-immediate-response":"started","io.modelcontextprotocol/related-task":{"taskId":"up-task-7"}}}`)}, nil
			}
			return &jsonrpc.Message{Result: json.RawMessage(`{"content":[{"type":"text","text":"plain"}]}`)}, nil
		case "tasks/get":
			// The job ends after one poll.
			got := task(status)
			if status == "working" {
				status = "completed"
			}
			return &jsonrpc.Message{Result: json.RawMessage(got)}, nil
		case "tasks/result":
			status = "completed"
			return &jsonrpc.Message{Result: json.RawMessage(`{"content":[{"type":"text","text":"done"}],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"up-task-7"}}}`)}, nil
		case "tasks/cancel":
			status = "cancelled"
			return &jsonrpc.Message{Result: json.RawMessage(task(status))}, nil
		}
		return &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "no %s", method)}, nil
	}
	return f
}

// taskOf reads the gateway's task id of an answer that created one.
func taskOf(t *testing.T, reply *Reply, modern bool) string {
	t.Helper()
	if reply.Error != nil {
		t.Fatalf("reply error: %v", reply.Error)
	}
	task := reply.Result
	if !modern {
		task, _ = jsonrpc.Field(reply.Result, "task")
	}
	id, _ := jsonrpc.StringField(task, "taskId")
	if !strings.HasPrefix(id, "gw-task-") || len(id) < len("gw-task-")+22 {
		t.Fatalf("task id %q is not the gateway's, in %s", id, reply.Result)
	}
	return id
}

func taskReq(method, id string) *jsonrpc.Request {
	return request(method, `{"taskId":"`+id+`"}`)
}

var (
	aliceLegacy = &Caller{ProtocolVersion: "2025-11-25", Session: "s-alice", Principal: "alice", Capabilities: json.RawMessage(`{"tasks":{}}`)}
	bobLegacy   = &Caller{ProtocolVersion: "2025-11-25", Session: "s-bob", Principal: "bob", Capabilities: json.RawMessage(`{"tasks":{}}`)}
	aliceModern = &Caller{ProtocolVersion: ModernVersion, Principal: "alice", Capabilities: json.RawMessage(`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`)}
)

// TestUpstreamTaskIsTheCallersAlone: a legacy upstream's task reaches the
// host under an unguessable gateway id; the upstream's id never does, in
// the created task, tasks/get, tasks/list or tasks/result's related-task;
// another identity, or the same identity in another view, finds no such
// task whatever it asks.
func TestUpstreamTaskIsTheCallersAlone(t *testing.T) {
	up := legacyTaskUpstream()
	r := startRouter(t, Options{}, map[string]*fakeUpstream{"up": up}, "up")
	ctx := context.Background()

	created := r.Dispatch(ctx, aliceLegacy, request("tools/call", `{"name":"up__job","arguments":{},"task":{"ttl":999999999}}`))
	id := taskOf(t, created, false)
	if !strings.Contains(string(created.Result), `/model-immediate-response":"started"`) {
		t.Errorf("the upstream's _meta did not pass: %s", created.Result)
	}
	sent := up.recorded()[0].Params
	if !strings.Contains(sent, `"task":{"ttl":3600000}`) {
		t.Errorf("the upstream was asked for %s, want the ttl capped at the gateway's hour", sent)
	}

	for _, c := range []*Caller{bobLegacy, {ProtocolVersion: "2025-11-25", Session: "s-anon", Capabilities: json.RawMessage(`{"tasks":{}}`)}} {
		for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
			if reply := r.Dispatch(ctx, c, taskReq(method, id)); reply.Error == nil || reply.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(reply.Error.Message, "Task not found") {
				t.Errorf("%s by %q/%q: %+v %s", method, c.Principal, c.View, reply.Error, reply.Result)
			}
		}
		if reply := r.Dispatch(ctx, c, request("tasks/list", `{}`)); string(reply.Result) != `{"tasks":[]}` {
			t.Errorf("tasks/list by %q/%q = %s", c.Principal, c.View, reply.Result)
		}
	}
	before := len(up.recorded())

	got := r.Dispatch(ctx, aliceLegacy, taskReq("tasks/get", id))
	if got.Error != nil || !strings.Contains(string(got.Result), `"taskId":"`+id+`"`) || !strings.Contains(string(got.Result), `"pollInterval":250`) {
		t.Errorf("tasks/get = %v %s", got.Error, got.Result)
	}
	if calls := up.recorded(); len(calls) != before+1 || calls[before].Method != "tasks/get" || calls[before].Params != `{"taskId":"up-task-7"}` {
		t.Errorf("the upstream was asked %+v, want tasks/get of its own id", calls[before:])
	}
	list := r.Dispatch(ctx, aliceLegacy, request("tasks/list", `{}`))
	if !strings.Contains(string(list.Result), id) {
		t.Errorf("tasks/list = %s, want %s", list.Result, id)
	}
	res := r.Dispatch(ctx, aliceLegacy, taskReq("tasks/result", id))
	if res.Error != nil || !strings.Contains(string(res.Result), `/related-task":{"taskId":"`+id+`"}`) {
		t.Errorf("tasks/result = %v %s", res.Error, res.Result)
	}
	for _, reply := range []*Reply{created, got, list, res} {
		if strings.Contains(string(reply.Result), "up-task-7") {
			t.Errorf("the upstream's task id reached the host: %s", reply.Result)
		}
	}
	if reply := r.Dispatch(ctx, aliceLegacy, taskReq("tasks/get", "gw-task-guessed")); reply.Error == nil || reply.Error.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("a guessed id: %+v", reply.Error)
	}
	if reply := r.Dispatch(ctx, aliceLegacy, request("tasks/get", `{}`)); reply.Error == nil || !strings.Contains(reply.Error.Message, "needs params.taskId") {
		t.Errorf("tasks/get without an id: %+v", reply.Error)
	}
}

// TestModernHostPollsALegacyTask: a modern host with the extension gets a
// legacy upstream's task as a 2026-07-28 handle and, once it is done,
// the result inline; tasks/cancel is acknowledged with an empty result;
// the 2025-11-25 members never reach it.
func TestModernHostPollsALegacyTask(t *testing.T) {
	up := legacyTaskUpstream()
	r := startRouter(t, Options{}, map[string]*fakeUpstream{"up": up}, "up")
	ctx := context.Background()

	created := r.Dispatch(ctx, aliceModern, request("tools/call", `{"name":"up__must","arguments":{}}`))
	id := taskOf(t, created, true)
	if rt, _ := jsonrpc.StringField(created.Result, "resultType"); rt != "task" {
		t.Errorf("created = %s, want resultType task", created.Result)
	}
	if sent := up.recorded()[0].Params; !strings.Contains(sent, `"task":{}`) {
		t.Errorf("a required task tool was called as %s, without a task", sent)
	}
	got := r.Dispatch(ctx, aliceModern, taskReq("tasks/get", id))
	if got.Error != nil || !strings.Contains(string(got.Result), `"status":"working"`) || strings.Contains(string(got.Result), `"result"`) {
		t.Errorf("tasks/get while working = %v %s", got.Error, got.Result)
	}
	// The upstream finishes (its tasks/result makes the fake completed).
	up.answer("tasks/result", nil)
	done := r.Dispatch(ctx, aliceModern, taskReq("tasks/get", id))
	for _, want := range []string{`"resultType":"complete"`, `"status":"completed"`, `"result":{"resultType":"complete","content":[{"type":"text","text":"done"}]}`, `"ttlMs":`, `"pollIntervalMs":250`} {
		if !strings.Contains(string(done.Result), want) {
			t.Errorf("tasks/get when done = %s, want %s", done.Result, want)
		}
	}
	for _, legacy := range []string{`"ttl":`, `"pollInterval":`, "related-task", "up-task-7"} {
		if strings.Contains(string(done.Result), legacy) {
			t.Errorf("tasks/get when done = %s, has %s", done.Result, legacy)
		}
	}
	if reply := r.Dispatch(ctx, aliceModern, taskReq("tasks/cancel", id)); string(reply.Result) != `{"resultType":"complete"}` {
		t.Errorf("modern tasks/cancel of a finished task = %v %s, want the empty acknowledgement", reply.Error, reply.Result)
	}
	for _, method := range []string{"tasks/result", "tasks/list"} {
		if reply := r.Dispatch(ctx, aliceModern, taskReq(method, id)); reply.Error == nil || reply.Error.Code != jsonrpc.CodeMethodNotFound {
			t.Errorf("modern %s: %+v, want -32601", method, reply.Error)
		}
	}
	noExt := &Caller{ProtocolVersion: ModernVersion, Principal: "alice", Capabilities: json.RawMessage(`{}`)}
	if reply := r.Dispatch(ctx, noExt, taskReq("tasks/get", id)); reply.Error == nil || reply.Error.Code != jsonrpc.CodeMissingRequiredClientCapability {
		t.Errorf("tasks/get without the extension: %+v, want -32021", reply.Error)
	}
	// Without the extension, a required task tool is still callable: the
	// gateway waits for the task's result.
	plainly := r.Dispatch(ctx, noExt, request("tools/call", `{"name":"up__must","arguments":{}}`))
	if plainly.Error != nil || !strings.Contains(string(plainly.Result), `"text":"done"`) || strings.Contains(string(plainly.Result), "related-task") {
		t.Errorf("a host without tasks calling a required task tool = %v %s", plainly.Error, plainly.Result)
	}
}

// TestTaskParamIsHeardOnlyWhereItIsDefined: params.task reaches an
// upstream only as the gateway's own augmentation of a legacy host's
// tools/call; a tool that does not run as a task refuses it (-32601); a
// modern host's, or one on another method, is ignored and removed; a
// host before 2025-11-25 has no tasks at all.
func TestTaskParamIsHeardOnlyWhereItIsDefined(t *testing.T) {
	up := legacyTaskUpstream()
	up.lists["prompts/list"] = []string{`{"name":"p"}`}
	r := startRouter(t, Options{}, map[string]*fakeUpstream{"up": up}, "up")
	ctx := context.Background()

	if reply := r.Dispatch(ctx, aliceLegacy, request("tools/call", `{"name":"up__plain","arguments":{},"task":{}}`)); reply.Error == nil || reply.Error.Code != jsonrpc.CodeMethodNotFound || !strings.Contains(reply.Error.Message, "does not run as a task") {
		t.Errorf("task on a tool without task support: %+v %s", reply.Error, reply.Result)
	}
	if reply := r.Dispatch(ctx, aliceLegacy, request("tools/call", `{"name":"up__job","arguments":{},"task":7}`)); reply.Error == nil || reply.Error.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("task that is not an object: %+v", reply.Error)
	}
	r.Dispatch(ctx, aliceModern, request("tools/call", `{"name":"up__plain","arguments":{},"task":{"ttl":1}}`))
	r.Dispatch(ctx, aliceLegacy, request("prompts/get", `{"name":"up__p","task":{}}`))
	old := &Caller{ProtocolVersion: "2025-06-18", Session: "s-old", Capabilities: json.RawMessage(`{"tasks":{}}`)}
	r.Dispatch(ctx, old, request("tools/call", `{"name":"up__job","arguments":{},"task":{}}`))
	for _, c := range up.recorded() {
		if strings.Contains(c.Params, `"task"`) {
			t.Errorf("the upstream got %s %s", c.Method, c.Params)
		}
	}
	if reply := r.Dispatch(ctx, old, taskReq("tasks/get", "gw-task-x")); reply.Error == nil || reply.Error.Code != jsonrpc.CodeMethodNotFound {
		t.Errorf("tasks/get from a 2025-06-18 host: %+v, want -32601", reply.Error)
	}
	for version, want := range map[string]bool{"2025-06-18": false, "2025-11-25": true} {
		if got := strings.Contains(string(r.InitializeResult(version)), `"tasks":`); got != want {
			t.Errorf("initialize %s offers tasks: %v, want %v", version, got, want)
		}
	}
	if !strings.Contains(string(r.DiscoverResult()), `"extensions":{"io.modelcontextprotocol/tasks":{}}`) {
		t.Errorf("server/discover does not offer the tasks extension: %s", r.DiscoverResult())
	}
}

// TestModernUpstreamTaskHandle: a modern upstream's own task handle
// reaches a modern host under a gateway id; tasks/get, tasks/update and
// tasks/cancel reach the upstream with its id, their answers the host
// with the gateway's. A handle given to a host that did not declare the
// extension is refused.
func TestModernUpstreamTaskHandle(t *testing.T) {
	up := &fakeUpstream{
		version:      ModernVersion,
		capabilities: `{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`,
		lists:        map[string][]string{"tools/list": tools("build")},
	}
	up.answer = func(method string, params json.RawMessage) (*jsonrpc.Message, error) {
		switch method {
		case "tools/call":
			return &jsonrpc.Message{Result: json.RawMessage(`{"resultType":"task","taskId":"up-9","status":"working","createdAt":"2026-07-28T00:00:00Z","lastUpdatedAt":"2026-07-28T00:00:00Z","ttlMs":60000,"pollIntervalMs":100}`)}, nil
		case "tasks/get":
			return &jsonrpc.Message{Result: json.RawMessage(`{"resultType":"complete","taskId":"up-9","status":"input_required","createdAt":"2026-07-28T00:00:00Z","lastUpdatedAt":"2026-07-28T00:00:00Z","ttlMs":60000,"inputRequests":{"k":{"method":"elicitation/create","params":{"message":"ok?"}}},"x-vendor":1}`)}, nil
		case "tasks/update", "tasks/cancel":
			return &jsonrpc.Message{Result: json.RawMessage(`{"resultType":"complete"}`)}, nil
		}
		return &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "no %s", method)}, nil
	}
	r := startRouter(t, Options{}, map[string]*fakeUpstream{"up": up}, "up")
	ctx := context.Background()

	created := r.Dispatch(ctx, aliceModern, request("tools/call", `{"name":"up__build","arguments":{}}`))
	id := taskOf(t, created, true)
	got := r.Dispatch(ctx, aliceModern, taskReq("tasks/get", id))
	if got.Error != nil || !strings.Contains(string(got.Result), `"taskId":"`+id+`"`) || !strings.Contains(string(got.Result), `"x-vendor":1`) || strings.Contains(string(got.Result), "up-9") {
		t.Errorf("tasks/get = %v %s", got.Error, got.Result)
	}
	r.Dispatch(ctx, aliceModern, request("tasks/update", `{"taskId":"`+id+`","inputResponses":{"k":{"action":"accept"}}}`))
	r.Dispatch(ctx, aliceModern, taskReq("tasks/cancel", id))
	calls := up.recorded()
	var seen []string
	for _, c := range calls[1:] {
		seen = append(seen, c.Method+" "+c.Params)
	}
	want := []string{
		`tasks/get {"taskId":"up-9","_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}`,
		`tasks/update {"taskId":"up-9","inputResponses":{"k":{"action":"accept"}},"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}`,
		`tasks/cancel {"taskId":"up-9","_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}`,
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Errorf("the upstream was sent\n%s\nwant\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
	bob := &Caller{ProtocolVersion: ModernVersion, Principal: "bob", Capabilities: aliceModern.Capabilities}
	if reply := r.Dispatch(ctx, bob, taskReq("tasks/get", id)); reply.Error == nil || reply.Error.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("another identity's tasks/get: %+v", reply.Error)
	}
	noExt := &Caller{ProtocolVersion: ModernVersion, Capabilities: json.RawMessage(`{}`)}
	if reply := r.Dispatch(ctx, noExt, request("tools/call", `{"name":"up__build","arguments":{}}`)); reply.Error == nil || !strings.Contains(reply.Error.Message, "did not declare") {
		t.Errorf("a task handle for a host without the extension: %+v %s", reply.Error, reply.Result)
	}
}

// TestTaskStoreBoundsAndExpiry: a caller holds at most MaxTasks live
// tasks (others are not affected); an expired task is found by nobody,
// and a call the gateway still runs for it is stopped.
func TestTaskStoreBoundsAndExpiry(t *testing.T) {
	var s taskStore
	mk := func(owner string, expires time.Time) *task {
		return &task{id: "gw-task-" + randomTag(), owner: owner, quota: owner, expires: expires, done: make(chan struct{})}
	}
	later := time.Now().Add(time.Hour)
	a1, a2 := mk("alice", later), mk("alice", later)
	if !s.add(a1, 2) || !s.add(a2, 2) {
		t.Fatal("two tasks did not fit a bound of two")
	}
	if s.add(mk("alice", later), 2) {
		t.Error("a third task of one caller fit a bound of two")
	}
	if !s.add(mk("bob", later), 2) {
		t.Error("another caller's task did not fit: one caller's tasks bound everyone's")
	}
	stopped := false
	a1.expires = time.Now().Add(-time.Second)
	a1.stop = func() { stopped = true }
	if s.get(a1.id, "alice") != nil {
		t.Error("an expired task was found")
	}
	if !stopped {
		t.Error("the call of an expired task was not stopped")
	}
	if got := s.list("alice"); len(got) != 1 || got[0] != a2 {
		t.Errorf("alice's tasks = %v, want the live one", got)
	}
	if !s.add(mk("alice", later), 2) {
		t.Error("an expired task still counted against the bound")
	}
	if s.get(a2.id, "bob") != nil {
		t.Error("bob found alice's task")
	}
}

// TestTaskStatusRendering: a tool result with isError is "failed" to a
// legacy host and "completed" with its result to a modern one; a JSON-RPC
// error is "failed" with the error for a modern host; a cancelled task
// stays cancelled whatever its call then returns.
func TestTaskStatusRendering(t *testing.T) {
	now := time.Now()
	mk := func() *task {
		return &task{id: "gw-task-x", created: now, expires: now.Add(time.Minute), status: taskWorking, updated: now, pollMs: 1000, done: make(chan struct{})}
	}
	tk := mk()
	tk.finish(json.RawMessage(`{"content":[],"isError":true}`), nil, true)
	if got := string(tk.render(aliceLegacy, false)); !strings.Contains(got, `"status":"failed"`) || !strings.Contains(got, `"ttl":60000`) {
		t.Errorf("legacy view of an isError result: %s", got)
	}
	if got := string(tk.render(aliceModern, true)); !strings.Contains(got, `"status":"completed"`) || !strings.Contains(got, `"result":{"resultType":"complete","content":[],"isError":true}`) || !strings.Contains(got, `"ttlMs":60000`) {
		t.Errorf("modern view of an isError result: %s", got)
	}
	tk = mk()
	tk.finish(nil, jsonrpc.NewError(-32603, "boom"), false)
	if got := string(tk.render(aliceModern, true)); !strings.Contains(got, `"status":"failed"`) || !strings.Contains(got, `"error":{"code":-32603,"message":"boom"}`) {
		t.Errorf("modern view of a failed call: %s", got)
	}
	tk = mk()
	tk.set(taskCancelled, "")
	tk.finish(json.RawMessage(`{"content":[]}`), nil, false)
	if st := tk.snapshot(); st.status != taskCancelled {
		t.Errorf("a cancelled task became %s", st.status)
	}
}

// TestTaskResultsAreFaithfulToTheHostsEra walks the task methods from a
// host of each revision whose schema is in the spec folder, with a
// legacy task upstream behind: a 2025-11-25 host gets the 2025-11-25
// Task (ttl, pollInterval) and no member only 2026-07-28 defines; a
// modern host gets resultType on every result and the 2026-07-28 Task
// (ttlMs, pollIntervalMs), never the legacy names; a 2025-06-18 host has
// no tasks.
func TestTaskResultsAreFaithfulToTheHostsEra(t *testing.T) {
	up := legacyTaskUpstream()
	r := startRouter(t, Options{}, map[string]*fakeUpstream{"up": up}, "up")
	ctx := context.Background()
	members := func(t *testing.T, raw json.RawMessage) map[string]json.RawMessage {
		t.Helper()
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("result %s: %v", raw, err)
		}
		return m
	}
	taskMembers := []string{"taskId", "status", "createdAt", "lastUpdatedAt"}

	t.Run("2025-11-25", func(t *testing.T) {
		created := r.Dispatch(ctx, aliceLegacy, request("tools/call", `{"name":"up__job","arguments":{},"task":{}}`))
		id := taskOf(t, created, false)
		replies := map[string]*Reply{
			"tools/call":   created,
			"tasks/get":    r.Dispatch(ctx, aliceLegacy, taskReq("tasks/get", id)),
			"tasks/list":   r.Dispatch(ctx, aliceLegacy, request("tasks/list", `{}`)),
			"tasks/result": r.Dispatch(ctx, aliceLegacy, taskReq("tasks/result", id)),
		}
		for method, reply := range replies {
			if reply.Error != nil {
				t.Fatalf("%s: %v", method, reply.Error)
			}
			top := members(t, reply.Result)
			for _, k := range modernOnly {
				if _, ok := top[k]; ok {
					t.Errorf("%s: a legacy host got %q: %s", method, k, reply.Result)
				}
			}
		}
		task := members(t, members(t, created.Result)["task"])
		got := members(t, replies["tasks/get"].Result)
		for _, m := range []map[string]json.RawMessage{task, got} {
			for _, k := range append(taskMembers, "ttl") {
				if _, ok := m[k]; !ok {
					t.Errorf("a 2025-11-25 Task lacks %q: %v", k, m)
				}
			}
			for _, k := range []string{"ttlMs", "pollIntervalMs", "result", "error", "inputRequests"} {
				if _, ok := m[k]; ok {
					t.Errorf("a 2025-11-25 Task has %q: %v", k, m)
				}
			}
		}
	})
	t.Run(ModernVersion, func(t *testing.T) {
		created := r.Dispatch(ctx, aliceModern, request("tools/call", `{"name":"up__must","arguments":{}}`))
		id := taskOf(t, created, true)
		replies := map[string]*Reply{
			"tools/call":   created,
			"tasks/get":    r.Dispatch(ctx, aliceModern, taskReq("tasks/get", id)),
			"tasks/update": r.Dispatch(ctx, aliceModern, request("tasks/update", `{"taskId":"`+id+`","inputResponses":{}}`)),
			"tasks/cancel": r.Dispatch(ctx, aliceModern, taskReq("tasks/cancel", id)),
		}
		for method, reply := range replies {
			if reply.Error != nil {
				t.Fatalf("%s: %v", method, reply.Error)
			}
			top := members(t, reply.Result)
			if _, ok := top["resultType"]; !ok && !reply.LacksResultType {
				t.Errorf("%s: a modern host gets no resultType: %s", method, reply.Result)
			}
			for _, k := range []string{"ttl", "pollInterval", "task"} {
				if _, ok := top[k]; ok {
					t.Errorf("%s: a modern host got the legacy %q: %s", method, k, reply.Result)
				}
			}
		}
		for _, method := range []string{"tools/call", "tasks/get"} {
			m := members(t, replies[method].Result)
			for _, k := range append(taskMembers, "ttlMs") {
				if _, ok := m[k]; !ok {
					t.Errorf("%s: a 2026-07-28 Task lacks %q: %s", method, k, replies[method].Result)
				}
			}
		}
	})
	t.Run("2025-06-18", func(t *testing.T) {
		old := &Caller{ProtocolVersion: "2025-06-18", Session: "s-old", Capabilities: json.RawMessage(`{"tasks":{}}`)}
		for _, method := range []string{"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"} {
			if reply := r.Dispatch(ctx, old, taskReq(method, "gw-task-x")); reply.Error == nil || reply.Error.Code != jsonrpc.CodeMethodNotFound {
				t.Errorf("%s: %+v, want -32601", method, reply.Error)
			}
		}
	})
}

// TestAnonymousTasksAreTheSessions: without authentication a legacy
// session's tasks are its own: another session neither reaches nor lists
// them.
func TestAnonymousTasksAreTheSessions(t *testing.T) {
	up := legacyTaskUpstream()
	r := startRouter(t, Options{}, map[string]*fakeUpstream{"up": up}, "up")
	ctx := context.Background()
	one := &Caller{ProtocolVersion: "2025-11-25", Session: "s-1", Capabilities: json.RawMessage(`{"tasks":{}}`)}
	two := &Caller{ProtocolVersion: "2025-11-25", Session: "s-2", Capabilities: json.RawMessage(`{"tasks":{}}`)}
	id := taskOf(t, r.Dispatch(ctx, one, request("tools/call", `{"name":"up__job","arguments":{},"task":{}}`)), false)
	if reply := r.Dispatch(ctx, two, taskReq("tasks/get", id)); reply.Error == nil || reply.Error.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("another anonymous session's tasks/get: %+v %s", reply.Error, reply.Result)
	}
	if reply := r.Dispatch(ctx, two, request("tasks/list", `{}`)); string(reply.Result) != `{"tasks":[]}` {
		t.Errorf("another anonymous session's tasks/list = %s", reply.Result)
	}
	if reply := r.Dispatch(ctx, one, request("tasks/list", `{}`)); !strings.Contains(string(reply.Result), id) {
		t.Errorf("the session's own tasks/list = %s", reply.Result)
	}
}

// paramsHost is a Host that records each request's params and answers
// with an accepted elicitation.
type paramsHost struct {
	mu     sync.Mutex
	params []string
}

func (h *paramsHost) Notify(string, json.RawMessage) {}

func (h *paramsHost) Request(_ context.Context, _ string, params json.RawMessage) (*jsonrpc.Message, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.params = append(h.params, string(params))
	return &jsonrpc.Message{Result: json.RawMessage(`{"action":"accept","content":{}}`)}, nil
}

func (h *paramsHost) last() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.params[len(h.params)-1]
}

// TestTaskRequestsGoToTheirTask: with two tasks/result of one legacy
// session open on a connection, a request the upstream sends outside
// either stream (stdio) for one task (related-task) reaches the host as
// that task's, under the gateway's id of it, every time; it never goes
// out on the other task's tasks/result.
func TestTaskRequestsGoToTheirTask(t *testing.T) {
	arrived := make(chan string, 4) // each tasks/result: its arrival upstream, its failure
	release := make(chan struct{})
	up := &fakeUpstream{
		capabilities: `{"tools":{},"tasks":{"requests":{"tools":{"call":{}}}}}`,
		lists:        map[string][]string{"tools/list": {`{"name":"must","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}}`}},
	}
	var mu sync.Mutex
	made := 0
	up.answer = func(method string, params json.RawMessage) (*jsonrpc.Message, error) {
		switch method {
		case "tools/call":
			mu.Lock()
			made++
			id := "up-" + string(rune('0'+made))
			mu.Unlock()
			return &jsonrpc.Message{Result: json.RawMessage(`{"task":{"taskId":"` + id + `","status":"working","createdAt":"2025-11-25T10:00:00Z","lastUpdatedAt":"2025-11-25T10:00:00Z","ttl":60000}}`)}, nil
		case "tasks/get":
			// Both wait for the host: the gateway goes on to tasks/result.
			id, _ := jsonrpc.StringField(params, "taskId")
			return &jsonrpc.Message{Result: json.RawMessage(`{"taskId":"` + id + `","status":"input_required","createdAt":"2025-11-25T10:00:00Z","lastUpdatedAt":"2025-11-25T10:00:00Z","ttl":60000}`)}, nil
		case "tasks/result":
			id, _ := jsonrpc.StringField(params, "taskId")
			arrived <- id
			<-release
			return &jsonrpc.Message{Result: json.RawMessage(`{"content":[{"type":"text","text":"done ` + id + `"}]}`)}, nil
		}
		return &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "no %s", method)}, nil
	}
	r := startRouter(t, Options{}, map[string]*fakeUpstream{"up": up}, "up")
	host := &paramsHost{}
	alice := &Caller{ProtocolVersion: "2025-11-25", Session: "s-alice", Principal: "alice", Host: host, Capabilities: json.RawMessage(`{"tasks":{},"elicitation":{}}`)}
	ctx := context.Background()
	ids := map[string]string{} // upstream id -> gateway id
	for _, remote := range []string{"up-1", "up-2"} {
		ids[remote] = taskOf(t, r.Dispatch(ctx, alice, request("tools/call", `{"name":"up__must","arguments":{},"task":{}}`)), false)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(release) // first: the tasks/result end, also after a failure
	for _, id := range ids {
		wg.Go(func() {
			if res := r.Dispatch(ctx, alice, taskReq("tasks/result", id)); res.Error != nil {
				t.Errorf("tasks/result: %v", res.Error)
				arrived <- "" // never reached the upstream
			}
		})
	}
	for range 2 {
		if <-arrived == "" {
			t.FailNow()
		}
	}
	// Which of the two open calls a guess would pick varies: ask often.
	for i := range 20 {
		remote := []string{"up-1", "up-2"}[i%2]
		resp := up.handlers.Request(ctx, &jsonrpc.Message{ID: json.RawMessage("7"), Method: "elicitation/create",
			Params: json.RawMessage(`{"message":"ok?","requestedSchema":{"type":"object"},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"` + remote + `"}}}`)})
		if resp.Error != nil {
			t.Fatalf("elicitation for %s: %v", remote, resp.Error)
		}
		if got := host.last(); !strings.Contains(got, `"taskId":"`+ids[remote]+`"`) {
			t.Fatalf("the elicitation for %s (the gateway's %s) reached the host as %s", remote, ids[remote], got)
		}
	}
}

// TestRelatedTaskNamesOnlyTheGatewaysTask: the related-task _meta that
// ties a message to a task names the gateway's id towards the host and
// the upstream's own towards the upstream, whatever the other side put
// there. A legacy upstream's log message about its task (2025-11-25
// "Associating Task-Related Messages": every message about a task names
// it) reaches the host with the gateway's id, never the upstream's; the
// host's answer to the upstream's elicitation, which names a task the
// host made up (another caller's upstream id, say), reaches the upstream
// naming the upstream's own task; a related-task in a host's own request
// never reaches an upstream.
func TestRelatedTaskNamesOnlyTheGatewaysTask(t *testing.T) {
	up := legacyTaskUpstream()
	base := up.answer
	answers := make(chan *jsonrpc.Message, 1)
	up.answer = func(method string, params json.RawMessage) (*jsonrpc.Message, error) {
		if method == "tasks/result" {
			up.handlers.Notify(&jsonrpc.Message{Method: "notifications/message",
				Params: json.RawMessage(`{"level":"info","data":"half way","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"up-task-7"}}}`)})
			answers <- up.handlers.Request(context.Background(), &jsonrpc.Message{ID: json.RawMessage("7"), Method: "elicitation/create",
				Params: json.RawMessage(`{"message":"sure?","requestedSchema":{"type":"object"},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"up-task-7"}}}`)})
		}
		return base(method, params)
	}
	r := startRouter(t, Options{}, map[string]*fakeUpstream{"up": up}, "up")
	ctx := context.Background()
	host := &recordingHost{answer: json.RawMessage(`{"action":"accept","content":{},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"up-3"}}}`)}
	alice := *aliceLegacy
	alice.Host = host
	alice.Capabilities = json.RawMessage(`{"tasks":{},"elicitation":{}}`)

	id := taskOf(t, r.Dispatch(ctx, &alice, request("tools/call", `{"name":"up__job","arguments":{},"task":{}}`)), false)
	if res := r.Dispatch(ctx, &alice, taskReq("tasks/result", id)); res.Error != nil {
		t.Fatalf("tasks/result: %v", res.Error)
	}
	notes, asked := host.got()
	if len(notes) != 1 || len(asked) != 1 {
		t.Fatalf("the host got notifications %q and requests %q, want the log message and the elicitation", notes, asked)
	}
	if strings.Contains(notes[0], "up-task-7") || !strings.Contains(notes[0], `"taskId":"`+id+`"`) {
		t.Errorf("the host was sent %s, want the related-task naming %s", notes[0], id)
	}
	answer := <-answers
	if meta, _ := jsonrpc.Field(answer.Result, "_meta"); !strings.Contains(string(meta), `{"taskId":"up-task-7"}`) {
		t.Errorf("the upstream got the host's answer %s, want its related-task naming the upstream's task", answer.Result)
	}

	r.Dispatch(ctx, &alice, request("tools/call", `{"name":"up__plain","arguments":{},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"up-task-7"}}}`))
	calls := up.recorded()
	if last := calls[len(calls)-1]; last.Method != "tools/call" || strings.Contains(last.Params, "related-task") {
		t.Errorf("the upstream got %s %s, with the host's related-task", last.Method, last.Params)
	}
}

// TestTasksStayInTheirEra: one identity speaking both revisions finds a
// task only in the revision that created it. A task's result is kept in
// that host's era, and a modern upstream's task has no tasks/result: a
// 2025-11-25 tasks/get, tasks/result or tasks/cancel of a modern host's
// task (or the reverse) gets "Task not found", and nothing reaches the
// upstream.
func TestTasksStayInTheirEra(t *testing.T) {
	modernUp := &fakeUpstream{
		version:      ModernVersion,
		capabilities: `{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`,
		lists:        map[string][]string{"tools/list": tools("build")},
		answer: func(method string, params json.RawMessage) (*jsonrpc.Message, error) {
			return &jsonrpc.Message{Result: json.RawMessage(`{"resultType":"task","taskId":"up-9","status":"working","createdAt":"2026-07-28T00:00:00Z","lastUpdatedAt":"2026-07-28T00:00:00Z","ttlMs":60000}`)}, nil
		},
	}
	legacyUp := legacyTaskUpstream()
	r := startRouter(t, Options{}, map[string]*fakeUpstream{"m": modernUp, "l": legacyUp}, "m", "l")
	ctx := context.Background()

	modernID := taskOf(t, r.Dispatch(ctx, aliceModern, request("tools/call", `{"name":"m__build","arguments":{}}`)), true)
	legacyID := taskOf(t, r.Dispatch(ctx, aliceLegacy, request("tools/call", `{"name":"l__job","arguments":{},"task":{}}`)), false)
	sent := len(modernUp.recorded()) + len(legacyUp.recorded())
	// Bounded, so that a tasks/result which polls a task of the other era
	// for ever fails the test instead of hanging it.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		if reply := r.Dispatch(ctx, aliceLegacy, taskReq(method, modernID)); reply.Error == nil || !strings.Contains(reply.Error.Message, "Task not found") {
			t.Errorf("legacy %s of a modern host's task: %+v %s", method, reply.Error, reply.Result)
		}
	}
	for _, method := range []string{"tasks/get", "tasks/cancel"} {
		if reply := r.Dispatch(ctx, aliceModern, taskReq(method, legacyID)); reply.Error == nil || !strings.Contains(reply.Error.Message, "Task not found") {
			t.Errorf("modern %s of a legacy host's task: %+v %s", method, reply.Error, reply.Result)
		}
	}
	if list := r.Dispatch(ctx, aliceLegacy, request("tasks/list", `{}`)); strings.Contains(string(list.Result), modernID) {
		t.Errorf("a legacy tasks/list shows a modern host's task: %s", list.Result)
	}
	if now := len(modernUp.recorded()) + len(legacyUp.recorded()); now != sent {
		t.Errorf("the upstreams got %d requests for tasks of another era", now-sent)
	}
}

// TestGatewayTaskStopsWhenItExpires: the call the gateway runs for a
// task is stopped once the task expires, even when no request touches
// the task store after that (an expired task holds no call, and no
// upstream slot, until the gateway closes).
func TestGatewayTaskStopsWhenItExpires(t *testing.T) {
	stopped := make(chan struct{})
	up := &fakeUpstream{lists: map[string][]string{"tools/list": tools("work")}}
	up.answerCtx = func(ctx context.Context, method string, _ json.RawMessage) (*jsonrpc.Message, error) {
		<-ctx.Done()
		close(stopped)
		return nil, ctx.Err()
	}
	opts := Options{Upstreams: []UpstreamConfig{{Name: "up", Connect: up.connect, Timeout: time.Hour, Relay: relayAll, TaskAfter: time.Second}}}
	r := startRouter(t, opts, map[string]*fakeUpstream{"up": up})
	created := r.Dispatch(context.Background(), aliceLegacy, request("tools/call", `{"name":"up__work","arguments":{},"task":{"ttl":1}}`))
	taskOf(t, created, false)
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the call of an expired task still runs")
	}
}

// TestHugeTTLIsCapped: a ttl too large for a duration is capped at the
// gateway's TaskTTL like any other, never wrapped around into a task that
// expires at once (2^64 ns is 18446744073709.55 ms).
func TestHugeTTLIsCapped(t *testing.T) {
	up := legacyTaskUpstream()
	r := startRouter(t, Options{}, map[string]*fakeUpstream{"up": up}, "up")
	for _, ttl := range []string{"18446744073710", "9223372036854775807", "1e400", "-5", "2.5", `"60000"`} {
		created := r.Dispatch(context.Background(), aliceLegacy, request("tools/call", `{"name":"up__job","arguments":{},"task":{"ttl":`+ttl+`}}`))
		taskOf(t, created, false)
		calls := up.recorded()
		if sent := calls[len(calls)-1].Params; !strings.Contains(sent, `"task":{"ttl":3600000}`) {
			t.Errorf("ttl %s: the upstream was asked for %s, want the gateway's hour", ttl, sent)
		}
	}
}

// TestUpstreamErrorsNameTheGatewaysTask: an upstream's error about its
// task (tasks/get, tasks/result) names the gateway's id, in its message
// and its data, never the upstream's own.
func TestUpstreamErrorsNameTheGatewaysTask(t *testing.T) {
	up := legacyTaskUpstream()
	base := up.answer
	var mu sync.Mutex
	failing := "tasks/get"
	up.answer = func(method string, params json.RawMessage) (*jsonrpc.Message, error) {
		mu.Lock()
		fail := method == failing || method == "tasks/result"
		mu.Unlock()
		if fail {
			return &jsonrpc.Message{Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Task up-task-7 is gone", Data: json.RawMessage(`{"taskId":"up-task-7"}`)}}, nil
		}
		return base(method, params)
	}
	r := startRouter(t, Options{}, map[string]*fakeUpstream{"up": up}, "up")
	ctx := context.Background()
	for _, c := range []*Caller{aliceLegacy, aliceModern} {
		call := `{"name":"up__job","arguments":{},"task":{}}`
		if c.Modern() {
			call = `{"name":"up__must","arguments":{}}`
		}
		id := taskOf(t, r.Dispatch(ctx, c, request("tools/call", call)), c.Modern())
		methods := []string{"tasks/get", "tasks/result"}
		if c.Modern() {
			methods = methods[:1]
		}
		for _, method := range methods {
			reply := r.Dispatch(ctx, c, taskReq(method, id))
			if reply.Error == nil {
				t.Fatalf("%s %s: no error: %s", c.ProtocolVersion, method, reply.Result)
			}
			if e, _ := json.Marshal(reply.Error); strings.Contains(string(e), "up-task-7") || !strings.Contains(reply.Error.Message, id) || !strings.Contains(string(reply.Error.Data), id) {
				t.Errorf("%s %s: the host got %s, want the gateway's id %s", c.ProtocolVersion, method, e, id)
			}
		}
	}
	// A modern host's tasks/get shows the failed task's error inline once
	// the upstream's tasks/get says it is done.
	mu.Lock()
	failing = ""
	mu.Unlock()
	id := taskOf(t, r.Dispatch(ctx, aliceModern, request("tools/call", `{"name":"up__must","arguments":{}}`)), true)
	r.Dispatch(ctx, aliceModern, taskReq("tasks/get", id)) // working; the fake is done after one poll
	got := r.Dispatch(ctx, aliceModern, taskReq("tasks/get", id))
	if !strings.Contains(string(got.Result), `"status":"failed"`) || strings.Contains(string(got.Result), "up-task-7") || !strings.Contains(string(got.Result), `"message":"Task `+id) {
		t.Errorf("modern tasks/get of the failed task = %v %s, want its error naming %s", got.Error, got.Result, id)
	}
}

// TestCancelRacingTheCallsEnd: tasks/cancel, tasks/get and the end of the
// call the gateway runs, all at once on one task: the task stays
// cancelled whatever the call then returns.
func TestCancelRacingTheCallsEnd(t *testing.T) {
	up, arrived, release := blockingUpstream()
	opts := Options{Upstreams: []UpstreamConfig{{Name: "up", Connect: up.connect, Timeout: time.Hour, Relay: relayAll, TaskAfter: time.Second}}}
	r := startRouter(t, opts, map[string]*fakeUpstream{"up": up})
	ctx := context.Background()
	id := taskOf(t, r.Dispatch(ctx, aliceLegacy, request("tools/call", `{"name":"up__work","arguments":{},"task":{}}`)), false)
	<-arrived
	var wg sync.WaitGroup
	wg.Go(func() { close(release) })
	wg.Go(func() { r.Dispatch(ctx, aliceLegacy, taskReq("tasks/get", id)) })
	cancelled := r.Dispatch(ctx, aliceLegacy, taskReq("tasks/cancel", id))
	wg.Wait()
	if cancelled.Error != nil {
		// The call ended first: the task is completed, and stays so.
		if got := r.Dispatch(ctx, aliceLegacy, taskReq("tasks/get", id)); !strings.Contains(string(got.Result), `"status":"completed"`) {
			t.Errorf("cancel refused (%v) but the task is %s", cancelled.Error, got.Result)
		}
		return
	}
	res := r.Dispatch(ctx, aliceLegacy, taskReq("tasks/result", id))
	if got := r.Dispatch(ctx, aliceLegacy, taskReq("tasks/get", id)); !strings.Contains(string(got.Result), `"status":"cancelled"`) || res.Error == nil {
		t.Errorf("a cancelled task became %s (tasks/result %v %s)", got.Result, res.Error, res.Result)
	}
}

// TestFullCallerMakesNoUpstreamTask: a caller at tasks.max_per_identity
// gets an error for its next task-augmented call, and the upstream is
// not asked to make a task only for it to be cancelled.
func TestFullCallerMakesNoUpstreamTask(t *testing.T) {
	up := legacyTaskUpstream()
	r := startRouter(t, Options{MaxTasks: 1}, map[string]*fakeUpstream{"up": up}, "up")
	ctx := context.Background()
	taskOf(t, r.Dispatch(ctx, aliceLegacy, request("tools/call", `{"name":"up__job","arguments":{},"task":{}}`)), false)
	sent := len(up.recorded())
	if reply := r.Dispatch(ctx, aliceLegacy, request("tools/call", `{"name":"up__job","arguments":{},"task":{}}`)); reply.Error == nil || !strings.Contains(reply.Error.Message, "Too many tasks") {
		t.Errorf("a task past the bound: %+v %s", reply.Error, reply.Result)
	}
	if calls := up.recorded(); len(calls) != sent {
		t.Errorf("the upstream was sent %+v for a task past the bound", calls[sent:])
	}
	taskOf(t, r.Dispatch(ctx, bobLegacy, request("tools/call", `{"name":"up__job","arguments":{},"task":{}}`)), false)
}

// waitingHost is a host that never answers: its Request returns only
// when its context ends, and says so on returned.
type waitingHost struct {
	asked, returned chan struct{}
}

func (h *waitingHost) Notify(string, json.RawMessage) {}

func (h *waitingHost) Request(ctx context.Context, _ string, _ json.RawMessage) (*jsonrpc.Message, error) {
	close(h.asked)
	<-ctx.Done()
	close(h.returned)
	return nil, ctx.Err()
}

// TestTaskResultLeavesNoRelayBehind: a legacy host's tasks/result that
// relays a gateway-run task's elicitation, and is answered because the
// task ended first, leaves no request to the host running after it.
func TestTaskResultLeavesNoRelayBehind(t *testing.T) {
	now := time.Now()
	tk := &task{id: "gw-task-x", created: now, expires: now.Add(time.Minute), status: taskWorking, updated: now, pollMs: 1000,
		done: make(chan struct{}), asked: make(chan struct{}, 1)}
	host := &waitingHost{asked: make(chan struct{}), returned: make(chan struct{})}
	c := &Caller{ProtocolVersion: "2025-11-25", Session: "s", Host: host, Capabilities: json.RawMessage(`{"tasks":{},"elicitation":{}}`)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // lets a request left behind end, on failure
	asked := make(chan *jsonrpc.Message, 1)
	go func() { asked <- tk.ask(ctx, "elicitation/create", json.RawMessage(`{"message":"?"}`)) }()
	replied := make(chan *Reply, 1)
	go func() { replied <- (&Router{}).taskResult(ctx, c, tk) }()
	<-host.asked
	tk.finish(json.RawMessage(`{"content":[]}`), nil, false)
	if reply := <-replied; reply.Error != nil {
		t.Fatalf("tasks/result: %v", reply.Error)
	}
	if resp := <-asked; resp.Error == nil {
		t.Errorf("the ask of an ended task got %s, want an error", resp.Result)
	}
	select {
	case <-host.returned:
	default:
		t.Error("a request to the host still runs after tasks/result was answered")
	}
}
