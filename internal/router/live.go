package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// Host is the way back to the host that sent a request, for what an
// upstream sends while it serves that request. The server implements it
// for each request it dispatches.
type Host interface {
	// Notify sends the host a notification that belongs to the request
	// (progress, a log message), on the request's own stream.
	Notify(method string, params json.RawMessage)
	// Request asks the host (sampling, elicitation, roots) and returns
	// its response. It fails with ErrHostUnreachable when the host cannot
	// be asked (a modern host, or one that went away).
	Request(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error)
}

// ErrHostUnreachable reports that a host cannot receive requests.
var ErrHostUnreachable = errors.New("the host cannot be asked")

// call is one request in flight from a host to an upstream. It relays
// what the upstream sends about it back to the host.
type call struct {
	r  *Router
	up *upstreamState
	// calls is the set of the connection the call runs on.
	calls *callSet
	// parked is set for a modern host's call to a legacy upstream, whose
	// requests for input wait for the host's retry.
	parked *parkedCall

	mu sync.Mutex // guards caller
	// caller is who the call answers to: for a parked call, the request
	// of the current round.
	caller *Caller

	// hostToken is the host's raw progress token, and token the one the
	// upstream was given; both nil without a token.
	hostToken json.RawMessage
	token     string
	// taskID, when set, is the gateway's id of the task the call serves
	// (a tasks/result): the upstream's requests for the task name it in
	// their related-task _meta instead of the upstream's own. task, when
	// set, is that task, whose host is asked by polling (see collect).
	// upTaskID is the upstream's id of that task: the upstream's
	// requests that name it are this call's (see callSet.forTask), and
	// the host's answers name it instead of whatever the host put there.
	taskID, upTaskID string
	task             *task
}

// startCall registers a call and rewrites its request for the upstream:
// a host's progress token is replaced by one unique to the gateway, so
// that two hosts using the same token never see each other's progress.
func (r *Router) startCall(c *Caller, u *upstreamState, calls *callSet, in *jsonrpc.Request, out *jsonrpc.Outgoing) *call {
	cl := &call{r: r, caller: c, up: u, calls: calls}
	if tok := in.Meta.ProgressToken; tok != nil {
		// Unguessable, so that no one who sees or guesses another call's
		// token can send progress into it.
		cl.token = "gw-" + randomTag()
		r.mu.Lock()
		r.progress[cl.token] = cl
		r.mu.Unlock()
		cl.hostToken = tok
		out.SetMeta("progressToken", jsonrpc.String(cl.token))
	}
	// A legacy host declares its capabilities and log level once per
	// session; a modern upstream reads them from each request's _meta.
	if !c.Modern() && u.isModern() {
		if len(c.Capabilities) > 0 {
			out.SetMeta(jsonrpc.MetaClientCapabilities, c.Capabilities)
		}
		if c.LogLevel != "" {
			out.SetMeta(jsonrpc.MetaLogLevel, jsonrpc.String(c.LogLevel))
		}
	}
	calls.add(cl)
	return cl
}

func (cl *call) getCaller() *Caller {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.caller
}

func (cl *call) setCaller(c *Caller) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.caller = c
}

// end unregisters the call.
func (cl *call) end() {
	cl.calls.remove(cl)
	if cl.token != "" {
		cl.r.mu.Lock()
		delete(cl.r.progress, cl.token)
		cl.r.mu.Unlock()
	}
}

// Notify relays a notification about this call to its host (it
// implements upstream.CallHandler).
func (cl *call) Notify(n *jsonrpc.Message) {
	caller := cl.getCaller()
	host := caller.Host
	switch n.Method {
	case "notifications/progress":
		if tok, _ := jsonrpc.StringField(n.Params, "progressToken"); tok != cl.token {
			// Another call's, sent on this one's stream.
			if tok != "" {
				cl.r.upstreamNotification(cl.up, cl.calls, n)
			}
			return
		}
		if host == nil || cl.hostToken == nil {
			return // the host asked for no progress
		}
		params, err := jsonrpc.SetField(n.Params, "progressToken", cl.hostToken)
		if err != nil {
			return
		}
		host.Notify(n.Method, retagged(params, cl.taskID))
	case "notifications/message":
		if host == nil || !caller.wantsLog(n.Params) {
			return
		}
		host.Notify(n.Method, retagged(n.Params, cl.taskID))
	default:
		// A server may send what is not about the call on the call's
		// stream (the Go SDK sends resources/updated there when the
		// calling session subscribed): it goes where it would have
		// gone on the connection's own stream.
		cl.r.upstreamNotification(cl.up, cl.calls, n)
	}
}

