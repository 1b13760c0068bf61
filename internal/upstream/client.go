// Package upstream connects the gateway to one upstream MCP server: it
// launches or dials the server, learns which era of MCP it speaks, performs
// that era's handshake, and then carries requests to it, many at a time.
//
// # Eras
//
// MCP has two eras (spec 2026-07-28, basic/versioning). Legacy servers
// (2025-03-26 to 2025-11-25) expect an initialize handshake and then serve
// a session, which Streamable HTTP names with Mcp-Session-Id. Modern
// servers (2026-07-28) are stateless: there is no handshake, and every
// request carries the protocol version, the client's capabilities and its
// identity in params._meta (over HTTP also in the MCP-Protocol-Version,
// Mcp-Method and Mcp-Name headers).
//
// Start learns the era once and the Client keeps it for its lifetime:
//
//   - stdio: server/discover is sent as a modern request. A DiscoverResult
//     or a recognised modern error (-32020 to -32022) means modern; any
//     other error, or no answer within ProbeTimeout, means legacy, and
//     initialize follows.
//   - Streamable HTTP: server/discover is POSTed. 200 with a
//     DiscoverResult, or a 4xx whose body is a recognised modern error,
//     means modern; anything else means legacy. When the transport was
//     inferred and initialize then fails with 400, 404 or 405, the URL is
//     taken to serve the deprecated HTTP+SSE transport.
//   - HTTP+SSE: legacy only.
//
// A modern answer that lists only legacy versions (a dual-era server
// configured for legacy clients) leads to initialize as well.
//
// Callers then use Send (or Call), Notify and List the same way in both eras: the
// Client adds what a modern request needs and strips it from legacy ones.
//
// # Live traffic
//
// Besides responses, a server sends notifications (progress, log
// messages, list_changed, resources/updated) and, in the legacy era,
// requests of its own (sampling/createMessage, elicitation/create,
// roots/list, ping). The Client hands each to the party it concerns:
//
//   - A Streamable HTTP call made with a context from WithCallHandler has
//     what the server sends on that call's own response stream delivered
//     to its CallHandler: the progress and log messages of that call, and
//     the requests a legacy server makes while serving it. That is how a
//     gateway returns them to the host that made the call.
//   - Everything else goes to Options.OnNotification and
//     Options.OnRequest: all stdio traffic (one shared stream: correlate
//     by progress token), the GET stream of a legacy session, the
//     deprecated HTTP+SSE transport, and calls without a handler.
//   - A legacy Streamable HTTP session's GET stream is opened before
//     notifications/initialized is sent, and the handshake waits (up to
//     5s) for the server to answer it, so a notification the server sends
//     right after initialized is not lost.
//   - Modern servers send change notifications only on a
//     subscriptions/listen stream (spec 2026-07-28,
//     basic/patterns/subscriptions): Subscribe opens and keeps one, and
//     its notifications go to Options.OnNotification. Legacy servers send
//     list_changed unasked; resources/subscribe is an ordinary request (Send).
//   - Cancelling a call's context cancels it upstream: notifications/cancelled
//     on stdio and legacy HTTP, closing the response stream on modern
//     HTTP.
//
// Requests answered by a CallHandler or Options.OnRequest go back to the
// server the usual way (a POST, or a line on stdin).
//
// # Resilience
//
// A Client bounds each call with Options.Timeout (which the server's
// progress notifications may extend up to Options.MaxTimeout) and its
// calls in flight with Options.MaxInFlight and MaxQueue. A Client whose
// connection is lost stays Failed; a Supervised wraps a Client for each
// connection, restarts the server with backoff, and guards it with a
// circuit breaker (see RestartOptions and BreakerOptions).
package upstream

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcpheader"
)

