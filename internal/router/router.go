// Package router turns many upstream MCP servers into one: it starts them
// in parallel, merges their catalogs into one namespaced catalog, and
// dispatches each host request to the upstream that owns the name it
// uses.
//
// The router speaks in JSON-RPC messages and knows nothing of HTTP or
// sessions: the server package hands it one decoded request at a time
// together with a Caller describing who asks and in which protocol era.
// Results travel as raw JSON from the upstream to the server, untouched
// but for the few members translating between eras rewrites. The router
// records no telemetry: its Dispatch and its upstream clients are wrapped
// from outside (cmd/mcp-gateway), and a Reply says what ran.
//
// Upstreams start independently. One that is slow, dead or misbehaving
// only leaves its own entries out of the catalog; Status says why.
package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/namespace"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/state"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// Upstream is what the router needs of one upstream client
// (*upstream.Client implements it).
type Upstream interface {
	// Start connects and performs the handshake; it returns when the
	// upstream is ready or has failed.
	Start(ctx context.Context) error
	// Close stops the upstream and waits for it. It may be called more
	// than once.
	Close() error
	// Send sends a request and returns the upstream's response; a Go
	// error means the request failed in transport (down, timed out). It
	// may rewrite req (the _meta of the upstream's era) before encoding
	// it, once.
	Send(ctx context.Context, req *jsonrpc.Outgoing) (*jsonrpc.Message, error)
	// List returns every item of a paginated list method.
	List(ctx context.Context, method, itemsKey string) ([]json.RawMessage, error)
	// ProtocolVersion is the version negotiated with the upstream.
	ProtocolVersion() string
	// Capabilities are the upstream server's capabilities, raw.
	Capabilities() json.RawMessage
	// Instructions are the upstream server's instructions, if any.
	Instructions() string
	// State is the client's health (upstream.Client and
	// upstream.Supervised report theirs): the router derives the
	// upstream's phase from it (see upstreamState.health) and keeps no
	// copy of its own.
	State() upstream.State
}

// UpstreamConfig is one upstream as the router sees it.
type UpstreamConfig struct {
	Name string
	// Connect creates a client of this upstream: once for the shared
	// session, and once per host in per-client mode. Everything the
	// server sends on its own (notifications, and requests outside a
	// call's stream) must go to the Handlers given, which route it to the
	// right host. Connect must not start anything.
	Connect func(ConnectOptions) (Upstream, error)
	// PerClient gives each host its own upstream session (see
	// perclient.go); the shared session then only lists the catalog.
	PerClient bool
	// MaxClients bounds the per-client sessions; 0 means
	// config.DefaultMaxClients.
	MaxClients int
	// ClientIdle closes a per-client session unused for this long; 0
	// means config.DefaultIdleTimeout.
	ClientIdle time.Duration
	// Fingerprint identifies the upstream's settings: Reconfigure keeps
	// running an upstream whose name and fingerprint are unchanged, and
	// restarts one whose fingerprint changed.
	Fingerprint string
	// Required upstreams must be ready for Ready to report true.
	Required bool
	// Key is the name the configuration gave the upstream when Name was
	// derived from it (an mcpServers key such as "my.server"); "" when
	// Name is that name. Status shows it.
	Key string
	// Transport is how the gateway reaches it (config.Transport: stdio,
	// streamable-http, sse), for Status.
	Transport string
	// Relay lists the client capabilities whose server requests the
	// upstream may send hosts (sampling, elicitation, roots); a request
	// of any other is answered with an error naming the relay key, and a
	// per-client session declares to the upstream only the host's
	// capabilities listed here.
	Relay []string
	// SharedStream says the server's requests arrive outside the calls'
	// own streams (stdio): calls of hosts that declared a relayed
	// capability then take turns, host by host (see hostGate), so that
	// each request reaches the host whose call caused it.
	SharedStream bool
	// Timeout bounds the start and each list request; 0 means
	// config.DefaultTimeout.
	Timeout time.Duration
	// TaskAfter, when positive, turns the upstream's long calls into
	// tasks the gateway runs (tasks.after; see tasks.go): a tools/call
	// from a modern host that declared the tasks extension and is still
	// running after this long is answered with a task handle, and a
	// legacy host that declared tasks may make any of the upstream's
	// tools a task. 0 leaves calls as they are.
	TaskAfter time.Duration
}

