// Package server is the gateway's Streamable HTTP endpoint, for hosts of
// both protocol eras on one URL, plus the health endpoints and a stdio
// front for hosts that only launch local servers.
//
// A request is legacy (2025-03-26 .. 2025-11-25) when it is an initialize
// or carries an Mcp-Session-Id, and modern (2026-07-28) when it declares a
// modern version in MCP-Protocol-Version or in params._meta. Legacy
// sessions live in this process, or, with Options.Shared, in every
// replica that serves them (shared.go); modern requests carry everything
// they need and may reach any replica.
//
// The server validates what HTTP carries (origin, host, size, headers,
// sessions) and hands each JSON-RPC request to the router. It translates
// errors to HTTP statuses here and nowhere else.
package server

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/mux"
	"golang.org/x/time/rate"

	"go.opentelemetry.io/otel/metric"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcpheader"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/state"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

// Dispatcher is what the server needs of the router (*router.Router).
type Dispatcher interface {
	Dispatch(ctx context.Context, c *router.Caller, req *jsonrpc.Request) *router.Reply
	InitializeResult(version string) json.RawMessage
	// SubscribeResource subscribes a host (a session or a listen stream,
	// by key) to a resource; HostGone forgets a host that ended.
	SubscribeResource(ctx context.Context, c *router.Caller, key, uri string) *jsonrpc.Error
	HostGone(key string)
	// ParamBindings returns the x-mcp-header bindings of a tool in a
	// view, against which a modern request's Mcp-Param-* headers are
	// checked; none for a tool the view does not hold.
	ParamBindings(view, tool string) []mcpheader.Binding
	Status() []router.UpstreamStatus
	Views() []router.ViewStatus
	Ready() bool
}

// Options configure a Server.
type Options struct {
	// Endpoint is the MCP endpoint's path; "" means "/mcp".
	Endpoint string
	// Profiles are the names of the profiles served on their own paths,
	// <Endpoint>/<name> (config.ProfilePath), each with every method of
	// the endpoint: a request there is in its identity's view narrowed
	// by the profile (policy.Identity.Profile). Another name under
	// Endpoint gets 404. Replaced by SetProfiles.
	Profiles []string
	// AllowedOrigins lists the Origin values (scheme://host[:port]) a
	// request may carry, on every endpoint; loopback origins are accepted
	// too when Loopback is set. A request with any other Origin gets 403,
	// against DNS rebinding. A request without Origin is not affected.
	AllowedOrigins []string
	// Loopback says the server listens on a loopback address only: then
	// loopback origins (http://localhost:3000) are accepted, which on any
	// other listener prove nothing (a rebinding page can be one).
	Loopback bool
	// AllowedHosts bounds the Host header of requests to the MCP
	// endpoint: host names or IPs (any port) or host:port (that port
	// only), compared without regard to case. nil means the loopback
	// names only (config.DefaultAllowedHosts); ListenerHosts gives the
	// gateway's default for a listen address. Another Host gets 403.
	// /readyz and /metrics also answer a Host that is an IP literal
	// (probes by pod IP), and /healthz any Host.
	AllowedHosts []string
	// MaxBodyBytes limits a request body; 0 means
	// config.DefaultMaxBodyBytes (4 MiB). A larger body gets 413.
	MaxBodyBytes int64
	// MaxSessions limits the number of live legacy sessions; 0 means
	// config.DefaultMaxSessions (10000). When the limit is reached, idle
	// sessions are expired first; then the new session takes the room of
	// the least recently used session without an open GET stream of the
	// identity holding the most sessions (which may be the caller) among
	// those that have such a session, so that one identity's flood
	// displaces only its own sessions once it holds the most. An
	// initialize that still finds no room (every session streams) gets
	// 503.
	MaxSessions int
	// SessionIdleTimeout ends a legacy session that has had no request
	// and no open GET stream for this long (many clients never send
	// DELETE); 0 means config.DefaultSessionIdleTimeout (30 minutes). Its
	// next request gets 404, which tells the client to initialize again.
	SessionIdleTimeout time.Duration
	// BodyTimeout bounds the reading of a request's body, from the end of
	// its headers; 0 means config.DefaultBodyTimeout (30s). A body that
	// has not arrived by then gets 408, and a request answered without
	// reading its body (a 401, a 403) waits for it no longer either: its
	// connection is closed. Response streams are not bound by it.
	BodyTimeout time.Duration
	// WriteTimeout bounds each write to a host: an answer, or a batch of
	// events on a stream (a POST's SSE answer, a GET stream, a
	// subscriptions/listen stream); 0 means config.DefaultWriteTimeout
	// (30s). A host that takes nothing for that long is cut off alone:
	// its stream ends, its connection closes, and what the stream held
	// is released.
	WriteTimeout time.Duration
	// Quotas returns an identity's own quotas: the legacy sessions it may
	// hold (its next initialize ends its own least recently used session
	// without an open GET stream) and the GET and subscriptions/listen
	// streams it may hold open (more get 429); 0 means no quota of its
	// own. nil means none.
	Quotas func(who policy.Identity) (sessions, streams int)
	// Admit takes one POSTed JSON-RPC request of an identity from its
	// rate limits, or refuses it: limit is the telemetry.Limit* value of
	// the limit hit and retry how long until the request would be
	// admitted. A refused request gets 429 with Retry-After. Responses
	// and notifications are not charged. nil admits everything.
	Admit func(who policy.Identity) (limit string, retry time.Duration, ok bool)
	// KeepAlive is the interval of SSE comment lines on idle GET
	// streams; 0 means config.DefaultKeepAlive (25s).
	KeepAlive time.Duration
	// Identify authenticates a request's bearer token (the text after
	// "Bearer " in Authorization) and returns the caller's identity, whose
	// team is the view the caller sees. nil means no authentication:
	// every caller gets the default view.
	Identify func(token string) (policy.Identity, error)
	// ResourceMetadata, when set (auth mode oauth), is served at
	// /.well-known/oauth-protected-resource and at its path-suffixed
	// forms (RFC 9728), each profile's at the form of its path, and
	// named in the challenges of a 401 and of a 403 for a missing scope. nil serves none and challenges as for API keys.
	ResourceMetadata *ResourceMetadata
	// Metrics, if set, is served at /metrics.
	Metrics http.Handler
	// Telemetry reads the trace context of hosts' HTTP requests and
	// counts sessions; nil means telemetry.Disabled().
	Telemetry *telemetry.Telemetry
	// Shared, if set (state.store: redis), shares legacy sessions with
	// the gateway's other replicas (shared.go); the server starts it. nil
	// keeps them in this process.
	Shared *state.Store
	// ServePeer answers another replica's request (router.ServePeer);
	// used with Shared.
	ServePeer func(ctx context.Context, payload []byte) []byte
	// Approved, if set, is called when another replica (or pin
	// --approve) changed the shared approvals; used with Shared.
	Approved func()
	// Console, if set, is served at ConsolePath and below (the operator
	// console, internal/console), behind the same Host check as the MCP
	// endpoint; it checks Origin itself (its own pages post to it) and
	// Drain ends its streams.
	Console Console
	// ConsolePath is where Console is served; "" means
	// config.ConsolePath.
	ConsolePath string
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
}

