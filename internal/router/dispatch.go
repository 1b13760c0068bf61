package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcpheader"
	"github.com/mcp-gateway/mcp-gateway/internal/namespace"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// Caller describes who sends a request: its protocol era and version,
// its capabilities, and the way back to it. Teams and identities will be
// added here.
type Caller struct {
	// ProtocolVersion is the legacy session's negotiated version, or the
	// modern request's declared version.
	ProtocolVersion string
	// Session identifies a legacy session in logs; empty for modern.
	Session string
	// Capabilities are the host's client capabilities (raw): from its
	// initialize, or from the modern request's _meta.
	Capabilities json.RawMessage
	// LogLevel is the least severe log level the host wants: set by
	// logging/setLevel (legacy) or _meta (modern). Empty means the legacy
	// default (everything the server sends) or, for a modern host, none.
	LogLevel string
	// Host is the way back to the host for this request; nil when there
	// is none.
	Host Host
	// View is the caller's view: its team's name, or "" for the default
	// view, narrowed on a profile's path (policy.ViewKey: team/profile).
	// A view that does not exist sees nothing. What is bound to the
	// caller (owner) is bound to the whole key, profile included.
	View string
	// Principal is who the caller is (policy.Identity.ID): what the
	// router keeps for a caller (per-client upstream sessions, parked
	// calls, sealed request state) is bound to it and its view. ""
	// without authentication.
	Principal string
	// Identity names the caller's credential for the audit log (a key's
	// id, never the key); "" without authentication.
	Identity string
	// Token is the caller's validated OAuth access token (auth.mode
	// oauth; never an API key), carried only so that an upstream with
	// auth.token_exchange can exchange it for a token of its own (RFC
	// 8693). It is never sent to an upstream as such, and never logged:
	// it formats as "[token]".
	Token HostToken

	// fromPeer marks a request another replica sent (peers.go), which is
	// answered here or not at all.
	fromPeer bool
}

// HostToken is a host's bearer token (Caller.Token). It hides its value
// from fmt, slog and encoding/json.
type HostToken string

func (HostToken) String() string       { return "[token]" }
func (HostToken) GoString() string     { return "[token]" }
func (HostToken) LogValue() slog.Value { return slog.StringValue("[token]") }

// MarshalJSON hides the value from encoding/json (a slog JSON handler
// marshals a logged Caller that way).
func (HostToken) MarshalJSON() ([]byte, error) { return []byte(`"[token]"`), nil }

// withSubject gives ctx the caller's token for token exchange
// (upstream.WithSubject); ctx as it is when the caller has none.
func withSubject(ctx context.Context, c *Caller) context.Context {
	if c.Token == "" || c.Principal == "" {
		return ctx
	}
	return upstream.WithSubject(ctx, upstream.NewSubject(c.Principal, string(c.Token)))
}

// owner names who a caller is for what is bound to it: its principal and
// its view, profile included.
func (c *Caller) owner() string { return c.Principal + "\x00" + c.View }

// quotaOwner names who a caller is for what counts against its quotas
// (tasks.max_per_identity, a per-client pool's fairness): its principal
// and its team, without the profile, so that the paths of profiles are
// no way to hold more.
func (c *Caller) quotaOwner() string { return c.Principal + "\x00" + c.team() }

// team is the caller's team ("" for the default view): whose limits it
// is charged to on every path.
func (c *Caller) team() string {
	team, _ := policy.SplitViewKey(c.View)
	return team
}

// Modern reports whether the caller speaks the stateless era.
func (c *Caller) Modern() bool { return isModern(c.ProtocolVersion) }

// declares reports whether the host declared a client capability.
func (c *Caller) declares(capability string) bool {
	v, ok := jsonrpc.Field(c.Capabilities, capability)
	return ok && string(v) != "null"
}

// wantsLog reports whether a notifications/message is at or above the
// host's log level.
func (c *Caller) wantsLog(params json.RawMessage) bool {
	if c.LogLevel == "" {
		return !c.Modern() // modern servers send logs only when asked
	}
	level, _ := jsonrpc.StringField(params, "level")
	return slices.Index(logLevels, level) >= slices.Index(logLevels, c.LogLevel)
}

// Reply is the router's answer to one request: a raw result or an error,
// and what ran.
type Reply struct {
	Result json.RawMessage
	Error  *jsonrpc.Error
	// LacksResultType is set when Result has no "resultType" member (a
	// legacy upstream's), which a modern host requires: the server adds
	// it while writing the result out.
	LacksResultType bool
	// ToolError is set when Result is a tool result with isError.
	ToolError bool
	// NoView is set when the caller's view is a profile's that the
	// configuration no longer has (a reload removed it while the request
	// was on its way): the HTTP server answers 404, as for a path that is
	// not a profile. Error says the same for other fronts.
	NoView bool
	// Upstream and Original say where the request was routed: the
	// upstream, and the name (or URI) it knows the target by; both empty
	// when no upstream was chosen (an unknown or hidden name).
	Upstream, Original string
	// after, when set, rewrites the result once it is in the host's era
	// (a resource read by its gateway form gets that form back).
	after func(json.RawMessage) json.RawMessage
	// unknown is the name or URI of a call that found no upstream: one
	// still in its first start may yet offer it.
	unknown string
	// unknownURI says that unknown is a URI, not a name.
	unknownURI bool
	// src is the upstream's answer that Result passes on, whose era
	// members fitEra translates; nil for a result the gateway built.
	src *jsonrpc.Message
	// via and viaCalls are the upstream connection src came on, and its
	// calls: a task the upstream made lives there (taskremote.go).
	via      Upstream
	viaCalls *callSet
	// settled marks an answer another replica made (peers.go): it is in
	// the host's era already.
	settled bool
}

