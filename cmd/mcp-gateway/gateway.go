package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"reflect"
	"runtime/debug"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/console"
	"github.com/mcp-gateway/mcp-gateway/internal/namespace"
	"github.com/mcp-gateway/mcp-gateway/internal/pin"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/server"
	"github.com/mcp-gateway/mcp-gateway/internal/state"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

func versionString() string {
	commit, goVersion := "unknown", "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		goVersion = info.GoVersion
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				commit = s.Value
			}
		}
	}
	return fmt.Sprintf("mcp-gateway %s (commit %s, %s)", version, commit, goVersion)
}

// loadConfig loads and validates the config. Every problem goes to w on
// its own line, and so does every warning.
func loadConfig(path string, w io.Writer) (*config.Config, error) {
	cfg, err := config.Load(path, nil)
	if err != nil {
		var ve *config.ValidationError
		if errors.As(err, &ve) {
			for _, p := range ve.Problems {
				fmt.Fprintf(w, "%s: %s\n", problemPath(path, p), p.Message)
			}
		} else {
			fmt.Fprintln(w, err)
		}
		return nil, err
	}
	for _, p := range cfg.Warnings() {
		fmt.Fprintf(w, "warning: %s: %s\n", problemPath(path, p), p.Message)
	}
	return cfg, nil
}

func problemPath(file string, p config.Problem) string {
	if p.Path == "" {
		return file
	}
	return file + ": " + p.Path
}

// newLogger returns the JSON logger on stderr at the configured level.
func newLogger(cfg *config.Config, stderr io.Writer) *slog.Logger {
	level, err := telemetry.ParseLevel(cfg.Telemetry.LogLevel)
	if err != nil {
		level = slog.LevelInfo // Validate already rejected unknown levels
	}
	return telemetry.NewLogger(stderr, level)
}

// recorders are what the gateway records with. They are built once, at
// start, and kept across reloads: a reload that changes telemetry
// settings is told they apply at the next start.
type recorders struct {
	log   *slog.Logger         // nil discards
	tel   *telemetry.Telemetry // nil means telemetry.Disabled()
	audit *telemetry.Audit     // nil: no audit log
	// obs records with tel and audit; nil (then built from them by
	// observer) or not On: nothing is observed.
	obs *telemetry.Observer
}

// observer returns rec's observer, built from its telemetry and audit
// log when it has none.
func (rec *recorders) observer() (*telemetry.Observer, error) {
	if rec.obs == nil && (rec.tel != nil || rec.audit != nil) {
		obs, err := telemetry.NewObserver(rec.tel, rec.audit)
		if err != nil {
			return nil, err
		}
		rec.obs = obs
	}
	return rec.obs, nil
}

// telemetryFlushTimeout bounds the export of the last spans and metrics
// at shutdown.
const telemetryFlushTimeout = 5 * time.Second

// newRecorders builds the telemetry and the audit log of cfg, logging to
// log. prometheus serves metrics at /metrics when telemetry.metrics is on
// (the HTTP gateway; stdio has no HTTP endpoint). OTLP export follows
// telemetry.otlp_endpoint, else the standard OTEL_EXPORTER_OTLP_*
// variables. stop flushes the telemetry and closes the audit file: call
// it after the router has closed, so that the last spans are in. Calls
// after the first do nothing.
func newRecorders(ctx context.Context, cfg *config.Config, log *slog.Logger, stderr io.Writer, prometheus bool) (rec recorders, stop func(), err error) {
	tel, err := telemetry.New(ctx, telemetry.Options{
		Prometheus:   prometheus && cfg.Telemetry.Metrics,
		OTLPEndpoint: cfg.Telemetry.OTLPEndpoint,
		Version:      version,
	})
	if err != nil {
		return recorders{}, nil, err
	}
	var auditFile *os.File
	var audit *telemetry.Audit
	if a := cfg.Telemetry.Audit; a.Enabled {
		w := stderr
		if a.Path != "" {
			auditFile, err = os.OpenFile(a.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
			if err != nil {
				_ = tel.Shutdown(ctx)
				return recorders{}, nil, fmt.Errorf("audit log: %w", err)
			}
			w = auditFile
		}
		audit = telemetry.NewAudit(w, a.Arguments == config.AuditHash)
	}
	stop = sync.OnceFunc(func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), telemetryFlushTimeout)
		defer cancel()
		if err := tel.Shutdown(fctx); err != nil {
			log.Warn("flushing telemetry", telemetry.KeyErr, err)
		}
		if auditFile != nil {
			if err := auditFile.Close(); err != nil {
				log.Warn("closing the audit log", telemetry.KeyErr, err)
			}
		}
	})
	rec = recorders{log: log, tel: tel, audit: audit}
	if _, err := rec.observer(); err != nil {
		stop()
		return recorders{}, nil, fmt.Errorf("telemetry: %w", err)
	}
	return rec, stop, nil
}

