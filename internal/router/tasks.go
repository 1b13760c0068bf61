package router

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
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
// Records live in this process: a handle is pollable on the replica that
// made it. They expire TaskTTL after their creation (the upstream may
// forget its own earlier), and one caller holds at most MaxTasks.

// extTasks is the 2026-07-28 tasks extension's identifier, and
// metaRelatedTask the _meta key that ties a message to a task.
const (
	extTasks        = "io.modelcontextprotocol/tasks"
	metaRelatedTask = "io.modelcontextprotocol/related-task"
)

// TasksExtension is the tasks extension's identifier, for the fronts.
const TasksExtension = extTasks

// TakesTasks reports whether the caller can receive tasks (see
// takesTasks).
func (c *Caller) TakesTasks() bool { return c.takesTasks() }

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

// task is one task the gateway handed a host.
type task struct {
	id      string
	owner   string
	up      *upstreamState
	subject string // the tool's exposed name
	created time.Time
	expires time.Time
	// remote is the upstream's id of the task it runs, on the connection
	// client; "" when the gateway runs the call itself.
	remote       string
	remoteModern bool
	client       Upstream
	calls        *callSet

	mu      sync.Mutex // guards the fields below
	status  string
	message string
	updated time.Time
	pollMs  int64
	// result (completed) or failure (failed) is the call's outcome, in
	// the era of the host that created the task; for a remote task, kept
	// once the upstream gave it.
	result  json.RawMessage
	failure *jsonrpc.Error
	// done is closed when the status becomes terminal.
	done chan struct{}
	// stop cancels the call the gateway runs (nil for a remote task).
	stop context.CancelFunc
	// asks are the upstream's requests for the task (an elicitation)
	// that wait for the host, by the key the host answers them with;
	// asked is signalled when one is added. collecting is set while a
	// tasks/result is open upstream to receive a legacy upstream's asks
	// for a modern host (see collect).
	asks       map[string]*taskAsk
	nextAsk    int
	asked      chan struct{}
	collecting bool
}

// taskAsk is one request an upstream made for a task, waiting for the
// host's answer.
type taskAsk struct {
	method string
	params json.RawMessage
	answer chan *jsonrpc.Message
	// relaying is set while a legacy host's tasks/result carries it to
	// the host.
	relaying bool
}

// ask makes an upstream's request for the task wait for the host: a
// modern host finds it in tasks/get's inputRequests and answers with
// tasks/update; a legacy host is asked it on its tasks/result (see
// relayAsks). A task the gateway runs shows input_required meanwhile.
func (t *task) ask(ctx context.Context, method string, params json.RawMessage) *jsonrpc.Message {
	// The request names the gateway's task, never the upstream's.
	a := &taskAsk{method: method, params: relatedTo(bytesClone(params), t.id), answer: make(chan *jsonrpc.Message, 1)}
	t.mu.Lock()
	if terminal(t.status) {
		t.mu.Unlock()
		return &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeInternalError, "The task is %s", t.status)}
	}
	if t.asks == nil {
		t.asks = map[string]*taskAsk{}
	}
	t.nextAsk++
	key := "gw-input-" + strconv.Itoa(t.nextAsk)
	t.asks[key] = a
	if t.remote == "" {
		t.setLocked(taskInputRequired, "")
	}
	select {
	case t.asked <- struct{}{}:
	default:
	}
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(t.asks, key)
		if len(t.asks) == 0 && t.remote == "" && t.status == taskInputRequired {
			t.setLocked(taskWorking, "")
		}
	}()
	select {
	case resp := <-a.answer:
		return resp
	case <-t.done:
		return &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeInternalError, "The task ended before the host answered %s", method)}
	case <-ctx.Done():
		return &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeInternalError, "The host did not answer %s in time", method)}
	}
}

// answer hands a modern host's inputResponses to the asks they name;
// keys that name no outstanding ask are ignored (ext-tasks "Task Update
// Requests").
func (t *task) answer(responses json.RawMessage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for key, a := range t.asks {
		v, ok := jsonrpc.Field(responses, key)
		if !ok || string(v) == "null" {
			continue
		}
		select {
		case a.answer <- &jsonrpc.Message{Result: bytesClone(v)}:
		default: // answered already
		}
	}
}