// Console is the operator console's handler (*console.Console).
type Console interface {
	http.Handler
	// Close ends its event streams.
	Close()
}

// Server serves MCP over Streamable HTTP.
type Server struct {
	d       Dispatcher
	opts    Options
	log     *slog.Logger
	origins map[string]bool
	// hosts holds the allowed Host values, lower case: a bare host
	// (any port) or host:port as net.JoinHostPort writes it.
	hosts map[string]bool
	// tel is Options.Telemetry.
	tel         *telemetry.Telemetry
	listChanged metric.Int64Counter
	rejected    metric.Int64Counter
	gauges      metric.Registration

	// identify is Options.Identify, replaced by SetIdentify on a reload.
	identify atomic.Pointer[func(string) (policy.Identity, error)]
	// meta is Options.ResourceMetadata, replaced by SetResourceMetadata.
	meta atomic.Pointer[ResourceMetadata]
	// profiles holds Options.Profiles, replaced by SetProfiles.
	profiles atomic.Pointer[map[string]bool]
	// profileBase is the prefix of profile paths: Endpoint without a
	// trailing "/", then "/".
	profileBase string
	// replica names this process in GET stream event ids: the shared
	// store's replica id, or a random one.
	replica string
	// draining is set by StopAccepting: /readyz says 503 and answers
	// close their connections.
	draining atomic.Bool

	mu sync.Mutex // guards the fields below
	// sessions holds the live legacy sessions by id.
	sessions map[string]*session
	// listeners holds the open modern subscriptions/listen streams, also
	// by subscriber key; nextListener numbers their keys.
	listeners      map[*listener]struct{}
	listenersByKey map[string]*listener
	nextListener   uint64
	// revoked holds the shared sessions ended lately, until when they are
	// remembered, so that a request adopting one while its revocation
	// arrives cannot bring it back (shared.go).
	revoked map[string]time.Time
	// streams counts the open GET and listen streams by identity
	// (policy.Identity.ID), against Options.Quotas.
	streams map[string]int
	// closing is closed by Close, which ends every stream.
	closing chan struct{}
	closed  bool
}

// New returns a server that dispatches to d.
func New(d Dispatcher, opts *Options) *Server {
	s := &Server{d: d, log: telemetry.Discard(opts.Logger), sessions: map[string]*session{}, origins: map[string]bool{},
		listeners: map[*listener]struct{}{}, listenersByKey: map[string]*listener{}, streams: map[string]int{}, closing: make(chan struct{})}
	s.opts = *opts
	if opts.Identify != nil {
		s.identify.Store(&opts.Identify)
	}
	s.meta.Store(opts.ResourceMetadata)
	s.SetProfiles(opts.Profiles)
	if opts.Shared != nil {
		s.replica = opts.Shared.Replica()
	} else {
		s.replica = newSessionID()[:16]
	}
	s.observe()
	if s.opts.Endpoint == "" {
		s.opts.Endpoint = config.DefaultEndpoint
	}
	s.profileBase = config.ProfilePath(s.opts.Endpoint, "")
	if s.opts.MaxBodyBytes <= 0 {
		s.opts.MaxBodyBytes = config.DefaultMaxBodyBytes
	}
	if s.opts.MaxSessions <= 0 {
		s.opts.MaxSessions = config.DefaultMaxSessions
	}
	if s.opts.SessionIdleTimeout <= 0 {
		s.opts.SessionIdleTimeout = config.DefaultSessionIdleTimeout
	}
	if s.opts.BodyTimeout <= 0 {
		s.opts.BodyTimeout = config.DefaultBodyTimeout
	}
	if s.opts.WriteTimeout <= 0 {
		s.opts.WriteTimeout = config.DefaultWriteTimeout
	}
	if s.opts.KeepAlive <= 0 {
		s.opts.KeepAlive = config.DefaultKeepAlive
	}
	for _, o := range opts.AllowedOrigins {
		s.origins[strings.TrimSuffix(strings.ToLower(o), "/")] = true
	}
	hosts := opts.AllowedHosts
	if hosts == nil {
		hosts = config.DefaultAllowedHosts
	}
	s.hosts = map[string]bool{}
	for _, h := range hosts {
		s.hosts[normalHost(h)] = true
	}
	s.startShared()
	return s
}