// newRouter translates the config into upstream clients and a router,
// with the state gauges registered when metrics are on. onChange receives
// the changes hosts should hear of; guard (nil: pinning off) vets each
// catalog.
func newRouter(cfg *config.Config, rec recorders, onChange func(router.Change), limits *router.Limits, shared *sharedState, guard *pin.Guard) (*router.Router, error) {
	opts := routerOptions(cfg, rec, onChange)
	opts.Limits = limits
	if guard != nil {
		opts.Pins = guard
	}
	if shared != nil { // the HTTP gateway; stdio and tools have one host, or none
		opts.Sealer = shared.sealer
		if shared.store != nil {
			opts.Peers = shared.store
		}
	}
	rt, err := router.New(opts)
	if err != nil {
		return nil, err
	}
	if err := observeState(rec.obs, rt); err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	if err := observePinning(rec.obs, guard); err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	return rt, nil
}

// routerOptions translates the config into the router's options, with
// one client factory per upstream.
func routerOptions(cfg *config.Config, rec recorders, onChange func(router.Change)) *router.Options {
	log := rec.log
	tel := cmp.Or(rec.tel, telemetry.Disabled())
	rules := policyRules(cfg)
	info := upstream.Implementation{Name: "mcp-gateway", Version: version}
	var ups []router.UpstreamConfig
	for _, u := range cfg.Upstreams {
		transport := string(u.Transport)
		if u.TransportInferred {
			transport = ""
		}
		taskAfter := u.TaskAfter(cfg.Tasks.After)
		creds := upstreamCredentials(u)
		ups = append(ups, router.UpstreamConfig{
			Name:        u.Name,
			Transport:   string(u.Transport),
			Fingerprint: fingerprint(u, taskAfter),
			Connect: func(o router.ConnectOptions) (router.Upstream, error) {
				caps := o.Capabilities
				if caps == nil {
					caps = relayCapabilities(u.Relayed())
				}
				opts := upstream.Options{
					Credentials:     creds(o.OnState == nil),
					Name:            u.Name,
					Command:         u.Command,
					Args:            u.Args,
					Env:             u.Env,
					Dir:             u.Cwd,
					URL:             u.URL,
					Transport:       transport,
					Headers:         u.Headers,
					Propagator:      tel.Propagator,
					Timeout:         u.Timeout,
					MaxTimeout:      u.MaxTimeout,
					MaxInFlight:     u.MaxInFlight,
					MaxQueue:        u.MaxQueue,
					MaxMessageBytes: u.MaxMessageBytes,
					ClientInfo:      info,
					Logger:          log,
					Capabilities:    caps,
					OnNotification:  o.Notify,
					OnRequest:       o.Request,
				}
				if t := u.TLS; t != nil {
					// Read when the upstream is built: at start, and
					// when a reload changes its settings.
					cfg, err := upstream.ClientTLS(t.CAFile, t.CertFile, t.KeyFile, t.ServerName)
					if err != nil {
						return nil, err // the router names the upstream
					}
					opts.TLS = cfg
				}
				var c upstreamClient
				var err error
				if o.OnState == nil {
					c, err = upstream.New(&opts)
				} else {
					opts.OnStateChange = o.OnState
					c, err = upstream.NewSupervised(&upstream.SupervisedOptions{
						Options: opts,
						Breaker: upstream.BreakerOptions{Failures: u.Breaker.Failures, Cooldown: u.Breaker.Cooldown},
						Restart: upstream.RestartOptions{
							Initial: u.Restart.Delay, Max: u.Restart.MaxDelay,
							CrashLimit: u.Restart.CrashLimit, CrashWindow: u.Restart.CrashWindow,
						},
					})
				}
				if err != nil {
					return nil, err
				}
				return observed(c, u.Name, rec.obs), nil
			},
			PerClient:  u.PerClient(),
			MaxClients: u.MaxClients,
			ClientIdle: u.IdleTimeout,
			Required:   u.Required,
			Key:        u.Key,
			Timeout:    u.Timeout,
			Relay:      u.Relayed(),
			// A stdio or HTTP+SSE server's requests come on its one
			// stream, not on the stream of the call that caused them.
			SharedStream: u.SharedStream(),
			TaskAfter:    taskAfter,
		})
	}
	return &router.Options{
		Upstreams:  ups,
		Namespace:  namespace.Options{Separator: cfg.Separator, Mode: namespace.Mode(cfg.Prefix)},
		Rules:      rules,
		ServerInfo: router.Implementation{Name: "mcp-gateway", Version: version},
		OnChange:   onChange,
		TaskTTL:    cfg.Tasks.TTL,
		MaxTasks:   cfg.Tasks.MaxPerIdentity,
		Logger:     log,
	}
}

