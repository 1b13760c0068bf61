package router

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// How a tools/call becomes a task (see tasks.go):
//
//   - A legacy host's task-augmented call (params.task) of a tool its
//     legacy upstream runs as a task (execution.taskSupport optional or
//     required, and the tasks.requests.tools.call capability): the
//     upstream makes the task, the host gets the gateway's id for it.
//   - A call of a tool that only runs as a task (taskSupport required),
//     from a host that did not ask for one, or of a tool that may
//     (optional) from a modern host that declared the tasks extension:
//     the gateway asks the upstream for a task and, for such a modern
//     host, hands the host a task handle; any other host waits, and gets
//     the result as from a plain call.
//   - With tasks.after set for the upstream: a legacy host's
//     task-augmented call of any other tool runs as a task of the
//     gateway's; a modern host's call (with the extension) still running
//     after that long is answered with a handle while the call goes on.
//   - A modern upstream's own task handle (resultType "task", given only
//     to a host that declared the extension) is kept under a gateway id.
//
// Anything else runs as before: a task-augmented call of a tool that
// does not run as a task is refused (-32601, 2025-11-25 "Tool-Level
// Negotiation"), and params.task is ignored where no revision reads it
// (a modern request, a method other than tools/call: 2025-11-25
// "Behavior Requirements" has receivers ignore it there, and hosts send
// it on tasks/get), and taken out of the request, never passed to an
// upstream that could make a task the gateway does not know of.

// taskSupportOf reads a 2025-11-25 tool definition's
// execution.taskSupport ("" when absent).
func taskSupportOf(def json.RawMessage) string {
	exec, ok := jsonrpc.Field(def, "execution")
	if !ok {
		return ""
	}
	s, _ := jsonrpc.StringField(exec, "taskSupport")
	return s
}

// runsTasks reports whether a legacy upstream accepts task-augmented
// tools/call (capabilities.tasks.requests.tools.call).
func runsTasks(u *upstreamState) bool {
	if u.isModern() {
		return false
	}
	v, ok := jsonrpc.Field(u.Client.Capabilities(), "tasks")
	for _, k := range []string{"requests", "tools", "call"} {
		if !ok {
			return false
		}
		v, ok = jsonrpc.Field(v, k)
	}
	return ok && string(v) != "null"
}

// directsTasks reports whether a modern upstream makes tasks of its own
// (it declares the tasks extension): the gateway then leaves the choice
// to it.
func directsTasks(u *upstreamState) bool {
	if !u.isModern() {
		return false
	}
	ext, ok := jsonrpc.Field(u.Client.Capabilities(), "extensions")
	if !ok {
		return false
	}
	_, ok = jsonrpc.Field(ext, extTasks)
	return ok
}

// askedTTL reads the ttl (milliseconds) of a task augmentation; 0 when
// none is given.
func askedTTL(task json.RawMessage) int64 {
	v, ok := jsonrpc.Field(task, "ttl")
	if !ok {
		return 0
	}
	ms, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || ms < 0 {
		return 0
	}
	return ms
}

// checkTaskParam refuses a legacy tools/call whose task augmentation is
// not an object.
func checkTaskParam(c *Caller, req *jsonrpc.Request) *Reply {
	if req.Task == nil || c.Modern() || !c.knowsTasks() || req.Method != "tools/call" || req.Task[0] == '{' {
		return nil
	}
	return errorReply(jsonrpc.CodeInvalidParams, "Invalid params: params.task must be an object")
}