// ConnectOptions are what the router passes to UpstreamConfig.Connect.
type ConnectOptions struct {
	Handlers
	// Capabilities, when not nil, are the client capabilities the
	// client declares (a host's own, for a per-client session); nil
	// means the upstream's configured ones.
	Capabilities json.RawMessage
	// OnState, when not nil, asks for a supervised client (restarts,
	// circuit breaker: upstream.Supervised) that reports its state
	// here; the router then takes the upstream's entries out of every
	// view while it is down and lists it again when it is back. Nil (a
	// per-client session) asks for a plain client.
	OnState func(upstream.State)
}

// Handlers receive what an upstream server sends on its own.
type Handlers struct {
	// Notify receives a notification.
	Notify func(n *jsonrpc.Message)
	// Request answers a request from the server; it never returns nil.
	Request func(ctx context.Context, req *jsonrpc.Message) *jsonrpc.Message
}

// Implementation names the gateway to hosts.
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Options configure a Router.
type Options struct {
	// Upstreams in priority order: catalog order follows it. Names must
	// be unique.
	Upstreams []UpstreamConfig
	// Namespace controls exposed names (separator, prefix mode).
	Namespace namespace.Options
	// Rules filter and trim what callers see.
	Rules policy.Rules
	// ServerInfo is the gateway's name and version, as hosts see it.
	ServerInfo Implementation
	// ListWait bounds how long a call by a name (or URI) that no
	// upstream offers yet waits for the upstreams still in their first
	// start that could offer it (see Dispatch); 0 means
	// config.DefaultListWait, and a negative value means no wait. Lists
	// never wait.
	ListWait time.Duration
	// ListTTL is the ttlMs hint on list results for modern hosts; 0 means
	// config.DefaultListTTL.
	ListTTL time.Duration
	// Tokens estimates the size of a definition in tokens, for token
	// limits; nil means policy.Tokens.
	Tokens func([]byte) int
	// OnChange, if set, is told of every change hosts should hear of:
	// a list that changed, or a subscribed resource that was updated. It
	// is called from the router's goroutines and must not block.
	OnChange func(Change)
	// TaskTTL is how long a task the gateway hands a host is kept, from
	// its creation, and the longest a host may ask for; 0 means
	// config.DefaultTaskTTL.
	TaskTTL time.Duration
	// MaxTasks bounds the tasks one identity holds at once in its team,
	// on every profile's path together (an anonymous legacy host: in its
	// session); 0 means config.DefaultMaxTasks.
	MaxTasks int
	// Limits, if set, are the per-identity quotas and rate limits of
	// calls (tool rates, calls in flight per upstream); nil limits
	// nothing.
	Limits *Limits
	// Sealer seals the request states handed to modern hosts: the keys
	// every replica shares (state.key); nil makes a random key, good for
	// this process only.
	Sealer *state.Sealer
	// Pins, if set, decides at each catalog build which definitions to
	// leave out (pinning; see Pins). Nil leaves them all in. It applies
	// when the catalog is built, never per call.
	Pins Pins
	// Peers, if set, reach the gateway's other replicas (state.store:
	// redis): a modern host's retry of a call parked on another replica,
	// and a task that runs on another, are answered there (peers.go).
	Peers Peers
	// MaxExposed bounds the found tools a view with expose_found adds to
	// one session's or identity's tools/list (exposed.go); 0 means
	// config.DefaultMaxExposed. MaxExposedCallers bounds the sessions
	// and identities such lists are kept for; 0 means
	// config.DefaultMaxExposedCallers. ExposedIdle forgets a list
	// unused for that long; 0 means config.DefaultExposedIdle.
	MaxExposed, MaxExposedCallers int
	ExposedIdle                   time.Duration
	// Logger receives the router's logs; nil discards them.
	Logger *slog.Logger
}