// upstreamCredentials returns the factory of u's credentials
// (upstreams[].auth) for one client of it: a per-client session's, or
// the shared session's. Token caches are made here, once per upstream,
// so that every session of the upstream shares them. Under
// token_exchange a per-client session exchanges its host's token, and
// the shared session, which only lists the catalog and has no host,
// uses a client credentials token of the same client and audience.
func upstreamCredentials(u config.Upstream) func(perClient bool) upstream.Credentials {
	var cc upstream.Credentials
	var tx *upstream.TokenExchange
	switch a := u.Auth; {
	case a.OAuth != nil:
		cc = upstream.NewClientCredentials(&upstream.TokenOptions{Upstream: u.Name, Client: *a.OAuth})
	case a.TokenExchange != nil:
		cc = upstream.NewClientCredentials(&upstream.TokenOptions{Upstream: u.Name, Client: *a.TokenExchange})
		tx = upstream.NewTokenExchange(&upstream.TokenOptions{Upstream: u.Name, Client: *a.TokenExchange})
	}
	var headers upstream.Credentials
	if len(u.Auth.Headers) > 0 {
		headers = upstream.SecretHeaders(u.Name, u.Auth.Headers)
	}
	return func(perClient bool) upstream.Credentials {
		bearer := cc
		if tx != nil && perClient {
			bearer = tx.For()
		}
		return upstream.Chain(headers, bearer)
	}
}

