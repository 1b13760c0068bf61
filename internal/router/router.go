// Package router turns many upstream MCP servers into one: it starts them
// in parallel, merges their catalogs into one namespaced catalog, and
// dispatches each host request to the upstream that owns the name it
// uses.
//
// The router speaks in JSON-RPC messages and knows nothing of HTTP or
// sessions: the server package hands it one request at a time together
// with a Caller describing who asks and in which protocol era. Results
// travel as raw JSON from the upstream to the server, untouched.
//
// Upstreams start independently. One that is slow, dead or misbehaving
// only leaves its own entries out of the catalog; Status says why.
package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/namespace"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
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
	// Call sends a request and returns the upstream's response; a Go
	// error means the request failed in transport (down, timed out).
	Call(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error)
	// List returns every item of a paginated list method.
	List(ctx context.Context, method, itemsKey string) ([]json.RawMessage, error)
	// ProtocolVersion is the version negotiated with the upstream.
	ProtocolVersion() string
	// Capabilities are the upstream server's capabilities, raw.
	Capabilities() json.RawMessage
	// Instructions are the upstream server's instructions, if any.
	Instructions() string
}

// UpstreamConfig is one upstream as the router sees it.
type UpstreamConfig struct {
	Name   string
	Client Upstream
	// Required upstreams must be ready for Ready to report true.
	Required bool
	// Timeout bounds the start and each list request; 0 means 60s.
	Timeout time.Duration
}

// Implementation names the gateway to hosts.
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Options configure a Router.
type Options struct {
	// Upstreams in priority order: catalog order follows it.
	Upstreams []UpstreamConfig
	// Namespace controls exposed names (separator, prefix mode).
	Namespace namespace.Options
	// Rules filter and trim what callers see.
	Rules policy.Rules
	// ServerInfo is the gateway's name and version, as hosts see it.
	ServerInfo Implementation
	// ListWait bounds how long a request that needs the catalog (a list,
	// or a call by name) waits for upstreams that are still in their
	// first start, so that a host connecting just after the gateway
	// starts sees a complete catalog; 0 means 10s, and a negative value
	// means no wait.
	ListWait time.Duration
	// ListTTL is the ttlMs hint on list results for modern hosts; 0 means
	// 60s.
	ListTTL time.Duration
	// Logger receives the router's logs; nil discards them.
	Logger *slog.Logger
}

// Router merges and routes. Create it with New, call Start once, and
// Close when done.
type Router struct {
	opts      Options
	log       *slog.Logger
	upstreams []*upstreamState

	// started is closed when every upstream has finished its first start
	// attempt, successfully or not.
	started chan struct{}
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	// rebuildMu serialises catalog rebuilds (see rebuild).
	rebuildMu sync.Mutex

	mu sync.Mutex // guards cat
	// cat is the merged catalog, rebuilt whenever an upstream's entries
	// change; readers take the pointer under mu and then use it freely.
	cat *catalog
}

// upstreamState is the router's record of one upstream.
type upstreamState struct {
	UpstreamConfig
	index int // position in Options.Upstreams

	mu          sync.Mutex // guards the fields below
	phase       Phase
	err         error
	since       time.Time
	tools       []json.RawMessage
	prompts     []json.RawMessage
	resources   []json.RawMessage
	templates   []json.RawMessage
	modern      bool
	listProblem error // a list that failed while the upstream itself is up
}

// Phase is where an upstream is in its life.
type Phase string

// Phases of an upstream.
const (
	PhaseStarting Phase = "starting"
	PhaseReady    Phase = "ready"
	PhaseDegraded Phase = "degraded" // ready, but a catalog list failed
	PhaseFailed   Phase = "failed"
	PhaseStopped  Phase = "stopped"
)

// New returns a router over the given upstreams. It starts nothing.
func New(opts *Options) *Router {
	r := &Router{opts: *opts, log: telemetry.Discard(opts.Logger), started: make(chan struct{})}
	if r.opts.ListWait == 0 {
		r.opts.ListWait = 10 * time.Second
	}
	if r.opts.ListTTL == 0 {
		r.opts.ListTTL = 60 * time.Second
	}
	for i, u := range opts.Upstreams {
		if u.Timeout <= 0 {
			u.Timeout = 60 * time.Second
		}
		r.upstreams = append(r.upstreams, &upstreamState{UpstreamConfig: u, index: i, phase: PhaseStarting, since: time.Now()})
	}
	r.cat = r.buildCatalog()
	return r
}