// Change is a change hosts should hear of.
type Change struct {
	// Method is the notification to send: notifications/tools/list_changed,
	// notifications/prompts/list_changed, notifications/resources/list_changed
	// or notifications/resources/updated.
	Method string
	// Params are the notification's params (resources/updated); nil for
	// list changes.
	Params json.RawMessage
	// Subscribers, for resources/updated, are the keys that subscribed
	// to the resource (see SubscribeResource); nil for list changes,
	// which go to every host of View.
	Subscribers []string
	// View is the view whose list changed ("" = the default view).
	View string
	// Session, when set, is the one legacy session whose own tools/list
	// changed (search.expose_found): only it hears of the change.
	Session string
	// ForPrincipal says the change is of one modern identity's own
	// tools/list in View (search.expose_found): only the listen streams
	// of Principal (policy.Identity.ID, "" without authentication) in
	// View hear of it.
	ForPrincipal bool
	Principal    string
}

// Router merges and routes. Create it with New, call Start once, and
// Close when done.
type Router struct {
	opts Options
	log  *slog.Logger
	// searchTokens is the size of search mode's tools/list, counted once
	// (searchmode.go).
	searchTokensOnce sync.Once
	searchTokens     int
	// gateSeq numbers modern requests for host gates.
	gateSeq atomic.Uint64

	// started is closed when every upstream has finished its first start
	// attempt, successfully or not.
	started chan struct{}
	wg      sync.WaitGroup

	// rebuildMu serialises catalog rebuilds (see rebuild).
	rebuildMu sync.Mutex
	// reloadMu serialises Reconfigure.
	reloadMu sync.Mutex
	// subs are the hosts' resource subscriptions.
	subs resourceSubs
	// parked are the legacy upstream calls waiting for a modern host's
	// input; sealer seals the request states that name them.
	parked parking
	// parkedRunning counts the upstream calls of parked calls still
	// running (AwaitParked).
	parkedRunning atomic.Int64
	sealer        *sealer
	// owners caches which replica holds each host's per-client upstream
	// sessions (peers.go).
	owners owners
	// tasks are the tasks handed to hosts (taskstore.go).
	tasks taskStore
	// exposed are the found tools callers have as their own
	// (exposed.go); now, when set, is its clock (tests).
	exposed exposures
	now     func() time.Time

	mu sync.Mutex // guards the fields below
	// ups are the upstreams, in priority order; Reconfigure replaces the
	// slice (never changes it in place), so a copy taken under mu can be
	// used freely.
	ups []*upstreamState
	// rules and names are the policy and naming in force; Reconfigure
	// replaces them.
	rules *policy.Rules
	names *namespace.Options
	// life is the router's lifetime, from Start to Close; cancel ends it.
	life   context.Context
	cancel context.CancelFunc
	// cat is the merged catalog, rebuilt whenever an upstream's entries
	// change; readers take the pointer under mu and then use it freely.
	cat *catalog
	// progress maps the progress tokens the gateway gave upstreams to
	// the calls they belong to.
	progress map[string]*call
	// nextParked numbers the parked calls.
	nextParked uint64
}

// upstreamState is the router's record of one upstream.
type upstreamState struct {
	UpstreamConfig
	Client Upstream

	// calls are the calls in flight on the shared session, for
	// attributing what the server sends outside a call's own stream
	// (stdio).
	calls callSet
	// gate lets the calls of one relaying host at a time run on a shared
	// stream (see hostGate).
	gate hostGate
	// pool holds the per-client sessions; nil in shared mode.
	pool *clientPool
	// listenMu serialises the setting of a modern upstream's listen
	// filter (listenUpstream).
	listenMu sync.Mutex
	// firstDone is closed when the first start attempt has ended, and
	// the catalog of its connection, if it made one, is listed.
	firstDone chan struct{}

	// mu guards the fields below: what only the router knows of the
	// upstream. Its health is the client's (Client.State), from which
	// health derives the phase.
	mu sync.Mutex
	// tools, prompts, resources and templates are the catalog of the
	// connection generation listedGen (0: none yet), listed last at
	// listedAt; modern is that connection's era, and listProblem a list
	// that failed while the connection was up.
	tools, prompts, resources, templates []json.RawMessage
	modern                               bool
	listedGen                            uint64
	listedAt                             time.Time
	listProblem                          error
	// relistGen is the newest generation a re-list was started for;
	// starting is set during the first Start, which lists its connection
	// itself.
	relistGen uint64
	starting  bool
	// stopped is set once the router stopped the upstream (it closed, or
	// a reload removed it), stopErr saying why; fault is a panic of its
	// client's first start.
	stopped bool
	stopErr error
	fault   error
	// relisting is set while a re-list runs; relistAgain asks for one
	// more run after it.
	relisting, relistAgain bool
}