// fingerprint identifies an upstream's settings: a reload restarts an
// upstream whose fingerprint changed and leaves the others running. Its
// effective tasks.after (taskAfter) counts too, since the router reads it
// when the upstream starts: one that inherits the top-level value
// restarts when that changes, and one that writes out the value it
// inherited does not restart.
func fingerprint(u config.Upstream, taskAfter time.Duration) string {
	u.Tasks = config.UpstreamTasks{} // taskAfter is what counts
	b, _ := json.Marshal(struct {
		Upstream  config.Upstream
		TaskAfter time.Duration
	}{u, taskAfter}) // maps marshal in key order
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// policyRules translates the policy settings of the config.
func policyRules(cfg *config.Config) policy.Rules {
	rules := policy.Rules{
		MaxTools:            cfg.Policy.MaxTools,
		MaxTokens:           cfg.Policy.MaxTokens,
		DescriptionMaxChars: cfg.Policy.DescriptionMaxChars,
		SlimSchemas:         cfg.Policy.SlimSchemas,
		Priority:            cfg.Policy.Priority,
		Mode:                cfg.Policy.Mode,
		ExposeFound:         cfg.Search.ExposeFound,
		Upstreams:           map[string]policy.UpstreamRules{},
	}
	for _, u := range cfg.Upstreams {
		rename := map[string]string{}
		for _, r := range u.Tools.Rename {
			rename[r.From] = r.To
		}
		rules.Upstreams[u.Name] = policy.UpstreamRules{
			Allow: u.Tools.Allow, Deny: u.Tools.Deny, MaxTools: u.MaxTools,
			Rename: rename, Descriptions: u.Tools.Descriptions,
		}
	}
	for _, t := range cfg.Teams {
		rules.Teams = append(rules.Teams, policy.Team{Name: t.Name, Allow: t.Allow, Deny: t.Deny, MaxTools: t.MaxTools, MaxTokens: t.MaxTokens, Mode: t.Mode, ExposeFound: t.Search.ExposeFound})
	}
	for _, p := range cfg.Profiles {
		rules.Profiles = append(rules.Profiles, policy.Team{Name: p.Name, Allow: p.Allow, Deny: p.Deny, MaxTools: p.MaxTools, MaxTokens: p.MaxTokens, Priority: p.Priority, Mode: p.Mode})
	}
	return rules
}

// profileNames are the names of cfg's profiles, whose paths the server
// serves.
func profileNames(cfg *config.Config) []string {
	var names []string
	for _, p := range cfg.Profiles {
		names = append(names, p.Name)
	}
	return names
}

// authn is how callers authenticate under one config: what the server's
// Identify, SetIdentify and ResourceMetadata take.
type authn struct {
	// identify and team are nil for auth mode none.
	identify func(string) (policy.Identity, error)
	team     func(id string) (string, bool)
	// meta is set under auth mode oauth.
	meta *server.ResourceMetadata
	// oauth is the token verifier, and basis what it was built from: a
	// reload with the same basis keeps it, with its cached keys and the
	// teams it gave, so that OAuth sessions outlive the reload.
	oauth *policy.OAuth
	basis []any
}

// newAuthn builds the authentication of cfg's auth mode, keeping prev's
// verifier (prev may be nil) when its basis is unchanged. Nothing is
// fetched here: the issuers' keys are fetched when a token needs them.
func newAuthn(cfg *config.Config, log *slog.Logger, prev *authn) (*authn, error) {
	switch cfg.Auth.Mode {
	case config.AuthAPIKey:
		teamKeys := map[string][]string{}
		for _, t := range cfg.Teams {
			teamKeys[t.Name] = t.APIKeys
		}
		keys, err := policy.NewAPIKeys(teamKeys)
		if err != nil {
			return nil, err
		}
		return &authn{identify: keys.Identify, team: keys.Team}, nil
	case config.AuthOAuth:
		a := &authn{basis: oauthBasis(cfg)}
		if prev != nil && prev.oauth != nil && reflect.DeepEqual(prev.basis, a.basis) {
			a.oauth = prev.oauth
		} else {
			o, err := policy.NewOAuth(cfg, &policy.OAuthOptions{Logger: log})
			if err != nil {
				return nil, err
			}
			a.oauth = o
		}
		a.identify, a.team = a.oauth.Identify, a.oauth.Team
		oc := cfg.Auth.OAuth
		a.meta = &server.ResourceMetadata{Resource: oc.Resource, ScopesSupported: oc.ScopesSupported, RequiredScopes: oc.RequiredScopes}
		for _, is := range oc.Issuers {
			a.meta.AuthorizationServers = append(a.meta.AuthorizationServers, is.Issuer)
		}
		if len(oc.ScopesSupported) == 0 {
			scopes := slices.Clone(oc.RequiredScopes)
			for _, t := range cfg.Teams {
				scopes = append(scopes, t.Scopes...)
			}
			slices.Sort(scopes)
			a.meta.ScopesSupported = slices.Compact(scopes)
		}
		return a, nil
	}
	return &authn{}, nil
}

// oauthBasis is what of a config the OAuth verifier is built from.
func oauthBasis(cfg *config.Config) []any {
	out := []any{cfg.Auth.OAuth}
	for _, t := range cfg.Teams {
		out = append(out, t.Name, t.APIKeys, t.Claims, t.ClaimsMatch, t.Scopes)
	}
	for _, p := range cfg.Profiles {
		out = append(out, p.Name) // each profile's path is an audience
	}
	return out
}

// relayCapabilities are the client capabilities the gateway declares to
// an upstream: those of the server requests it relays.
func relayCapabilities(relay []string) json.RawMessage {
	caps := map[string]struct{}{}
	for _, r := range relay {
		caps[r] = struct{}{}
	}
	out, _ := json.Marshal(caps)
	return out
}

// gateway is the router and the HTTP server built from one config.
type gateway struct {
	router *router.Router
	server *server.Server
	// onChange is the router's change callback, and rec what it records
	// with, both kept for reloads.
	onChange func(router.Change)
	rec      recorders
	// auth is how callers authenticate, replaced on a reload.
	auth *authn
	// shared is what the gateway's replicas share (state.*).
	shared *sharedState
	// guard pins definitions (pinning; nil when off), reading lockfile,
	// both as the gateway started: a reload re-reads the file.
	guard    *pin.Guard
	lockfile string

	// approvalsMu guards approvals: what pin --approve recorded in the
	// shared store (state.store redis), applied over the lockfile.
	approvalsMu sync.Mutex
	approvals   []pin.Entry

	// console is the operator console (nil when off); consoleMu makes
	// its approvals one at a time, each reading the lock the previous
	// one wrote.
	console   *console.Console
	consoleMu sync.Mutex
}

// sharedState is what replicas share: the keys that seal session ids and
// request states, and with state.store redis the store.
type sharedState struct {
	sealer *state.Sealer
	store  *state.Store // nil for state.store memory
}

// newSharedState reads the sealing keys and, for state.store redis,
// opens the store (which connects as it is used: Redis may start later).
func newSharedState(cfg *config.Config, log *slog.Logger) (*sharedState, error) {
	keys, err := cfg.State.Keys()
	if err != nil {
		return nil, err
	}
	sealer, err := state.NewSealer(keys)
	if err != nil {
		return nil, fmt.Errorf("state.key: %w", err)
	}
	st := &sharedState{sealer: sealer}
	if cfg.State.Store != config.StoreRedis {
		return st, nil
	}
	password, err := cfg.State.Redis.Password.Read()
	if err != nil {
		return nil, fmt.Errorf("state.redis.password: %w", err)
	}
	st.store, err = state.Open(state.Options{URL: cfg.State.Redis.URL, Password: password, CAFile: cfg.State.Redis.CAFile,
		Sealer: sealer, SessionTTL: cmp.Or(cfg.Limits.SessionIdleTimeout, config.DefaultSessionIdleTimeout), Logger: log})
	if err != nil {
		return nil, err
	}
	log.Info("sharing sessions with the other replicas through Redis", "replica", st.store.Replica())
	return st, nil
}

// close closes the store, after the server and the router.
func (st *sharedState) close() {
	if st != nil && st.store != nil {
		_ = st.store.Close()
	}
}

func newGateway(cfg *config.Config, rec recorders) (*gateway, error) {
	if _, err := rec.observer(); err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	// The router tells the server of changes; the server is made after
	// the router, and the router sends nothing before it starts.
	var srv *server.Server
	var g *gateway // for the store's Approved, which it calls once started
	onChange := func(c router.Change) { srv.Deliver(c) }
	limits := routerLimits(cfg, rec)
	guard, err := newGuard(cfg, rec.log)
	if err != nil {
		return nil, err
	}
	shared, err := newSharedState(cfg, rec.log)
	if err != nil {
		return nil, err
	}
	rt, err := newRouter(cfg, rec, onChange, limits, shared, guard)
	if err != nil {
		shared.close()
		return nil, err
	}
	auth, err := newAuthn(cfg, rec.log, nil)
	if err != nil {
		_ = rt.Close()
		shared.close()
		return nil, err
	}
	var metrics http.Handler
	if rec.tel != nil {
		metrics = rec.tel.MetricsHandler()
	}
	hosts := cfg.AllowedHosts
	if len(hosts) == 0 {
		hosts = server.ListenerHosts(cfg.Listen)
	}
	var calls *console.Calls
	var con *console.Console
	var consoleHandler server.Console // nil unless on: a nil *console.Console is not a nil interface
	if cfg.ConsoleOn() {
		calls = console.NewCalls(cmp.Or(cfg.Console.RecentCalls, config.DefaultRecentCalls))
		opts := console.Options{Path: config.ConsolePath, Source: rt, Auth: consoleAuth(cfg, auth), Calls: calls,
			Secure: cfg.ConsoleSecure(), Origin: cfg.Console.Origin, Logger: rec.log}
		if shared.store != nil { // a nil *state.Store is not a nil Shared
			opts.Shared = shared.store
		}
		if guard != nil {
			opts.Approve = func(ctx context.Context, a console.Approval) error { return g.consoleApprove(ctx, a) }
		}
		con = console.New(opts)
		consoleHandler = con
		telemetry.Discard(rec.log).Info("operator console on", "path", config.ConsolePath, "auth", cfg.Auth.Mode, "admins", cfg.Auth.Admins)
	}
	srv = server.New(dispatcher(rt, rec.obs, calls), &server.Options{
		Console:            consoleHandler,
		Identify:           auth.identify,
		ResourceMetadata:   auth.meta,
		Endpoint:           cfg.Endpoint,
		Profiles:           profileNames(cfg),
		AllowedOrigins:     cfg.AllowedOrigins,
		Loopback:           config.IsLoopback(cfg.Listen),
		AllowedHosts:       hosts,
		MaxBodyBytes:       cfg.MaxBodyBytes,
		MaxSessions:        cfg.Limits.MaxSessions,
		SessionIdleTimeout: cfg.Limits.SessionIdleTimeout,
		Quotas:             limits.Quotas,
		Admit:              limits.Admit,
		Metrics:            metrics,
		Telemetry:          rec.tel,
		Shared:             shared.store,
		ServePeer:          rt.ServePeer,
		Approved:           func() { g.applyApprovals(rec.log) },
		Logger:             rec.log,
	})
	g = &gateway{router: rt, server: srv, onChange: onChange, rec: rec, auth: auth, shared: shared, guard: guard, console: con}
	if cfg.Pinning != nil {
		g.lockfile = cfg.Pinning.Lockfile
	}
	// A replica starting reads the approvals the others share.
	g.applyApprovals(rec.log)
	return g, nil
}

// serve runs the HTTP gateway until ctx is done (SIGINT or SIGTERM), then
// shuts down in order: stop accepting and drain requests, end sessions,
// stop the upstreams, flush the telemetry.
func serve(ctx context.Context, path string, cfg *config.Config, stderr io.Writer) int {
	log := newLogger(cfg, stderr)
	rec, stopRecorders, err := newRecorders(ctx, cfg, log, stderr, true)
	if err != nil {
		log.Error("cannot start telemetry", telemetry.KeyErr, err)
		return exitError
	}
	defer stopRecorders() // on early returns; see the end
	g, err := newGateway(cfg, rec)
	if err != nil {
		log.Error("cannot start the gateway", telemetry.KeyErr, err)
		return exitError
	}
	var cert *server.Certificate
	if cfg.TLS != nil {
		if cert, err = server.NewCertificate(cfg.TLS.CertFile, cfg.TLS.KeyFile, log); err != nil {
			log.Error("cannot load the listener's certificate", telemetry.KeyErr, err)
			return exitError
		}
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		log.Error("cannot listen", "listen", cfg.Listen, telemetry.KeyErr, err)
		return exitError
	}
	httpSrv := &http.Server{
		Handler: g.server.Handler(),
		// Bodies and response writes get their deadlines in the server
		// (Options.BodyTimeout, WriteTimeout): http.Server's ReadTimeout
		// and WriteTimeout would also cut the long-lived streams.
		ReadHeaderTimeout: config.DefaultReadHeaderTimeout,
		IdleTimeout:       config.DefaultHTTPIdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Session GET streams and listen streams never go idle on their own:
	// end them when Shutdown starts, so that it can drain, while requests
	// in progress finish.
	httpSrv.RegisterOnShutdown(g.server.Drain)
	scheme := "http://"
	listen := httpSrv.Serve
	if cert != nil {
		scheme = "https://"
		httpSrv.TLSConfig = cert.TLSConfig()
		// ServeTLS adds HTTP/2 to the config; the certificate comes from
		// GetCertificate, so no files are named here.
		listen = func(ln net.Listener) error { return httpSrv.ServeTLS(ln, "", "") }
	}

	// The watch starts before the gateway is ready, so that no change
	// made from then on is missed.
	current := cfg
	var also []string
	if g.lockfile != "" {
		also = append(also, g.lockfile)
	}
	watch := newConfigWatch(path, log, func() { current = g.reload(path, current, log) }, also...)
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		watch.run(watchCtx)
	}()
	g.router.Start(ctx)
	log.Info("gateway listening", "address", scheme+ln.Addr().String()+cfg.Endpoint, "upstreams", len(cfg.Upstreams))
	serveErr := make(chan error, 1)
	go func() { serveErr <- listen(ln) }()
	defer func() {
		stopWatch()
		<-watched
	}()

	code := exitOK
	select {
	case <-ctx.Done():
		log.Info("shutting down", "delay", cfg.Shutdown.Delay, "timeout", cfg.Shutdown.Timeout)
		if cfg.Shutdown.Delay > 0 {
			// Still serving, but no longer ready: the balancer's health
			// checks take this replica out before it stops accepting.
			g.server.Leave()
			select {
			case <-time.After(cfg.Shutdown.Delay):
			case err := <-serveErr:
				log.Error("server failed", telemetry.KeyErr, err)
				code = exitError
			}
		}
	case err := <-serveErr:
		log.Error("server failed", telemetry.KeyErr, err)
		code = exitError
	}
	timeout := cmp.Or(cfg.Shutdown.Timeout, config.DefaultShutdownTimeout)
	deadline := time.Now().Add(timeout)
	shutdownHTTP(ctx, httpSrv, timeout, log)
	// Calls parked here for a modern host's retry (a legacy upstream
	// asking for input) go on within the same timeout: the retries reach
	// this replica through the others while its shared store is open.
	pctx, cancelParked := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	if !g.router.AwaitParked(pctx) {
		log.Warn("shutdown: calls parked for a host's input did not finish in time: cancelled")
	}
	cancelParked()
	// What did not finish in time is cancelled; the upstreams hear of it.
	g.server.Close()
	if err := g.router.Close(); err != nil {
		log.Warn("stopping upstreams", telemetry.KeyErr, err)
	}
	g.shared.close()
	// The last spans and audit records are in once the upstreams stopped.
	stopRecorders()
	log.Info("stopped")
	return code
}

// shutdownHTTP stops srv gracefully: it stops accepting, ends the
// long-lived streams (the Drain registered with RegisterOnShutdown) and
// lets requests in progress finish for up to timeout; then it closes
// every connection still open, so that a shutdown always ends, even
// with a handler stuck on a host that does not read. log may be nil.
func shutdownHTTP(ctx context.Context, srv *http.Server, timeout time.Duration, log *slog.Logger) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		telemetry.Discard(log).Warn("graceful shutdown incomplete: closing the connections left", telemetry.KeyErr, err)
		_ = srv.Close()
	}
}