// Handler returns the HTTP handler with every endpoint.
func (s *Server) Handler() http.Handler {
	m := mux.NewRouter()
	m.HandleFunc("/healthz", s.healthz).Methods(http.MethodGet, http.MethodHead)
	// The metadata is public and tells nothing a host must not know: like
	// /healthz, it answers any Host, for a host reaches the gateway by
	// whatever name its operator gave it.
	m.HandleFunc(metadataPath, s.resourceMetadata).Methods(http.MethodGet, http.MethodHead)
	m.HandleFunc(metadataPath+s.opts.Endpoint, s.resourceMetadata).Methods(http.MethodGet, http.MethodHead)
	// A profile's metadata is at its path's (forProfile), whatever path
	// the resource has.
	m.HandleFunc(metadataPath+s.profileBase+"{profile}", s.resourceMetadata).Methods(http.MethodGet, http.MethodHead)
	if md := s.opts.ResourceMetadata; md != nil {
		if p := md.path(); p != "" && p != s.opts.Endpoint {
			m.HandleFunc(metadataPath+p, s.resourceMetadata).Methods(http.MethodGet, http.MethodHead)
		}
	}
	m.Handle("/readyz", s.checkProbeHost(http.HandlerFunc(s.readyz))).Methods(http.MethodGet, http.MethodHead)
	if s.opts.Metrics != nil {
		m.Handle("/metrics", s.checkProbeHost(s.opts.Metrics)).Methods(http.MethodGet)
	}
	m.Handle(s.opts.Endpoint, s.checkHost(s.post)).Methods(http.MethodPost)
	m.Handle(s.opts.Endpoint, s.checkHost(s.get)).Methods(http.MethodGet)
	m.Handle(s.opts.Endpoint, s.checkHost(s.delete)).Methods(http.MethodDelete)
	// Profiles' paths: the same handlers, which read the profile from
	// the path (profileOf). The Host check comes first, so that a
	// rebinding page cannot tell which names are profiles (403 for all);
	// then onProfile answers 404 for a name that is not a profile,
	// before authentication, whose challenge would name the metadata of
	// a resource that does not exist.
	profile := s.profileBase + "{profile}"
	m.Handle(profile, s.checkHost(s.onProfile(s.post))).Methods(http.MethodPost)
	m.Handle(profile, s.checkHost(s.onProfile(s.get))).Methods(http.MethodGet)
	m.Handle(profile, s.checkHost(s.onProfile(s.delete))).Methods(http.MethodDelete)
	m.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeError(w, http.StatusMethodNotAllowed, nil, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Method not allowed: %s", r.Method))
	})
	mcp := s.guard(m)
	if s.opts.Console == nil {
		return mcp
	}
	console := s.consoleGuard(s.opts.Console)
	base := cmp.Or(s.opts.ConsolePath, config.ConsolePath)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p == base || strings.HasPrefix(p, base+"/") {
			console.ServeHTTP(w, r)
			return
		}
		mcp.ServeHTTP(w, r)
	})
}

// firstDeadlines sets a request's first deadlines (see guard).
func (s *Server) firstDeadlines(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	now := time.Now()
	_ = rc.SetWriteDeadline(now.Add(s.opts.WriteTimeout))
	if r.Body != nil && r.Body != http.NoBody {
		_ = rc.SetReadDeadline(now.Add(s.opts.BodyTimeout))
	}
}

// consoleGuard is guard for the console: the same deadlines and the
// same Host check as the MCP endpoint (a rebinding page sends its own
// name), but not its Origin list: the console's own pages post to it
// from its own origin, which the console checks.
func (s *Server) consoleGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.firstDeadlines(w, r)
		if !s.hostAllowed(r.Host) {
			s.log.Warn("console request with a foreign Host rejected", "host", r.Host)
			http.Error(w, fmt.Sprintf("Forbidden: Host %q is not allowed (list it in allowed_hosts)", r.Host), http.StatusForbidden)
			return
		}
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// Leave marks the server as leaving: /readyz answers 503 and every answer
// closes its connection, so that a load balancer stops sending requests
// here and keeps no idle connection, while requests still served.
// Drain follows.
func (s *Server) Leave() { s.draining.Store(true) }

// Drain starts a graceful shutdown: it ends every long-lived stream (GET
// and subscriptions/listen, whose hosts will reconnect elsewhere) and
// refuses new sessions, but lets requests in progress finish. Close
// ends the rest. Both may be called more than once.
func (s *Server) Drain() {
	if s.opts.Console != nil {
		s.opts.Console.Close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.closing)
	}
}

