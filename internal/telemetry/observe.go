package telemetry

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Observer records what the gateway does, the same way on every path: a
// server span, host-side metrics and an audit record for each host
// request (Host), a client span and upstream-side metrics for each
// request to an upstream (Upstream), and the gauges of the gateway's
// state (ObserveState). The gateway's wiring wraps dispatch and every
// upstream client with it as decorators, so that no path goes unobserved.
// With nothing recording (no tracing, no metrics, no audit) On is false
// and the decorators are not installed.
type Observer struct {
	tel   *Telemetry
	in    *Instruments
	audit *Audit
	on    bool

	// sets caches the attribute sets of measurements (attrKey ->
	// measure): building one allocates, and the few combinations repeat
	// on every call. cached counts them.
	sets   sync.Map
	cached atomic.Int64
	// server and client count the requests in progress, for the observed
	// ServerActive and ClientActive.
	server, client activeCounts

	mu sync.Mutex // guards regs
	// regs are the registrations of the observed instruments.
	regs []metric.Registration
}

// NewObserver records with tel (nil means Disabled) and, if set, audit.
func NewObserver(tel *Telemetry, audit *Audit) (*Observer, error) {
	if tel == nil {
		tel = Disabled()
	}
	in, err := NewInstruments(tel.Meter)
	if err != nil {
		return nil, err
	}
	o := &Observer{tel: tel, in: in, audit: audit, on: tel.Tracing() || tel.Metering() || audit != nil}
	if tel.Metering() {
		reg, err := tel.Meter.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
			o.server.observe(obs, in.ServerActive)
			o.client.observe(obs, in.ClientActive)
			return nil
		}, in.ServerActive, in.ClientActive)
		if err != nil {
			return nil, err
		}
		o.regs = append(o.regs, reg)
	}
	return o, nil
}

// On reports whether anything records.
func (o *Observer) On() bool { return o.on }

// Close unregisters the observed instruments.
func (o *Observer) Close() {
	o.mu.Lock()
	regs := o.regs
	o.regs = nil
	o.mu.Unlock()
	for _, r := range regs {
		_ = r.Unregister()
	}
}

// UpstreamReport and ViewReport are what the state gauges show of one
// upstream and one view.
type UpstreamReport struct {
	Name, State string
	Restarts    uint64
}

// ViewReport: see UpstreamReport. An empty Name is the default view.
// Tokens is the size of the view's catalog; ListedTokens what its
// tools/list costs a host (the gateway's tools, for a view in search
// mode).
type ViewReport struct {
	Name                        string
	Tools, Tokens, ListedTokens int
}

// ObserveState registers the gauges of the gateway's state, read from
// upstreams and views at each collection: mcp_gateway.upstream.state and
// .restarts, mcp_gateway.view.tools, .tokens and .listed_tokens. Without
// metrics it does nothing.
func (o *Observer) ObserveState(upstreams func() []UpstreamReport, views func() []ViewReport) error {
	if !o.tel.Metering() {
		return nil
	}
	m := o.tel.Meter
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
		metric.WithUnit("{token}"), metric.WithDescription("Estimated tokens of each view's catalog, the tool definitions it serves (cl100k_base)."))
	if err != nil {
		return err
	}
	listed, err := m.Int64ObservableGauge("mcp_gateway.view.listed_tokens",
		metric.WithUnit("{token}"), metric.WithDescription("Estimated tokens of each view's tools/list as hosts get it: its catalog, or in search mode the gateway's search tools (cl100k_base)."))
	if err != nil {
		return err
	}
	reg, err := m.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		for _, u := range upstreams() {
			up := AttrUpstream.String(u.Name)
			obs.ObserveInt64(state, 1, metric.WithAttributes(up, AttrState.String(u.State)))
			obs.ObserveInt64(restarts, int64(u.Restarts), metric.WithAttributes(up))
		}
		for _, v := range views() {
			view := metric.WithAttributes(AttrView.String(ViewLabel(v.Name)))
			obs.ObserveInt64(tools, int64(v.Tools), view)
			obs.ObserveInt64(tokens, int64(v.Tokens), view)
			obs.ObserveInt64(listed, int64(v.ListedTokens), view)
		}
		return nil
	}, state, restarts, tools, tokens, listed)
	if err != nil {
		return err
	}
	o.mu.Lock()
	o.regs = append(o.regs, reg)
	o.mu.Unlock()
	return nil
}