// inputRequests writes the outstanding asks as a 2026-07-28
// inputRequests map; nil when there are none.
func (t *task) inputRequests() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.asks) == 0 {
		return nil
	}
	out := []byte{'{'}
	for i, key := range slices.Sorted(mapKeys(t.asks)) {
		a := t.asks[key]
		if i > 0 {
			out = append(out, ',')
		}
		out = jsonrpc.AppendString(out, key)
		out = append(out, `:{"method":`...)
		out = jsonrpc.AppendString(out, a.method)
		if len(a.params) > 0 {
			out = append(out, `,"params":`...)
			out = append(out, a.params...)
		}
		out = append(out, '}')
	}
	return append(out, '}')
}

// relayAsks asks a legacy host, on its tasks/result, each outstanding ask
// of the task that no other tasks/result carries yet, until the task
// ends or the request does.
func (r *Router) relayAsks(ctx context.Context, c *Caller, t *task) {
	for {
		t.mu.Lock()
		var keys []string
		for key, a := range t.asks {
			if !a.relaying {
				a.relaying = true
				keys = append(keys, key)
			}
		}
		asks := make([]*taskAsk, len(keys))
		for i, k := range keys {
			asks[i] = t.asks[k]
		}
		t.mu.Unlock()
		for _, a := range asks {
			go func() {
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
			}()
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

func (t *task) snapshot() taskState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return taskState{status: t.status, message: t.message, updated: t.updated, pollMs: t.pollMs, result: t.result, failure: t.failure}
}

// taskState is a task's state at one moment.
type taskState struct {
	status, message string
	updated         time.Time
	pollMs          int64
	result          json.RawMessage
	failure         *jsonrpc.Error
}

// set records a new status (and message, when not empty). A terminal
// status is final: a later one is ignored (a task cancelled stays
// cancelled, whatever its call then returns).
func (t *task) set(status, message string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.setLocked(status, message)
}

func (t *task) setLocked(status, message string) bool {
	if terminal(t.status) {
		return false
	}
	if status != t.status || message != "" && message != t.message {
		t.updated = time.Now()
	}
	t.status = status
	if message != "" {
		t.message = message
	}
	if terminal(status) {
		close(t.done)
	}
	return true
}

// note sets the status message.
func (t *task) note(message string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !terminal(t.status) && message != t.message {
		t.message, t.updated = message, time.Now()
	}
}

// finish records the outcome of the call (result or failure) and its
// terminal status.
func (t *task) finish(result json.RawMessage, failure *jsonrpc.Error, toolError bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if terminal(t.status) && t.status != taskCompleted && t.status != taskFailed {
		return // cancelled
	}
	if t.result == nil && t.failure == nil {
		t.result, t.failure = result, t.scrub(failure)
	}
	if terminal(t.status) {
		return
	}
	switch {
	case failure != nil:
		t.setLocked(taskFailed, failure.Message)
	case toolError:
		t.setLocked(taskCompleted, "The tool reported an error")
	default:
		t.setLocked(taskCompleted, "")
	}
}

// taskStore holds the tasks the gateway handed hosts.
type taskStore struct {
	mu      sync.Mutex
	byID    map[string]*task
	byOwner map[string][]*task
	swept   time.Time
}

// add records t unless its owner already holds max live tasks.
func (s *taskStore) add(t *task, max int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.byID == nil {
		s.byID, s.byOwner = map[string]*task{}, map[string][]*task{}
	}
	if now.Sub(s.swept) > time.Minute {
		s.sweepLocked(now)
	}
	held := s.dropExpiredLocked(t.owner, now)
	if len(held) >= max {
		return false
	}
	s.byID[t.id] = t
	s.byOwner[t.owner] = append(held, t)
	return true
}

// full reports whether the owner holds max live tasks already.
func (s *taskStore) full(owner string, max int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.dropExpiredLocked(owner, time.Now())) >= max
}

// get returns the owner's live task id; nil when there is none (unknown,
// expired, or another caller's).
func (s *taskStore) get(id, owner string) *task {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.byID[id]
	if t == nil || t.owner != owner {
		return nil
	}
	if time.Now().After(t.expires) {
		s.dropExpiredLocked(owner, time.Now())
		return nil
	}
	return t
}

// list returns the owner's live tasks, oldest first.
func (s *taskStore) list(owner string) []*task {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.dropExpiredLocked(owner, time.Now()))
}

// dropExpiredLocked forgets the owner's expired tasks (stopping the
// calls the gateway still runs for them) and returns the others.
func (s *taskStore) dropExpiredLocked(owner string, now time.Time) []*task {
	held := s.byOwner[owner]
	live := held[:0]
	for _, t := range held {
		if now.After(t.expires) {
			delete(s.byID, t.id)
			if t.stop != nil {
				t.stop()
			}
			continue
		}
		live = append(live, t)
	}
	clear(held[len(live):])
	if len(live) == 0 {
		delete(s.byOwner, owner)
		return nil
	}
	s.byOwner[owner] = live
	return live
}