// Close ends every legacy session, with what it has in flight, and every
// stream.
func (s *Server) Close() {
	s.Drain()
	s.mu.Lock()
	gauges := s.gauges
	s.gauges = nil
	s.mu.Unlock()
	if gauges != nil {
		_ = gauges.Unregister()
	}
	s.mu.Lock()
	sessions := s.sessions
	s.sessions = map[string]*session{}
	s.mu.Unlock()
	for _, ss := range sessions {
		s.ended(ss)
	}
}

// ended finishes a session that left the table; one that was ended, not
// only dropped from this replica's table, ends on every replica.
func (s *Server) ended(ss *session) {
	ss.close()
	s.d.HostGone(ss.id)
	if s.opts.Shared != nil && ss.revoke {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := s.opts.Shared.EndSession(ctx, ss.id); err != nil {
			s.log.Warn("cannot end a session on the other replicas", telemetry.KeySession, ss.id, telemetry.KeyErr, err)
		}
	}
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok\n")
}

// pinner is a Dispatcher that pins definitions (*router.Router).
type pinner interface {
	Pinning() (router.PinReport, bool)
}

// Readiness is the body of /readyz, the same with 200 and 503; `mcp-gateway
// status` reads it.
type Readiness struct {
	// Ready is false until every required upstream is serving, and
	// while the server is leaving.
	Ready     bool                    `json:"ready"`
	Upstreams []router.UpstreamStatus `json:"upstreams"`
	Views     []router.ViewStatus     `json:"views"`
	// Under pinning (both present, perhaps empty; absent without):
	// what it leaves out of every view, and what it reports but lists.
	Quarantined []router.PinStatus `json:"quarantined,omitzero"`
	Flagged     []router.PinStatus `json:"flagged,omitzero"`
}

// readyz reports 200 once every required upstream is serving, and each
// upstream's state and each view's size and cuts either way.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	body := Readiness{Ready: s.d.Ready() && !s.draining.Load(), Upstreams: s.d.Status(), Views: s.d.Views()}
	if p, ok := s.d.(pinner); ok {
		if rep, on := p.Pinning(); on {
			body.Quarantined = append([]router.PinStatus{}, rep.Quarantined...)
			body.Flagged = append([]router.PinStatus{}, rep.Flagged...)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if !body.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}

// guard applies the check every endpoint shares: the Origin header
// (2025-11-25 basic/transports "Security Warning": servers must validate
// it on every connection, against DNS rebinding); then, for an origin
// listed in AllowedOrigins, CORS (cors).
//
// It also sets the request's first deadlines: a body must arrive within
// BodyTimeout (post clears it once read; a handler that answers without
// reading the body leaves it, so net/http's discarding of the unread
// body ends there too and closes the connection), and writes must be
// taken within WriteTimeout (a deadlineWriter renews it for each write
// of an answer or a stream). A write that fails also cancels the
// request's context in net/http, which ends a stream's pump.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.firstDeadlines(w, r)
		if origin := r.Header.Get("Origin"); origin != "" && !s.originAllowed(origin) {
			s.log.Warn("request with a foreign Origin rejected", "origin", origin)
			writeError(w, http.StatusForbidden, nil, jsonrpc.NewError(jsonrpc.CodeInvalidRequest,
				"Forbidden: Origin %q is not allowed (list it in allowed_origins)", origin))
			return
		}
		if s.cors(w, r) {
			return
		}
		if s.draining.Load() {
			// Leaving: no connection is kept for another request.
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// checkHost refuses a request to the MCP endpoint whose Host is not an
// allowed one: a rebinding page reaches the gateway under the attacker's
// name, which the Host header carries.
func (s *Server) checkHost(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r.Host) {
			s.foreignHost(w, r)
			return
		}
		next(w, r)
	})
}