func errorReply(code int64, format string, args ...any) *Reply {
	return &Reply{Error: jsonrpc.NewError(code, format, args...)}
}

// Supported protocol versions, newest first. The legacy ones are reached
// through initialize, the modern one through per-request _meta.
var (
	ModernVersions = []string{ModernVersion}
	LegacyVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26"}
)

// SupportedVersions returns every version the gateway speaks, newest first.
func SupportedVersions() []string {
	return append(append([]string(nil), ModernVersions...), LegacyVersions...)
}

// removedInModern lists the methods 2026-07-28 removed (changelog, major
// changes 2, 4 and 5): a modern caller gets "method not found" for them.
var removedInModern = map[string]bool{
	"initialize": true, "ping": true, "logging/setLevel": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
}

// Dispatch answers one host request. It never returns nil.
//
// A request waits for no upstream but the one it is routed to: lists are
// answered from what is listed now (an upstream that becomes ready later
// arrives with list_changed), and a call by a name or URI that no
// upstream offers yet waits, for at most ListWait, only for the upstreams
// still in their first start that could offer it, then looks again.
func (r *Router) Dispatch(ctx context.Context, c *Caller, req *jsonrpc.Request) *Reply {
	ctx = withSubject(ctx, c)
	reply := r.dispatch(ctx, c, req)
	if reply.unknown != "" && r.awaitFirstStarts(ctx, c, reply.unknown, reply.unknownURI) {
		reply = r.dispatch(ctx, c, req)
	}
	if reply.settled {
		return reply
	}
	if reply.Result != nil && ((reply.src != nil && reply.src.Members != 0) || (c.Modern() && req.Method == "resources/read")) {
		r.fitEra(c, req.Method, reply)
	}
	if reply.Result != nil && reply.after != nil {
		reply.Result = reply.after(reply.Result)
	}
	return reply
}

// fitEra translates an upstream's result into the caller's era at its
// top level, and nothing else: every other member, content and
// structuredContent included, stays byte for byte. A legacy host loses
// the members only 2026-07-28 defines (changelog, major changes 7 and 8,
// minor change 5; an input_required reaches a legacy host only as the
// gateway's answers to it, see fulfil, or as an error); a modern host's
// resources/read gets the cache hints 2026-07-28 requires
// (CacheableResult) where a legacy upstream gave none (its resultType is
// added as the result goes out, see LacksResultType); and the serverInfo
// in _meta is the gateway's, since the host talks to the gateway. Only a
// result with one of those members, or a modern host's resources/read,
// is copied, once, from where the decoder found them.
func (r *Router) fitEra(c *Caller, method string, reply *Reply) {
	if src := reply.src; src != nil && src.Members != 0 {
		var drop jsonrpc.Members
		if !c.Modern() {
			drop = jsonrpc.ModernMembers
			reply.LacksResultType = true
		}
		var info json.RawMessage
		if src.Members&jsonrpc.MemberMeta != 0 {
			info = r.appendServerInfo(nil)
		}
		reply.Result = src.TranslateResult(drop, info)
	}
	if c.Modern() && method == "resources/read" {
		reply.Result = r.addCacheHints(reply, reply.Result)
	}
}

// addCacheHints gives a modern host's resources/read result the ttlMs
// and cacheScope it lacks: a legacy upstream gives no hints, so the
// result is marked as private and immediately stale. An input_required
// result is not cacheable and gets none.
func (r *Router) addCacheHints(reply *Reply, result json.RawMessage) json.RawMessage {
	var members jsonrpc.Members
	if reply.src != nil {
		members = reply.src.Members
	}
	const hints = jsonrpc.MemberTTLMs | jsonrpc.MemberCacheScope
	if members&hints == hints {
		return result
	}
	if !reply.LacksResultType {
		if rt, _ := jsonrpc.StringField(result, "resultType"); rt == "input_required" {
			return result
		}
	}
	if members&jsonrpc.MemberTTLMs == 0 {
		if out, err := jsonrpc.SetField(result, "ttlMs", json.RawMessage("0")); err == nil {
			result = out
		}
	}
	if members&jsonrpc.MemberCacheScope == 0 {
		if out, err := jsonrpc.SetField(result, "cacheScope", jsonrpc.String("private")); err == nil {
			result = out
		}
	}
	return result
}

