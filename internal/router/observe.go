package router

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// The router's telemetry: a server span and the host-side metrics for
// every request it answers, a client span and the upstream-side metrics
// for every call it forwards, an audit record for each tool call, prompt
// and resource read, and gauges of upstream and view state. With
// telemetry off (no exporter, no audit) none of it runs.

// observer is the router's telemetry.
type observer struct {
	tel   *telemetry.Telemetry
	in    *telemetry.Instruments
	audit *telemetry.Audit
	// on: something records (spans, metrics or the audit log).
	on bool
	// gauges is the registration of the observed gauges.
	gauges metric.Registration
	// sets caches the attribute sets of measurements (attrKey ->
	// measure): building one allocates, and the few combinations repeat
	// on every call. cached counts them.
	sets   sync.Map
	cached atomic.Int64
	// server and client count the requests in progress, for the
	// observed ServerActive and ClientActive.
	server, client activeCounts
}

// activeCounts counts requests in progress by attribute set (attrKey ->
// *activeCount): a request adds to its counter, and a metrics collection
// reads them all. At most maxActiveSeries sets are counted apart (the
// method of a host's request is any string it sends); the requests of
// the others share one counter marked otel.metric.overflow, as the OTel
// SDK marks the series over its cardinality limit.
type activeCounts struct {
	m        sync.Map
	n        atomic.Int64 // sets in m
	overflow activeCount
}

type activeCount struct {
	n    atomic.Int64
	opts []metric.ObserveOption // the attribute set
}

// maxActiveSeries bounds the series of each active-requests counter.
const maxActiveSeries = 1000

var overflowOpts = []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(attribute.Bool("otel.metric.overflow", true)))}

// get returns the counter of k.
func (a *activeCounts) get(o *observer, k attrKey) *activeCount {
	if v, ok := a.m.Load(k); ok {
		return v.(*activeCount)
	}
	if a.n.Load() >= maxActiveSeries {
		return &a.overflow
	}
	c := &activeCount{opts: []metric.ObserveOption{o.measurement(k).observe}}
	if v, loaded := a.m.LoadOrStore(k, c); loaded {
		return v.(*activeCount)
	}
	a.n.Add(1)
	return c
}

// observe reports every counter to inst.
func (a *activeCounts) observe(o metric.Observer, inst metric.Int64Observable) {
	a.m.Range(func(_, v any) bool {
		c := v.(*activeCount)
		o.ObserveInt64(inst, c.n.Load(), c.opts...)
		return true
	})
	if a.n.Load() >= maxActiveSeries {
		o.ObserveInt64(inst, a.overflow.n.Load(), overflowOpts...)
	}
}

// maxCachedSets bounds the attribute-set cache; combinations beyond it
// are built per measurement.
const maxCachedSets = 10000

// attrKey is the attributes of one measurement.
type attrKey struct {
	active                                   bool // an active-requests counter (method and upstream only)
	client                                   bool
	method, upstream, team, outcome, errType string
	target                                   string
}

// measure is the options that carry one measurement's attributes: as
// Record's variadic arguments (passing a cached slice spares the slice
// each call would otherwise allocate), and as the option of an
// observation (activeCounts).
type measure struct {
	record  []metric.RecordOption
	observe metric.ObserveOption
}

// measurement returns the options carrying k's attributes.
func (o *observer) measurement(k attrKey) measure {
	if v, ok := o.sets.Load(k); ok {
		return v.(measure)
	}
	attrs := []attribute.KeyValue{telemetry.AttrMethod.String(k.method)}
	if k.client || k.upstream != "" {
		attrs = append(attrs, telemetry.AttrUpstream.String(k.upstream))
	}
	if !k.active {
		attrs = append(attrs, telemetry.AttrOutcome.String(k.outcome))
		if !k.client {
			attrs = append(attrs, telemetry.AttrTeam.String(viewLabel(k.team)))
		}
		if k.target != "" {
			attrs = append(attrs, targetKey(k.method).String(k.target))
		}
		if k.errType != "" {
			attrs = append(attrs, telemetry.AttrErrorType.String(k.errType))
		}
	}
	opt := metric.WithAttributeSet(attribute.NewSet(attrs...))
	m := measure{record: []metric.RecordOption{opt}, observe: opt}
	if o.cached.Load() < maxCachedSets {
		if _, loaded := o.sets.LoadOrStore(k, m); !loaded {
			o.cached.Add(1)
		}
	}
	return m
}

