package router

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/state"
)

// Replicas of one gateway (state.store: redis) answer any host, but two
// things live in one process: a legacy upstream call parked for a modern
// host's input (mrtr.go), and a task (tasks.go). Their handles name the
// replica (the sealed requestState's Replica, a task id's middle), and a
// request that reaches another replica is answered there: this replica
// sends the request, with who asked, through Peers, and passes the answer
// on. The gateway never re-runs such a call elsewhere: when the replica
// holding it is gone, the host hears that the call was interrupted.
//
// What is sent carries the caller's identity and view as this replica
// authenticated them, and its bearer token for an upstream that exchanges
// it; messages between replicas are sealed with the shared key
// (state.Store), so only a replica can send or read one. The way back to
// the host is not sent: progress of a call answered on another replica
// does not reach the host.

// Peers reach the other replicas (*state.Store).
type Peers interface {
	// Replica is this replica's id.
	Replica() string
	// Call runs payload on replica (ServePeer there): state.ErrReplicaGone
	// when that replica is not running, state.ErrInterrupted when it
	// stopped during the call.
	Call(ctx context.Context, replica string, payload []byte) ([]byte, error)
	// Claim makes this replica the owner of name for ttl unless another
	// replica owns it (renewing its own claim), and returns the owner.
	Claim(ctx context.Context, name string, ttl time.Duration) (string, error)
	// Disown ends replica's claim of name.
	Disown(ctx context.Context, name, replica string) error
}

// peerCall is a request that another replica answers.
type peerCall struct {
	Caller  peerCaller      `json:"c"`
	Request json.RawMessage `json:"r"`
}

type peerCaller struct {
	ProtocolVersion string          `json:"v"`
	Session         string          `json:"s,omitempty"`
	Capabilities    json.RawMessage `json:"caps,omitempty"`
	LogLevel        string          `json:"l,omitempty"`
	View            string          `json:"t,omitempty"`
	Principal       string          `json:"p,omitempty"`
	Identity        string          `json:"i,omitempty"`
	// Token is the host's bearer token (Caller.Token), for an upstream
	// that exchanges it; the message is sealed.
	Token string `json:"tk,omitempty"`
}

// peerReply is its answer.
type peerReply struct {
	Result          json.RawMessage `json:"r,omitempty"`
	Error           *jsonrpc.Error  `json:"e,omitempty"`
	LacksResultType bool            `json:"lrt,omitempty"`
	ToolError       bool            `json:"te,omitempty"`
	Upstream        string          `json:"u,omitempty"`
	Original        string          `json:"o,omitempty"`
}

// replica is this replica's id; "" without peers.
func (r *Router) replica() string {
	if r.opts.Peers == nil {
		return ""
	}
	return r.opts.Peers.Replica()
}

// elsewhere reports whether replica names another replica that this one
// can reach. A request that came from another replica is never sent on.
func (r *Router) elsewhere(c *Caller, replica string) bool {
	return replica != "" && r.opts.Peers != nil && !c.fromPeer && replica != r.opts.Peers.Replica()
}

// askReplica has replica answer req for c. gone answers when that
// replica is not running: delivered says whether it got the request
// (and stopped while it ran it), which may then have taken effect.
func (r *Router) askReplica(ctx context.Context, c *Caller, replica string, req *jsonrpc.Request, gone func(delivered bool) *Reply) *Reply {
	raw := jsonrpc.AppendRequest(nil, req.ID, req.Method, req.Params)
	payload, _ := json.Marshal(peerCall{Caller: peerCaller{
		ProtocolVersion: c.ProtocolVersion, Session: c.Session, Capabilities: c.Capabilities, LogLevel: c.LogLevel,
		View: c.View, Principal: c.Principal, Identity: c.Identity, Token: string(c.Token),
	}, Request: raw})
	answer, err := r.opts.Peers.Call(ctx, replica, payload)
	var pr peerReply
	switch {
	case errors.Is(err, state.ErrReplicaGone), errors.Is(err, state.ErrInterrupted):
		r.log.Warn("the replica holding a call is gone", keyMethod, req.Method, "replica", replica)
		return gone(errors.Is(err, state.ErrInterrupted))
	case err != nil:
		r.log.Warn("cannot reach the replica holding a call", keyMethod, req.Method, "replica", replica, keyErr, err)
		return errorReply(jsonrpc.CodeInternalError, "Internal error: the gateway replica holding this call cannot be reached (the gateway's shared state does not answer); try again")
	case json.Unmarshal(answer, &pr) != nil || (pr.Result == nil && pr.Error == nil):
		return errorReply(jsonrpc.CodeInternalError, "Internal error: the gateway replica holding this call answered with nothing")
	}
	return &Reply{Result: pr.Result, Error: pr.Error, LacksResultType: pr.LacksResultType, ToolError: pr.ToolError,
		Upstream: pr.Upstream, Original: pr.Original, settled: true}
}