func (r *Router) dispatch(ctx context.Context, c *Caller, req *jsonrpc.Request) *Reply {
	if c.Modern() && removedInModern[req.Method] {
		return errorReply(jsonrpc.CodeMethodNotFound, "Method not found: %s is not part of protocol version %s", req.Method, c.ProtocolVersion)
	}
	switch req.Method {
	case "ping":
		return &Reply{Result: json.RawMessage(`{}`), LacksResultType: true}
	case "server/discover":
		return &Reply{Result: r.DiscoverResult()}
	}
	v := r.catalog().view(c.View)
	if v == nil {
		if _, profile := policy.SplitViewKey(c.View); profile != "" {
			// A reload removed the profile and the server still serves
			// its path (until SetProfiles): as unknown as a path that
			// never was one.
			r.log.Debug("request on the path of a profile that no longer exists", keyTeam, c.View)
			return &Reply{NoView: true, Error: jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Not found: no profile %q", profile)}
		}
		r.log.Error("request for a view that does not exist", keyTeam, c.View)
		return errorReply(jsonrpc.CodeInternalError, "Internal error: no view for this caller")
	}
	if reply := checkTaskParam(c, req); reply != nil {
		return reply
	}
	switch req.Method {
	case "tools/list":
		return r.list(c, v, req, "tools", r.listedTools(c, v))
	case "prompts/list":
		return r.list(c, v, req, "prompts", v.promptsJSON)
	case "resources/list":
		return r.list(c, v, req, "resources", v.resourcesJSON)
	case "resources/templates/list":
		return r.list(c, v, req, "resourceTemplates", v.templatesJSON)
	case "tools/call":
		if v.search {
			if reply := r.searchCall(ctx, c, v, req); reply != nil {
				return reply
			}
		}
		return r.callNamed(ctx, c, req, v.tools, "tool")
	case "tasks/get", "tasks/result", "tasks/cancel", "tasks/update", "tasks/list":
		return r.taskRequest(ctx, c, req)
	case "prompts/get":
		return r.callNamed(ctx, c, req, v.prompts, "prompt")
	case "resources/read":
		return r.readResource(ctx, c, v, req)
	case "completion/complete":
		return r.complete(ctx, c, v, req)
	case "logging/setLevel":
		return r.setLogLevel(ctx, c, v, req)
	case "resources/subscribe", "resources/unsubscribe":
		uri := req.URI
		if !req.HasURI {
			return errorReply(jsonrpc.CodeInvalidParams, "%s needs params.uri", req.Method)
		}
		if c.Session == "" {
			return errorReply(jsonrpc.CodeInvalidRequest, "%s needs a session", req.Method)
		}
		if req.Method == "resources/unsubscribe" {
			r.UnsubscribeResource(ctx, c.Session, uri)
		} else if e := r.SubscribeResource(ctx, c, c.Session, uri); e != nil {
			return &Reply{Error: e}
		}
		return &Reply{Result: json.RawMessage(`{}`), LacksResultType: true}
	}
	return errorReply(jsonrpc.CodeMethodNotFound, "Method not found: %s", req.Method)
}

// awaitFirstStarts waits, for at most ListWait, for the upstreams still
// in their first start that could offer name (a tool or prompt name, or
// a URI if uri) to caller c: with every name prefixed, only the upstream
// of the name's prefix; otherwise every one still starting; and only
// where c's view allows the name (a tool's or prompt's exposed name, or
// the resource key <upstream><separator><URI>), so that an upstream the
// view hides answers at once, like one that does not exist, and does not
// reveal that it is starting. It reports whether it waited for any, so
// that the caller looks again. A host that calls a tool it remembers
// just after the gateway starts is then answered by that tool's server,
// and a call of a name nobody offers waits only while some upstream is
// starting.
func (r *Router) awaitFirstStarts(ctx context.Context, c *Caller, name string, uri bool) bool {
	if r.opts.ListWait <= 0 {
		return false
	}
	v := r.catalog().view(c.View)
	if v == nil || !uri && !v.rules.Allows(name) {
		return false // the view will not show it, whoever offers it
	}
	_, names := r.settings()
	sep := names.Separator
	if sep == "" {
		sep = namespace.DefaultSeparator
	}
	prefixed := names.Mode != namespace.ModeOnConflict
	var waits []<-chan struct{}
	for _, u := range r.upstreams() {
		select {
		case <-u.firstDone:
			continue
		default:
		}
		if !uri && prefixed && strings.Contains(name, sep) && !strings.HasPrefix(name, u.Name+sep) {
			continue // another upstream's name (a URI has no prefix)
		}
		if uri {
			own, named := ownURI(u, name)
			if !named && strings.HasPrefix(name, gatewayScheme) {
				continue // another upstream's gateway form
			}
			if !v.rules.Allows(resourceKey(v.names, u, own)) {
				continue // the view hides this upstream's resource
			}
		}
		waits = append(waits, u.firstDone)
	}
	if len(waits) == 0 {
		return false
	}
	t := time.NewTimer(r.opts.ListWait)
	defer t.Stop()
	for _, done := range waits {
		select {
		case <-done:
		case <-t.C:
			return true
		case <-ctx.Done():
			return true // the second look answers at once
		}
	}
	return true
}

// list answers a list method from the caller's view. The gateway returns
// the whole list in one page: a cursor it never issued is invalid.
func (r *Router) list(c *Caller, v *view, req *jsonrpc.Request, key string, body []byte) *Reply {
	if cursor := req.Cursor; cursor != nil && string(cursor) != "null" {
		return errorReply(jsonrpc.CodeInvalidParams, "Invalid cursor: the gateway returns every %s in one page", key)
	}
	out := make([]byte, 0, len(body)+len(key)+96)
	out = append(out, '{')
	out = jsonrpc.AppendString(out, key)
	out = append(out, ':')
	out = append(out, body...)
	if c.Modern() {
		// A view that exposes what its callers find lists tools per
		// identity.
		out = r.appendCacheable(out, v.rules.Private() || (key == "tools" && v.exposing()))
	}
	return &Reply{Result: append(out, '}')}
}

// appendCacheable adds the members every modern cacheable result carries
// (2026-07-28 server/utilities/caching). A team's view differs per
// caller, so its lists are private; the default view is the same for
// everyone, so its lists are public.
func (r *Router) appendCacheable(out []byte, private bool) []byte {
	out = append(out, `,"resultType":"complete","ttlMs":`...)
	out = strconv.AppendInt(out, r.opts.ListTTL.Milliseconds(), 10)
	if private {
		return append(out, `,"cacheScope":"private"`...)
	}
	return append(out, `,"cacheScope":"public"`...)
}

// callNamed routes tools/call and prompts/get by exposed name.
func (r *Router) callNamed(ctx context.Context, c *Caller, req *jsonrpc.Request, n named, kind string) *Reply {
	name := req.Name
	if !req.HasName {
		return errorReply(jsonrpc.CodeInvalidParams, "%s needs params.name", req.Method)
	}
	e := n.byName[name]
	if e == nil {
		if d := n.down[name]; d != nil {
			return routed(r.downReply(d.up, req.Method, name), d.up, d.original)
		}
		reply := errorReply(jsonrpc.CodeInvalidParams, "Unknown %s: %s", kind, name)
		reply.unknown = name
		return reply
	}
	if err := mcpheader.Ambiguous(e.bindings, req.Arguments); err != nil {
		// The upstream's Mcp-Param-* headers would say one value and its
		// parser might read another.
		return errorReply(jsonrpc.CodeInvalidRequest, "Invalid request: %v", err)
	}
	out := req.Outgoing()
	out.Set("name", jsonrpc.String(e.original))
	if req.Method == "tools/call" {
		return routed(r.callTool(ctx, c, e, req, out), e.up, e.original)
	}
	return routed(r.forward(ctx, c, e.up, req, out, name), e.up, e.original)
}

// routed marks a reply with where its request was routed.
func routed(reply *Reply, u *upstreamState, original string) *Reply {
	reply.Upstream, reply.Original = u.Name, original
	return reply
}

// forward sends a host's request to an upstream, as out (in rewritten
// for it), and turns a transport failure into an answer a model can act
// on.
func (r *Router) forward(ctx context.Context, c *Caller, u *upstreamState, in *jsonrpc.Request, out *jsonrpc.Outgoing, subject string) *Reply {
	method := out.Method
	if in.Task != nil && method != "tools/call" {
		out.Set("task", nil) // ignored (see callTool for tools/call)
	}
	if in.Meta.Has(metaRelatedTask) {
		// A host knows only the gateway's task ids: one it names (or
		// makes up) must not reach an upstream, which could take it for
		// one of its own tasks, perhaps another caller's.
		out.SetMeta(metaRelatedTask, nil)
	}
	interactive := slices.Contains(interactiveMethods, method)
	modernUp := u.isModern() // read once: a re-list may change it
	if (in.HasRequestState || in.InputResponses != nil) && !(c.Modern() && interactive && in.HasRequestState) {
		// Only a modern host's retry of a multi round-trip request
		// carries these, with the requestState the gateway gave it
		// (2026-07-28 basic/patterns/mrtr): anything else is refused,
		// never passed to an upstream that might read it.
		return errorReply(jsonrpc.CodeInvalidParams, "Invalid params: requestState and inputResponses belong only to a retry, in protocol version %s, of the tools/call, prompts/get or resources/read that was answered with input_required, carrying the requestState it was given", ModernVersion)
	}
	if in.HasRequestState {
		// A retry: its state says what it continues, and is opened
		// before anything is taken for the call.
		st, err := r.sealer.open(in.RequestState, c, method, subject)
		switch {
		case err != nil:
			return errorReply(jsonrpc.CodeInvalidParams, "Invalid params: %v", errBadState)
		case st.Parked != "" && r.elsewhere(c, st.Replica):
			// Parked on another replica: answered there.
			return r.askReplica(ctx, c, st.Replica, in, func(bool) *Reply { return interruptedReply(method, subject) })
		case st.Parked != "":
			// A parked call continues; it holds its own session.
			return r.resumeParked(ctx, c, u, st, in)
		case st.Upstream != u.Name || !modernUp:
			return errorReply(jsonrpc.CodeInvalidParams, "Invalid params: %v", errBadState)
		}
		// The retry of an input_required the gateway relayed: its state
		// wraps the upstream's own.
		if st.State != nil {
			out.Set("requestState", *st.State)
		} else {
			out.Set("requestState", nil)
		}
	}
	if r.perClientShared(c, u) && (method != "tools/call" || in.HasRequestState) {
		// A host's own upstream session stays on one replica (callTool
		// checked a tools/call already).
		if reply := r.perClientElsewhere(ctx, c, u, in, method, subject); reply != nil {
			return reply
		}
	}
	if u.pool != nil && r.opts.Peers != nil && c.fromPeer {
		// Sent here by another replica: this one holds the session, and
		// keeps its claim while it is used.
		r.perClientOwner(ctx, c, u, perClientName(c, u))
	}
	// end frees the call's slot: when forward returns, unless the call
	// is parked (forwardParked takes end, set to nil here).
	var end func()
	if r.opts.Limits != nil {
		// A retry with a modern upstream's wrapped state counts as a call
		// too: such a state may be presented again until it expires, and
		// must not be a way around the limits. (A parked call's retry
		// resumed above: it holds the slot its first round took.)
		tool := ""
		if method == "tools/call" {
			tool, _ = out.StringParam("name")
		}
		var why string
		if end, why = r.opts.Limits.call(c, u.Name, tool); end == nil {
			return failedReply(method, subject, why)
		}
		defer func() {
			if end != nil {
				end()
			}
		}()
	}
	client, calls, release := u.Client, &u.calls, func() {}
	var hc *hostConn
	if u.pool != nil {
		var err error
		hc, err = r.acquire(ctx, u, c)
		if err != nil {
			r.log.Warn("upstream call failed", keyUpstream, u.Name, keyMethod, method,
				"name", subject, keySession, c.Session, keyErr, err)
			return r.unavailable(ctx, u, method, subject, err)
		}
		client, calls, release = hc.client, &hc.calls, func() { r.release(u, hc) }
	}
	if interactive && u.gated(c) {
		leave, reply := r.enterGate(ctx, c, u, method, subject)
		if reply != nil {
			release()
			return reply
		}
		prev := release
		release = func() { leave(); prev() }
	}
	if interactive && c.Modern() && !modernUp {
		// The call may outlive this request: the session and the slot
		// are released when the upstream call ends.
		parkedEnd := end
		end = nil
		reply := r.forwardParked(ctx, c, u, client, calls, release, parkedEnd, in, out, subject)
		reply.via, reply.viaCalls = client, calls
		return reply
	}
	defer release()
	cl := r.startCall(c, u, calls, in, out)
	defer cl.end()
	resp, err := client.Send(upstream.WithCallHandler(ctx, cl), out)
	if err == nil && interactive && !c.Modern() && modernUp {
		resp, err = r.fulfil(ctx, u, client, cl, out, resp)
	}
	if err == nil && resp.Error == nil && resp.ResultType == "input_required" {
		if !interactive || !c.Modern() {
			// Nothing can retry it: only a modern host retries, and only
			// the methods that may ask. Its requestState stays here.
			return errorReply(jsonrpc.CodeInternalError, "Internal error: the server %q asked for input on %s, which cannot be answered", u.Name, method)
		}
		if e := u.unrelayedInput(resp); e != nil {
			return &Reply{Error: e}
		}
		resp = r.sealInputRequired(c, u, method, subject, resp)
	}
	if err != nil {
		r.log.Warn("upstream call failed", keyUpstream, u.Name, keyMethod, method,
			"name", subject, keySession, c.Session, keyErr, err)
		if hc != nil && errors.Is(err, upstream.ErrClosed) {
			// The host's own session died (its process crashed): the
			// next call starts a new one.
			r.discard(u, hc)
		}
		return r.unavailable(ctx, u, method, subject, err)
	}
	reply := replyOf(resp)
	reply.via, reply.viaCalls = client, calls
	return reply
}

// replyOf is the reply that passes an upstream's answer on.
func replyOf(resp *jsonrpc.Message) *Reply {
	if resp.Error != nil {
		return &Reply{Error: resp.Error}
	}
	return &Reply{Result: resp.Result, LacksResultType: !resp.HasResultType, ToolError: resp.ToolError, src: resp}
}

// unrelayedInput is the error for a modern upstream's input_required
// result that asks for input the upstream's relay key does not let
// through to hosts, or whose inputRequests cannot be read for certain;
// nil when it asks for nothing withheld. Every member that a parser
// could take for an ask's "method" (a repeated one, one in another case)
// is checked, so that what the host reads was checked here.
func (u *upstreamState) unrelayedInput(resp *jsonrpc.Message) *jsonrpc.Error {
	requests, ok := jsonrpc.Field(resp.Result, "inputRequests")
	if !ok || len(requests) == 0 {
		return nil
	}
	methods, err := askedMethods(requests)
	if err != nil {
		return jsonrpc.NewError(jsonrpc.CodeInternalError, "The server %q sent inputRequests the gateway cannot read: %v", u.Name, err)
	}
	for _, method := range methods {
		if capability := requiredCapability(method); capability != "" {
			if e := u.notRelayed(method, capability); e != nil {
				return e
			}
		}
	}
	return nil
}

// askedMethods returns the value of every member of each input request
// whose name matches "method" in any case, escapes undone: inputRequests
// is an object of objects, and each such member is a string.
func askedMethods(requests json.RawMessage) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(requests))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("inputRequests is not an object")
	}
	var methods []string
	for dec.More() {
		if _, err := dec.Token(); err != nil { // the ask's key
			return nil, err
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return nil, errors.New("an input request is not an object")
		}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return nil, err
			}
			if name, _ := k.(string); strings.EqualFold(name, "method") {
				var m string
				if err := json.Unmarshal(v, &m); err != nil {
					return nil, errors.New("an input request's method is not a string")
				}
				methods = append(methods, m)
			}
		}
		if _, err := dec.Token(); err != nil { // the ask's end
			return nil, err
		}
	}
	return methods, nil
}