func (r *Router) newObserver() error {
	tel := r.opts.Telemetry
	if tel == nil {
		tel = telemetry.Disabled()
	}
	in, err := telemetry.NewInstruments(tel.Meter)
	if err != nil {
		return err
	}
	r.obs = observer{tel: tel, in: in, audit: r.opts.Audit, on: tel.Tracing() || tel.Metering() || r.opts.Audit != nil}
	if !tel.Metering() {
		return nil
	}
	m := tel.Meter
	state, err := m.Int64ObservableGauge("mcp_gateway.upstream.state",
		metric.WithDescription("1 for each upstream's current state (starting, ready, degraded, restarting, breaker_open, failed, stopped)."))
	if err != nil {
		return err
	}
	restarts, err := m.Int64ObservableCounter("mcp_gateway.upstream.restarts",
		metric.WithUnit("{restart}"), metric.WithDescription("Connections made to an upstream after its first (crashed stdio servers started again)."))
	if err != nil {
		return err
	}
	tools, err := m.Int64ObservableGauge("mcp_gateway.view.tools",
		metric.WithUnit("{tool}"), metric.WithDescription("Tools exposed in each view."))
	if err != nil {
		return err
	}
	tokens, err := m.Int64ObservableGauge("mcp_gateway.view.tokens",
		metric.WithUnit("{token}"), metric.WithDescription("Estimated tokens of each view's tool definitions (cl100k_base)."))
	if err != nil {
		return err
	}
	r.obs.gauges, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, s := range r.Status() {
			up := telemetry.AttrUpstream.String(s.Name)
			o.ObserveInt64(state, 1, metric.WithAttributes(up, telemetry.AttrState.String(string(s.State))))
			o.ObserveInt64(restarts, int64(s.Restarts), metric.WithAttributes(up))
		}
		for name, v := range r.catalog().views {
			view := metric.WithAttributes(telemetry.AttrView.String(viewLabel(name)))
			o.ObserveInt64(tools, int64(len(v.tools.entries)), view)
			o.ObserveInt64(tokens, int64(r.viewTokens(v)), view)
		}
		r.obs.server.observe(o, in.ServerActive)
		r.obs.client.observe(o, in.ClientActive)
		return nil
	}, state, restarts, tools, tokens, in.ServerActive, in.ClientActive)
	return err
}

// viewLabel names a view in metrics: "default" for the default view.
func viewLabel(name string) string {
	if name == "" {
		return "default"
	}
	return name
}

// viewTokens is the estimated size of a view's tools: as its token
// limit measured it, else counted at the first scrape of this catalog.
func (r *Router) viewTokens(v *view) int {
	if v.rules.MaxTokens > 0 {
		return v.tokens
	}
	v.measured.Do(func() {
		for _, e := range v.tools.entries {
			v.measuredTokens += r.tokens(e.def)
		}
	})
	return v.measuredTokens
}

// transportErrorType names a transport failure for error.type.
func transportErrorType(err error) string {
	var down *upstream.UnavailableError
	switch {
	case errors.As(err, &down) && errors.Is(err, upstream.ErrBreakerOpen):
		return "breaker_open"
	case errors.As(err, &down):
		return "unavailable"
	case isTimeout(err):
		return "timeout"
	case errors.Is(err, upstream.ErrOverloaded):
		return "overloaded"
	case errors.Is(err, upstream.ErrClosed):
		return "connection_lost"
	}
	return "transport"
}

// callInfo is what dispatching learned about a request, for its span,
// metrics and audit record: the upstream it went to.
type callInfo struct {
	upstream, original string

	// checked is the upstream result whose isError member the client
	// span looked up, and toolError what it said: the server span reuses
	// the answer instead of scanning a large result again. All of a
	// callInfo is written and read on the request's own goroutine.
	checked   json.RawMessage
	toolError bool
}

type callInfoKey struct{}

// noteCall records where a request went, when it is observed.
func noteCall(ctx context.Context, upstream, original string) {
	if ci, ok := ctx.Value(callInfoKey{}).(*callInfo); ok {
		ci.upstream, ci.original = upstream, original
	}
}

// audited are the methods with an audit record.
var audited = map[string]bool{"tools/call": true, "prompts/get": true, "resources/read": true}