// health is what the router shows of an upstream's health.
type health struct {
	phase    Phase
	err      error
	retryAt  time.Time // when an upstream that is down is tried again
	since    time.Time // when the phase last changed
	restarts uint64    // connections made after the first
}

// serving reports whether the upstream's entries belong in the catalog.
func (h health) serving() bool { return h.phase == PhaseReady || h.phase == PhaseDegraded }

// down reports whether an upstream that served before is down now, to be
// tried again (or failed for good after a crash loop).
func (h health) down() bool {
	return h.phase == PhaseRestarting || h.phase == PhaseUnavailable || h.phase == PhaseFailed
}

// health derives the upstream's phase from its client's state, and from
// what only the router knows: whether that connection's catalog is
// listed, whether a list failed, whether the router stopped it.
func (u *upstreamState) health() health {
	st := u.Client.State()
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.healthLocked(st)
}

// healthLocked is health for a state of the client. u.mu must be held.
func (u *upstreamState) healthLocked(st upstream.State) health {
	h := health{since: st.Since}
	if u.listedAt.After(h.since) {
		h.since = u.listedAt
	}
	if st.Generation > 1 {
		h.restarts = st.Generation - 1
	}
	switch {
	case u.stopped:
		h.phase, h.err = PhaseStopped, u.stopErr
	case u.fault != nil:
		h.phase, h.err = PhaseFailed, u.fault
	case st.Phase == upstream.Stopped:
		h.phase = PhaseStopped
	case st.Phase == upstream.Failed:
		h.phase, h.err = PhaseFailed, st.Err
	case st.Phase == upstream.Restarting:
		h.phase, h.err, h.retryAt = PhaseRestarting, st.Err, st.RetryAt
	case st.Phase != upstream.Ready:
		h.phase = PhaseStarting
	case st.Breaker != upstream.BreakerClosed:
		h.phase, h.retryAt = PhaseUnavailable, st.RetryAt
		h.err = fmt.Errorf("circuit breaker %s after repeated failures", st.Breaker)
	case u.listedGen == 0:
		h.phase = PhaseStarting // connected, its catalog not listed yet
	case st.Generation > u.listedGen:
		h.phase = PhaseRestarting // a new connection, being listed again
	case u.listProblem != nil:
		h.phase, h.err = PhaseDegraded, u.listProblem
	default:
		h.phase = PhaseReady
	}
	return h
}

// Phase is where an upstream is in its life.
type Phase string

// Phases of an upstream.
const (
	PhaseStarting Phase = "starting"
	PhaseReady    Phase = "ready"
	PhaseDegraded Phase = "degraded" // ready, but a catalog list failed
	// PhaseRestarting: the connection was lost (a stdio server exited)
	// and is being made again; the upstream's tools are out of the views
	// until it is back and listed.
	PhaseRestarting Phase = "restarting"
	// PhaseUnavailable: the circuit breaker is open (or half-open, a
	// probe out); the tools are out of the views until it closes.
	PhaseUnavailable Phase = "breaker_open"
	PhaseFailed      Phase = "failed"
	PhaseStopped     Phase = "stopped"
)

// New returns a router over the given upstreams. It starts nothing.
func New(opts *Options) (*Router, error) {
	r := &Router{opts: *opts, log: discardLogs(opts.Logger), started: make(chan struct{}), sealer: newSealer()}
	if opts.Sealer != nil {
		r.sealer.keys = opts.Sealer
	}
	r.owners.cache, _ = lru.New[string, ownerEntry](4096) // a positive size never fails
	r.progress = map[string]*call{}
	if r.opts.ListWait == 0 {
		r.opts.ListWait = config.DefaultListWait
	}
	if r.opts.ListTTL == 0 {
		r.opts.ListTTL = config.DefaultListTTL
	}
	rules, names := opts.Rules, opts.Namespace
	r.rules, r.names = &rules, &names
	for _, u := range opts.Upstreams {
		us, err := r.newUpstream(u)
		if err != nil {
			return nil, err
		}
		r.ups = append(r.ups, us)
	}
	r.cat = r.buildCatalog()
	return r, nil
}