// Start starts every upstream in parallel and returns at once. Each
// upstream is started under its own timeout, then its catalog is listed;
// the merged catalog grows as upstreams become ready.
func (r *Router) Start(ctx context.Context) {
	ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	var first sync.WaitGroup
	for _, u := range r.upstreams {
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
}

// startUpstream runs the first start of one upstream: handshake, then the
// catalog lists. A panic in an upstream client is contained here so that
// it cannot take the gateway down.
func (r *Router) startUpstream(ctx context.Context, u *upstreamState) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("upstream start panicked", telemetry.KeyUpstream, u.Name, "panic", p)
			u.setPhase(PhaseFailed, fmt.Errorf("internal error: %v", p))
		}
	}()
	startCtx, cancel := context.WithTimeout(ctx, u.Timeout)
	err := u.Client.Start(startCtx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			u.setPhase(PhaseStopped, ctx.Err())
			return
		}
		r.log.Warn("upstream failed to start", telemetry.KeyUpstream, u.Name, telemetry.KeyErr, err)
		u.setPhase(PhaseFailed, err)
		return
	}
	r.refresh(ctx, u)
}

// refresh lists one upstream's catalog and rebuilds the merged catalog.
func (r *Router) refresh(ctx context.Context, u *upstreamState) {
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
		})
	}
	wg.Wait()
	var problems []error
	for _, l := range lists {
		if l.err != nil {
			r.log.Warn("upstream list failed", telemetry.KeyUpstream, u.Name, telemetry.KeyMethod, l.method, telemetry.KeyErr, l.err)
			problems = append(problems, fmt.Errorf("%s: %w", l.method, l.err))
			continue
		}
		*l.dst = l.items
	}
	u.mu.Lock()
	u.tools, u.prompts, u.resources, u.templates = tools, prompts, resources, templates
	u.modern = isModern(u.Client.ProtocolVersion())
	u.listProblem = errors.Join(problems...)
	u.mu.Unlock()
	if len(problems) > 0 {
		u.setPhase(PhaseDegraded, u.listProblem)
	} else {
		u.setPhase(PhaseReady, nil)
	}
	r.rebuild()
	r.log.Info("upstream ready", telemetry.KeyUpstream, u.Name,
		"protocol_version", u.Client.ProtocolVersion(), "tools", len(tools), "prompts", len(prompts),
		"resources", len(resources), "resource_templates", len(templates))
}

func (u *upstreamState) setPhase(p Phase, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.phase, u.err, u.since = p, err, time.Now()
}

// serving reports whether the upstream's entries belong in the catalog.
func (u *upstreamState) serving() bool {
	return u.phase == PhaseReady || u.phase == PhaseDegraded
}

// rebuild recomputes the merged catalog from every upstream's lists.
// Rebuilds are serialised: two upstreams becoming ready at once must not
// let the build that saw less be stored last.
func (r *Router) rebuild() {
	r.rebuildMu.Lock()
	defer r.rebuildMu.Unlock()
	cat := r.buildCatalog()
	r.mu.Lock()
	r.cat = cat
	r.mu.Unlock()
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
	if r.cancel != nil {
		r.cancel()
	}
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, u := range r.upstreams {
		wg.Go(func() {
			if err := u.Client.Close(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("upstream %s: %w", u.Name, err))
				mu.Unlock()
			}
			u.setPhase(PhaseStopped, nil)
		})
	}
	wg.Wait()
	r.wg.Wait()
	return errors.Join(errs...)
}

// UpstreamStatus is one upstream's health, as /readyz shows it.
type UpstreamStatus struct {
	Name     string    `json:"name"`
	State    Phase     `json:"state"`
	Required bool      `json:"required"`
	Era      string    `json:"era,omitempty"`
	Protocol string    `json:"protocol_version,omitempty"`
	Tools    int       `json:"tools"`
	Prompts  int       `json:"prompts"`
	Error    string    `json:"error,omitempty"`
	Since    time.Time `json:"since"`
}

// Status returns every upstream's status, in configuration order.
func (r *Router) Status() []UpstreamStatus {
	cat := r.catalog()
	out := make([]UpstreamStatus, 0, len(r.upstreams))
	for _, u := range r.upstreams {
		u.mu.Lock()
		s := UpstreamStatus{Name: u.Name, State: u.phase, Required: u.Required, Since: u.since}
		if u.err != nil {
			s.Error = u.err.Error()
		}
		if u.serving() {
			s.Protocol = u.Client.ProtocolVersion()
			s.Era = "legacy"
			if u.modern {
				s.Era = "modern"
			}
		}
		u.mu.Unlock()
		s.Tools, s.Prompts = cat.countTools(u.index), cat.countPrompts(u.index)
		out = append(out, s)
	}
	return out
}

// Ready reports whether every required upstream is serving.
func (r *Router) Ready() bool {
	for _, u := range r.upstreams {
		u.mu.Lock()
		ok := !u.Required || u.serving()
		u.mu.Unlock()
		if !ok {
			return false
		}
	}
	return true
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