// observe answers req as dispatch does, inside a server span, and
// records the host-side metrics and the audit record.
func (r *Router) observe(ctx context.Context, c *Caller, req *jsonrpc.Request) *Reply {
	start := time.Now()
	if r.obs.tel.Tracing() {
		ctx = r.metaTraceContext(ctx, &req.Meta)
	}
	target := requestTarget(req)
	span := trace.SpanFromContext(ctx) // a no-op without tracing
	if r.obs.tel.Tracing() {
		name := req.Method
		if target != "" && req.Method != "resources/read" {
			name += " " + target
		}
		ctx, span = r.obs.tel.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
	}
	if span.IsRecording() {
		span.SetAttributes(
			telemetry.AttrMethod.String(req.Method),
			telemetry.AttrProtocolVersion.String(c.ProtocolVersion),
			telemetry.AttrTeam.String(viewLabel(c.View)),
		)
		if c.Session != "" {
			span.SetAttributes(telemetry.AttrSessionID.String(c.Session))
		}
		if len(req.ID) > 0 {
			span.SetAttributes(telemetry.AttrRequestID.String(string(req.ID)))
		}
		setTargetAttrs(span, req.Method, target)
	}
	info := &callInfo{}
	ctx = context.WithValue(ctx, callInfoKey{}, info)
	active := r.obs.server.get(&r.obs, attrKey{active: true, method: req.Method})
	active.n.Add(1)
	reply := r.dispatch(ctx, c, req)
	active.n.Add(-1)
	elapsed := time.Since(start)

	outcome, code := replyOutcome(ctx, req.Method, reply)
	key := attrKey{method: req.Method, outcome: outcome, team: c.View, upstream: info.upstream}
	if info.upstream != "" && target != "" && req.Method != "resources/read" {
		// Only names the catalog routed: a host's unknown names would
		// make the series unbounded.
		key.target = target
	}
	if outcome == telemetry.OutcomeError {
		key.errType = strconv.FormatInt(code, 10)
	} else if outcome == telemetry.OutcomeToolError {
		key.errType = "tool_error"
	}
	r.obs.in.ServerDuration.Record(ctx, elapsed.Seconds(), r.obs.measurement(key).record...)
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrOutcome.String(outcome))
		if info.upstream != "" {
			span.SetAttributes(telemetry.AttrUpstream.String(info.upstream))
		}
		switch outcome {
		case telemetry.OutcomeError:
			span.SetAttributes(telemetry.AttrErrorType.String(strconv.FormatInt(code, 10)), telemetry.AttrStatusCode.String(strconv.FormatInt(code, 10)))
			span.SetStatus(codes.Error, reply.Error.Message)
		case telemetry.OutcomeToolError:
			span.SetAttributes(telemetry.AttrErrorType.String("tool_error"))
			span.SetStatus(codes.Error, "tool error")
		}
	}
	span.End()

	if r.obs.audit != nil && audited[req.Method] {
		size := len(reply.Result)
		if reply.Error != nil {
			size = len(reply.Error.Message) + len(reply.Error.Data)
		}
		args := req.Arguments
		r.obs.audit.Record(ctx, telemetry.AuditRecord{
			Method: req.Method, Name: target, Upstream: info.upstream, Original: info.original,
			Identity: c.Identity, Team: c.View, Session: c.Session, Protocol: c.ProtocolVersion,
			Duration: elapsed, Outcome: outcome, ErrorCode: code, Bytes: size, Arguments: args,
		})
	}
	return reply
}

// observeUpstream starts the client span of a call to an upstream and
// writes its trace context into the request's _meta (HTTP upstreams
// also get it in headers, from ctx). The returned finish records the
// call's metrics and ends the span.
func (r *Router) observeUpstream(ctx context.Context, u *upstreamState, out *jsonrpc.Outgoing) (context.Context, func(resp *jsonrpc.Message, err error)) {
	method := out.Method
	if !r.obs.on {
		return ctx, func(*jsonrpc.Message, error) {}
	}
	start := time.Now()
	original := ""
	if ci, ok := ctx.Value(callInfoKey{}).(*callInfo); ok {
		original = ci.original
	}
	span := trace.SpanFromContext(ctx) // a no-op without tracing
	if r.obs.tel.Tracing() {
		name := method
		if original != "" && method != "resources/read" {
			name += " " + original
		}
		ctx, span = r.obs.tel.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient))
	}
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrMethod.String(method), telemetry.AttrUpstream.String(u.Name))
		setTargetAttrs(span, method, original)
	}
	if r.obs.tel.Tracing() {
		// Without tracing, a host's own _meta trace context passes
		// through untouched.
		r.withMetaTraceContext(ctx, out)
	}
	active := r.obs.client.get(&r.obs, attrKey{active: true, client: true, method: method, upstream: u.Name})
	active.n.Add(1)
	return ctx, func(resp *jsonrpc.Message, err error) {
		active.n.Add(-1)
		outcome, errType := telemetry.OutcomeOK, ""
		switch {
		case ctx.Err() != nil:
			outcome, errType = telemetry.OutcomeCancelled, "cancelled"
		case err != nil:
			outcome, errType = telemetry.OutcomeError, transportErrorType(err)
		case resp.Error != nil:
			outcome, errType = telemetry.OutcomeError, strconv.FormatInt(resp.Error.Code, 10)
		case method == "tools/call" && noteToolError(ctx, resp.Result):
			outcome, errType = telemetry.OutcomeToolError, "tool_error"
		}
		key := attrKey{client: true, method: method, upstream: u.Name, outcome: outcome, errType: errType}
		if method != "resources/read" {
			key.target = original
		}
		r.obs.in.ClientDuration.Record(ctx, time.Since(start).Seconds(), r.obs.measurement(key).record...)
		if span.IsRecording() {
			span.SetAttributes(telemetry.AttrOutcome.String(outcome))
			if errType != "" {
				span.SetAttributes(telemetry.AttrErrorType.String(errType))
				span.SetStatus(codes.Error, errType)
			}
			if err != nil {
				span.RecordError(err)
			}
		}
		span.End()
	}
}