// newUpstream makes the state of one configured upstream, with its
// client; nothing starts.
func (r *Router) newUpstream(u UpstreamConfig) (*upstreamState, error) {
	if u.Timeout <= 0 {
		u.Timeout = config.DefaultTimeout
	}
	if u.MaxClients <= 0 {
		u.MaxClients = config.DefaultMaxClients
	}
	if u.ClientIdle <= 0 {
		u.ClientIdle = config.DefaultIdleTimeout
	}
	us := &upstreamState{UpstreamConfig: u, firstDone: make(chan struct{})}
	client, err := u.Connect(ConnectOptions{
		Handlers: r.handlers(us, &us.calls),
		OnState:  func(st upstream.State) { r.upstreamChanged(us, st) },
	})
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", u.Name, err)
	}
	us.Client = client
	if u.PerClient {
		us.pool = newClientPool(u.MaxClients)
	}
	return us, nil
}

// upstreams returns the upstreams in force, in priority order.
func (r *Router) upstreams() []*upstreamState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ups
}

// settings returns the policy and naming in force.
func (r *Router) settings() (*policy.Rules, *namespace.Options) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rules, r.names
}

// Start starts every upstream in parallel and returns at once. Each
// upstream is started under its own timeout, then its catalog is listed;
// the merged catalog grows as upstreams become ready.
func (r *Router) Start(ctx context.Context) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.mu.Lock()
	r.life, r.cancel = ctx, cancel
	r.mu.Unlock()
	var first sync.WaitGroup
	for _, u := range r.upstreams() {
		first.Add(1)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer first.Done()
			r.startUpstream(ctx, u)
		}()
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		first.Wait()
		close(r.started)
	}()
	if every := r.sweepInterval(); every > 0 {
		r.spawn(func() { r.janitor(every) })
	}
}

// sweepInterval is how often the janitor looks for idle per-client
// sessions: a quarter of the shortest idle timeout, at least a second;
// 0 without per-client upstreams.
func (r *Router) sweepInterval() time.Duration {
	var every time.Duration
	for _, u := range r.upstreams() {
		if u.pool != nil && (every == 0 || u.ClientIdle/4 < every) {
			every = u.ClientIdle / 4
		}
	}
	if every > 0 && every < time.Second {
		every = time.Second
	}
	return every
}

// startUpstream runs the first start of one upstream: handshake, then the
// catalog lists. A panic in an upstream client is contained here so that
// it cannot take the gateway down.
func (r *Router) startUpstream(ctx context.Context, u *upstreamState) {
	defer close(u.firstDone) // last: after the listing, or the panic's rebuild
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("upstream start panicked", keyUpstream, u.Name, "panic", p)
			u.mu.Lock()
			u.fault = fmt.Errorf("internal error: %v", p)
			u.mu.Unlock()
			r.rebuild()
		}
	}()
	u.mu.Lock()
	u.starting = true
	u.mu.Unlock()
	startCtx, cancel := context.WithTimeout(ctx, u.Timeout)
	err := u.Client.Start(startCtx)
	cancel()
	st := u.Client.State()
	u.mu.Lock()
	u.starting = false
	if err == nil {
		// This start lists its connection itself, below: a report of
		// it that arrives late must not list it a second time.
		u.relistGen = max(u.relistGen, st.Generation)
	}
	u.mu.Unlock()
	if err != nil {
		if ctx.Err() != nil {
			return // the router is closing
		}
		r.log.Warn("upstream failed to start", keyUpstream, u.Name, keyErr, err)
		// A plain client has failed for good now; a supervised one tries
		// again, and may even have connected since (its callback was
		// not acted on during the first start): look at its state.
		r.upstreamChanged(u, u.Client.State())
		return
	}
	r.listAndListen(ctx, u)
}

// listAndListen lists a connection's catalog, then subscribes to its
// changes (a modern upstream's subscriptions/listen).
func (r *Router) listAndListen(ctx context.Context, u *upstreamState) {
	r.refresh(ctx, u)
	if err := r.listenUpstream(ctx, u); err != nil {
		r.log.Warn("upstream subscriptions/listen failed", keyUpstream, u.Name, keyErr, err)
	}
}