// callTool routes a tools/call, as a task where it becomes one.
func (r *Router) callTool(ctx context.Context, c *Caller, e *entry, req *jsonrpc.Request, out *jsonrpc.Outgoing) *Reply {
	u, name := e.up, e.exposed
	if r.perClientShared(c, u) && !req.HasRequestState {
		// The replica holding the host's upstream session runs the whole
		// call there, a task included (a retry is routed by its state, in
		// forward).
		if reply := r.perClientElsewhere(ctx, c, u, req, "tools/call", name); reply != nil {
			return reply
		}
	}
	upstreamTasks := (e.taskSupport == "optional" || e.taskSupport == "required") && runsTasks(u)
	asked := req.Task != nil && !c.Modern() && c.knowsTasks()
	if req.Task != nil && !asked {
		// 2026-07-28 has none (tasks are the server's choice), and a
		// revision before tasks none either.
		out.Set("task", nil)
	}
	switch {
	case asked && upstreamTasks:
		return r.remoteTask(ctx, c, e, req, out, true)
	case asked && u.TaskAfter > 0:
		out.Set("task", nil)
		return r.gatewayTask(ctx, c, u, req, out, name, 0)
	case asked:
		support := e.taskSupport
		if support == "" {
			support = "absent"
		}
		return errorReply(jsonrpc.CodeMethodNotFound, "Method not found: the tool %s does not run as a task (its execution.taskSupport is %s); call it without params.task", name, support)
	case e.taskSupport == "required" && upstreamTasks,
		upstreamTasks && c.Modern() && c.takesTasks():
		// A modern host that takes tasks gets the upstream's task for a
		// tool that may run as one: the server's choice, made here.
		out.Set("task", json.RawMessage(`{}`))
		return r.remoteTask(ctx, c, e, req, out, c.Modern() && c.takesTasks())
	case c.Modern() && u.TaskAfter > 0 && c.takesTasks() && !directsTasks(u):
		return r.gatewayTask(ctx, c, u, req, out, name, u.TaskAfter)
	}
	reply := r.forward(ctx, c, u, req, out, name)
	if reply.src != nil && reply.src.ResultType == "task" {
		return r.adoptModernTask(ctx, c, u, name, reply)
	}
	return reply
}

// remoteTask sends a task-augmented call to a legacy upstream. With
// handle, the host gets a task (the gateway's id for the upstream's);
// without, the gateway waits for the task's result and answers with it.
func (r *Router) remoteTask(ctx context.Context, c *Caller, e *entry, req *jsonrpc.Request, out *jsonrpc.Outgoing, handle bool) *Reply {
	u := e.up
	if handle && r.tasksFull(c) {
		return r.tooManyTasks()
	}
	t := r.newTask(c, u, e.exposed, askedTTL(req.Task))
	if req.Task != nil {
		// The host's augmentation, with the ttl the gateway keeps the
		// task for: the upstream need not keep it longer.
		out.Set("task", json.RawMessage(`{"ttl":`+strconv.FormatInt(t.expires.Sub(t.created).Milliseconds(), 10)+`}`))
	}
	reply := r.forward(ctx, c, u, req, out, e.exposed)
	if reply.Result == nil {
		return reply
	}
	created, _ := jsonrpc.Field(reply.Result, "task")
	remote, _ := jsonrpc.StringField(created, "taskId")
	if remote == "" {
		// The upstream ran the call at once, as a receiver may.
		if !handle {
			return reply
		}
		if reply.src != nil && reply.src.Members != 0 {
			r.fitEra(c, "tools/call", reply)
		}
		t.finish(bytesClone(reply.Result), nil, reply.ToolError)
		if !r.register(t) {
			return r.tooManyTasks()
		}
		return t.createdReply(c, nil)
	}
	t.remote, t.client, t.calls = remote, reply.via, reply.viaCalls
	t.adopt(created)
	if !handle {
		if e := r.fetchRemoteResult(ctx, c, t); e != nil {
			return &Reply{Error: e}
		}
		return t.outcome()
	}
	if !r.register(t) {
		r.dropRemote(ctx, c, t)
		return r.tooManyTasks()
	}
	meta, _ := jsonrpc.Field(reply.Result, "_meta")
	return t.createdReply(c, meta)
}

// dropRemote cancels upstream a remote task that the store had no room
// for (the caller gets an error instead of its handle), even when the
// caller's request has ended meanwhile.
func (r *Router) dropRemote(ctx context.Context, c *Caller, t *task) {
	resp, err := r.sendTask(context.WithoutCancel(ctx), c, t, "tasks/cancel", nil)
	if err == nil && resp.Error != nil {
		err = resp.Error
	}
	if err != nil {
		r.log.Warn("task not cancelled upstream", keyUpstream, t.up.Name, "name", t.subject, keyErr, err)
	}
}

// outcome answers with a finished task's result or error, as a plain
// call's answer.
func (t *task) outcome() *Reply {
	st := t.snapshot()
	switch {
	case st.failure != nil:
		return &Reply{Error: st.failure}
	case st.result != nil:
		_, has := jsonrpc.Field(st.result, "resultType")
		return &Reply{Result: st.result, LacksResultType: !has, ToolError: isToolError(st.result)}
	}
	return errorReply(jsonrpc.CodeInternalError, "The task of %s was %s before it had a result", t.subject, st.status)
}