// ViewLabel names a view in telemetry: "default" for the default view.
func ViewLabel(name string) string {
	if name == "" {
		return "default"
	}
	return name
}

// HostRequest is a host's request, as its span, metrics and audit record
// describe it.
type HostRequest struct {
	Method string
	// Target is what the request names: the exposed tool or prompt name,
	// or the resource URI; "" for none.
	Target          string
	ProtocolVersion string
	Session         string // the legacy session; "" for modern requests
	RequestID       string // the raw JSON-RPC id
	Team            string // the view; "" is the default view
	Identity        string // the credential's audit id; "" without authentication
	// TraceParent, TraceState and Baggage are the trace context of the
	// request's _meta, which wins over that of the HTTP headers in ctx.
	TraceParent, TraceState, Baggage string
	// Arguments are the arguments of an audited request, for
	// arguments_sha256.
	Arguments json.RawMessage
}

// HostResult is how a host's request ended.
type HostResult struct {
	// Outcome is OutcomeOK, OutcomeToolError, OutcomeError or
	// OutcomeCancelled; Code and Message the JSON-RPC error's.
	Outcome string
	Code    int64
	Message string
	// Upstream and Original are what ran: the upstream and the name it
	// knows the target by; "" when no upstream was reached.
	Upstream, Original string
	// Bytes is the size of the result or error.
	Bytes int
}

// HostSpan is a host request being observed.
type HostSpan struct {
	o      *Observer
	req    *HostRequest
	method string // MethodLabel(req.Method)
	start  time.Time
	span   trace.Span
	active *activeCount
}

// audited are the methods with an audit record.
var audited = map[string]bool{"tools/call": true, "prompts/get": true, "resources/read": true}

// MethodLabel names a request's method in telemetry: the method, when
// it is one of the protocol's requests, else "_OTHER" (as the semantic
// conventions name an HTTP method they do not know). A host's method is
// any string it sends; only the protocol's may become a series or a span
// name.
func MethodLabel(method string) string {
	switch method {
	case "initialize", "ping", "server/discover", "subscriptions/listen",
		"tools/list", "tools/call", "prompts/list", "prompts/get",
		"resources/list", "resources/templates/list", "resources/read",
		"resources/subscribe", "resources/unsubscribe",
		"completion/complete", "logging/setLevel",
		"sampling/createMessage", "elicitation/create", "roots/list",
		"tasks/get", "tasks/list", "tasks/result", "tasks/cancel":
		return method
	}
	return "_OTHER"
}

// Host starts observing a host's request: ctx gets its server span, named
// after the method until End knows whether the target was routed.
func (o *Observer) Host(ctx context.Context, req *HostRequest) (context.Context, *HostSpan) {
	s := &HostSpan{o: o, req: req, method: MethodLabel(req.Method), start: time.Now(), span: trace.SpanFromContext(ctx)}
	if o.tel.Tracing() {
		if req.TraceParent != "" {
			carrier := propagation.MapCarrier{"traceparent": req.TraceParent}
			if req.TraceState != "" {
				carrier["tracestate"] = req.TraceState
			}
			if req.Baggage != "" {
				carrier["baggage"] = req.Baggage
			}
			ctx = o.tel.Propagator.Extract(ctx, carrier)
		}
		ctx, s.span = o.tel.Tracer.Start(ctx, s.method, trace.WithSpanKind(trace.SpanKindServer))
	}
	if s.span.IsRecording() {
		s.span.SetAttributes(
			AttrMethod.String(s.method),
			AttrProtocolVersion.String(req.ProtocolVersion),
			AttrTeam.String(ViewLabel(req.Team)),
		)
		if req.Session != "" {
			s.span.SetAttributes(AttrSessionID.String(req.Session))
		}
		if req.RequestID != "" {
			s.span.SetAttributes(AttrRequestID.String(req.RequestID))
		}
		setTargetAttrs(s.span, req.Method, req.Target)
	}
	s.active = o.server.get(o, attrKey{active: true, method: s.method})
	s.active.n.Add(1)
	return ctx, s
}