// checkProbeHost guards /readyz and /metrics: they accept any IP literal
// as Host, so that probes by pod IP keep working, and otherwise only an
// allowed host. A rebinding page can only send a DNS name (its own),
// which would otherwise read upstream errors (internal URLs) and metrics,
// even on a loopback listener: a same-origin GET carries no Origin.
// /healthz tells nothing and is not checked.
func (s *Server) checkProbeHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if net.ParseIP(hostOnly(r.Host)) == nil && !s.hostAllowed(r.Host) {
			s.foreignHost(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// foreignHost answers a request whose Host is not allowed.
func (s *Server) foreignHost(w http.ResponseWriter, r *http.Request) {
	s.log.Warn("request with a foreign Host rejected", "host", r.Host)
	writeError(w, http.StatusForbidden, nil, jsonrpc.NewError(jsonrpc.CodeInvalidRequest,
		"Forbidden: Host %q is not allowed (list it in allowed_hosts)", r.Host))
}

// hostAllowed reports whether a Host header names an allowed host, with
// any port, or an allowed host:port.
func (s *Server) hostAllowed(host string) bool {
	if host == "" {
		return false
	}
	return s.hosts[normalHost(hostOnly(host))] || s.hosts[normalHost(host)]
}

// normalHost is the form hosts are compared in: lower case, an IPv6
// address bare, a host:port as net.JoinHostPort writes it.
func normalHost(h string) string {
	h = strings.ToLower(h)
	if host, port, err := net.SplitHostPort(h); err == nil {
		return net.JoinHostPort(host, port)
	}
	return strings.Trim(h, "[]")
}

// originAllowed reports whether an Origin is listed, or is a loopback
// origin on a loopback listener. An Origin equal to the Host proves
// nothing: a DNS rebinding page sends exactly that.
func (s *Server) originAllowed(origin string) bool {
	o := strings.TrimSuffix(strings.ToLower(origin), "/")
	if s.origins[o] {
		return true
	}
	if !s.opts.Loopback {
		return false
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // includes the opaque origin "null"
	}
	return isLoopbackHost(u.Hostname())
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}

func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// ListenerHosts returns the Host values a gateway listening on listen
// (host:port) accepts by default: the loopback names, the listen host,
// the machine's host name (os.Hostname), and, for a listener on every
// interface (":8080", "0.0.0.0:8080", "[::]:8080"), the address of each
// interface, so that an operator who connects by the machine's IP is
// not locked out. Names that only DNS gives the machine (an FQDN, a
// load balancer's name) must be listed in allowed_hosts.
func ListenerHosts(listen string) []string {
	hosts := slices.Clone(config.DefaultAllowedHosts)
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		host = listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		hosts = append(hosts, interfaceIPs()...)
	} else {
		hosts = append(hosts, host)
	}
	if name, err := os.Hostname(); err == nil && name != "" {
		hosts = append(hosts, name)
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

// interfaceIPs returns the IP address of each network interface (none
// when they cannot be listed).
func interfaceIPs() []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var ips []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			ips = append(ips, n.IP.String())
		}
	}
	return ips
}

// SetIdentify replaces Options.Identify (a reloaded config's keys); nil
// turns authentication off. team tells the team of an identity the new
// keys still know (policy.APIKeys.Team; nil when identify is nil). The
// legacy sessions and listen streams whose identity the new keys do not
// know, or know in another team, end at once, and so do those opened
// without authentication when it is turned on, and the reverse: their
// hosts open new ones, under the new keys.
func (s *Server) SetIdentify(identify func(string) (policy.Identity, error), team func(id string) (string, bool)) {
	if identify == nil {
		s.identify.Store(nil)
	} else {
		s.identify.Store(&identify)
	}
	stale := func(principal, view string) bool {
		switch {
		case identify == nil:
			return principal != ""
		case principal == "":
			return true
		case team == nil:
			return false
		}
		t, ok := team(principal)
		vt, _ := policy.SplitViewKey(view)
		return !ok || t != vt
	}
	s.mu.Lock()
	var ended []*session
	for id, ss := range s.sessions {
		if stale(ss.principal, ss.view) {
			delete(s.sessions, id)
			ended = append(ended, ss)
		}
	}
	for l := range s.listeners {
		if stale(l.principal, l.view) {
			l.end()
		}
	}
	s.mu.Unlock()
	for _, ss := range ended {
		s.log.Info("session ended: its credentials changed", telemetry.KeySession, ss.id)
		s.ended(ss)
	}
}

// identity returns who the caller is (its view is its team), or writes
// 401 and reports false (2025-11-25 basic/authorization: a missing or
// invalid token is 401 with WWW-Authenticate). The token itself is never
// logged.
func (s *Server) identity(w http.ResponseWriter, r *http.Request) (policy.Identity, bool) {
	profile := s.profileOf(r)
	identify := s.identify.Load()
	if identify == nil {
		return policy.Identity{Profile: profile}, true
	}
	var id policy.Identity
	var err error
	if auth := r.Header.Values("Authorization"); len(auth) > 1 {
		// A singleton field (RFC 9110 §11.6.2): a proxy in front that
		// read another copy than this would vouch for another identity.
		err = fmt.Errorf("%w: more than one Authorization header", policy.ErrInvalidCredentials)
	} else {
		id, err = (*identify)(bearerToken(r.Header.Get("Authorization")))
	}
	if err == nil && !id.AllowsPath(profile) {
		// A token for one profile's path (its audience) opens that path
		// only: never the main endpoint or another profile, which may
		// reach more (RFC 8707 §2: a token is for the resource named).
		err = fmt.Errorf("%w: the token's audience is another path of this gateway", policy.ErrInvalidCredentials)
	}
	if err == nil {
		id.Profile = profile
		return id, true
	}
	s.log.Warn("request not authenticated", "remote", r.RemoteAddr, "reason", err.Error())
	md := s.meta.Load().forProfile(s.opts.Endpoint, profile)
	var se *policy.ScopeError
	switch {
	case errors.As(err, &se):
		// 2025-11-25 basic/authorization, "Scope Challenge Handling".
		challenge := `Bearer error="insufficient_scope", scope=` + quoteParam(se.Scope)
		if md != nil {
			challenge += `, resource_metadata=` + quoteParam(md.URL())
		}
		w.Header().Set("WWW-Authenticate", challenge)
		writeError(w, http.StatusForbidden, nil, jsonrpc.NewError(jsonrpc.CodeInvalidRequest,
			"Forbidden: the token lacks a needed scope (needs %s)", se.Scope))
		return policy.Identity{}, false
	case errors.Is(err, policy.ErrNoTeam):
		writeError(w, http.StatusForbidden, nil, jsonrpc.NewError(jsonrpc.CodeInvalidRequest,
			"Forbidden: the token is valid but matches no team of this gateway"))
		return policy.Identity{}, false
	}
	missing := errors.Is(err, policy.ErrUnauthenticated)
	var challenge, message string
	if md == nil {
		challenge = `Bearer realm="mcp-gateway"`
		message = "Unauthorized: send an API key as Authorization: Bearer <key>"
		if !missing {
			challenge += `, error="invalid_token"`
			message = "Unauthorized: the API key is not valid"
		}
	} else {
		// RFC 9728 §5.1: the challenge names the metadata, from which
		// the host finds the authorization servers.
		challenge = "Bearer "
		message = "Unauthorized: send an OAuth access token as Authorization: Bearer <token> (see " + md.URL() + ")"
		if !missing {
			challenge += `error="invalid_token", `
			message = "Unauthorized: the token is not valid (see " + md.URL() + ")"
		}
		challenge += `resource_metadata=` + quoteParam(md.URL())
		if len(md.RequiredScopes) > 0 {
			challenge += `, scope=` + quoteParam(strings.Join(md.RequiredScopes, " "))
		}
	}
	w.Header().Set("WWW-Authenticate", challenge)
	writeError(w, http.StatusUnauthorized, nil, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "%s", message))
	return policy.Identity{}, false
}