// Request relays a server request made during this call to its host (it
// implements upstream.CallHandler). The upstream gets an error at once
// when the host cannot answer, instead of waiting for ever.
func (cl *call) Request(ctx context.Context, req *jsonrpc.Message) *jsonrpc.Message {
	if req.Method == "ping" {
		return &jsonrpc.Message{Result: json.RawMessage("{}")}
	}
	capability := requiredCapability(req.Method)
	if capability == "" {
		return &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "Method not found: the gateway does not relay %s", req.Method)}
	}
	if e := cl.up.notRelayed(req.Method, capability); e != nil {
		return &jsonrpc.Message{Error: e}
	}
	if cl.parked != nil {
		return cl.parked.requestInput(ctx, req, capability)
	}
	caller := cl.getCaller()
	if cl.task != nil {
		if !caller.declares(capability) {
			return &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeInvalidRequest,
				"The host did not declare the %s capability, so the gateway cannot relay %s", capability, req.Method)}
		}
		return cl.hostAnswer(cl.task.ask(ctx, req.Method, req.Params))
	}
	if caller.Host == nil || !caller.declares(capability) {
		return &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeInvalidRequest,
			"The host did not declare the %s capability, so the gateway cannot relay %s", capability, req.Method)}
	}
	// The host knows only the gateway's task ids: the request names the
	// task it serves by the gateway's (or names none).
	params := retagged(req.Params, "")
	if cl.taskID != "" {
		params = relatedTo(req.Params, cl.taskID)
	}
	resp, err := caller.Host.Request(ctx, req.Method, params)
	if err != nil {
		cl.r.log.Info("host could not answer an upstream request", keyUpstream, cl.up.Name,
			keyMethod, req.Method, keySession, caller.Session, keyErr, err)
		return &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeInternalError, "The host could not answer %s: %v", req.Method, err)}
	}
	return cl.hostAnswer(resp)
}

// hostAnswer gives the host's answer to an upstream's request the
// related-task of the upstream's own task the call serves (2025-11-25
// "Associating Task-Related Messages"), or none: what the host put there
// (the gateway's id, or any id it made up) never reaches the upstream,
// which could take it for one of its tasks, perhaps another caller's.
func (cl *call) hostAnswer(resp *jsonrpc.Message) *jsonrpc.Message {
	if resp == nil || resp.Result == nil {
		return resp
	}
	result := retagged(resp.Result, "")
	if cl.upTaskID != "" {
		result = relatedTo(resp.Result, cl.upTaskID)
	}
	out := *resp
	out.Result = result
	return &out
}

// retagged returns params with its related-task _meta, when it has one,
// naming task id instead (removed with id ""); params without one come
// back as they are.
func retagged(params json.RawMessage, id string) json.RawMessage {
	meta, ok := jsonrpc.Field(params, "_meta")
	if !ok {
		return params
	}
	if _, ok := jsonrpc.Field(meta, metaRelatedTask); !ok {
		return params
	}
	return relatedTo(params, id)
}

// notRelayed is the error for a server request of method, which needs
// capability, when the upstream's relay key does not list capability;
// nil when it does.
func (u *upstreamState) notRelayed(method, capability string) *jsonrpc.Error {
	if slices.Contains(u.Relay, capability) {
		return nil
	}
	return jsonrpc.NewError(jsonrpc.CodeInvalidRequest,
		"The gateway does not relay %s from the server %q: its relay key in gateway.yaml does not list %s", method, u.Name, capability)
}

// relayedCapabilities returns a host's capabilities without those the
// upstream does not relay, for a session of the host's own: the server
// then does not ask for what would only get an error. Capabilities that
// are not an object pass as they are (the upstream rejects them, as it
// would the host's).
func (u *upstreamState) relayedCapabilities(caps json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(caps, &m) != nil || m == nil {
		return caps
	}
	removed := false
	for _, capability := range []string{"sampling", "elicitation", "roots"} {
		if _, ok := m[capability]; ok && !slices.Contains(u.Relay, capability) {
			delete(m, capability)
			removed = true
		}
	}
	if !removed {
		return caps
	}
	out, _ := json.Marshal(m)
	return out
}