// Sentinel errors. Errors returned by a Client wrap them together with the
// upstream's name and the operation.
var (
	// ErrClosed: the connection is gone (the process exited, the stream
	// broke, or Close was called).
	ErrClosed = errors.New("upstream connection closed")
	// ErrTimeout: Options.Timeout elapsed before the server answered.
	ErrTimeout = errors.New("upstream request timed out")
	// ErrNotReady: the Client has not (yet) completed Start.
	ErrNotReady = errors.New("upstream not ready")
	// ErrMalformed: the server sent something that is not a valid answer.
	ErrMalformed = errors.New("malformed upstream response")
	// ErrOverloaded: the call was not sent because Options.MaxInFlight
	// calls were in flight and either Options.MaxQueue calls were already
	// waiting, or no slot came free within Options.Timeout. The server
	// never saw the request, so it is safe to try again.
	ErrOverloaded = errors.New("upstream overloaded")
	// ErrBreakerOpen: a Supervised did not send the call because its
	// circuit breaker is open (see BreakerOptions). The error is an
	// *UnavailableError that says when the upstream is tried again.
	ErrBreakerOpen = errors.New("upstream circuit breaker open")
	// ErrTooLarge: the server's answer was larger than
	// Options.MaxMessageBytes; it was skipped unread. The error is a
	// *TooLargeError, which also matches ErrMalformed.
	ErrTooLarge = errors.New("upstream answer too large")
)

// TooLargeError is the error of a call whose answer was larger than the
// limit (Options.MaxMessageBytes). The connection stays usable: the rest
// of the message was skipped (stdio, SSE streams) or its HTTP response
// closed.
type TooLargeError struct {
	// Limit is the limit in bytes.
	Limit int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the answer is larger than max_message_bytes (%d bytes)", e.Limit)
}

// Is matches ErrTooLarge, and ErrMalformed, which an oversize answer was
// before it had an error of its own.
func (e *TooLargeError) Is(target error) bool {
	return target == ErrTooLarge || target == ErrMalformed
}

