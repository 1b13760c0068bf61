package router

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// Tasks: a long tools/call answered with a handle that the host polls
// (2025-11-25 basic/utilities/tasks; in 2026-07-28 the
// io.modelcontextprotocol/tasks extension, whose tasks are
// server-directed, polled with tasks/get, fed with tasks/update, and
// never listed).
//
// Every task id a host sees is the gateway's own: a record in the
// router's task store, created for one caller (identity and view) and
// found only by it, with an id of 128 random bits. Another caller's
// tasks/get, tasks/result or tasks/cancel of that id is answered as if
// the task did not exist. A record stands for one of:
//
//   - a task an upstream runs (remote): the upstream's own id never
//     reaches the host, and each tasks/* request goes to the upstream
//     connection that created the task, with the upstream's id, its
//     answer translated into the host's era (a modern host polling a
//     legacy upstream's task gets the result inline once it is done);
//   - a call the gateway runs itself (tasks.after): the upstream needs
//     no task support; the result, or the error, is kept until the task
//     expires.
//
// Records live in the process that made them; with peers (state.store
// redis) a task id names that replica, and a request for it that reaches
// another is answered there (peers.go). They expire TaskTTL after their creation, or sooner where the
// host's ttl (or a modern upstream's ttlMs) is shorter, and the upstream
// may forget its own task earlier; one caller holds at most MaxTasks.
//
// The files: this one has the tasks/* methods and how a task is written
// in each era; taskstore.go the task record and the store; taskremote.go
// what the gateway sends an upstream about the upstream's own task;
// taskcall.go how a tools/call becomes a task.

// extTasks is the 2026-07-28 tasks extension's identifier, and
// metaRelatedTask the _meta key that ties a message to a task.
const (
	extTasks        = "io.modelcontextprotocol/tasks"
	metaRelatedTask = "io.modelcontextprotocol/related-task"
)

// TakesTasks reports whether the caller can receive tasks (see
// takesTasks).
func (c *Caller) TakesTasks() bool { return c.takesTasks() }

// MissingTasksExtension is the -32021 error for a modern request that
// uses tasks without declaring the tasks extension (ext-tasks "Error
// Handling"); needs names the part of the request that needs it ("" for
// the request itself).
func MissingTasksExtension(needs string) *jsonrpc.Error {
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{extTasks: map[string]any{}}}})
	msg := "Missing required client capability: the extension " + extTasks
	if needs != "" {
		msg = "Missing required client capability: " + needs + " needs the extension " + extTasks
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeMissingRequiredClientCapability, Message: msg, Data: data}
}

// taskPollMs is the polling interval the gateway suggests for the tasks
// it runs itself.
const taskPollMs = 1000

// Task statuses, as both revisions name them.
const (
	taskWorking       = "working"
	taskInputRequired = "input_required"
	taskCompleted     = "completed"
	taskFailed        = "failed"
	taskCancelled     = "cancelled"
)

func terminal(status string) bool {
	return status == taskCompleted || status == taskFailed || status == taskCancelled
}

// tasksVersion is the first revision with tasks.
const tasksVersion = "2025-11-25"

// knowsTasks reports whether the caller's revision has tasks: 2025-11-25
// and later (earlier hosts get -32601 for tasks/*, and no tasks
// capability).
func (c *Caller) knowsTasks() bool { return c.ProtocolVersion >= tasksVersion }

// takesTasks reports whether the host can receive a task: a 2025-11-25
// host that declared the tasks capability, or a modern request that
// declared the tasks extension.
func (c *Caller) takesTasks() bool {
	if !c.Modern() {
		return c.knowsTasks() && c.declares("tasks")
	}
	ext, ok := jsonrpc.Field(c.Capabilities, "extensions")
	if !ok {
		return false
	}
	v, ok := jsonrpc.Field(ext, extTasks)
	return ok && string(v) != "null"
}

// taskOwner is who a task belongs to: the caller's identity and view;
// without authentication, a legacy host's session (2025-11-25 "Task
// Isolation and Access Control": bound to the context there is, so that
// one anonymous session neither lists nor reaches another's tasks, nor
// fills their bound). An anonymous modern host has neither: its task ids
// are bearer tokens of 128 random bits. A task is also bound to the era
// of the host that made it: its result is kept in that era, and a modern
// upstream's task has no tasks/result, so one identity speaking both
// revisions finds each task only in its own.
func taskOwner(c *Caller) string {
	switch {
	case c.Modern():
		return c.owner() + "\x00modern"
	case c.Principal == "" && c.Session != "":
		return c.owner() + "\x00session:" + c.Session
	}
	return c.owner()
}