// requiredCapability is the client capability a server request needs.
func requiredCapability(method string) string {
	switch method {
	case "sampling/createMessage":
		return "sampling"
	case "elicitation/create":
		return "elicitation"
	case "roots/list":
		return "roots"
	}
	return ""
}

// callSet is the calls in flight on one upstream.
type callSet struct {
	mu    sync.Mutex // guards calls
	calls map[*call]struct{}
}

func (s *callSet) add(cl *call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls == nil {
		s.calls = map[*call]struct{}{}
	}
	s.calls[cl] = struct{}{}
}

func (s *callSet) remove(cl *call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.calls, cl)
}

// oneHost returns a call in flight that keep accepts, when all such
// calls belong to one host (a parked call is a host of its own); nil
// when there is none, or they belong to several hosts.
func (s *callSet) oneHost(keep func(*call) bool) *call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var found *call
	var key string
	for cl := range s.calls {
		if !keep(cl) {
			continue
		}
		// A host is a legacy session; a call without one (a modern
		// request, parked or not) stands for itself.
		k := fmt.Sprintf("call:%p", cl)
		if c := cl.getCaller(); cl.parked == nil && c.Session != "" {
			k = "session:" + c.Session
		}
		switch {
		case found == nil:
			found, key = cl, k
		case k != key:
			return nil
		}
	}
	return found
}

// only returns the one call in flight that keep accepts, or nil when
// there is none or more than one.
func (s *callSet) only(keep func(*call) bool) *call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var found *call
	for cl := range s.calls {
		if !keep(cl) {
			continue
		}
		if found != nil {
			return nil
		}
		found = cl
	}
	return found
}

// upstreamNotification routes a notification an upstream sent outside
// any call's own stream (stdio, the legacy GET stream, a listen stream).
func (r *Router) upstreamNotification(u *upstreamState, calls *callSet, n *jsonrpc.Message) {
	switch n.Method {
	case "notifications/progress":
		tok, _ := jsonrpc.StringField(n.Params, "progressToken")
		r.mu.Lock()
		cl := r.progress[tok]
		r.mu.Unlock()
		if cl != nil && cl.calls == calls {
			// Only a call on this connection: progress from a per-client
			// session never reaches another host's call.
			cl.Notify(n)
		}
	case "notifications/message":
		// A log message on a shared connection belongs to no host; it is
		// relayed only when one call is in flight, the only one it can be
		// about.
		if cl := calls.only(func(cl *call) bool { return cl.getCaller().Host != nil }); cl != nil {
			cl.Notify(n)
			return
		}
		r.log.Debug("upstream log message not relayed", keyUpstream, u.Name)
	case "notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed":
		r.relist(u)
	case "notifications/resources/updated":
		r.resourceUpdated(u, n)
	default:
		r.log.Debug("upstream notification not relayed", keyUpstream, u.Name, keyMethod, n.Method)
	}
}

// upstreamRequest answers a request an upstream sent outside any call's
// own stream. One that names a task (related-task) goes to the
// tasks/result open for that task on this connection. Otherwise, on a
// shared stdio connection nothing says which call it
// serves: it goes to the host whose calls in flight can answer it, and
// the host gate (hostGate) makes sure that is one host. Should several
// hosts still qualify (a request outside any call, say), the gateway
// cannot tell them apart and the upstream gets an error at once.
func (r *Router) upstreamRequest(ctx context.Context, u *upstreamState, calls *callSet, req *jsonrpc.Message) *jsonrpc.Message {
	if req.Method == "ping" {
		return &jsonrpc.Message{Result: json.RawMessage("{}")}
	}
	capability := requiredCapability(req.Method)
	if capability == "" {
		return &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "Method not found: the gateway does not relay %s", req.Method)}
	}
	if e := u.notRelayed(req.Method, capability); e != nil {
		return &jsonrpc.Message{Error: e}
	}
	if cl := calls.forTask(req.Params); cl != nil {
		return cl.Request(ctx, req)
	}
	cl := calls.oneHost(func(cl *call) bool {
		c := cl.getCaller()
		return (c.Host != nil || cl.parked != nil || cl.task != nil) && c.declares(capability)
	})
	if cl == nil {
		r.log.Warn("upstream request with no host to answer it", keyUpstream, u.Name, keyMethod, req.Method)
		return &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeInvalidRequest,
			"No single host with the %s capability has a call in flight, so the gateway cannot relay %s", capability, req.Method)}
	}
	return cl.Request(ctx, req)
}