func (s *taskStore) sweepLocked(now time.Time) {
	s.swept = now
	for owner := range s.byOwner {
		s.dropExpiredLocked(owner, now)
	}
}

// closeAll stops every call the gateway runs for a task.
func (s *taskStore) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.byID {
		if t.stop != nil {
			t.stop()
		}
	}
}

// newTask makes a task record for caller c; the host asked for ttlMs (0:
// no wish), which is capped by the gateway's TaskTTL.
func (r *Router) newTask(c *Caller, u *upstreamState, subject string, ttlMs int64) *task {
	ttl := r.opts.TaskTTL
	if ttl <= 0 {
		ttl = config.DefaultTaskTTL
	}
	// Compared in milliseconds: a huge ttlMs would overflow a Duration.
	if ttlMs > 0 && ttlMs < ttl.Milliseconds() {
		ttl = time.Duration(ttlMs) * time.Millisecond
	}
	now := time.Now()
	return &task{
		id: "gw-task-" + randomTag(), owner: taskOwner(c), up: u, subject: subject,
		created: now, expires: now.Add(ttl), status: taskWorking, updated: now, pollMs: taskPollMs,
		done: make(chan struct{}), asked: make(chan struct{}, 1),
	}
}

// register adds t to the store; false when the caller holds too many.
func (r *Router) register(t *task) bool {
	limit := r.opts.MaxTasks
	if limit <= 0 {
		limit = config.DefaultMaxTasks
	}
	return r.tasks.add(t, limit)
}

// tasksFull reports whether caller c holds MaxTasks live tasks: checked
// before an upstream is asked for a task, so that none is made only to
// be cancelled.
func (r *Router) tasksFull(c *Caller) bool {
	limit := r.opts.MaxTasks
	if limit <= 0 {
		limit = config.DefaultMaxTasks
	}
	return r.tasks.full(taskOwner(c), limit)
}

// tooManyTasks is the error for a caller that holds MaxTasks live tasks.
func (r *Router) tooManyTasks() *Reply {
	limit := r.opts.MaxTasks
	if limit <= 0 {
		limit = config.DefaultMaxTasks
	}
	return errorReply(jsonrpc.CodeInternalError, "Too many tasks: this caller already holds %d (tasks.max_per_identity); wait for some to expire", limit)
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
		data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{extTasks: map[string]any{}}}})
		return &Reply{Error: &jsonrpc.Error{Code: jsonrpc.CodeMissingRequiredClientCapability,
			Message: "Missing required client capability: the extension " + extTasks, Data: data}}
	}
	if req.Method == "tasks/list" {
		return r.listTasks(c, req)
	}
	if !req.HasTaskID {
		return errorReply(jsonrpc.CodeInvalidParams, "Invalid params: %s needs params.taskId (a string)", req.Method)
	}
	t := r.tasks.get(req.TaskID, taskOwner(c))
	if t == nil {
		return errorReply(jsonrpc.CodeInvalidParams, "Failed to retrieve task: Task not found (unknown, expired, or not this caller's)")
	}
	reply := r.taskMethod(ctx, c, t, req)
	reply.Error = t.scrub(reply.Error)
	reply.Upstream, reply.Original = t.up.Name, t.subject
	return reply
}

// scrub returns an upstream's error about a remote task with the
// upstream's task id replaced by the gateway's: where the data has it as
// a string value, and in the message when the id is long enough (8
// characters or more) to stand for itself there, so that a short id
// ("1") does not garble the rest of the message.
func (t *task) scrub(e *jsonrpc.Error) *jsonrpc.Error {
	if e == nil || t.remote == "" {
		return e
	}
	quoted := jsonrpc.String(t.remote)
	inMessage := len(t.remote) >= 8 && strings.Contains(e.Message, t.remote)
	if !inMessage && !bytes.Contains(e.Data, quoted) {
		return e
	}
	out := *e
	if inMessage {
		out.Message = strings.ReplaceAll(e.Message, t.remote, t.id)
	}
	if len(e.Data) > 0 {
		out.Data = bytes.ReplaceAll(e.Data, quoted, jsonrpc.String(t.id))
	}
	return &out
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
		return &Reply{Result: r.renderTask(c, t, t.snapshot(), true)}
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
		out = append(out, r.renderTask(c, t, t.snapshot(), false)...)
	}
	return &Reply{Result: append(out, "]}"...), LacksResultType: true}
}