// sealInputRequired returns an upstream's input_required answer with its
// requestState sealed for the caller (seal.go): the host gets the
// gateway's state, which carries the upstream's.
func (r *Router) sealInputRequired(c *Caller, u *upstreamState, method, subject string, resp *jsonrpc.Message) *jsonrpc.Message {
	st := sealedState{Owner: c.owner(), Method: method, Subject: subject, Upstream: u.Name}
	if raw, ok := jsonrpc.Field(resp.Result, "requestState"); ok {
		state := append(json.RawMessage(nil), raw...) // resp aliases a shared read buffer
		st.State = &state
	}
	// Every requestState member goes, should the upstream have sent two.
	result, err := jsonrpc.SetField(jsonrpc.DeleteField(resp.Result, "requestState"), "requestState", jsonrpc.String(r.sealer.seal(st)))
	if err != nil {
		return &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeInternalError, "The server %q sent an input_required result that is not an object", u.Name)}
	}
	// What the decoder noted of the upstream's result still holds: its
	// resultType is there (the server must not add a second) and its
	// _meta names the upstream.
	return &jsonrpc.Message{ID: resp.ID, Result: result, ResultType: resp.ResultType, HasResultType: true, Members: resp.Members | jsonrpc.MemberRequestState}
}

// enterGate waits, up to the upstream's timeout, for the call's turn on
// a shared stream that relays server requests (see hostGate). It returns
// the function that ends the turn, or the reply for a call that did not
// get one.
func (r *Router) enterGate(ctx context.Context, c *Caller, u *upstreamState, method, subject string) (func(), *Reply) {
	// A host is a legacy session; a request without one (a modern
	// request) stands for itself.
	key := "session:" + c.Session
	if c.Modern() || c.Session == "" {
		key = "request:" + strconv.FormatUint(r.gateSeq.Add(1), 10)
	}
	waitCtx, cancel := context.WithTimeout(ctx, u.Timeout)
	defer cancel()
	if err := u.gate.enter(waitCtx, key); err != nil {
		if ctx.Err() != nil {
			return nil, failedReply(method, subject, "the request was cancelled")
		}
		return nil, failedReply(method, subject, fmt.Sprintf("the server %q was busy for %s with another host's calls, which may ask their host for input (with session: per-client each host gets a server of its own)", u.Name, u.Timeout))
	}
	return u.gate.leave, nil
}