// taskQuota is whose quota (MaxTasks) a task counts against: the
// caller's identity in its team, on every profile's path and in both
// eras together; without authentication, a legacy host's session (as
// taskOwner), else every anonymous host of the team.
func taskQuota(c *Caller) string {
	if c.Principal == "" && c.Session != "" && !c.Modern() {
		return c.quotaOwner() + "\x00session:" + c.Session
	}
	return c.quotaOwner()
}

// relayAsks asks a legacy host, on its tasks/result, each outstanding ask
// of the task that no other tasks/result carries yet, until the task
// ends or ctx does. It returns once its requests to the host have
// returned, which they do when ctx ends.
func (t *task) relayAsks(ctx context.Context, c *Caller) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		t.mu.Lock()
		var asks []*taskAsk
		for _, a := range t.asks {
			if !a.relaying {
				a.relaying = true
				asks = append(asks, a)
			}
		}
		t.mu.Unlock()
		for _, a := range asks {
			wg.Go(func() {
				var resp *jsonrpc.Message
				if c.Host != nil && c.declares(requiredCapability(a.method)) {
					m, err := c.Host.Request(ctx, a.method, relatedTo(a.params, t.id))
					if err == nil {
						resp = m
					}
				}
				if resp == nil {
					t.mu.Lock()
					a.relaying = false // asked again on the next tasks/result
					t.mu.Unlock()
					return
				}
				select {
				case a.answer <- resp:
				default:
				}
			})
		}
		select {
		case <-t.asked:
		case <-t.done:
			return
		case <-ctx.Done():
			return
		}
	}
}

// taskRequest answers tasks/get, tasks/result, tasks/cancel, tasks/update
// and tasks/list.
func (r *Router) taskRequest(ctx context.Context, c *Caller, req *jsonrpc.Request) *Reply {
	switch {
	case !c.knowsTasks():
		return errorReply(jsonrpc.CodeMethodNotFound, "Method not found: %s is not part of protocol version %s (tasks came with %s)", req.Method, c.ProtocolVersion, tasksVersion)
	case c.Modern() && (req.Method == "tasks/result" || req.Method == "tasks/list"):
		return errorReply(jsonrpc.CodeMethodNotFound, "Method not found: %s is not part of protocol version %s (poll tasks/get)", req.Method, c.ProtocolVersion)
	case !c.Modern() && req.Method == "tasks/update":
		return errorReply(jsonrpc.CodeMethodNotFound, "Method not found: tasks/update is part of protocol version %s only", ModernVersion)
	case c.Modern() && !c.takesTasks():
		// ext-tasks "Error Handling": a request that does not declare
		// the extension gets -32021.
		return &Reply{Error: MissingTasksExtension("")}
	}
	if req.Method == "tasks/list" {
		return r.listTasks(c, req)
	}
	if !req.HasTaskID {
		return errorReply(jsonrpc.CodeInvalidParams, "Invalid params: %s needs params.taskId (a string)", req.Method)
	}
	t := r.tasks.get(req.TaskID, taskOwner(c))
	if rep := taskReplica(req.TaskID); t == nil && r.elsewhere(c, rep) {
		// Another replica runs it (peers.go).
		return r.askReplica(ctx, c, rep, req, func(bool) *Reply {
			return errorReply(jsonrpc.CodeInvalidParams, "Failed to retrieve task: the gateway replica that ran it stopped, and the task ended with it")
		})
	}
	if t == nil {
		return errorReply(jsonrpc.CodeInvalidParams, "Failed to retrieve task: Task not found (unknown, expired, or not this caller's)")
	}
	reply := r.taskMethod(ctx, c, t, req)
	reply.Error = t.scrub(reply.Error)
	reply.Upstream, reply.Original = t.up.Name, t.subject
	return reply
}

