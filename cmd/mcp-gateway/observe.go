package main

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/console"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/server"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// The gateway's telemetry is two decorators, installed here when
// anything records: observedDispatcher around the router's Dispatch (a
// server span, host-side metrics and the audit record of each host
// request) and observedUpstream around every upstream client the router
// connects, shared and per-client (a client span and upstream-side
// metrics of each request to an upstream: calls, parked calls, the
// retries of multi round-trip requests, lists, logging/setLevel,
// subscriptions, completions). The router itself records nothing: what
// ran comes back in its Reply.

// observedDispatcher is the router with each host request observed:
// by telemetry when it records (obs), and in the console's recent calls
// when the console is on (calls).
type observedDispatcher struct {
	*router.Router
	obs   *telemetry.Observer // nil: telemetry records nothing
	calls *console.Calls      // nil: no console
}

// dispatcher returns what the server dispatches to: rt, observed when
// anything records (telemetry, or the console's recent calls).
func dispatcher(rt *router.Router, obs *telemetry.Observer, calls *console.Calls) server.Dispatcher {
	if obs != nil && !obs.On() {
		obs = nil
	}
	if obs == nil && calls == nil {
		return rt
	}
	return observedDispatcher{Router: rt, obs: obs, calls: calls}
}

// Dispatch answers req as the router does, observed. The span ends and
// the counters balance even if the router panics.
func (d observedDispatcher) Dispatch(ctx context.Context, c *router.Caller, req *jsonrpc.Request) (reply *router.Reply) {
	if d.calls != nil && req.Method == "tools/call" {
		start := time.Now()
		defer func() {
			call := console.Call{At: start, View: c.View, Principal: c.Principal, Identity: c.Identity, Tool: req.Name,
				Duration: time.Since(start), Outcome: string(telemetry.OutcomeError)}
			if reply != nil {
				call.Upstream = reply.Upstream
				call.Outcome = string(hostResult(ctx, req, reply).Outcome)
			}
			d.calls.Add(call)
		}()
	}
	if d.obs == nil {
		return d.Router.Dispatch(ctx, c, req)
	}
	team, _ := policy.SplitViewKey(c.View) // the team's name on every path: metrics keep their labels
	hr := &telemetry.HostRequest{
		Method: req.Method, Target: hostTarget(req), ProtocolVersion: c.ProtocolVersion,
		Session: c.Session, RequestID: string(req.ID), Team: team, Identity: c.Identity,
		TraceParent: req.Meta.TraceParent, TraceState: req.Meta.TraceState, Baggage: req.Meta.Baggage,
	}
	if req.Method == "tools/call" || req.Method == "prompts/get" {
		hr.Arguments = req.Arguments
	}
	ctx, span := d.obs.Host(ctx, hr)
	defer func() { span.End(ctx, hostResult(ctx, req, reply)) }()
	return d.Router.Dispatch(ctx, c, req)
}

// hostResult is how a host's request ended; reply is nil when Dispatch
// panicked (it never returns nil).
func hostResult(ctx context.Context, req *jsonrpc.Request, reply *router.Reply) telemetry.HostResult {
	if reply == nil {
		return telemetry.HostResult{Outcome: telemetry.OutcomeError, Code: jsonrpc.CodeInternalError, Message: "Internal error: the gateway panicked"}
	}
	res := telemetry.HostResult{Upstream: reply.Upstream, Original: reply.Original, Bytes: len(reply.Result)}
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		// The host went away or cancelled; a deadline is the error the
		// router answered with.
		res.Outcome = telemetry.OutcomeCancelled
	case reply.Error != nil:
		res.Outcome, res.Code, res.Message = telemetry.OutcomeError, reply.Error.Code, reply.Error.Message
		res.Bytes = len(reply.Error.Message) + len(reply.Error.Data)
	case req.Method == "tools/call" && reply.ToolError:
		res.Outcome = telemetry.OutcomeToolError
	default:
		res.Outcome = telemetry.OutcomeOK
	}
	return res
}

// hostTarget is what a host's request names: a tool, a prompt, or a URI.
func hostTarget(req *jsonrpc.Request) string {
	switch req.Method {
	case "tools/call", "prompts/get":
		return req.Name
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		return req.URI
	}
	return ""
}

// upstreamClient is what the gateway connects: an upstream.Client or an
// upstream.Supervised.
type upstreamClient interface {
	router.Upstream
	Subscribe(ctx context.Context, want upstream.Subscriptions) error
}

// observed returns c with each request observed when anything records.
func observed(c upstreamClient, name string, obs *telemetry.Observer) router.Upstream {
	if obs == nil || !obs.On() {
		return c
	}
	return &observedUpstream{upstreamClient: c, name: name, obs: obs}
}

// observedUpstream is an upstream client with each request observed.
type observedUpstream struct {
	upstreamClient
	name string
	obs  *telemetry.Observer
}