// ServePeer answers a request another replica sent (Peers.Call there).
func (r *Router) ServePeer(ctx context.Context, payload []byte) []byte {
	var pc peerCall
	var reply *Reply
	if err := json.Unmarshal(payload, &pc); err != nil {
		reply = errorReply(jsonrpc.CodeInternalError, "Internal error: a malformed request from another replica")
	} else if req, err := jsonrpc.DecodeRequest(pc.Request); err != nil {
		reply = errorReply(jsonrpc.CodeInternalError, "Internal error: a malformed request from another replica: %v", err)
	} else {
		c := &Caller{ProtocolVersion: pc.Caller.ProtocolVersion, Session: pc.Caller.Session, Capabilities: pc.Caller.Capabilities,
			LogLevel: pc.Caller.LogLevel, View: pc.Caller.View, Principal: pc.Caller.Principal, Identity: pc.Caller.Identity,
			Token: HostToken(pc.Caller.Token), fromPeer: true}
		reply = r.Dispatch(ctx, c, req)
	}
	out, _ := json.Marshal(peerReply{Result: reply.Result, Error: reply.Error, LacksResultType: reply.LacksResultType,
		ToolError: reply.ToolError, Upstream: reply.Upstream, Original: reply.Original})
	return out
}

// interruptedReply answers a retry of a call whose replica is gone. The
// call may have reached the upstream, so the gateway does not run it
// again: the host (or its user) decides.
func interruptedReply(method, subject string) *Reply {
	const why = "the gateway replica running it stopped before it finished. It may have taken effect; run it again only if that is safe"
	if method != "tools/call" {
		return errorReply(jsonrpc.CodeInternalError, "%s %s was interrupted: %s", method, subject, why)
	}
	return toolErrorReply("The call to " + subject + " was interrupted: " + why + ".")
}

// newTaskID returns a new task id: with peers, it names this replica.
func (r *Router) newTaskID() string {
	if rep := r.replica(); rep != "" {
		return taskIDPrefix + rep + "." + randomTag()
	}
	return taskIDPrefix + randomTag()
}

const taskIDPrefix = "gw-task-"

// taskReplica returns the replica a task id names; "" for none.
func taskReplica(id string) string {
	rest, ok := strings.CutPrefix(id, taskIDPrefix)
	if !ok {
		return ""
	}
	rep, _, ok := strings.Cut(rest, ".")
	if !ok {
		return ""
	}
	return rep
}

// ownerTTL is how long this replica trusts what it learnt of who holds a
// host's per-client upstream session before asking Redis again: a host's
// calls cost one round trip per ownerTTL, not one each.
const ownerTTL = 2 * time.Second

// owners caches which replica holds each host's per-client upstream
// session (Peers.Claim).
type owners struct {
	cache *lru.Cache[string, ownerEntry]
}

type ownerEntry struct {
	replica string
	until   time.Time
}

// perClientOwner returns the replica that holds, or is to hold, c's
// per-client session of u: this one when none does. "" when Redis does
// not answer: the call is served here.
func (r *Router) perClientOwner(ctx context.Context, c *Caller, u *upstreamState, name string) string {
	now := time.Now()
	if e, ok := r.owners.cache.Get(name); ok && now.Before(e.until) {
		return e.replica
	}
	owner, err := r.opts.Peers.Claim(ctx, name, u.ClientIdle)
	if err != nil {
		// Served here for a while: a call does not wait for Redis each
		// time while it is down.
		r.log.Warn("cannot learn which replica holds a per-client session: serving it here", keyUpstream, u.Name, keyErr, err)
		r.owners.cache.Add(name, ownerEntry{replica: r.opts.Peers.Replica(), until: now.Add(ownerTTL)})
		return ""
	}
	r.owners.cache.Add(name, ownerEntry{replica: owner, until: now.Add(ownerTTL)})
	return owner
}

// perClientElsewhere sends a call to a per-client upstream to the replica
// that holds the caller's upstream session (a stateful process keeps its
// state for the host there); nil when this replica holds it, or is to.
// When the holder is gone before it got the call, this replica takes the
// session over: the call starts a new one here.
func (r *Router) perClientElsewhere(ctx context.Context, c *Caller, u *upstreamState, in *jsonrpc.Request, method, subject string) *Reply {
	name := perClientName(c, u)
	owner := r.perClientOwner(ctx, c, u, name)
	if !r.elsewhere(c, owner) {
		return nil
	}
	return r.askReplica(ctx, c, owner, in, func(delivered bool) *Reply {
		r.owners.cache.Remove(name)
		if err := r.opts.Peers.Disown(ctx, name, owner); err != nil {
			r.log.Warn("cannot take over a per-client session", keyUpstream, u.Name, keyErr, err)
		}
		if delivered {
			return interruptedReply(method, subject)
		}
		if next := r.perClientOwner(ctx, c, u, name); r.elsewhere(c, next) {
			// Another replica took it over first.
			return r.askReplica(ctx, c, next, in, func(bool) *Reply { return interruptedReply(method, subject) })
		}
		r.log.Warn("the replica holding a host's per-client upstream session is gone: a new session starts here",
			keyUpstream, u.Name, "replica", owner, keySession, c.Session)
		local := *c
		local.fromPeer = true // answered here
		return r.dispatch(ctx, &local, in)
	})
}

// perClientShared reports whether c's calls to u go to the replica that
// holds c's per-client session of u.
func (r *Router) perClientShared(c *Caller, u *upstreamState) bool {
	return u.pool != nil && r.opts.Peers != nil && !c.fromPeer
}

// perClientName names c's per-client session of u in the replicas'
// claims.
func perClientName(c *Caller, u *upstreamState) string { return u.Name + "\x00" + hostKey(c) }