// serveStdio serves the catalog to one host over stdin and stdout, in the
// view of team (empty: the default view). Logs go to stderr, as the
// stdio transport allows.
func serveStdio(ctx context.Context, cfg *config.Config, team, profile string, stdin io.Reader, stdout, stderr io.Writer) int {
	log := newLogger(cfg, stderr)
	if !hasTeam(cfg, team) {
		fmt.Fprintf(stderr, "mcp-gateway stdio: no team %q in the config\n", team)
		return exitUsage
	}
	if !hasProfile(cfg, profile) {
		fmt.Fprintf(stderr, "mcp-gateway stdio: no profile %q in the config\n", profile)
		return exitUsage
	}
	rec, stopRecorders, err := newRecorders(ctx, cfg, log, stderr, false)
	if err != nil {
		log.Error("cannot start telemetry", telemetry.KeyErr, err)
		return exitError
	}
	defer stopRecorders()
	guard, err := newGuard(cfg, log)
	if err != nil {
		log.Error("cannot start the gateway", telemetry.KeyErr, err)
		return exitError
	}
	applySharedOnce(ctx, cfg, guard, log)
	var host *server.Stdio
	rt, err := newRouter(cfg, rec, func(c router.Change) { host.Deliver(c) }, routerLimits(cfg, rec), nil, guard)
	if err != nil {
		log.Error("invalid upstream", telemetry.KeyErr, err)
		return exitError
	}
	host = server.NewStdio(dispatcher(rt, rec.obs, nil), stdout, &server.StdioOptions{View: policy.ViewKey(team, profile), Logger: log})
	rt.Start(ctx)
	err = host.Serve(ctx, stdin)
	if cerr := rt.Close(); cerr != nil {
		log.Warn("stopping upstreams", telemetry.KeyErr, cerr)
	}
	stopRecorders()
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Error("stdio host failed", telemetry.KeyErr, err)
		return exitError
	}
	return exitOK
}