// Send sends req as the client does, inside a client span: the client
// writes the span's trace context into the request. Each span ends, and
// the counters balance, even if the client panics.
func (u *observedUpstream) Send(ctx context.Context, req *jsonrpc.Outgoing) (resp *jsonrpc.Message, err error) {
	ctx, span := u.obs.Upstream(ctx, telemetry.UpstreamRequest{Method: req.Method, Upstream: u.name, Target: upstreamTarget(req)})
	returned := false
	defer func() { endUpstream(ctx, span, req.Method, returned, resp, err) }()
	resp, err = u.upstreamClient.Send(ctx, req)
	returned = true
	return resp, err
}

// List lists as the client does, inside one client span for all pages.
func (u *observedUpstream) List(ctx context.Context, method, itemsKey string) (items []json.RawMessage, err error) {
	ctx, span := u.obs.Upstream(ctx, telemetry.UpstreamRequest{Method: method, Upstream: u.name})
	returned := false
	defer func() { endUpstream(ctx, span, method, returned, nil, err) }()
	items, err = u.upstreamClient.List(ctx, method, itemsKey)
	returned = true
	return items, err
}

// Subscribe sets a modern upstream's subscriptions/listen filter as the
// client does, inside a client span that ends once it is acknowledged.
func (u *observedUpstream) Subscribe(ctx context.Context, want upstream.Subscriptions) (err error) {
	ctx, span := u.obs.Upstream(ctx, telemetry.UpstreamRequest{Method: "subscriptions/listen", Upstream: u.name})
	returned := false
	defer func() { endUpstream(ctx, span, "subscriptions/listen", returned, nil, err) }()
	err = u.upstreamClient.Subscribe(ctx, want)
	returned = true
	return err
}

// endUpstream ends the span of a request to an upstream; returned is
// false when the client panicked.
func endUpstream(ctx context.Context, span *telemetry.UpstreamSpan, method string, returned bool, resp *jsonrpc.Message, err error) {
	if !returned {
		span.End(ctx, telemetry.OutcomeError, "panic", errPanicked)
		return
	}
	outcome, errType := upstreamOutcome(ctx, method, resp, err)
	span.End(ctx, outcome, errType, err)
}

var errPanicked = errors.New("the upstream client panicked")

// upstreamTarget is what a request to an upstream names: the upstream's
// own tool or prompt name, or a URI.
func upstreamTarget(req *jsonrpc.Outgoing) string {
	key := "name"
	switch req.Method {
	case "tools/call", "prompts/get":
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		key = "uri"
	default:
		return ""
	}
	s, _ := req.StringParam(key)
	return s
}

// upstreamOutcome classifies how a request to an upstream ended, and its
// error.type.
func upstreamOutcome(ctx context.Context, method string, resp *jsonrpc.Message, err error) (outcome, errType string) {
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return telemetry.OutcomeCancelled, "cancelled"
	case ctx.Err() != nil:
		return telemetry.OutcomeError, "timeout"
	case err != nil:
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) { // a list or subscription the server refused
			return telemetry.OutcomeError, strconv.FormatInt(rpcErr.Code, 10)
		}
		return telemetry.OutcomeError, transportErrorType(err)
	case resp != nil && resp.Error != nil:
		return telemetry.OutcomeError, strconv.FormatInt(resp.Error.Code, 10)
	case resp != nil && method == "tools/call" && resp.ToolError:
		return telemetry.OutcomeToolError, "tool_error"
	}
	return telemetry.OutcomeOK, ""
}

// transportErrorType names a transport failure for error.type.
func transportErrorType(err error) string {
	var down *upstream.UnavailableError
	switch {
	case errors.As(err, &down) && errors.Is(err, upstream.ErrBreakerOpen):
		return "breaker_open"
	case errors.As(err, &down):
		return "unavailable"
	case errors.Is(err, upstream.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, upstream.ErrOverloaded):
		return "overloaded"
	case errors.Is(err, upstream.ErrClosed):
		return "connection_lost"
	}
	return "transport"
}

// observeState registers the gauges of rt's upstreams and views.
func observeState(obs *telemetry.Observer, rt *router.Router) error {
	if obs == nil {
		return nil
	}
	return obs.ObserveState(func() []telemetry.UpstreamReport {
		var out []telemetry.UpstreamReport
		for _, s := range rt.Status() {
			out = append(out, telemetry.UpstreamReport{Name: s.Name, State: string(s.State), Restarts: s.Restarts})
		}
		return out
	}, func() []telemetry.ViewReport {
		var out []telemetry.ViewReport
		for _, v := range rt.Views() {
			out = append(out, telemetry.ViewReport{Name: v.Name, Tools: v.Tools, Tokens: rt.ViewTokens(v.Name), ListedTokens: rt.ListedTokens(v.Name)})
		}
		return out
	})
}
