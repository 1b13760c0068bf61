package telemetry

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Attribute keys of spans and metrics: the OpenTelemetry semantic
// conventions for MCP and GenAI where they have one, mcp_gateway.* for the
// gateway's own. Metrics carry only bounded values: no session ids, no
// arguments, no URIs.
const (
	AttrMethod          = attribute.Key("mcp.method.name")
	AttrSessionID       = attribute.Key("mcp.session.id")
	AttrProtocolVersion = attribute.Key("mcp.protocol.version")
	AttrResourceURI     = attribute.Key("mcp.resource.uri")
	AttrToolName        = attribute.Key("gen_ai.tool.name")
	AttrPromptName      = attribute.Key("gen_ai.prompt.name")
	AttrOperationName   = attribute.Key("gen_ai.operation.name")
	AttrRequestID       = attribute.Key("jsonrpc.request.id")
	AttrStatusCode      = attribute.Key("rpc.response.status_code")
	AttrErrorType       = attribute.Key("error.type")
	AttrNetworkTranport = attribute.Key("network.transport")

	AttrUpstream = attribute.Key("mcp_gateway.upstream")
	AttrTeam     = attribute.Key("mcp_gateway.team")
	AttrOutcome  = attribute.Key("mcp_gateway.outcome")
	AttrEra      = attribute.Key("mcp_gateway.era")
	AttrState    = attribute.Key("mcp_gateway.state")
	AttrView     = attribute.Key("mcp_gateway.view")
	// AttrLimit is the limit a rejection hit, one of the Limit* values
	// (never an identity, a key or a tool).
	AttrLimit = attribute.Key("mcp_gateway.limit")
)

// Limits a request can be refused for, the values of AttrLimit.
const (
	LimitRate            = "rate"             // an identity's request rate
	LimitTeamRate        = "team_rate"        // a team's request rate
	LimitToolRate        = "tool_rate"        // a tool's rate for an identity
	LimitConcurrentCalls = "concurrent_calls" // an identity's calls in flight on one upstream
	LimitSessions        = "sessions"         // legacy sessions: the table or an identity's share
	LimitStreams         = "streams"          // an identity's open GET and listen streams
)

// Outcomes of a request, the values of AttrOutcome.
const (
	OutcomeOK        = "ok"         // a result
	OutcomeToolError = "tool_error" // a tool result with isError
	OutcomeError     = "error"      // a JSON-RPC error
	OutcomeCancelled = "cancelled"  // the host went away or cancelled
)

// durationBuckets suit MCP calls: from a millisecond to two minutes.
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// Instruments are the gateway's per-request metrics, made from one Meter.
// The state metrics (upstreams, views, sessions) are observed gauges that
// their owners register with the same Meter, and so are the active
// request counts, which their owner observes from its own counters.
type Instruments struct {
	// ServerDuration: mcp.server.operation.duration, a host's request
	// as the gateway answered it.
	ServerDuration metric.Float64Histogram
	// ClientDuration: mcp.client.operation.duration, a request of the
	// gateway's to an upstream. The difference is the gateway's share.
	ClientDuration metric.Float64Histogram
	// ServerActive and ClientActive count requests in progress. They
	// are observed (their owner registers a callback) rather than added
	// to on every request: a request then costs two atomic adds instead
	// of two metric updates, which under load were half of all the
	// metrics' cost (docs/performance.md).
	ServerActive metric.Int64ObservableUpDownCounter
	ClientActive metric.Int64ObservableUpDownCounter
	// ListChanged counts the list_changed notifications the gateway
	// sent hosts, by method.
	ListChanged metric.Int64Counter
	// Rejections counts what a limit refused or ended, by AttrLimit:
	// mcp_gateway.rejections.
	Rejections metric.Int64Counter
}

// NewInstruments makes the instruments of m. A no-op meter makes no-op
// instruments.
func NewInstruments(m metric.Meter) (*Instruments, error) {
	var in Instruments
	var err error
	if in.ServerDuration, err = m.Float64Histogram("mcp.server.operation.duration",
		metric.WithUnit("s"), metric.WithDescription("Duration of the MCP requests hosts sent the gateway, until the gateway answered."),
		metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return nil, err
	}
	if in.ClientDuration, err = m.Float64Histogram("mcp.client.operation.duration",
		metric.WithUnit("s"), metric.WithDescription("Duration of the MCP requests the gateway sent upstream servers, until they answered."),
		metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return nil, err
	}
	if in.ServerActive, err = m.Int64ObservableUpDownCounter("mcp_gateway.server.active_requests",
		metric.WithUnit("{request}"), metric.WithDescription("Host requests in progress.")); err != nil {
		return nil, err
	}
	if in.ClientActive, err = m.Int64ObservableUpDownCounter("mcp_gateway.client.active_requests",
		metric.WithUnit("{request}"), metric.WithDescription("Upstream requests in progress.")); err != nil {
		return nil, err
	}
	if in.ListChanged, err = m.Int64Counter("mcp_gateway.list_changed.sent",
		metric.WithUnit("{notification}"), metric.WithDescription("list_changed notifications sent to hosts.")); err != nil {
		return nil, err
	}
	if in.Rejections, err = m.Int64Counter("mcp_gateway.rejections",
		metric.WithUnit("{request}"), metric.WithDescription("Requests a quota or rate limit refused, and sessions it ended, by limit.")); err != nil {
		return nil, err
	}
	return &in, nil
}