// Options configures a Client. Exactly one of Command and URL must be set.
type Options struct {
	// Name is the upstream's name, used in logs and errors.
	Name string

	// Command runs a stdio server; Args are its arguments.
	Command string
	Args    []string
	// Env is added to the child's environment, which otherwise holds only
	// HOME, LOGNAME, PATH, SHELL, TERM, USER, TMPDIR and LANG from the
	// gateway's own: never the whole of it, which may hold the gateway's
	// secrets. Keys keep their case.
	Env map[string]string
	// Dir is the child's working directory; "" means the gateway's.
	Dir string

	// URL is the MCP endpoint of an HTTP server.
	URL string
	// Transport is "stdio", "streamable-http" or "sse" (the deprecated
	// HTTP+SSE transport); "" infers it: stdio when Command is set,
	// otherwise Streamable HTTP falling back to HTTP+SSE as the spec's
	// backward-compatibility rules describe.
	Transport string
	// Headers are sent on every HTTP request to this upstream (for example
	// Authorization). They are never logged.
	Headers map[string]string
	// Credentials, if set, add the gateway's credentials for this
	// upstream to every HTTP request to it, after Headers (see
	// SecretHeaders, NewClientCredentials, NewTokenExchange). A request
	// whose credentials fail is not sent; its call fails with a
	// *CredentialsError.
	Credentials Credentials
	// Propagator, if set, writes the trace context of each call's ctx
	// (W3C traceparent and tracestate, and baggage, as it is configured)
	// into the call's params._meta, on every transport, and into the
	// headers of the HTTP requests that carry the call: the Streamable
	// HTTP POST, or the HTTP+SSE POST. Nil writes none. No other header
	// of the host that made the call is ever passed on.
	Propagator propagation.TextMapPropagator
	// HTTPClient makes the HTTP requests; nil means a client with dial
	// and TLS timeouts and connection reuse. Requests are bounded by their
	// contexts, so it should have no overall Timeout (streams are long).
	HTTPClient *http.Client
	// TLS configures the TLS of an https:// upstream (see ClientTLS):
	// the CAs, a client certificate, the server name. nil means the
	// system's CAs and no client certificate. Ignored with HTTPClient,
	// whose Transport has its own.
	TLS *tls.Config

	// Timeout bounds each request; 0 means config.DefaultTimeout (60s).
	// Progress may extend it
	// (see MaxTimeout). A call's time waiting for a slot (MaxInFlight)
	// counts against it.
	Timeout time.Duration
	// MaxTimeout is how long a call may run in all while the server
	// reports progress: each notifications/progress for the call (the
	// progressToken of its params._meta; on the call's own response
	// stream, or anywhere on a shared stream such as stdio) restarts the
	// call's Timeout, but never past MaxTimeout from its start (spec
	// 2025-11-25, lifecycle "Timeouts": "Implementations MAY choose to
	// reset the timeout clock when receiving a progress notification
	// ... SHOULD always enforce a maximum timeout"). 0 means
	// config.DefaultMaxTimeout(Timeout): 10×Timeout or 10 minutes,
	// whichever is less, and never less than Timeout; a negative value
	// means progress extends nothing. A positive value below Timeout is
	// an error.
	MaxTimeout time.Duration
	// MaxInFlight bounds the calls (Send and Call, and each page of List) in
	// flight at once on the connection; 0 means config.DefaultMaxInFlight
	// (256), and a negative value means no limit. Handshake and
	// subscription requests do not count.
	MaxInFlight int
	// MaxQueue bounds the calls waiting for one of the MaxInFlight
	// slots; 0 means config.DefaultMaxQueue (1024), and a negative value
	// means none wait. A call
	// that finds the queue full fails at once, and one still waiting when
	// its Timeout elapses fails then, both with ErrOverloaded; a call
	// whose context ends while it waits fails with the context's error.
	MaxQueue int
	// MaxMessageBytes bounds one message from the server: a stdio line,
	// a JSON answer body, one SSE event. At most about this much of a
	// message is buffered; a larger one is never parsed, and the call it
	// answers fails with a *TooLargeError (see ErrTooLarge). 0 means
	// config.DefaultMaxMessageBytes (16 MiB); negative, or more than
	// config.MaxMaxMessageBytes, is an error.
	MaxMessageBytes int64
	// ProbeTimeout is how long a stdio server has to answer the
	// server/discover probe before it is taken for a legacy server; 0 means
	// the smaller of Timeout and 10s.
	ProbeTimeout time.Duration

	// ClientInfo is the implementation the gateway presents; an empty Name
	// means "mcp-gateway".
	ClientInfo Implementation
	// Capabilities is the ClientCapabilities object the gateway declares in
	// a legacy initialize (for example {"sampling":{},"elicitation":{}}
	// when it can pass those requests on to its hosts); nil means {}. It
	// must be a JSON object. Modern requests carry the capabilities in
	// their caller's params._meta instead (or {}), since each comes from
	// one host.
	Capabilities json.RawMessage
	// Logger receives the client's logs, and the stderr lines of a stdio
	// child, one record per line, with the attribute upstream=<Name>. Nil
	// means discard.
	Logger *slog.Logger

	// OnNotification receives the notifications from the server
	// (list_changed, progress, message, resources/updated, ...) that no
	// CallHandler takes (see the package documentation), including those
	// of the Subscribe stream. It is called from the goroutine reading the
	// server's messages (for HTTP, from the goroutine of the request whose
	// stream carried it), so calls may be concurrent, and must not block
	// long. The message aliases a read buffer: copy what is kept.
	OnNotification func(n *jsonrpc.Message)
	// OnRequest answers a request from the server (sampling, elicitation,
	// roots/list, ping) that no CallHandler takes, with a response; the
	// Client sets the response's id. It runs on its own goroutine; ctx is
	// done when the Client closes. Nil answers ping with {} and everything
	// else at once with error -32601, so that the server never waits.
	OnRequest func(ctx context.Context, req *jsonrpc.Message) *jsonrpc.Message
	// OnStateChange, if set, is called after every state change, in order.
	// It must not call Start or Close. (A Supervised calls it with its
	// own state instead of each connection's; see NewSupervised.)
	OnStateChange func(State)
}