// unavailable answers a call whose upstream failed in transport. A tool
// call gets a tool result with isError, so that the model reads why and
// can choose another way; other methods get a JSON-RPC error.
func (r *Router) unavailable(ctx context.Context, u *upstreamState, method, subject string, err error) *Reply {
	var why string
	var down *upstream.UnavailableError
	var big *upstream.TooLargeError
	var creds *upstream.CredentialsError
	switch {
	case ctx.Err() != nil:
		why = "the request was cancelled"
	case errors.As(err, &creds):
		why = creds.Error()
	case errors.As(err, &big):
		why = fmt.Sprintf("the answer of the server %q exceeded its max_message_bytes limit (%d bytes); ask for less, or raise the limit", u.Name, big.Limit)
	case errors.As(err, &down):
		why = downReason(u.Name, down.Err, down.RetryAt)
	case errors.Is(err, errNoRoom):
		why = fmt.Sprintf("the server %q has no session free for this caller: all %d it may have are in use by other callers", u.Name, u.MaxClients)
	case errors.Is(err, upstream.ErrOverloaded):
		why = fmt.Sprintf("the server %q is too busy: too many calls are waiting for it", u.Name)
	case isTimeout(err):
		why = fmt.Sprintf("the server %q did not answer within %s", u.Name, u.Timeout)
	default:
		why = fmt.Sprintf("the server %q is unavailable", u.Name)
	}
	return failedReply(method, subject, why)
}