func (r *Router) taskMethod(ctx context.Context, c *Caller, t *task, req *jsonrpc.Request) *Reply {
	switch req.Method {
	case "tasks/get":
		if t.remote != "" && t.remoteModern {
			return r.remoteModern(ctx, c, t, "tasks/get", nil)
		}
		if t.remote != "" {
			if e := r.refreshRemote(ctx, c, t); e != nil {
				return &Reply{Error: e}
			}
		}
		return &Reply{Result: t.render(c, true)}
	case "tasks/result":
		return r.taskResult(ctx, c, t)
	case "tasks/update":
		if t.remote != "" && t.remoteModern {
			return r.remoteModern(ctx, c, t, "tasks/update", req.InputResponses)
		}
		if req.InputResponses != nil {
			t.answer(req.InputResponses)
		}
		return &Reply{Result: json.RawMessage(`{"resultType":"complete"}`)}
	case "tasks/cancel":
		return r.cancelTask(ctx, c, t)
	}
	return errorReply(jsonrpc.CodeMethodNotFound, "Method not found: %s", req.Method)
}

// listTasks answers a legacy host's tasks/list with its own tasks, in
// one page, as last seen (tasks/get asks the upstream).
func (r *Router) listTasks(c *Caller, req *jsonrpc.Request) *Reply {
	if cursor := req.Cursor; cursor != nil && string(cursor) != "null" {
		return errorReply(jsonrpc.CodeInvalidParams, "Invalid cursor: the gateway returns every task in one page")
	}
	out := []byte(`{"tasks":[`)
	for i, t := range r.tasks.list(taskOwner(c)) {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, t.render(c, false)...)
	}
	return &Reply{Result: append(out, "]}"...), LacksResultType: true}
}

// render writes the task as it is now in the host's era: a 2025-11-25
// Task, or a 2026-07-28 DetailedTask (with the result or error of a
// finished task, or what it waits for, when detailed). A tool result with isError is "failed" for a legacy
// host (2025-11-25 "Task Status") and "completed" for a modern one
// (ext-tasks "Task Status": failed means a JSON-RPC error).
func (t *task) render(c *Caller, detailed bool) json.RawMessage {
	st := t.snapshot()
	status := st.status
	var inputs []byte
	if status == taskInputRequired && c.Modern() {
		// inputRequests must hold what the task waits for: until the
		// upstream's request has reached the gateway, the task is shown
		// as working.
		if inputs = t.inputRequests(); inputs == nil {
			status = taskWorking
		}
	}
	if !c.Modern() && status == taskCompleted && st.result != nil && isToolError(st.result) {
		status = taskFailed
	}
	if c.Modern() && status == taskFailed && st.failure == nil && st.result != nil {
		status = taskCompleted
	}
	if c.Modern() && status == taskCompleted && st.result == nil && st.failure != nil {
		// A legacy upstream said completed, then answered tasks/result
		// with an error: a completed task must carry its result, and
		// what there is to carry is a JSON-RPC error.
		status = taskFailed
	}
	out := []byte{'{'}
	if c.Modern() {
		out = append(out, `"resultType":"complete",`...)
	}
	out = append(out, `"taskId":`...)
	out = jsonrpc.AppendString(out, t.id)
	out = append(out, `,"status":`...)
	out = jsonrpc.AppendString(out, status)
	if st.message != "" {
		out = append(out, `,"statusMessage":`...)
		out = jsonrpc.AppendString(out, st.message)
	}
	out = append(out, `,"createdAt":`...)
	out = jsonrpc.AppendString(out, t.created.UTC().Format(time.RFC3339Nano))
	out = append(out, `,"lastUpdatedAt":`...)
	out = jsonrpc.AppendString(out, st.updated.UTC().Format(time.RFC3339Nano))
	ttl := strconv.FormatInt(t.expires.Sub(t.created).Milliseconds(), 10)
	poll := strconv.FormatInt(st.pollMs, 10)
	if c.Modern() {
		out = append(out, `,"ttlMs":`+ttl+`,"pollIntervalMs":`+poll...)
		if detailed {
			switch {
			case inputs != nil:
				out = append(out, `,"inputRequests":`...)
				out = append(out, inputs...)
			case status == taskCompleted && st.result != nil:
				out = append(out, `,"result":`...)
				out = append(out, withResultType(st.result)...)
			case status == taskFailed && st.failure != nil:
				e, _ := json.Marshal(st.failure)
				out = append(out, `,"error":`...)
				out = append(out, e...)
			}
		}
	} else {
		out = append(out, `,"ttl":`+ttl+`,"pollInterval":`+poll...)
	}
	return append(out, '}')
}