// renderTask writes t in the host's era: a 2025-11-25 Task, or a
// 2026-07-28 DetailedTask (with the result or error of a finished task
// when detailed). A tool result with isError is "failed" for a legacy
// host (2025-11-25 "Task Status") and "completed" for a modern one
// (ext-tasks "Task Status": failed means a JSON-RPC error).
func (r *Router) renderTask(c *Caller, t *task, st taskState, detailed bool) json.RawMessage {
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

// relatedTo returns result with _meta's related-task naming the
// gateway's task id (2025-11-25 "Associating Task-Related Messages":
// tasks/result must carry it), or, with id "", without it (a result the
// host did not ask as a task).
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
		relayed := make(chan struct{})
		go func() {
			defer close(relayed)
			r.relayAsks(ctx, c, t)
		}()
		select {
		case <-t.done:
		case <-ctx.Done():
			<-relayed
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
	return &Reply{Result: r.renderTask(c, t, t.snapshot(), false), LacksResultType: true}
}

// sendTask sends a tasks/* request for t to the upstream connection that
// holds it, with the upstream's task id.
func (r *Router) sendTask(ctx context.Context, c *Caller, t *task, method string, inputResponses json.RawMessage) (*jsonrpc.Message, error) {
	params := []byte(`{"taskId":`)
	params = jsonrpc.AppendString(params, t.remote)
	if inputResponses != nil {
		params = append(params, `,"inputResponses":`...)
		params = append(params, inputResponses...)
	}
	out := jsonrpc.NewOutgoing(method, append(params, '}'))
	if t.remoteModern {
		// The per-request fields of 2026-07-28: the host's own.
		out.SetMeta(jsonrpc.MetaClientCapabilities, c.Capabilities)
	}
	return t.client.Send(ctx, out)
}

// adopt takes a legacy upstream's Task (a tasks/get or tasks/cancel
// result) as t's state.
func (t *task) adopt(raw json.RawMessage) {
	status, _ := jsonrpc.StringField(raw, "status")
	if status == "" {
		return
	}
	message, _ := jsonrpc.StringField(raw, "statusMessage")
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := jsonrpc.Field(raw, "pollInterval"); ok {
		if ms, err := strconv.ParseInt(string(v), 10, 64); err == nil && ms > 0 {
			t.pollMs = ms
		}
	}
	switch status {
	case taskWorking, taskInputRequired, taskCompleted, taskFailed, taskCancelled:
		t.setLocked(status, message)
	}
}

// refreshRemote asks a legacy upstream for its task's state; for a
// modern host, a finished task's result is fetched too, to go inline.
func (r *Router) refreshRemote(ctx context.Context, c *Caller, t *task) *jsonrpc.Error {
	if st := t.snapshot(); terminal(st.status) && (st.result != nil || st.failure != nil || st.status == taskCancelled) {
		return nil
	}
	resp, err := r.sendTask(ctx, c, t, "tasks/get", nil)
	if err != nil {
		return r.unavailable(ctx, t.up, "tasks/get", t.subject, err).Error
	}
	if resp.Error != nil {
		return resp.Error
	}
	t.adopt(resp.Result)
	st := t.snapshot()
	switch {
	case c.Modern() && (st.status == taskCompleted || st.status == taskFailed):
		return r.fetchRemoteResult(ctx, c, t)
	case c.Modern() && st.status == taskInputRequired:
		r.collect(c, t)
	}
	return nil
}

// collect opens a tasks/result to a legacy upstream whose task needs
// input, for a modern host: the legacy upstream sends its requests for
// the task on that stream (2025-11-25 "Input Required Status"), and
// they wait as the task's asks for the host's tasks/update. The
// tasks/result stays open until the task ends (its result is then
// kept) or expires.
func (r *Router) collect(c *Caller, t *task) {
	t.mu.Lock()
	if t.collecting {
		t.mu.Unlock()
		return
	}
	t.collecting = true
	t.mu.Unlock()
	bc := *c
	bc.Host = nil
	if !r.spawn(func() {
		defer func() {
			t.mu.Lock()
			t.collecting = false
			t.mu.Unlock()
		}()
		ctx, cancel := context.WithDeadline(r.life, t.expires)
		defer cancel()
		if e := r.fetchRemoteResult(ctx, &bc, t); e != nil {
			r.log.Info("task result not received", keyUpstream, t.up.Name, "name", t.subject, keyErr, e)
		}
	}) {
		t.mu.Lock()
		t.collecting = false
		t.mu.Unlock()
	}
}

// fetchRemoteResult waits for a legacy upstream's task to end and keeps
// its result. While the task works it polls tasks/get at the upstream's
// pollInterval (a tasks/result held open for long would time out, and
// count against the upstream's breaker, on a server that says nothing
// meanwhile); once the task has ended or needs input it asks tasks/result.
// What the upstream asks meanwhile (an elicitation for the task) goes to
// the host as in any call, tied to the gateway's task id, or, for a host
// that is asked by polling (c.Host nil), waits as the task's ask.
func (r *Router) fetchRemoteResult(ctx context.Context, c *Caller, t *task) *jsonrpc.Error {
	params := jsonrpc.AppendString([]byte(`{"taskId":`), t.remote)
	out := jsonrpc.NewOutgoing("tasks/result", append(params, '}'))
	cl := r.startCall(c, t.up, t.calls, &jsonrpc.Request{}, out)
	cl.taskID, cl.upTaskID = t.id, t.remote
	if c.Host == nil {
		cl.task = t
	}
	defer cl.end()
	for {
		st := t.snapshot()
		if st.result != nil || st.failure != nil {
			return nil
		}
		if st.status == taskWorking {
			wait := time.NewTimer(time.Duration(min(max(st.pollMs, 100), 5000)) * time.Millisecond)
			select {
			case <-wait.C:
			case <-ctx.Done():
				wait.Stop()
				return jsonrpc.NewError(jsonrpc.CodeInternalError, "The request was cancelled")
			}
			resp, err := r.sendTask(ctx, c, t, "tasks/get", nil)
			switch {
			case err != nil:
				return r.unavailable(ctx, t.up, "tasks/get", t.subject, err).Error
			case resp.Error != nil:
				return resp.Error
			}
			t.adopt(resp.Result)
			continue
		}
		resp, err := t.client.Send(upstream.WithCallHandler(ctx, cl), out)
		switch {
		case err != nil && isTimeout(err) && ctx.Err() == nil:
			t.set(taskWorking, "") // still going: poll again
			continue
		case err != nil:
			return r.unavailable(ctx, t.up, "tasks/result", t.subject, err).Error
		case resp.Error != nil:
			t.finish(nil, resp.Error, false)
		default:
			reply := replyOf(resp)
			if reply.src.Members != 0 {
				r.fitEra(c, "tools/call", reply)
			}
			t.finish(relatedTo(bytesClone(reply.Result), ""), nil, reply.ToolError)
		}
		return nil
	}
}

func bytesClone(b []byte) json.RawMessage { return append(json.RawMessage(nil), b...) }

// forTask returns the tasks/result in flight on this connection for the
// upstream task that params' related-task names; nil when params name
// none, or no such call is open. A legacy upstream sends its requests
// for a task on the stream of a tasks/result (2025-11-25 "Input Required
// Status"), which stdio does not tell apart: the task they name does.
func (s *callSet) forTask(params json.RawMessage) *call {
	meta, _ := jsonrpc.Field(params, "_meta")
	related, _ := jsonrpc.Field(meta, metaRelatedTask)
	id, _ := jsonrpc.StringField(related, "taskId")
	if id == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for cl := range s.calls {
		if cl.upTaskID == id {
			return cl
		}
	}
	return nil
}

// remoteModern passes a modern host's tasks/get, tasks/update or
// tasks/cancel to the modern upstream whose task it is, with the
// upstream's task id, and its answer back with the gateway's.
func (r *Router) remoteModern(ctx context.Context, c *Caller, t *task, method string, inputResponses json.RawMessage) *Reply {
	resp, err := r.sendTask(ctx, c, t, method, inputResponses)
	if err != nil {
		return r.unavailable(ctx, t.up, method, t.subject, err)
	}
	if resp.Error != nil {
		return &Reply{Error: resp.Error}
	}
	if e := t.up.unrelayedInput(resp); e != nil {
		return &Reply{Error: e}
	}
	result := resp.Result
	if _, ok := jsonrpc.Field(result, "taskId"); ok {
		out, err := jsonrpc.SetField(jsonrpc.DeleteField(result, "taskId"), "taskId", jsonrpc.String(t.id))
		if err != nil {
			return errorReply(jsonrpc.CodeInternalError, "The server %q sent a %s result that is not an object", t.up.Name, method)
		}
		result = out
	}
	t.adopt(result)
	return &Reply{Result: result, LacksResultType: !resp.HasResultType}
}