// Implementation names a piece of MCP software.
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Era is the generation of MCP a server speaks.
type Era int

const (
	// EraUnknown: not yet detected.
	EraUnknown Era = iota
	// EraLegacy: 2025-03-26 to 2025-11-25, with initialize and sessions.
	EraLegacy
	// EraModern: 2026-07-28, stateless, with per-request metadata.
	EraModern
)

func (e Era) String() string {
	switch e {
	case EraLegacy:
		return "legacy"
	case EraModern:
		return "modern"
	}
	return "unknown"
}

// Phase is where a Client is in its life.
type Phase int

const (
	// Idle: created, not started.
	Idle Phase = iota
	// Starting: Start is running.
	Starting
	// Ready: requests can be sent.
	Ready
	// Failed: Start failed or the connection was lost; State.Err says why.
	// A failed Client stays failed: make a new one to try again.
	Failed
	// Stopped: Close was called.
	Stopped
	// Restarting: a Supervised lost its connection, or failed to make
	// one, and tries again at State.RetryAt. A Client is never
	// Restarting.
	Restarting
)

func (p Phase) String() string {
	switch p {
	case Idle:
		return "idle"
	case Starting:
		return "starting"
	case Ready:
		return "ready"
	case Failed:
		return "failed"
	case Stopped:
		return "stopped"
	case Restarting:
		return "restarting"
	}
	return "phase(" + strconv.Itoa(int(p)) + ")"
}

// State is a snapshot of a Client's health.
type State struct {
	Phase Phase
	// Err is why the Client failed, or why a Supervised is restarting;
	// nil unless Phase is Failed or Restarting.
	Err error
	// Era and ProtocolVersion are known once the handshake is done.
	Era             Era
	ProtocolVersion string
	// Since is when Phase, or a Supervised's breaker, last changed.
	Since time.Time

	// Generation numbers the connections that became Ready: 1 for the
	// first, one more for each after a restart (Supervised). A new
	// generation is a new server process or session: its catalog may
	// differ, so whoever lists it should list it again.
	Generation uint64
	// Breaker is the state of a Supervised's circuit breaker; a Client
	// has none and reports BreakerClosed.
	Breaker BreakerState
	// RetryAt is when a Supervised tries again: with Phase Restarting,
	// when the next start begins; with Breaker BreakerOpen, when the
	// breaker lets a probe through. Zero otherwise.
	RetryAt time.Time
}

const (
	versionModern = "2026-07-28"
	// versionLegacy is what initialize asks for: the newest legacy version.
	versionLegacy = "2025-11-25"

	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
	metaServerInfo         = "io.modelcontextprotocol/serverInfo"
	metaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"

	methodListen       = "subscriptions/listen"
	methodAcknowledged = "notifications/subscriptions/acknowledged"

	// maxProbeTimeout bounds the server/discover probe of a server whose
	// era is unknown.
	maxProbeTimeout = 10 * time.Second
	// stopGrace is how long a stdio child gets to exit after its stdin is
	// closed, and again after SIGTERM.
	stopGrace = 2 * time.Second
	// notifyTimeout bounds best-effort messages sent on the side
	// (notifications/cancelled, answers to server requests).
	notifyTimeout = 5 * time.Second
)

func isModernVersion(v string) bool { return v == versionModern }

func isLegacyVersion(v string) bool {
	switch v {
	case "2025-11-25", "2025-06-18", "2025-03-26":
		return true
	}
	return false
}

type transportKind int

const (
	kindStdio transportKind = iota + 1
	kindStreamable
	kindSSE
)

