package router

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// The drivers of a task an upstream runs (remote): the tasks/* requests
// sent to it with its own id, polling a legacy upstream until its task
// ends, and collecting the requests it makes for the task (see tasks.go).

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

// adopt takes the status, statusMessage and poll interval (pollInterval,
// or 2026-07-28's pollIntervalMs) of an upstream's task, as a tasks/get
// or tasks/cancel result or the CreateTaskResult's task gives them, as
// t's state; an unknown status is ignored.
func (t *task) adopt(raw json.RawMessage) {
	status, _ := jsonrpc.StringField(raw, "status")
	if status == "" {
		return
	}
	message, _ := jsonrpc.StringField(raw, "statusMessage")
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, key := range []string{"pollInterval", "pollIntervalMs"} { // 2025-11-25, 2026-07-28
		if v, ok := jsonrpc.Field(raw, key); ok {
			if ms, err := strconv.ParseInt(string(v), 10, 64); err == nil && ms > 0 {
				t.pollMs = ms
			}
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
		ctx, cancel := context.WithDeadline(withSubject(r.life, &bc), t.expires)
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

// The bounds of the interval at which fetchRemoteResult polls an
// upstream's task: the upstream's pollInterval, but not so short that a
// careless upstream has the gateway spin, nor so long that a task that
// ended waits for it.
const (
	minPollMs = 100
	maxPollMs = 5000
)

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
			wait := time.NewTimer(time.Duration(min(max(st.pollMs, minPollMs), maxPollMs)) * time.Millisecond)
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
		out, err := withTaskID(result, t.id)
		if err != nil {
			return errorReply(jsonrpc.CodeInternalError, "The server %q sent a %s result that is not an object", t.up.Name, method)
		}
		result = out
	}
	t.adopt(result)
	return &Reply{Result: result, LacksResultType: !resp.HasResultType}
}

// withTaskID returns a modern upstream's task result with its taskId
// replaced by the gateway's id; an error when it is not an object.
func withTaskID(result json.RawMessage, id string) (json.RawMessage, error) {
	return jsonrpc.SetField(jsonrpc.DeleteField(result, "taskId"), "taskId", jsonrpc.String(id))
}