// quoteParam writes an auth-param value as a quoted-string (RFC 9110
// §5.6.4). Scopes and URLs hold no '"' or '\' (config validates them),
// but the escape keeps a header well-formed whatever they hold.
func quoteParam(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
}

// bearerToken returns the credentials of an Authorization header in the
// Bearer scheme, or "" for any other scheme. The scheme is matched without
// regard to case and is followed by one or more spaces (RFC 9110 §11.1,
// §11.4: "credentials = auth-scheme [ 1*SP ( token68 / #auth-param ) ]");
// the token itself is taken exactly as sent.
func bearerToken(header string) string {
	const scheme = "Bearer"
	if len(header) <= len(scheme) || !strings.EqualFold(header[:len(scheme)], scheme) || header[len(scheme)] != ' ' {
		return ""
	}
	return strings.TrimSpace(header[len(scheme):])
}

// observe sets up the server's telemetry: the list_changed counter and
// the gauge of open sessions and streams by era.
func (s *Server) observe() {
	s.tel = s.opts.Telemetry
	if s.tel == nil {
		s.tel = telemetry.Disabled()
	}
	in, err := telemetry.NewInstruments(s.tel.Meter)
	if err != nil {
		s.log.Error("telemetry instruments", telemetry.KeyErr, err)
		in, _ = telemetry.NewInstruments(telemetry.Disabled().Meter)
	}
	s.listChanged, s.rejected = in.ListChanged, in.Rejections
	if !s.tel.Metering() {
		return
	}
	sessions, err := s.tel.Meter.Int64ObservableGauge("mcp_gateway.sessions",
		metric.WithUnit("{session}"), metric.WithDescription("Open legacy sessions, and modern hosts' open subscriptions/listen streams."))
	if err == nil {
		s.gauges, err = s.tel.Meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			s.mu.Lock()
			legacy, modern := len(s.sessions), len(s.listeners)
			s.mu.Unlock()
			o.ObserveInt64(sessions, int64(legacy), metric.WithAttributes(telemetry.AttrEra.String("legacy")))
			o.ObserveInt64(sessions, int64(modern), metric.WithAttributes(telemetry.AttrEra.String("modern")))
			return nil
		}, sessions)
	}
	if err != nil {
		s.log.Error("telemetry session gauge", telemetry.KeyErr, err)
	}
}

