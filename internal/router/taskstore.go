package router

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// The task record (its status, outcome and the upstream's requests that
// wait for the host) and the store that holds records per caller (see
// tasks.go).

// task is one task the gateway handed a host.
//
// The fields above mu are set before the record is shared (in the store,
// or with the goroutine that runs the call) and never change after.
type task struct {
	id      string // the gateway's id, which the host sees
	owner   string // see taskOwner
	quota   string // see taskQuota
	up      *upstreamState
	subject string // the tool's exposed name
	created time.Time
	expires time.Time
	// remote is the upstream's id of the task it runs, on the connection
	// client, whose calls are calls; remoteModern says the upstream
	// speaks 2026-07-28. remote is "" when the gateway runs the call
	// itself.
	remote       string
	remoteModern bool
	client       Upstream
	calls        *callSet
	// done is closed when the status becomes terminal.
	done chan struct{}
	// stop cancels the call the gateway runs (nil for a remote task).
	stop context.CancelFunc
	// asked is signalled when an ask is added (see asks).
	asked chan struct{}

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
	// asks are the upstream's requests for the task (an elicitation)
	// that wait for the host, by the key the host answers them with
	// ("gw-input-" and nextAsk). collecting is set while a tasks/result
	// is open upstream to receive a legacy upstream's asks for a modern
	// host (see collect).
	asks       map[string]*taskAsk
	nextAsk    int
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

// ask makes an upstream's request for the task wait for the host, and
// returns the host's answer, or an error when the task ends or ctx does
// first: a modern host finds it in tasks/get's inputRequests and answers
// with tasks/update; a legacy host is asked it on its tasks/result (see
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

// snapshot returns the task's state, read at once.
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

// set records a new status (and message, when not empty), and reports
// whether it did. A terminal status is final: a later one is ignored (a
// task cancelled stays cancelled, whatever its call then returns).
func (t *task) set(status, message string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.setLocked(status, message)
}

// setLocked is set with t.mu held.
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

// finish records the outcome of the call (result or failure; toolError:
// the result has isError) and its terminal status. The first outcome is
// kept. A task already completed or failed (a legacy upstream's tasks/get
// said so before its tasks/result answered) keeps its status and takes
// the outcome; a cancelled task takes neither.
func (t *task) finish(result json.RawMessage, failure *jsonrpc.Error, toolError bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status == taskCancelled {
		return
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
	mu      sync.Mutex // guards the fields below
	byID    map[string]*task
	byOwner map[string][]*task // oldest first
	// byQuota holds the same tasks by task.quota, to count them.
	byQuota map[string][]*task
	// swept is when every owner's expired tasks were last dropped: add
	// does it at most once a minute, so that the tasks of an owner who
	// never comes back are forgotten too.
	swept time.Time
}

// add records t and reports true, unless its quota already holds max
// live tasks.
func (s *taskStore) add(t *task, max int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.byID == nil {
		s.byID, s.byOwner, s.byQuota = map[string]*task{}, map[string][]*task{}, map[string][]*task{}
	}
	if now.Sub(s.swept) > time.Minute {
		s.sweepLocked(now)
	}
	counted := s.liveLocked(s.byQuota, t.quota, now)
	if len(counted) >= max {
		return false
	}
	s.byID[t.id] = t
	s.byQuota[t.quota] = append(counted, t)
	s.byOwner[t.owner] = append(s.dropExpiredLocked(t.owner, now), t)
	return true
}

// full reports whether the quota holds max live tasks already.
func (s *taskStore) full(quota string, max int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.liveLocked(s.byQuota, quota, time.Now())) >= max
}

// get returns the owner's live task of this id; nil when there is none
// (unknown, expired, or another caller's).
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
	return s.liveLocked(s.byOwner, owner, now)
}

// liveLocked drops the expired tasks from m[key] (byOwner or byQuota),
// forgetting them (and stopping the calls the gateway still runs for
// them) if the other table has not already, and returns the others.
func (s *taskStore) liveLocked(m map[string][]*task, key string, now time.Time) []*task {
	held := m[key]
	live := held[:0]
	for _, t := range held {
		if now.After(t.expires) {
			if s.byID[t.id] == t {
				delete(s.byID, t.id)
				if t.stop != nil {
					t.stop()
				}
			}
			continue
		}
		live = append(live, t)
	}
	clear(held[len(live):])
	if len(live) == 0 {
		delete(m, key)
		return nil
	}
	m[key] = live
	return live
}

// sweepLocked drops every expired task.
func (s *taskStore) sweepLocked(now time.Time) {
	s.swept = now
	for owner := range s.byOwner {
		s.dropExpiredLocked(owner, now)
	}
	for quota := range s.byQuota {
		s.liveLocked(s.byQuota, quota, now)
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
		id: r.newTaskID(), owner: taskOwner(c), quota: taskQuota(c), up: u, subject: subject,
		created: now, expires: now.Add(ttl), status: taskWorking, updated: now, pollMs: taskPollMs,
		done: make(chan struct{}), asked: make(chan struct{}, 1),
	}
}

// maxTasks is MaxTasks, or its default.
func (r *Router) maxTasks() int {
	if r.opts.MaxTasks > 0 {
		return r.opts.MaxTasks
	}
	return config.DefaultMaxTasks
}

// register adds t to the store; false when the caller holds too many.
func (r *Router) register(t *task) bool { return r.tasks.add(t, r.maxTasks()) }

// tasksFull reports whether caller c's quota (taskQuota) holds MaxTasks
// live tasks: checked before an upstream is asked for a task, so that
// none is made only to be cancelled.
func (r *Router) tasksFull(c *Caller) bool { return r.tasks.full(taskQuota(c), r.maxTasks()) }

// tooManyTasks is the error for a caller that holds MaxTasks live tasks.
func (r *Router) tooManyTasks() *Reply {
	return errorReply(jsonrpc.CodeInternalError, "Too many tasks: this caller already holds %d (tasks.max_per_identity); wait for some to expire", r.maxTasks())
}

// bytesClone returns a copy of b (nil when b is empty), for what is kept
// past the message b is part of.
func bytesClone(b []byte) json.RawMessage { return append(json.RawMessage(nil), b...) }