// createdReply answers the call that made t: a 2025-11-25
// CreateTaskResult (with the upstream's _meta, which may carry the
// model's immediate response), or a 2026-07-28 one (resultType "task").
func (t *task) createdReply(c *Caller, meta json.RawMessage) *Reply {
	if c.Modern() {
		body := t.render(c, false)
		body, _ = jsonrpc.SetField(jsonrpc.DeleteField(body, "resultType"), "resultType", jsonrpc.String("task"))
		return &Reply{Result: body}
	}
	out := []byte(`{"task":`)
	out = append(out, t.render(c, false)...)
	if meta != nil && meta[0] == '{' {
		out = append(out, `,"_meta":`...)
		out = append(out, jsonrpc.DeleteField(meta, metaRelatedTask)...)
	}
	return &Reply{Result: append(out, '}'), LacksResultType: true}
}

// adoptModernTask keeps a modern upstream's task handle under a gateway
// id. Only a modern host that declared the extension gets one: the
// upstream must not give it to any other (ext-tasks "Capability
// Negotiation"), and such a result is refused.
func (r *Router) adoptModernTask(ctx context.Context, c *Caller, u *upstreamState, name string, reply *Reply) *Reply {
	if !c.Modern() || !c.takesTasks() {
		return errorReply(jsonrpc.CodeInternalError, "The server %q answered %s with a task, which this host did not declare it takes", u.Name, name)
	}
	remote, _ := jsonrpc.StringField(reply.Result, "taskId")
	if remote == "" {
		return errorReply(jsonrpc.CodeInternalError, "The server %q answered %s with a task without a taskId", u.Name, name)
	}
	var ttl int64
	if v, ok := jsonrpc.Field(reply.Result, "ttlMs"); ok {
		ttl, _ = strconv.ParseInt(string(v), 10, 64)
	}
	t := r.newTask(c, u, name, ttl)
	t.remote, t.remoteModern, t.client, t.calls = remote, true, reply.via, reply.viaCalls
	t.adopt(reply.Result)
	if !r.register(t) {
		r.dropRemote(ctx, c, t)
		return r.tooManyTasks()
	}
	result, err := withTaskID(reply.Result, t.id)
	if err != nil {
		return errorReply(jsonrpc.CodeInternalError, "The server %q sent a task that is not an object", u.Name)
	}
	return &Reply{Result: result}
}

// gatewayTask runs a call as a task of the gateway's. A legacy host
// (wait 0) gets the task at once; a modern host gets the call's own
// answer when it comes within wait, and a task handle after that, while
// the call goes on. The call runs until it ends, the task is cancelled
// or expires, or the gateway closes.
func (r *Router) gatewayTask(ctx context.Context, c *Caller, u *upstreamState, req *jsonrpc.Request, out *jsonrpc.Outgoing, name string, wait time.Duration) *Reply {
	t := r.newTask(c, u, name, askedTTL(req.Task))
	// The call ends when the task expires, whether or not anything looks
	// at the task store then. stop is set before the task is in the
	// store, where a sweep or Close reads it.
	callCtx, stop := context.WithDeadline(context.WithoutCancel(ctx), t.expires)
	t.stop = stop
	if wait == 0 && !r.register(t) {
		stop()
		return r.tooManyTasks()
	}
	host := &taskHost{t: t, inner: c.Host, answered: make(chan *Reply, 1)}
	bc := *c
	bc.Host = host
	if wait == 0 {
		host.detach()
	}
	// The request (req, out) stays in use after this returns: the fronts
	// give each message a buffer of its own, which nothing reuses.
	if !r.spawn(func() {
		defer stop()
		reply := r.forward(callCtx, &bc, u, req, out, name)
		for round := 0; ; round++ {
			if reply.Result != nil && reply.src != nil && reply.src.Members != 0 {
				r.fitEra(&bc, "tools/call", reply)
			}
			if host.deliver(reply) {
				return // the host's request got it: no task
			}
			if reply.Result == nil || !isInputRequired(reply.Result) || round == maxInputRounds {
				break
			}
			reply = r.answerAsTask(callCtx, &bc, u, t, req, out, name, reply)
		}
		switch {
		case reply.Error != nil:
			t.finish(nil, reply.Error, false)
		case isInputRequired(reply.Result):
			t.finish(nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "The server %q asked for input more than %d times", u.Name, maxInputRounds), false)
		default:
			t.finish(bytesClone(reply.Result), nil, reply.ToolError)
		}
	}) {
		stop()
		return errorReply(jsonrpc.CodeInternalError, "The gateway is shutting down")
	}
	if wait == 0 {
		return t.createdReply(c, nil)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case reply := <-host.answered:
		return reply
	case <-ctx.Done():
		stop()
		return errorReply(jsonrpc.CodeInternalError, "The request was cancelled")
	case <-timer.C:
	}
	if reply, ok := host.detach(); ok {
		return reply // it came as the wait ended
	}
	if !r.register(t) {
		// No room for another task: the host gets an error now rather
		// than a handle it could not poll; the call is stopped.
		stop()
		return r.tooManyTasks()
	}
	return t.createdReply(c, nil)
}