// sessionFor returns the session id's session when the caller is the
// identity that opened it, with the view it opened it in; otherwise it
// writes the error and returns nil: 404 for an unknown session, 403 for
// another identity's (another key, even of the same team), and 404 when
// the caller's view changed since (a reload moved its key to another
// team), ending the session so that the host opens one in its new view.
func (s *Server) sessionFor(w http.ResponseWriter, r *http.Request, id string, who policy.Identity, msgID json.RawMessage) *session {
	ss, err := s.session(r.Context(), id, who)
	switch {
	case err != nil:
		s.log.Warn("cannot open a session of another replica", telemetry.KeySession, id, telemetry.KeyErr, err)
		sharedUnavailable(w, msgID, "this session cannot be opened here")
		return nil
	case ss == nil:
		writeError(w, http.StatusNotFound, msgID, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Session not found: it expired or was deleted; initialize a new one"))
		return nil
	case ss.principal != who.ID && (ss.principal == "" || who.ID == ""):
		// Authentication was turned on or off since the session opened.
		s.endSession(id)
		writeError(w, http.StatusNotFound, msgID, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Session not found: the gateway's authentication changed; initialize a new one"))
		return nil
	case ss.principal != who.ID:
		s.log.Warn("request for a session of another identity", telemetry.KeySession, id)
		writeError(w, http.StatusForbidden, msgID, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Forbidden: the session belongs to another identity"))
		return nil
	case ss.team() != who.Team:
		s.log.Info("session ended: its identity's view changed", telemetry.KeySession, id)
		s.endSession(id)
		writeError(w, http.StatusNotFound, msgID, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Session not found: the caller's team changed; initialize a new one"))
		return nil
	case ss.view != who.View():
		// Opened on another profile's path (or the main endpoint's): a
		// session is in the view of its path and unknown on any other.
		// It is not ended: the request is not its host's.
		writeError(w, http.StatusNotFound, msgID, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Session not found on this path: a session belongs to the path it was initialized on"))
		return nil
	}
	now := time.Now()
	ss.touch(now) // only its own identity keeps a session alive
	s.refresh(ss, now)
	return ss
}

// newSessionID returns 128 random bits, hex encoded: visible ASCII, as
// the spec requires, and unguessable.
func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// session is one legacy host session.
type session struct {
	id      string
	version string
	// principal is the identity that opened the session
	// (policy.Identity.ID), key its id for the audit log, and view its
	// view then (policy.Identity.View: its team's, narrowed by the
	// profile of its path): every later request must come from that
	// identity, in that view.
	principal, key, view string
	// capabilities are the client capabilities the host declared in
	// initialize; set before the session is shared.
	capabilities json.RawMessage
	// done is closed when the session ends (DELETE, expiry or server
	// close).
	done      chan struct{}
	closeOnce sync.Once
	// out holds the change notifications for the GET stream.
	out *outbox
	// link tracks the requests running both ways.
	link hostLink

	mu sync.Mutex // guards the fields below
	// streaming is set while a GET stream is open; one at a time.
	streaming bool
	// lastUsed is when the session last had a request or a stream.
	lastUsed time.Time
	// level is the log level the host set with logging/setLevel.
	level string
	// refreshed is when the session's record in Redis last got its idle
	// timeout back (shared sessions only).
	refreshed time.Time
	// events numbers the session's GET stream events.
	events uint64
	// tells bounds what the session passes on to other replicas
	// (Server.tell); made on first use.
	tells *rate.Limiter
	// revoke says the session is ended everywhere, not only dropped
	// from this replica's table (shared sessions only).
	revoke bool
}

// team is the team of the session's view.
func (ss *session) team() string {
	team, _ := policy.SplitViewKey(ss.view)
	return team
}

// close ends the session and cancels everything it had in flight.
func (ss *session) close() {
	ss.closeOnce.Do(func() {
		close(ss.done)
		ss.link.cancelAll()
	})
}

func (ss *session) logLevel() string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.level
}

func (ss *session) setLogLevel(level string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.level = level
}

// idle reports whether the session has been unused for longer than d at
// now; a session with an open GET stream is never idle.
func (ss *session) idle(now time.Time, d time.Duration) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return !ss.streaming && now.Sub(ss.lastUsed) > d
}

func (ss *session) touch(now time.Time) {
	ss.mu.Lock()
	ss.lastUsed = now
	ss.mu.Unlock()
}

func (s *Server) newSession(version string, who policy.Identity) (*session, error) {
	now := time.Now()
	quota := 0
	if s.opts.Quotas != nil {
		quota, _ = s.opts.Quotas(who)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errShuttingDown
	}
	var ended []*session
	refused := false
	if quota > 0 && s.heldLocked(who.ID) >= quota {
		// At its own quota, an identity makes room from its own sessions.
		if lru := s.lruLocked(who.ID); lru != nil {
			ended = append(ended, lru)
		} else {
			refused = true
		}
	}
	if !refused && len(s.sessions) >= s.opts.MaxSessions {
		ended = append(ended, s.expireLocked(now)...)
	}
	if !refused && len(s.sessions) >= s.opts.MaxSessions {
		if lru := s.roomLocked(); lru != nil {
			ended = append(ended, lru)
		}
	}
	var ss *session
	if !refused && len(s.sessions) < s.opts.MaxSessions {
		ss = &session{id: s.newID(version, who), version: version, principal: who.ID, key: who.Key, view: who.View(),
			done: make(chan struct{}), lastUsed: now, out: newOutbox()}
		s.sessions[ss.id] = ss
	}
	s.mu.Unlock()
	for _, e := range ended {
		s.ended(e)
	}
	switch {
	case refused:
		s.reject(telemetry.LimitSessions)
		return nil, fmt.Errorf("%w: this identity holds its %d sessions, each with an open GET stream", errTooManySessions, quota)
	case ss == nil:
		s.reject(telemetry.LimitSessions)
		return nil, errTooManySessions
	}
	return ss, nil
}

// newID returns a new session's id: sealed around what every request
// needs when replicas share sessions, else 128 random bits.
func (s *Server) newID(version string, who policy.Identity) string {
	if s.opts.Shared == nil {
		return newSessionID()
	}
	return s.opts.Shared.NewSessionID(state.SessionSeal{Version: version, Principal: who.ID, Key: who.Key, View: who.View()})
}

// reject counts a refusal (or a session ended) for a limit.
func (s *Server) reject(limit string) {
	s.rejected.Add(context.Background(), 1, metric.WithAttributes(telemetry.AttrLimit.String(limit)))
}

// heldLocked counts the sessions of an identity. s.mu is held. (A scan:
// it runs for an initialize only, and the table is bounded.)
func (s *Server) heldLocked(principal string) int {
	n := 0
	for _, ss := range s.sessions {
		if ss.principal == principal {
			n++
		}
	}
	return n
}

// roomLocked removes from the table, and returns for the caller to end
// once s.mu is released, the least recently used session without an open
// GET stream of the identity holding the most sessions among those that
// have such a session: identities are taken by descending count until
// one can give room, so that an identity whose sessions all stream does
// not make the table refuse everyone. nil when every session streams.
// One pass over the table (it runs only when the table is full). s.mu is
// held.
func (s *Server) roomLocked() *session {
	type holder struct {
		held int
		lru  *session // without a GET stream
		at   time.Time
	}
	holders := map[string]*holder{}
	for _, ss := range s.sessions {
		h := holders[ss.principal]
		if h == nil {
			h = &holder{}
			holders[ss.principal] = h
		}
		h.held++
		ss.mu.Lock()
		used, streaming := ss.lastUsed, ss.streaming
		ss.mu.Unlock()
		if !streaming && (h.lru == nil || used.Before(h.at)) {
			h.lru, h.at = ss, used
		}
	}
	var best *holder
	for _, h := range holders {
		if h.lru != nil && (best == nil || h.held > best.held) {
			best = h
		}
	}
	if best == nil {
		return nil
	}
	// A shared session (state.store redis) only leaves this replica's
	// table: it may be in use on another replica.
	s.evictLocked(best.lru, false)
	return best.lru
}

// lruLocked removes from the table, and returns for the caller to end
// once s.mu is released, the least recently used session of an identity
// that has no open GET stream; nil when it has none. s.mu is held.
func (s *Server) lruLocked(principal string) *session {
	var lru *session
	var at time.Time
	for _, ss := range s.sessions {
		if ss.principal != principal {
			continue
		}
		ss.mu.Lock()
		used, streaming := ss.lastUsed, ss.streaming
		ss.mu.Unlock()
		if !streaming && (lru == nil || used.Before(at)) {
			lru, at = ss, used
		}
	}
	if lru != nil {
		s.evictLocked(lru, true) // the identity's own quota: ended everywhere
	}
	return lru
}

// evictLocked removes a session from the table to make room, and counts
// it. s.mu is held.
func (s *Server) evictLocked(ss *session, revoke bool) {
	delete(s.sessions, ss.id)
	ss.revoke = revoke
	s.log.Info("session ended to make room", telemetry.KeySession, ss.id)
	s.reject(telemetry.LimitSessions)
}

// takeStream counts a GET or listen stream of an identity against its
// quota; it returns the function that gives the slot back, or the quota
// when the identity has no slot left.
func (s *Server) takeStream(who policy.Identity) (release func(), quota int) {
	if s.opts.Quotas != nil {
		_, quota = s.opts.Quotas(who)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if quota > 0 && s.streams[who.ID] >= quota {
		return nil, quota
	}
	s.streams[who.ID]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.streams[who.ID]--; s.streams[who.ID] <= 0 {
			delete(s.streams, who.ID)
		}
	}, quota
}

// tooManyStreams answers a stream over its identity's quota.
func (s *Server) tooManyStreams(w http.ResponseWriter, id json.RawMessage, quota int) {
	s.reject(telemetry.LimitStreams)
	writeError(w, http.StatusTooManyRequests, id, jsonrpc.NewError(jsonrpc.CodeInternalError,
		"Too Many Requests: this identity has its %d open streams (GET and subscriptions/listen); close one first", quota))
}

// expireLocked removes every idle session from the table and returns
// them, for the caller to end once s.mu is released. It runs only when
// the table is full, so a sweep is rare.
func (s *Server) expireLocked(now time.Time) []*session {
	var expired []*session
	for id, ss := range s.sessions {
		if ss.idle(now, s.opts.SessionIdleTimeout) {
			delete(s.sessions, id)
			expired = append(expired, ss)
			s.log.Info("idle session expired", telemetry.KeySession, id)
		}
	}
	return expired
}

// session returns the live session with this id, or nil when there is
// none (never was, deleted, or expired). With shared sessions, one this
// replica does not hold is adopted (an error: Redis does not answer).
// sessionFor marks it used once the caller has been found to be its own.
func (s *Server) session(ctx context.Context, id string, who policy.Identity) (*session, error) {
	now := time.Now()
	s.mu.Lock()
	ss := s.sessions[id]
	var expired *session
	if ss != nil && ss.idle(now, s.opts.SessionIdleTimeout) {
		delete(s.sessions, id)
		expired, ss = ss, nil
	}
	s.mu.Unlock()
	if expired != nil {
		s.ended(expired)
	}
	if ss == nil && s.opts.Shared != nil {
		return s.adopt(ctx, id, who)
	}
	return ss, nil
}

// endSession ends a session, on every replica when they share sessions.
func (s *Server) endSession(id string) bool {
	s.mu.Lock()
	ss := s.sessions[id]
	delete(s.sessions, id)
	if ss != nil {
		ss.revoke = true
	}
	s.revokedLocked(id)
	s.mu.Unlock()
	switch {
	case ss != nil:
		s.ended(ss)
	case s.opts.Shared != nil:
		// Not held here, but ended all the same.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := s.opts.Shared.EndSession(ctx, id); err != nil {
			s.log.Warn("cannot end a session on the other replicas", telemetry.KeySession, id, telemetry.KeyErr, err)
		}
	}
	return ss != nil
}

var (
	errShuttingDown    = errors.New("the gateway is shutting down")
	errTooManySessions = errors.New("too many sessions")
)