// withResultType gives a result the resultType 2026-07-28 requires when
// it has none (a legacy upstream's).
func withResultType(result json.RawMessage) json.RawMessage {
	if _, ok := jsonrpc.Field(result, "resultType"); ok {
		return result
	}
	if out, err := jsonrpc.SetField(result, "resultType", jsonrpc.String("complete")); err == nil {
		return out
	}
	return result
}

// relatedTo returns result with _meta's related-task naming task id
// (2025-11-25 "Associating Task-Related Messages": tasks/result must
// carry it, and so do the requests and answers for a task), or, with id
// "", without it (a result the host did not ask as a task); an _meta
// left empty is removed.
func relatedTo(result json.RawMessage, id string) json.RawMessage {
	meta, _ := jsonrpc.Field(result, "_meta")
	if meta == nil {
		if id == "" {
			return result
		}
		meta = json.RawMessage(`{}`)
	}
	meta = jsonrpc.DeleteField(meta, metaRelatedTask)
	if id == "" && len(bytes.TrimSpace(bytes.Trim(bytes.TrimSpace(meta), "{}"))) == 0 { // nothing else was in _meta
		return jsonrpc.DeleteField(result, "_meta")
	}
	if id != "" {
		if m, err := jsonrpc.SetField(meta, metaRelatedTask, json.RawMessage(`{"taskId":`+string(jsonrpc.String(id))+`}`)); err == nil {
			meta = m
		}
	}
	out, err := jsonrpc.SetField(jsonrpc.DeleteField(result, "_meta"), "_meta", meta)
	if err != nil {
		return result
	}
	return out
}

// taskResult answers a legacy host's tasks/result: it waits for the task
// to end and returns what the call returned, result or error.
func (r *Router) taskResult(ctx context.Context, c *Caller, t *task) *Reply {
	if t.remote != "" {
		if st := t.snapshot(); st.result == nil && st.failure == nil {
			if e := r.fetchRemoteResult(ctx, c, t); e != nil {
				return &Reply{Error: e}
			}
		}
	} else {
		// The relay ends with this request, and so do its requests to
		// the host still waiting for an answer: once the task has ended,
		// nothing takes that answer.
		relayCtx, stopRelay := context.WithCancel(ctx)
		relayed := make(chan struct{})
		go func() {
			defer close(relayed)
			t.relayAsks(relayCtx, c)
		}()
		defer func() {
			stopRelay()
			<-relayed
		}()
		select {
		case <-t.done:
		case <-ctx.Done():
			return errorReply(jsonrpc.CodeInternalError, "The request was cancelled")
		}
	}
	st := t.snapshot()
	switch {
	case st.failure != nil:
		return &Reply{Error: st.failure}
	case st.result != nil:
		return &Reply{Result: relatedTo(st.result, t.id), LacksResultType: true, ToolError: isToolError(st.result)}
	}
	return errorReply(jsonrpc.CodeInternalError, "The task was %s before it had a result", st.status)
}

// cancelTask cancels a task: the call the gateway runs is cancelled
// upstream, a remote task is cancelled by its upstream.
func (r *Router) cancelTask(ctx context.Context, c *Caller, t *task) *Reply {
	if t.remote != "" && t.remoteModern {
		return r.remoteModern(ctx, c, t, "tasks/cancel", nil)
	}
	ended := func() *Reply {
		if c.Modern() {
			return &Reply{Result: json.RawMessage(`{"resultType":"complete"}`)}
		}
		return errorReply(jsonrpc.CodeInvalidParams, "Cannot cancel task: already in terminal status '%s'", t.snapshot().status)
	}
	if terminal(t.snapshot().status) {
		return ended()
	}
	if t.remote != "" {
		resp, err := r.sendTask(ctx, c, t, "tasks/cancel", nil)
		if err != nil {
			return r.unavailable(ctx, t.up, "tasks/cancel", t.subject, err)
		}
		if resp.Error != nil {
			return &Reply{Error: resp.Error}
		}
		t.adopt(resp.Result) // what the upstream says the task is now
	} else {
		if !t.set(taskCancelled, "The task was cancelled by request.") {
			return ended() // the call ended first
		}
		if t.stop != nil {
			t.stop()
		}
	}
	if c.Modern() {
		return &Reply{Result: json.RawMessage(`{"resultType":"complete"}`)}
	}
	return &Reply{Result: t.render(c, false), LacksResultType: true}
}