// A wire carries encoded messages to the server. Messages from the server
// reach the Client through Client.deliver.
type wire interface {
	// send transmits one message. On Streamable HTTP a request's send
	// returns once the response has been delivered (or with an error); on
	// the stream transports (stdio, HTTP+SSE) the response comes later.
	send(ctx context.Context, m *outgoing) error
	// close stops the wire and waits for its goroutines. It may be called
	// more than once.
	close() error
}

// outgoing is one message to the server.
type outgoing struct {
	id     int64  // request id; 0 for notifications and responses
	method string // "" for responses
	// req is the request data was encoded from, when the router made it:
	// a modern HTTP server's Mcp-Name header is read from it (and only
	// then). It is valid until send returns.
	req    *jsonrpc.Outgoing
	data   []byte      // the encoded message
	header http.Header // extra HTTP headers (Mcp-Param-*, probe headers)
	// handler receives the messages of a request's own response stream.
	handler CallHandler
	// handshake messages never trigger a session renewal.
	handshake bool
}

// callResult is what a pending call receives.
type callResult struct {
	msg *jsonrpc.Message
	err error
}

// Client is a connection to one upstream server. Its methods are safe for
// concurrent use.
type Client struct {
	opts         Options
	kind         transportKind
	inferred     bool // the transport was inferred: HTTP+SSE fallback allowed
	log          *slog.Logger
	timeout      time.Duration
	maxTimeout   time.Duration // >= timeout
	probeTimeout time.Duration
	maxMessage   int      // Options.MaxMessageBytes, defaulted
	slots        *limiter // nil: no limit
	stopGrace    time.Duration
	clientInfo   json.RawMessage
	capabilities json.RawMessage // declared in a legacy initialize
	hc           *http.Client
	ownTransport *http.Transport // hc's transport when New built it
	h1           *h1Transport    // POSTs when New built hc and the URL is plain http
	headers      http.Header     // Options.Headers, keys canonical (see addHeaders)

	nextID atomic.Int64
	// heard counts the messages the server sent on this connection (an
	// answer to a call still waiting for it, a notification, a request;
	// not a late answer): a call that times out while it moves was not
	// failed by a silent server (see Supervised.sendOn).
	heard atomic.Uint64
	life  context.Context // done once Close begins
	stop  context.CancelFunc
	wg    sync.WaitGroup // goroutines started through spawn

	// stateMu serialises state changes with their OnStateChange calls, so
	// that the callback sees them in order.
	stateMu sync.Mutex

	mu      sync.Mutex // guards the fields below
	state   State
	started bool
	closing bool
	w       wire
	pending map[int64]chan callResult
	// listeners holds the handlers of the open subscriptions/listen
	// requests by request id, for the stdio notifications tagged with it.
	listeners    map[int64]CallHandler
	sub          *subscription // the current Subscribe stream, if any
	dead         chan struct{} // closed when the connection is lost or Close begins
	deadErr      error
	caps         json.RawMessage
	serverInfo   json.RawMessage
	instructions string
	toolHeaders  map[string][]mcpheader.Binding // tool name -> x-mcp-header bindings
	// progress maps the progress tokens of the calls in flight (raw
	// JSON) to their deadlines, which progress extends.
	progress map[string]*deadline

	// subMu serialises Subscribe calls.
	subMu sync.Mutex

	closeDone chan struct{}
	closeErr  error
}