// upstreamChanged follows a supervised upstream's state: while it is
// restarting, failed or behind an open breaker its entries leave every
// view (hosts hear list_changed); a new connection is listed again
// before the entries come back, since a restarted server may offer
// other tools. It runs on the upstream's notifier goroutine, and once
// after a first start that failed.
func (r *Router) upstreamChanged(u *upstreamState, st upstream.State) {
	u.mu.Lock()
	// The first Start lists its connection itself; a connection made
	// after it failed, or after a crash, is listed here.
	relist := st.Phase == upstream.Ready && !u.starting && st.Generation > max(u.listedGen, u.relistGen)
	if relist {
		u.relistGen = st.Generation
	}
	h := u.healthLocked(st)
	u.mu.Unlock()
	level := slog.LevelInfo
	if h.down() {
		level = slog.LevelWarn
	}
	r.log.Log(context.Background(), level, "upstream state changed", keyUpstream, u.Name, "state", h.phase, keyErr, h.err)
	if relist {
		r.spawn(func() { r.listAndListen(r.life, u) })
	}
	// The catalog is rebuilt from every upstream's health; only the
	// lists that really changed reach hosts.
	r.rebuild()
}

// refresh lists one upstream's catalog and rebuilds the merged catalog.
// The lists are of the connection that is up when refresh begins.
func (r *Router) refresh(ctx context.Context, u *upstreamState) {
	st := u.Client.State()
	caps := parseCapabilities(u.Client.Capabilities())
	type list struct {
		has         bool
		method, key string
		dst         *[]json.RawMessage
		items       []json.RawMessage
		err         error
	}
	var tools, prompts, resources, templates []json.RawMessage
	lists := []*list{
		{has: caps.tools, method: "tools/list", key: "tools", dst: &tools},
		{has: caps.prompts, method: "prompts/list", key: "prompts", dst: &prompts},
		{has: caps.resources, method: "resources/list", key: "resources", dst: &resources},
		{has: caps.resources, method: "resources/templates/list", key: "resourceTemplates", dst: &templates},
	}
	var wg sync.WaitGroup
	for _, l := range lists {
		if !l.has {
			continue
		}
		wg.Go(func() {
			listCtx, cancel := context.WithTimeout(ctx, u.Timeout)
			defer cancel()
			l.items, l.err = u.Client.List(listCtx, l.method, l.key)
			l.items = r.unambiguous(u.Name, l.method, l.items)
		})
	}
	wg.Wait()
	u.mu.Lock()
	if st.Generation < u.listedGen {
		// A newer connection was listed meanwhile: these lists are of
		// one that is gone.
		u.mu.Unlock()
		return
	}
	tools, prompts, resources, templates = u.tools, u.prompts, u.resources, u.templates
	var problems []error
	for _, l := range lists {
		if l.err != nil {
			// A list that fails keeps what it had: a passing fault while
			// re-listing must not empty the catalog.
			r.log.Warn("upstream list failed", keyUpstream, u.Name, keyMethod, l.method, keyErr, l.err)
			problems = append(problems, fmt.Errorf("%s: %w", l.method, l.err))
			continue
		}
		*l.dst = l.items
	}
	u.tools, u.prompts, u.resources, u.templates = tools, prompts, resources, templates
	u.modern = isModern(u.Client.ProtocolVersion())
	hadProblem := u.listProblem != nil
	u.listProblem = errors.Join(problems...)
	if st.Phase == upstream.Ready {
		// A connection lost while listing stays out of the views: its
		// state says so, and the next connection is listed again. The
		// health's since moves only when the phase may have: a new
		// connection listed, a list failing or mending.
		if st.Generation > u.listedGen || hadProblem != (u.listProblem != nil) {
			u.listedAt = time.Now()
		}
		u.listedGen = st.Generation
	}
	u.mu.Unlock()
	r.rebuild()
	r.log.Info("upstream catalog listed", keyUpstream, u.Name,
		"protocol_version", u.Client.ProtocolVersion(), "tools", len(tools), "prompts", len(prompts),
		"resources", len(resources), "resource_templates", len(templates))
}

func (u *upstreamState) isModern() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.modern
}

// stop marks the upstream stopped by the router, with why.
func (u *upstreamState) stop(why error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.stopped, u.stopErr = true, why
}