// answerAsTask answers, through the task, a call's input_required
// result that came after the call became a task: each input request
// waits as the task's ask (tasks/update, or a legacy host's
// tasks/result), and the call is retried with the answers and its
// requestState, as the host would have.
func (r *Router) answerAsTask(ctx context.Context, c *Caller, u *upstreamState, t *task, req *jsonrpc.Request, out *jsonrpc.Outgoing, name string, reply *Reply) *Reply {
	requests, _ := jsonrpc.Field(reply.Result, "inputRequests")
	var asks map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(requests, &asks); err != nil || len(asks) == 0 {
		return errorReply(jsonrpc.CodeInternalError, "The server %q sent inputRequests the gateway cannot read", u.Name)
	}
	answers := make(map[string]json.RawMessage, len(asks))
	var mu sync.Mutex
	var failed *jsonrpc.Error
	var wg sync.WaitGroup
	for _, key := range slices.Sorted(mapKeys(asks)) {
		a := asks[key]
		wg.Go(func() {
			resp := t.ask(ctx, a.Method, a.Params)
			mu.Lock()
			defer mu.Unlock()
			if resp.Error != nil {
				failed = resp.Error
				return
			}
			answers[key] = resp.Result
		})
	}
	wg.Wait()
	if failed != nil {
		return &Reply{Error: failed}
	}
	state, _ := jsonrpc.Field(reply.Result, "requestState")
	inputs, _ := json.Marshal(answers)
	again := req.Outgoing()
	again.Set("requestState", bytesClone(state))
	again.Set("inputResponses", inputs)
	retry, err := jsonrpc.DecodeRequest(again.AppendRequest(nil, json.RawMessage("0")))
	if err != nil {
		return errorReply(jsonrpc.CodeInternalError, "Internal error: the retry of %s: %v", name, err)
	}
	retryOut := retry.Outgoing()
	original, _ := out.StringParam("name")
	retryOut.Set("name", jsonrpc.String(original))
	return r.forward(ctx, c, u, retry, retryOut, name)
}

func isInputRequired(result json.RawMessage) bool {
	rt, _ := jsonrpc.StringField(result, "resultType")
	return rt == "input_required"
}

func isToolError(result json.RawMessage) bool {
	v, ok := jsonrpc.Field(result, "isError")
	return ok && string(v) == "true"
}

// taskHost stands for the host of a call the gateway runs as a task:
// until the host has its task, what the call sends goes to the host's
// request, and so does its answer; after, the request is over: progress
// becomes the task's status message, requests wait as the task's asks,
// and the answer is the task's.
type taskHost struct {
	t *task
	// mu guards inner and gone; Notify holds it while it uses inner, so
	// that nothing reaches the request after detach (Request does not:
	// it waits for the host).
	mu sync.Mutex
	// inner is the host's request, nil once detached; gone is set once
	// the request no longer takes the answer (detached, or delivered).
	inner Host
	gone  bool
	// answered takes the answer while the request waits for it.
	answered chan *Reply
}

// detach hands the call over to the task: nothing more goes to the
// host's request. It returns the answer that reached the request just
// before, if one did.
func (h *taskHost) detach() (*Reply, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.inner, h.gone = nil, true
	select {
	case reply := <-h.answered:
		return reply, true
	default:
		return nil, false
	}
}

// deliver hands the call's answer to the host's request if it still
// waits; false when the answer is the task's.
func (h *taskHost) deliver(reply *Reply) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gone {
		return false
	}
	h.answered <- reply // buffered for one: sent once
	h.gone = true
	return true
}

func (h *taskHost) Notify(method string, params json.RawMessage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.inner != nil {
		h.inner.Notify(method, params)
		return
	}
	if method != "notifications/progress" {
		return
	}
	msg, _ := jsonrpc.StringField(params, "message")
	if msg == "" {
		progress, _ := jsonrpc.Field(params, "progress")
		msg = "progress " + string(progress)
		if total, ok := jsonrpc.Field(params, "total"); ok {
			msg += "/" + string(total)
		}
	}
	h.t.note(msg)
}

func (h *taskHost) Request(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error) {
	h.mu.Lock()
	inner := h.inner
	h.mu.Unlock()
	if inner == nil {
		// The host has its task: the request waits for its answer there.
		return h.t.ask(ctx, method, params), nil
	}
	return inner.Request(ctx, method, params)
}