// New validates opts and returns a Client. It starts nothing.
func New(opts *Options) (*Client, error) {
	if opts == nil {
		return nil, errors.New("upstream: nil options")
	}
	o := *opts
	if o.Name == "" {
		return nil, errors.New("upstream: a name is required")
	}
	c := &Client{
		opts:      o,
		log:       o.Logger,
		timeout:   o.Timeout,
		stopGrace: stopGrace,
		pending:   map[int64]chan callResult{},
		listeners: map[int64]CallHandler{},
		progress:  map[string]*deadline{},
		dead:      make(chan struct{}),
		closeDone: make(chan struct{}),
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.log = c.log.With("upstream", o.Name)
	switch {
	case o.Command != "" && o.URL != "":
		return nil, fmt.Errorf("upstream %q: set command or url, not both", o.Name)
	case o.Command == "" && o.URL == "":
		return nil, fmt.Errorf("upstream %q: set command or url", o.Name)
	}
	switch o.Transport {
	case "":
		c.kind, c.inferred = kindStdio, false
		if o.URL != "" {
			c.kind, c.inferred = kindStreamable, true
		}
	case "stdio":
		c.kind = kindStdio
	case "streamable-http":
		c.kind = kindStreamable
	case "sse":
		c.kind = kindSSE
	default:
		return nil, fmt.Errorf("upstream %q: unknown transport %q (want stdio, streamable-http or sse)", o.Name, o.Transport)
	}
	if c.kind == kindStdio && o.Command == "" {
		return nil, fmt.Errorf("upstream %q: transport stdio needs a command", o.Name)
	}
	if c.kind != kindStdio {
		if o.URL == "" {
			return nil, fmt.Errorf("upstream %q: transport %s needs a url", o.Name, o.Transport)
		}
		u, err := url.Parse(o.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("upstream %q: url must be an absolute http or https URL", o.Name)
		}
	}
	switch {
	case c.timeout < 0:
		return nil, fmt.Errorf("upstream %q: negative timeout", o.Name)
	case c.timeout == 0:
		c.timeout = config.DefaultTimeout
	}
	switch c.maxTimeout = o.MaxTimeout; {
	case c.maxTimeout < 0:
		c.maxTimeout = c.timeout
	case c.maxTimeout == 0:
		c.maxTimeout = config.DefaultMaxTimeout(c.timeout)
	case c.maxTimeout < c.timeout:
		return nil, fmt.Errorf("upstream %q: max timeout %v is less than the timeout %v", o.Name, c.maxTimeout, c.timeout)
	}
	inflight, queue := o.MaxInFlight, o.MaxQueue
	if inflight == 0 {
		inflight = config.DefaultMaxInFlight
	}
	switch {
	case queue == 0:
		queue = config.DefaultMaxQueue
	case queue < 0:
		queue = 0
	}
	if inflight > 0 {
		c.slots = newLimiter(inflight, queue)
	}
	if c.kind != kindStdio {
		c.hc = o.HTTPClient
		if c.hc == nil {
			c.ownTransport = defaultTransport(inflight)
			if o.TLS != nil {
				c.ownTransport.TLSClientConfig = o.TLS.Clone()
			}
			c.hc = &http.Client{Transport: c.ownTransport, CheckRedirect: checkRedirect}
			if c.kind != kindSSE {
				c.h1 = newH1Transport(c.ownTransport, o.URL, c.ownTransport.MaxIdleConnsPerHost)
			}
		}
		c.headers = make(http.Header, len(o.Headers))
		for k, v := range o.Headers {
			c.headers.Set(k, v)
		}
	}
	switch m := o.MaxMessageBytes; {
	case m < 0 || m > config.MaxMaxMessageBytes:
		return nil, fmt.Errorf("upstream %q: max message bytes must be between 0 and %d", o.Name, int64(config.MaxMaxMessageBytes))
	case m == 0:
		c.maxMessage = config.DefaultMaxMessageBytes
	default:
		c.maxMessage = int(m)
	}
	c.probeTimeout = o.ProbeTimeout
	switch {
	case c.probeTimeout < 0:
		return nil, fmt.Errorf("upstream %q: negative probe timeout", o.Name)
	case c.probeTimeout == 0:
		c.probeTimeout = min(c.timeout, maxProbeTimeout)
	}
	if o.ClientInfo.Name == "" {
		c.opts.ClientInfo = Implementation{Name: "mcp-gateway", Version: o.ClientInfo.Version}
	}
	info, err := json.Marshal(c.opts.ClientInfo)
	if err != nil {
		return nil, fmt.Errorf("upstream %q: client info: %w", o.Name, err)
	}
	c.clientInfo = info
	c.capabilities = json.RawMessage("{}")
	if o.Capabilities != nil {
		if !isObject(o.Capabilities) {
			return nil, fmt.Errorf("upstream %q: capabilities must be a JSON object", o.Name)
		}
		c.capabilities = clone(o.Capabilities)
	}
	c.life, c.stop = context.WithCancel(context.Background())
	return c, nil
}

// defaultTransport is http.DefaultTransport (dial and TLS handshake
// timeouts, keep-alives, HTTP/2 when the server offers it) with room to
// keep a connection idle for every call that may be in flight (inflight;
// negative for no limit), plus the long-lived streams (a legacy session's
// GET, a subscription), so that a burst of calls reuses its connections
// instead of dialling anew each time. The Transport's own default of 2
// idle connections per host would close most of them after each burst.
func defaultTransport(inflight int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if inflight <= 0 {
		inflight = config.DefaultMaxInFlight
	}
	t.MaxResponseHeaderBytes = maxResponseHeaderBytes // as on the own POSTs (h1Transport)
	t.MaxIdleConnsPerHost = inflight + 4
	t.MaxIdleConns = max(t.MaxIdleConns, t.MaxIdleConnsPerHost)
	return t
}

// State returns the Client's current state.
func (c *Client) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// Era returns the era detected by Start; EraUnknown before.
func (c *Client) Era() Era {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.Era
}

// ProtocolVersion returns the negotiated protocol version; "" before Start
// has negotiated one.
func (c *Client) ProtocolVersion() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.ProtocolVersion
}