// listed reports whether a catalog of the upstream was ever listed.
func (u *upstreamState) listed() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.listedGen > 0
}

// rebuild recomputes the merged catalog from every upstream's lists and
// tells hosts which lists changed. Rebuilds are serialised: two upstreams
// becoming ready at once must not let the build that saw less be stored
// last.
func (r *Router) rebuild() {
	r.rebuildMu.Lock()
	defer r.rebuildMu.Unlock()
	cat := r.buildCatalog()
	r.mu.Lock()
	old := r.cat
	r.cat = cat
	r.mu.Unlock()
	r.rebuildExposed(old, cat)
	if r.opts.OnChange == nil {
		return
	}
	for name, nv := range cat.views {
		ov := old.views[name]
		if ov == nil {
			continue
		}
		if !slices.Equal(ov.cut, nv.cut) {
			r.log.Info("limits cut tools from a view", keyTeam, name, "tools", len(nv.tools.entries), "cut", len(nv.cut), "cut_tools", cutNames(nv.cut))
		}
		for _, c := range []struct {
			method   string
			old, new []byte
		}{
			{"notifications/tools/list_changed", ov.announcedTools(), nv.announcedTools()},
			{"notifications/prompts/list_changed", ov.promptsJSON, nv.promptsJSON},
			{"notifications/resources/list_changed", append(ov.resourcesJSON[:len(ov.resourcesJSON):len(ov.resourcesJSON)], ov.templatesJSON...), append(nv.resourcesJSON[:len(nv.resourcesJSON):len(nv.resourcesJSON)], nv.templatesJSON...)},
		} {
			if !bytes.Equal(c.old, c.new) {
				r.opts.OnChange(Change{Method: c.method, View: name})
			}
		}
	}
}

func cutNames(cut []policy.Cut) []string {
	names := make([]string, len(cut))
	for i, c := range cut {
		names[i] = c.Name + " (" + c.Limit + ")"
	}
	return names
}

// relist re-lists an upstream after it said its lists changed. Bursts
// are coalesced: while a re-list runs, further notices only ask for one
// more run after it.
func (r *Router) relist(u *upstreamState) {
	serving := u.health().serving()
	u.mu.Lock()
	if !serving {
		u.mu.Unlock()
		return
	}
	if u.relisting {
		u.relistAgain = true
		u.mu.Unlock()
		return
	}
	u.relisting = true
	u.mu.Unlock()
	if !r.spawn(func() {
		for {
			r.refresh(r.life, u)
			u.mu.Lock()
			again := u.relistAgain
			u.relistAgain = false
			u.relisting = again
			u.mu.Unlock()
			if !again {
				return
			}
		}
	}) {
		u.mu.Lock()
		u.relisting = false
		u.mu.Unlock()
	}
}

// spawn runs f on a goroutine the router owns, unless the router is
// closing.
func (r *Router) spawn(f func()) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.life == nil || r.life.Err() != nil {
		return false
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		f()
	}()
	return true
}

func (r *Router) catalog() *catalog {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cat
}