// downReply answers a call to a tool or prompt whose upstream is down
// (restarting, behind an open breaker, or failed for good), at once and
// without I/O.
func (r *Router) downReply(u *upstreamState, method, subject string) *Reply {
	h := u.health()
	phase, retryAt := h.phase, h.retryAt
	cause := upstream.ErrNotReady
	if phase == PhaseUnavailable {
		cause = upstream.ErrBreakerOpen
	}
	if phase == PhaseFailed {
		return failedReply(method, subject, fmt.Sprintf("the server %q stopped after crashing repeatedly, and is not restarted until the gateway's config is reloaded", u.Name))
	}
	return failedReply(method, subject, downReason(u.Name, cause, retryAt))
}

// downReason says why an upstream is unavailable and when it is tried
// again.
func downReason(name string, cause error, retryAt time.Time) string {
	why := fmt.Sprintf("the server %q is restarting", name)
	if errors.Is(cause, upstream.ErrBreakerOpen) {
		why = fmt.Sprintf("the server %q is unavailable after repeated failures", name)
	}
	if !retryAt.IsZero() {
		why += fmt.Sprintf(" (it is retried at %s, in %s)", retryAt.UTC().Format(time.RFC3339), time.Until(retryAt).Round(time.Second))
	}
	return why
}

// failedReply is the answer to a call that could not run: a tool result
// with isError for tools/call, a JSON-RPC error for other methods.
func failedReply(method, subject, why string) *Reply {
	if method != "tools/call" {
		return errorReply(jsonrpc.CodeInternalError, "%s %s failed: %s", method, subject, why)
	}
	return toolErrorReply(fmt.Sprintf("The tool %s could not run: %s. Try again later, or use another tool.", subject, why))
}