// hasProfile reports whether the config has the profile ("" is the
// endpoint itself).
func hasProfile(cfg *config.Config, profile string) bool {
	return profile == "" || slices.ContainsFunc(cfg.Profiles, func(p config.Profile) bool { return p.Name == profile })
}

func hasTeam(cfg *config.Config, team string) bool {
	if team == "" {
		return true
	}
	for _, t := range cfg.Teams {
		if t.Name == team {
			return true
		}
	}
	return false
}

// toolRow is one line of `mcp-gateway tools`.
type toolRow struct {
	Name     string `json:"name"`
	Upstream string `json:"upstream"`
	Original string `json:"original_name"`
	// TokensBefore is the size of the upstream's own definition, and
	// TokensAfter of the definition hosts see (renamed, trimmed), both
	// counted with the cl100k_base tokenizer.
	TokensBefore int `json:"tokens_before"`
	TokensAfter  int `json:"tokens_after"`
}

// listTools starts the upstreams, waits for their first start, and prints
// the catalog a caller of the view sees, with each tool's size in tokens
// before and after trimming, the totals, and what limits cut.
func listTools(ctx context.Context, cfg *config.Config, team, profile string, mode config.ViewMode, asJSON bool, stdout, stderr io.Writer) int {
	log := newLogger(cfg, stderr)
	if !hasTeam(cfg, team) {
		fmt.Fprintf(stderr, "mcp-gateway tools: no team %q in the config\n", team)
		return exitUsage
	}
	if !hasProfile(cfg, profile) {
		fmt.Fprintf(stderr, "mcp-gateway tools: no profile %q in the config\n", profile)
		return exitUsage
	}
	if mode != "" {
		if code := setViewMode(cfg, team, profile, mode, stderr); code != exitOK {
			return code
		}
	}
	key := policy.ViewKey(team, profile)
	// The catalog a session would see: pinning leaves out what it
	// quarantines here too.
	guard, err := newGuard(cfg, log)
	if err != nil {
		log.Error("cannot start the gateway", telemetry.KeyErr, err)
		return exitError
	}
	applySharedOnce(ctx, cfg, guard, log)
	rt, err := newRouter(cfg, recorders{log: log}, nil, nil, nil, guard)
	if err != nil {
		log.Error("invalid upstream", telemetry.KeyErr, err)
		return exitError
	}
	defer rt.Close()
	rt.Start(ctx)
	if err := rt.WaitStarted(ctx); err != nil {
		return exitError
	}
	view, _ := rt.Tools(key)
	rows := make([]toolRow, 0, len(view.Tools))
	before, after := 0, 0
	for _, t := range view.Tools {
		row := toolRow{Name: t.Name, Upstream: t.Upstream, Original: t.Original,
			TokensBefore: policy.Tokens(t.Raw), TokensAfter: policy.Tokens(t.Definition)}
		before += row.TokensBefore
		after += row.TokensAfter
		rows = append(rows, row)
	}
	// What the host's tools/list costs: the catalog in full mode, the
	// gateway's own tools in search mode (the catalog is only searched).
	listed := after
	if view.Mode == config.ModeSearch {
		listed = 0
		for _, def := range view.Listed {
			listed += policy.Tokens(def)
		}
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			View         string                  `json:"view"`
			Mode         config.ViewMode         `json:"mode"`
			Tools        []toolRow               `json:"tools"`
			TokensBefore int                     `json:"tokens_before"`
			TokensAfter  int                     `json:"tokens_after"`
			ListedTokens int                     `json:"listed_tokens"`
			Cut          []policy.Cut            `json:"cut"`
			Upstreams    []router.UpstreamStatus `json:"upstreams"`
		}{key, view.Mode, rows, before, after, listed, view.Cut, rt.Status()})
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tUPSTREAM\tTOKENS\tTRIMMED")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", r.Name, r.Upstream, r.TokensBefore, r.TokensAfter)
	}
	fmt.Fprintf(tw, "total: %d tools\t\t%d\t%d\n", len(rows), before, after)
	_ = tw.Flush()
	if view.Mode == config.ModeSearch {
		fmt.Fprintf(stdout, "search mode: tools/list holds %d gateway tools, %d tokens (%s of the catalog's %d)\n",
			len(view.Listed), listed, percent(listed, after), after)
	} else {
		fmt.Fprintf(stdout, "full mode: tools/list holds the catalog, %d tokens\n", listed)
	}
	for _, c := range view.Cut {
		fmt.Fprintf(stdout, "cut by %s: %s\n", c.Limit, c.Name)
	}
	for _, s := range rt.Status() {
		if s.State != router.PhaseReady {
			fmt.Fprintf(stderr, "upstream %s: %s: %s\n", s.Name, s.State, printable(s.Error, 0))
		}
	}
	if rep, on := rt.Pinning(); on {
		for _, q := range rep.Quarantined {
			fmt.Fprintf(stderr, "quarantined %s %s of %s: %s\n", q.Kind, printable(q.Name, 0), q.Upstream, q.Reason)
		}
	}
	return exitOK
}