// End records how the request ended.
func (s *HostSpan) End(ctx context.Context, res HostResult) {
	s.active.n.Add(-1)
	elapsed := time.Since(s.start)
	req, o := s.req, s.o
	key := attrKey{method: s.method, outcome: res.Outcome, team: req.Team, upstream: res.Upstream}
	routed := res.Upstream != "" && req.Target != ""
	if routed && namesTarget(s.method) {
		// Only names the catalog routed: a host's unknown names would
		// make the series (and the span names) unbounded.
		key.target = req.Target
	}
	code := strconv.FormatInt(res.Code, 10)
	switch res.Outcome {
	case OutcomeError:
		key.errType = code
	case OutcomeToolError:
		key.errType = "tool_error"
	}
	o.in.ServerDuration.Record(ctx, elapsed.Seconds(), o.measurement(key).record...)
	if s.span.IsRecording() {
		if routed {
			s.span.SetName(spanName(s.method, req.Target))
		}
		s.span.SetAttributes(AttrOutcome.String(res.Outcome))
		if res.Upstream != "" {
			s.span.SetAttributes(AttrUpstream.String(res.Upstream))
		}
		switch res.Outcome {
		case OutcomeError:
			s.span.SetAttributes(AttrErrorType.String(code), AttrStatusCode.String(code))
			s.span.SetStatus(codes.Error, res.Message)
		case OutcomeToolError:
			s.span.SetAttributes(AttrErrorType.String("tool_error"))
			s.span.SetStatus(codes.Error, "tool error")
		}
	}
	if o.tel.Tracing() {
		s.span.End()
	}
	if o.audit != nil && audited[req.Method] {
		o.audit.Record(ctx, AuditRecord{
			Method: req.Method, Name: req.Target, Upstream: res.Upstream, Original: res.Original,
			Identity: req.Identity, Team: req.Team, Session: req.Session, Protocol: req.ProtocolVersion,
			Duration: elapsed, Outcome: res.Outcome, ErrorCode: res.Code, Bytes: res.Bytes, Arguments: req.Arguments,
		})
	}
}

// UpstreamRequest is a request of the gateway's to an upstream.
type UpstreamRequest struct {
	Method   string
	Upstream string
	// Target is the name the upstream knows the tool or prompt by, or
	// the resource URI; "" for none.
	Target string
}

// UpstreamSpan is an upstream request being observed.
type UpstreamSpan struct {
	o      *Observer
	req    UpstreamRequest
	start  time.Time
	span   trace.Span
	active *activeCount
}

// Upstream starts observing a request to an upstream: ctx gets its client
// span, which the upstream client writes into the request.
func (o *Observer) Upstream(ctx context.Context, req UpstreamRequest) (context.Context, *UpstreamSpan) {
	req.Method = MethodLabel(req.Method) // the router's, but bounded all the same
	s := &UpstreamSpan{o: o, req: req, start: time.Now(), span: trace.SpanFromContext(ctx)}
	if o.tel.Tracing() {
		ctx, s.span = o.tel.Tracer.Start(ctx, spanName(req.Method, req.Target), trace.WithSpanKind(trace.SpanKindClient))
	}
	if s.span.IsRecording() {
		s.span.SetAttributes(AttrMethod.String(req.Method), AttrUpstream.String(req.Upstream))
		setTargetAttrs(s.span, req.Method, req.Target)
	}
	s.active = o.client.get(o, attrKey{active: true, client: true, method: req.Method, upstream: req.Upstream})
	s.active.n.Add(1)
	return ctx, s
}