// Capabilities returns the server's capabilities as raw JSON, from its
// InitializeResult or DiscoverResult; nil when unknown.
func (c *Client) Capabilities() json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.caps
}

// ServerInfo returns the server's Implementation as raw JSON; nil when the
// server did not say.
func (c *Client) ServerInfo() json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.serverInfo
}

// Instructions returns the server's instructions, if any.
func (c *Client) Instructions() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.instructions
}

// Close stops the Client: pending calls fail at once with ErrClosed, a
// legacy HTTP session is ended with DELETE, a stdio child is stopped as the
// spec says (stdin closed; then, 2s apart, SIGTERM and SIGKILL to its
// process group) and reaped, and every goroutine the Client started has
// exited when Close returns. It may
// be called more than once and concurrently; every call returns the first
// one's result.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		<-c.closeDone
		return c.closeErr
	}
	c.closing = true
	w := c.w
	c.mu.Unlock()

	c.stop()
	c.markDead(errors.New("client closed"))
	if c.h1 != nil {
		c.h1.close() // ends the POSTs in flight, as c.stop ends the others
	}
	var err error
	if w != nil {
		err = w.close()
	}
	c.wg.Wait()
	if c.ownTransport != nil {
		c.ownTransport.CloseIdleConnections()
	}
	c.setState(Stopped, nil)
	c.closeErr = err
	close(c.closeDone)
	return err
}

// setState moves to phase p and reports it. Nothing moves a Client out of
// Stopped, once Close has begun only Stopped is reported, and a repeated
// phase keeps its first error.
func (c *Client) setState(p Phase, err error) {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	c.mu.Lock()
	if c.state.Phase == Stopped || c.state.Phase == p || (c.closing && p != Stopped) ||
		(p == Ready && c.deadErr != nil) { // lost before the handshake ended
		c.mu.Unlock()
		return
	}
	c.state.Phase, c.state.Err, c.state.Since = p, err, time.Now()
	if p == Ready {
		c.state.Generation = 1
	}
	s := c.state
	c.mu.Unlock()
	if c.opts.OnStateChange != nil {
		c.opts.OnStateChange(s)
	}
}