// WaitStarted blocks until every upstream has finished its first start
// attempt, or ctx is done.
func (r *Router) WaitStarted(ctx context.Context) error {
	select {
	case <-r.started:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops every upstream and waits for the router's goroutines.
func (r *Router) Close() error {
	r.mu.Lock()
	cancel := r.cancel
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	r.parked.closeAll()
	r.tasks.closeAll()
	r.closePools()
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, u := range r.upstreams() {
		wg.Go(func() {
			if err := u.Client.Close(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("upstream %s: %w", u.Name, err))
				mu.Unlock()
			}
			u.stop(nil)
		})
	}
	wg.Wait()
	r.wg.Wait()
	return errors.Join(errs...)
}

// UpstreamStatus is one upstream's health, as /readyz shows it.
type UpstreamStatus struct {
	Name string `json:"name"`
	// Key is the mcpServers key the name was derived from, when it is not
	// the name itself.
	Key      string `json:"key,omitempty"`
	State    Phase  `json:"state"`
	Required bool   `json:"required"`
	Era      string `json:"era,omitempty"`
	Protocol string `json:"protocol_version,omitempty"`
	// Transport is how the gateway reaches it: stdio, streamable-http
	// or sse.
	Transport string    `json:"transport,omitempty"`
	Tools     int       `json:"tools"`
	Prompts   int       `json:"prompts"`
	Error     string    `json:"error,omitempty"`
	Since     time.Time `json:"since"`
	// RetryAt is when an upstream that is down is tried again.
	RetryAt *time.Time `json:"retry_at,omitempty"`
	// Restarts counts the connections made after the first (a crashed
	// stdio server started again, say).
	Restarts uint64 `json:"restarts,omitempty"`
}

// Status returns every upstream's status, in configuration order, with
// its tool and prompt counts in the default view.
func (r *Router) Status() []UpstreamStatus {
	v := r.catalog().view("")
	ups := r.upstreams()
	out := make([]UpstreamStatus, 0, len(ups))
	for _, u := range ups {
		h := u.health()
		s := UpstreamStatus{Name: u.Name, Key: u.Key, Transport: u.Transport, State: h.phase, Required: u.Required, Since: h.since, Restarts: h.restarts}
		if h.err != nil {
			s.Error = h.err.Error()
		}
		if !h.retryAt.IsZero() {
			at := h.retryAt
			s.RetryAt = &at
		}
		if h.serving() {
			s.Protocol = u.Client.ProtocolVersion()
			s.Era = "legacy"
			if u.isModern() {
				s.Era = "modern"
			}
		}
		s.Tools, s.Prompts = v.tools.count(u), v.prompts.count(u)
		out = append(out, s)
	}
	return out
}

// ViewStatus is one view's size and what its limits cut, as /readyz
// shows it.
type ViewStatus struct {
	Name string `json:"view"`
	// Mode is how the view lists its tools now: full, or search (a view
	// in mode auto says which it is in).
	Mode config.ViewMode `json:"mode"`
	// Tools and Tokens are the size of the view's catalog: its tools, and
	// their estimated tokens when known (a token limit measured them, or
	// the view is in search mode).
	Tools  int `json:"tools"`
	Tokens int `json:"tokens,omitempty"`
	// ListedTokens is what the view's tools/list costs a host: Tokens in
	// full mode, the gateway's three tools in search mode.
	ListedTokens int          `json:"listed_tokens,omitempty"`
	Cut          []policy.Cut `json:"cut,omitempty"`
}

// Views returns the status of every view of the catalog in force, the
// default first.
func (r *Router) Views() []ViewStatus {
	cat := r.catalog()
	out := make([]ViewStatus, 0, len(cat.order))
	for _, name := range cat.order {
		v := cat.view(name)
		s := ViewStatus{Name: name, Mode: config.ModeFull, Tools: len(v.tools.entries), Tokens: v.tokens, Cut: v.cut}
		if v.search {
			// The catalog's size is what search mode saves: measured
			// (once per catalog) even without a token limit.
			s.Mode, s.Tokens = config.ModeSearch, r.viewTokens(v)
		}
		s.ListedTokens = r.listedTokens(v)
		out = append(out, s)
	}
	return out
}

// Ready reports whether every required upstream is serving; with none
// required, whether every upstream's first start attempt has ended (and
// what it connected to is listed), so that "ready" never means "nothing
// listed yet". An upstream a reload adds does not make a running
// gateway unready.
func (r *Router) Ready() bool {
	required := false
	for _, u := range r.upstreams() {
		if u.Required {
			required = true
			if !u.health().serving() {
				return false
			}
		}
	}
	if required {
		return true
	}
	select {
	case <-r.started:
		return true
	default:
		return false
	}
}

// capabilities lists which features an upstream offers.
type capabilities struct{ tools, prompts, resources, completions, logging bool }

func parseCapabilities(raw json.RawMessage) capabilities {
	has := func(k string) bool {
		v, ok := jsonrpc.Field(raw, k)
		return ok && string(v) != "null"
	}
	return capabilities{
		tools: has("tools"), prompts: has("prompts"), resources: has("resources"),
		completions: has("completions"), logging: has("logging"),
	}
}

// ModernVersion is the first protocol revision of the stateless era.
const ModernVersion = "2026-07-28"

// isModern reports whether a protocol version belongs to the modern era.
// Versions are dates, so they compare as strings.
func isModern(version string) bool { return version >= ModernVersion }