// setViewMode sets the mode of the view `mcp-gateway tools --mode` shows
// (the profile's, when one is named) and validates the config again (mode
// auto needs a max_tokens).
func setViewMode(cfg *config.Config, team, profile string, mode config.ViewMode, stderr io.Writer) int {
	if mode != config.ModeFull && mode != config.ModeSearch && mode != config.ModeAuto {
		fmt.Fprintf(stderr, "mcp-gateway tools: --mode must be full, search or auto, not %q\n", mode)
		return exitUsage
	}
	switch {
	case profile != "":
		for i := range cfg.Profiles {
			if cfg.Profiles[i].Name == profile {
				cfg.Profiles[i].Mode = mode
			}
		}
	case team == "":
		cfg.Policy.Mode = mode
	}
	for i := range cfg.Teams {
		if profile == "" && cfg.Teams[i].Name == team {
			cfg.Teams[i].Mode = mode
		}
	}
	if err := cfg.Validate(); err != nil {
		var ve *config.ValidationError
		if errors.As(err, &ve) {
			for _, p := range ve.Problems {
				fmt.Fprintf(stderr, "mcp-gateway tools --mode %s: %s: %s\n", mode, p.Path, p.Message)
			}
		} else {
			fmt.Fprintf(stderr, "mcp-gateway tools --mode %s: %v\n", mode, err)
		}
		return exitUsage
	}
	return exitOK
}

// percent is part as a share of whole, for people: "6%", "<1%".
func percent(part, whole int) string {
	switch {
	case whole <= 0:
		return "n/a"
	case part > 0 && 100*part < whole:
		return "<1%"
	}
	return fmt.Sprintf("%d%%", (100*part+whole/2)/whole)
}