// markDead records that the connection is gone: pending and later calls
// fail with ErrClosed. It reports whether this call marked it.
func (c *Client) markDead(cause error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deadErr != nil {
		return false
	}
	c.deadErr = cause
	close(c.dead)
	return true
}

// connLost is called by a wire whose connection is gone for good. The
// state says Failed before the calls in flight fail, so that whoever
// sees a call fail with ErrClosed sees the state that says why; new
// calls fail at once from the start (deadErr).
func (c *Client) connLost(cause error) {
	c.mu.Lock()
	if c.deadErr != nil {
		c.mu.Unlock()
		return
	}
	c.deadErr = cause
	closing := c.closing
	c.mu.Unlock()
	if !closing {
		c.log.Warn("upstream connection lost", "err", cause)
		c.setState(Failed, fmt.Errorf("upstream %q: %w: %w", c.opts.Name, ErrClosed, cause))
	}
	close(c.dead) // the one close: markDead closes only what it marked
}

// spawn runs f on a goroutine that Close waits for. It reports false, and
// does not run f, once Close has begun.
func (c *Client) spawn(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

// redirectHeaders are the headers a request keeps when the upstream
// redirects it to another origin: the protocol's, which the new address
// needs to serve it.
var redirectHeaders = []string{"Accept", "Content-Type", "User-Agent", "Mcp-Session-Id",
	"Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name", "Last-Event-Id"}

// checkRedirect follows a redirect as net/http does, but one to another
// origin (scheme, host and port) carries only the protocol's headers
// (redirectHeaders, Mcp-Param-*): a redirect copies every header of the
// request, and net/http strips only Authorization, and only for another
// host name, never the secret headers of auth.headers or
// Options.Headers. Such an address that needs credentials answers 401.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	from := via[0].URL
	if req.URL.Scheme == from.Scheme && req.URL.Host == from.Host {
		return nil
	}
	for name := range req.Header {
		if !slices.Contains(redirectHeaders, name) && !strings.HasPrefix(name, mcpheader.ParamPrefix) {
			delete(req.Header, name)
		}
	}
	return nil
}

// addHeaders adds the configured headers (Options.Headers) and the
// credentials (Options.Credentials) of a request made for ctx to h.
func (c *Client) addHeaders(ctx context.Context, h http.Header) error {
	for k, v := range c.headers {
		h[k] = v
	}
	if c.opts.Credentials != nil {
		return c.opts.Credentials.Apply(ctx, h)
	}
	return nil
}

// rejected tells the credentials that the upstream answered 401 to a
// request with the headers h, and reports whether they dropped a token,
// so that a new one may be tried.
func (c *Client) rejected(h http.Header) bool {
	r, ok := c.opts.Credentials.(rejecter)
	return ok && r.reject(h.Get("Authorization"))
}

// bound returns a context that is also done when Close begins.
func (c *Client) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.life, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

func (c *Client) errorf(op string, err error) error {
	return fmt.Errorf("upstream %q: %s: %w", c.opts.Name, op, err)
}

// closedErr is the error for a call on a dead connection.
func (c *Client) closedErr(op string) error {
	c.mu.Lock()
	cause := c.deadErr
	c.mu.Unlock()
	if cause == nil {
		return c.errorf(op, ErrClosed)
	}
	return fmt.Errorf("upstream %q: %s: %w: %w", c.opts.Name, op, ErrClosed, cause)
}

// readyWire returns the wire if the Client is Ready.
func (c *Client) readyWire(op string) (wire, error) {
	c.mu.Lock()
	w, phase, dead, closing := c.w, c.state.Phase, c.deadErr != nil, c.closing
	c.mu.Unlock()
	switch {
	case closing || dead:
		return nil, c.closedErr(op)
	case phase != Ready:
		return nil, c.errorf(op, ErrNotReady)
	}
	return w, nil
}