// toolErrorReply is a tool result with isError and text: an error the
// model can read and act on (2025-11-25 server/tools "Error Handling").
func toolErrorReply(text string) *Reply {
	out := []byte(`{"content":[{"type":"text","text":`)
	out = jsonrpc.AppendString(out, text)
	out = append(out, `}],"isError":true}`...)
	return &Reply{Result: out, LacksResultType: true, ToolError: true}
}

// isTimeout recognises a timeout: the upstream's own request timeout, or
// a deadline of the caller's context.
func isTimeout(err error) bool {
	return errors.Is(err, upstream.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
}

// readResource routes resources/read by URI.
func (r *Router) readResource(ctx context.Context, c *Caller, v *view, req *jsonrpc.Request) *Reply {
	uri := req.URI
	if !req.HasURI {
		return errorReply(jsonrpc.CodeInvalidParams, "resources/read needs params.uri")
	}
	u, original := v.resourceUpstream(r, uri, r.log)
	if u == nil {
		return resourceNotFound(c, uri)
	}
	out := req.Outgoing()
	if original != uri {
		out.Set("uri", jsonrpc.String(original))
	}
	reply := routed(r.forward(ctx, c, u, req, out, uri), u, original)
	if original != uri {
		// Contents come back under the URI the host asked for, once the
		// result is in the host's era (fitEra rebuilds it from the
		// upstream's answer).
		reply.after = func(result json.RawMessage) json.RawMessage { return contentsAs(result, original, uri) }
	}
	// Dispatch gives a modern host the cache hints (fitEra).
	return reply
}

// resourceNotFound uses the code of the caller's era: 2026-07-28 moved
// "resource not found" from -32002 to -32602.
func resourceNotFound(c *Caller, uri string) *Reply {
	code := int64(-32002)
	if c.Modern() {
		code = jsonrpc.CodeInvalidParams
	}
	reply := errorReply(code, "Resource not found: %s", uri)
	reply.Error.Data, _ = json.Marshal(map[string]string{"uri": uri})
	reply.unknown, reply.unknownURI = uri, true
	return reply
}

// complete routes completion/complete by its reference: a prompt by
// exposed name, a resource template by URI.
func (r *Router) complete(ctx context.Context, c *Caller, v *view, req *jsonrpc.Request) *Reply {
	typ := req.Ref.Type
	switch typ {
	case "ref/prompt":
		name := req.Ref.Name
		e := v.prompts.byName[name]
		if e == nil {
			reply := errorReply(jsonrpc.CodeInvalidParams, "Unknown prompt: %s", name)
			reply.unknown = name
			return reply
		}
		out := req.Outgoing()
		out.Set("ref", req.Ref.With("name", jsonrpc.String(e.original)))
		return routed(r.forward(ctx, c, e.up, req, out, name), e.up, e.original)
	case "ref/resource":
		uri := req.Ref.URI
		u, original := v.resourceUpstream(r, uri, r.log)
		if u == nil {
			return resourceNotFound(c, uri)
		}
		out := req.Outgoing()
		if original != uri {
			out.Set("ref", req.Ref.With("uri", jsonrpc.String(original)))
		}
		return routed(r.forward(ctx, c, u, req, out, uri), u, original)
	case "":
		return errorReply(jsonrpc.CodeInvalidParams, "completion/complete needs params.ref with a type")
	}
	return errorReply(jsonrpc.CodeInvalidParams, "completion/complete: unknown ref type %q", typ)
}

// logLevels are the syslog severities MCP logging uses (2025-11-25
// server/utilities/logging).
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// setLogLevel accepts a legacy host's logging/setLevel and passes it on to
// every serving legacy upstream that offers logging and that the caller's
// view shows something of: to the host's own session of a per-client
// upstream, else to the shared session, where the level applies to the
// upstream as a whole (the gateway still relays messages only to hosts
// whose own level lets them through).
func (r *Router) setLogLevel(ctx context.Context, c *Caller, v *view, req *jsonrpc.Request) *Reply {
	if !slices.Contains(logLevels, req.Level) {
		return errorReply(jsonrpc.CodeInvalidParams, "Invalid params: level must be one of %s", strings.Join(logLevels, ", "))
	}
	var wg sync.WaitGroup
	for _, u := range r.upstreams() {
		if !v.shows(u) {
			continue
		}
		eligible := u.health().serving() && !u.isModern() && parseCapabilities(u.Client.Capabilities()).logging
		if !eligible {
			continue
		}
		out := req.Outgoing() // one each, made here: Outgoing is not safe for concurrent use
		wg.Go(func() {
			callCtx, cancel := context.WithTimeout(ctx, u.Timeout)
			defer cancel()
			client := u.Client
			if u.pool != nil {
				// The level belongs to the host's own session.
				hc, err := r.acquire(callCtx, u, c)
				if err != nil {
					r.log.Warn("upstream rejected logging/setLevel", keyUpstream, u.Name, keySession, c.Session, keyErr, err)
					return
				}
				defer r.release(u, hc)
				client = hc.client
			}
			resp, err := client.Send(callCtx, out)
			if err == nil && resp.Error != nil {
				err = resp.Error
			}
			if err != nil {
				r.log.Warn("upstream rejected logging/setLevel", keyUpstream, u.Name, keySession, c.Session, keyErr, err)
			}
		})
	}
	wg.Wait()
	return &Reply{Result: json.RawMessage(`{}`), LacksResultType: true}
}

// The capabilities the gateway offers hosts, per revision. They are
// fixed, so that a host sees the same capabilities whichever upstreams
// are up: a feature no upstream offers simply lists nothing. A
// 2025-11-25 host is told of tasks ("Server Capabilities": the gateway
// lists and cancels the tasks it hands out, and tools/call may be
// task-augmented, for the tools whose execution.taskSupport says so); a
// modern host of the tasks extension (ext-tasks "Capability
// Negotiation"); an earlier legacy host of neither.
const (
	capabilitiesJSON       = `{"tools":{"listChanged":true},"prompts":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"completions":{},"logging":{}}`
	tasksCapabilitiesJSON  = `{"tools":{"listChanged":true},"prompts":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"completions":{},"logging":{},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}}`
	modernCapabilitiesJSON = `{"tools":{"listChanged":true},"prompts":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"completions":{},"logging":{},"extensions":{"` + extTasks + `":{}}}`
)

// InitializeResult answers a legacy initialize for the negotiated version.
func (r *Router) InitializeResult(version string) json.RawMessage {
	out := []byte(`{"protocolVersion":`)
	out = jsonrpc.AppendString(out, version)
	caps := capabilitiesJSON
	if version >= tasksVersion {
		caps = tasksCapabilitiesJSON
	}
	out = append(out, `,"capabilities":`+caps+`,"serverInfo":`...)
	out = r.appendServerInfo(out)
	if ins := r.instructions(); ins != "" {
		out = append(out, `,"instructions":`...)
		out = jsonrpc.AppendString(out, ins)
	}
	return append(out, '}')
}

// DiscoverResult answers server/discover (2026-07-28 server/discover).
func (r *Router) DiscoverResult() json.RawMessage {
	versions, _ := json.Marshal(SupportedVersions())
	out := []byte(`{"resultType":"complete","supportedVersions":`)
	out = append(out, versions...)
	out = append(out, `,"capabilities":`+modernCapabilitiesJSON+`,"_meta":{"io.modelcontextprotocol/serverInfo":`...)
	out = r.appendServerInfo(out)
	out = append(out, '}')
	if ins := r.instructions(); ins != "" {
		out = append(out, `,"instructions":`...)
		out = jsonrpc.AppendString(out, ins)
	}
	out = r.appendCacheable(out, false)
	return append(out, '}')
}

func (r *Router) appendServerInfo(out []byte) []byte {
	info, _ := json.Marshal(r.opts.ServerInfo)
	return append(out, info...)
}

// instructions joins the instructions the last catalog build vetted and
// kept, of every upstream still serving, each under its upstream's name,
// so that a model knows which server says what. It never reads an
// upstream's instructions live: those may have changed since the build
// (a restart), unvetted.
func (r *Router) instructions() string {
	var b strings.Builder
	for _, in := range r.catalog().instructions {
		if !in.up.health().serving() {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "## %s\n%s", in.up.Name, in.text)
	}
	return b.String()
}

// NegotiateLegacy picks the legacy version to answer an initialize with:
// the client's if the gateway speaks it, else the newest legacy version
// (2025-11-25 basic/lifecycle "Version Negotiation").
func NegotiateLegacy(requested string) string {
	for _, v := range LegacyVersions {
		if v == requested {
			return v
		}
	}
	return LegacyVersions[0]
}

// Supported reports whether the gateway speaks version v.
func Supported(v string) bool {
	for _, s := range SupportedVersions() {
		if s == v {
			return true
		}
	}
	return false
}