// metaTraceContext returns ctx with the trace context of params._meta
// (traceparent, tracestate, baggage: the 2026-07-28 revision's keys),
// which wins over that of the HTTP headers already in ctx.
func (r *Router) metaTraceContext(ctx context.Context, meta *jsonrpc.Meta) context.Context {
	if meta.TraceParent == "" {
		return ctx
	}
	carrier := propagation.MapCarrier{"traceparent": meta.TraceParent}
	if meta.TraceState != "" {
		carrier["tracestate"] = meta.TraceState
	}
	if meta.Baggage != "" {
		carrier["baggage"] = meta.Baggage
	}
	return r.obs.tel.Propagator.Extract(ctx, carrier)
}

// withMetaTraceContext writes ctx's trace context into the request's
// _meta, replacing the host's.
func (r *Router) withMetaTraceContext(ctx context.Context, out *jsonrpc.Outgoing) {
	carrier := propagation.MapCarrier{}
	r.obs.tel.Propagator.Inject(ctx, carrier)
	if _, ok := carrier["traceparent"]; !ok {
		return
	}
	// The three go together: a host's tracestate or baggage does not
	// describe the gateway's span.
	for _, k := range []string{"traceparent", "tracestate", "baggage"} {
		if v, ok := carrier[k]; ok {
			out.SetMeta(k, jsonrpc.String(v))
		} else {
			out.SetMeta(k, nil)
		}
	}
}

// requestTarget is what a request names: a tool, a prompt, or a URI.
func requestTarget(req *jsonrpc.Request) string {
	switch req.Method {
	case "tools/call", "prompts/get":
		return req.Name
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		return req.URI
	}
	return ""
}

func targetKey(method string) attribute.Key {
	if method == "prompts/get" {
		return telemetry.AttrPromptName
	}
	return telemetry.AttrToolName
}

func setTargetAttrs(span trace.Span, method, target string) {
	switch {
	case target == "":
	case method == "tools/call":
		span.SetAttributes(telemetry.AttrToolName.String(target), telemetry.AttrOperationName.String("execute_tool"))
	case method == "prompts/get":
		span.SetAttributes(telemetry.AttrPromptName.String(target))
	default:
		span.SetAttributes(telemetry.AttrResourceURI.String(target))
	}
}

// replyOutcome classifies a reply; code is the JSON-RPC error code.
func replyOutcome(ctx context.Context, method string, reply *Reply) (string, int64) {
	switch {
	case ctx.Err() != nil:
		return telemetry.OutcomeCancelled, 0
	case reply.Error != nil:
		return telemetry.OutcomeError, reply.Error.Code
	case method == "tools/call" && toolErrorOf(ctx, reply.Result):
		return telemetry.OutcomeToolError, 0
	}
	return telemetry.OutcomeOK, 0
}

// noteToolError is isToolError that records its answer in the request's
// callInfo, for toolErrorOf.
func noteToolError(ctx context.Context, result json.RawMessage) bool {
	te := isToolError(result)
	if ci, ok := ctx.Value(callInfoKey{}).(*callInfo); ok {
		ci.checked, ci.toolError = result, te
	}
	return te
}

// toolErrorOf is isToolError, answered from the callInfo when the result
// is the very one noteToolError looked at (a reply passed through as the
// upstream gave it), so that a large result is scanned once.
func toolErrorOf(ctx context.Context, result json.RawMessage) bool {
	if ci, ok := ctx.Value(callInfoKey{}).(*callInfo); ok && len(result) > 0 {
		if len(ci.checked) == len(result) && &ci.checked[0] == &result[0] {
			return ci.toolError
		}
	}
	return isToolError(result)
}

// isToolError reports whether a tool result says isError: true.
func isToolError(result json.RawMessage) bool {
	v, ok := jsonrpc.Field(result, "isError")
	return ok && string(v) == "true"
}