// End records how the request ended: outcome as HostResult's, errType the
// error.type (a JSON-RPC code, "tool_error", or a transport failure's
// kind), err the transport error, if any.
func (s *UpstreamSpan) End(ctx context.Context, outcome, errType string, err error) {
	s.active.n.Add(-1)
	o, req := s.o, s.req
	key := attrKey{client: true, method: req.Method, upstream: req.Upstream, outcome: outcome, errType: errType}
	if namesTarget(req.Method) {
		key.target = req.Target
	}
	o.in.ClientDuration.Record(ctx, time.Since(s.start).Seconds(), o.measurement(key).record...)
	if s.span.IsRecording() {
		s.span.SetAttributes(AttrOutcome.String(outcome))
		if errType != "" {
			s.span.SetAttributes(AttrErrorType.String(errType))
			s.span.SetStatus(codes.Error, errType)
		}
		if err != nil {
			s.span.RecordError(err)
		}
	}
	if o.tel.Tracing() {
		s.span.End()
	}
}

// spanName names a span after its method, and the tool or prompt it
// names (the semantic conventions' "{mcp.method.name} {target}").
func spanName(method, target string) string {
	if target != "" && namesTarget(method) {
		return method + " " + target
	}
	return method
}

// namesTarget reports whether a method's target may name a span or label
// a metric: a tool or a prompt. A resource's URI, which may be anything
// (and may say more than it should), is only a span attribute.
func namesTarget(method string) bool { return method == "tools/call" || method == "prompts/get" }

func targetKey(method string) attribute.Key {
	if method == "prompts/get" {
		return AttrPromptName
	}
	return AttrToolName
}

func setTargetAttrs(span trace.Span, method, target string) {
	switch {
	case target == "":
	case method == "tools/call":
		span.SetAttributes(AttrToolName.String(target), AttrOperationName.String("execute_tool"))
	case method == "prompts/get":
		span.SetAttributes(AttrPromptName.String(target))
	default:
		span.SetAttributes(AttrResourceURI.String(target))
	}
}

// activeCounts counts requests in progress by attribute set (attrKey ->
// *activeCount): a request adds to its counter, and a metrics collection
// reads them all. The sets are few: a method label (MethodLabel) and an
// upstream of the config.
type activeCounts struct{ m sync.Map }

type activeCount struct {
	n    atomic.Int64
	opts []metric.ObserveOption // the attribute set
}

// get returns the counter of k.
func (a *activeCounts) get(o *Observer, k attrKey) *activeCount {
	if v, ok := a.m.Load(k); ok {
		return v.(*activeCount)
	}
	v, _ := a.m.LoadOrStore(k, &activeCount{opts: []metric.ObserveOption{o.measurement(k).observe}})
	return v.(*activeCount)
}

// observe reports every counter to inst.
func (a *activeCounts) observe(o metric.Observer, inst metric.Int64Observable) {
	a.m.Range(func(_, v any) bool {
		c := v.(*activeCount)
		o.ObserveInt64(inst, c.n.Load(), c.opts...)
		return true
	})
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
func (o *Observer) measurement(k attrKey) measure {
	if v, ok := o.sets.Load(k); ok {
		return v.(measure)
	}
	attrs := []attribute.KeyValue{AttrMethod.String(k.method)}
	if k.client || k.upstream != "" {
		attrs = append(attrs, AttrUpstream.String(k.upstream))
	}
	if !k.active {
		attrs = append(attrs, AttrOutcome.String(k.outcome))
		if !k.client {
			attrs = append(attrs, AttrTeam.String(ViewLabel(k.team)))
		}
		if k.target != "" {
			attrs = append(attrs, targetKey(k.method).String(k.target))
		}
		if k.errType != "" {
			attrs = append(attrs, AttrErrorType.String(k.errType))
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
