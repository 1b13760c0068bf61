// Package console serves the operator console at /ui: server-rendered
// pages (html/template, assets embedded, no front-end build) of the
// upstreams, the views and what their limits cut, what pinning
// quarantined, with an approve action, and the recent calls, refreshed
// live over SSE.
//
// Everything shown is escaped by html/template, and the pages run no
// inline script: the Content-Security-Policy allows only the console's
// own script, so markup in a tool's description stays text. A visitor
// logs in once with an API key or OAuth token, the same credentials the
// MCP endpoint takes, into a session cookie (HttpOnly, SameSite=Strict);
// every POST must come from the console's own origin and, once logged
// in, carry the session's CSRF token. An admin (auth.admins) sees
// everything and may approve; anyone else sees only its own team's
// views, the upstreams behind them and its own calls.
package console

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"errors"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

// Source is what the console shows (*router.Router).
type Source interface {
	Status() []router.UpstreamStatus
	Views() []router.ViewStatus
	Tools(view string) (router.ViewInfo, bool)
	Pinning() (router.PinReport, bool)
}

// Approval is an admin's acceptance of the definition it was shown.
type Approval struct {
	Kind, Upstream string
	// Name is the name hosts know it by (pin.Status.Name).
	Name string
	// SHA256 is the hash of the definition the admin saw: if the
	// upstream changed it again since, nothing is approved
	// (ErrChangedAgain).
	SHA256 string
	// By is who approved, for the lockfile's history.
	By string
}

// Errors an Approve may wrap, each shown to the admin as it is.
var (
	ErrChangedAgain = errors.New("the definition changed again since the page showed it: review the new diff")
	ErrGone         = errors.New("the definition is no longer listed by its upstream")
)

// Auth is how visitors authenticate, replaced on a reload (SetAuth).
type Auth struct {
	// Identify checks a key or token as the MCP endpoint does; nil means
	// no authentication: every visitor is an admin (the console is then
	// served on loopback only, config.validateConsole).
	Identify func(token string) (policy.Identity, error)
	// Admin reports whether an identity is an admin.
	Admin func(policy.Identity) bool
}

// Options configure a Console.
type Options struct {
	// Path is where the console is served (config.ConsolePath).
	Path   string
	Source Source
	Auth   Auth
	// Approve accepts a changed, new or suspicious definition; nil
	// without pinning (nothing to approve).
	Approve func(ctx context.Context, a Approval) error
	// Calls holds the recent calls shown; nil shows none.
	Calls *Calls
	// Shared, when set (state.store redis), keeps the sessions for every
	// replica, so that behind a load balancer any replica serves a
	// logged-in browser and a logout ends the session on all; nil keeps
	// them in this process.
	Shared Shared
	// Secure says browsers reach the console over HTTPS (the gateway's
	// TLS, or an https Origin; config.ConsoleSecure): the cookie is then
	// Secure, with the __Host- prefix.
	Secure bool
	// Origin is the console's public origin when a proxy in front of
	// the gateway terminates TLS (https://gw.example.com): a POST may
	// name it in Origin, which then differs from what the gateway sees.
	// "" accepts only the origin of the request's own scheme and Host.
	Origin string
	// Refresh is how often a live page is rendered again (and sent when
	// it changed); 0 means one second.
	Refresh time.Duration
	Logger  *slog.Logger
}

// Bounds of the event streams, and of failed logins.
const (
	maxStreams            = 256
	maxStreamsPerIdentity = 4
	keepAlive             = 25 * time.Second
	writeTimeout          = 30 * time.Second
	// Failed logins are limited per client address (the connection's,
	// never a header's; addressKey): a guessing flood gets 429, which
	// costs only that address's console logins, never MCP traffic; a
	// login that succeeds is not counted. maxLoginAddrs bounds the
	// addresses remembered.
	failedLoginRate  = 5
	failedLoginBurst = 20
	maxLoginAddrs    = 10000
	// maxFormBytes bounds a POSTed form.
	maxFormBytes = 16 << 10
)

// Console is the console's handler.
type Console struct {
	opts     Options
	log      *slog.Logger
	auth     atomic.Pointer[Auth]
	sessions sessions
	failed   *lru.Cache[string, *bucket]
	cookie   string
	// ahead moves the console's clock forward, for tests of expiry.
	ahead atomic.Int64

	mu        sync.Mutex
	streams   int
	streamsBy map[string]int // open streams by streamOwner
	closing   chan struct{}
	closed    bool
}

// New returns the console of opts.
func New(opts Options) *Console {
	if opts.Refresh <= 0 {
		opts.Refresh = time.Second
	}
	c := &Console{opts: opts, log: telemetry.Discard(opts.Logger), sessions: sessions{shared: opts.Shared, log: telemetry.Discard(opts.Logger), m: map[[sha256.Size]byte]*session{}, ended: map[[sha256.Size]byte]time.Time{}},
		cookie: "mcpgw_console", streamsBy: map[string]int{}, closing: make(chan struct{})}
	c.failed, _ = lru.New[string, *bucket](maxLoginAddrs) // a positive size never fails
	if opts.Secure {
		c.cookie = "__Host-mcpgw_console"
	}
	c.SetAuth(opts.Auth)
	return c
}

func (c *Console) now() time.Time { return time.Now().Add(time.Duration(c.ahead.Load())) }

// SetAuth replaces how visitors authenticate (a reload); sessions are
// checked against it at their next use.
func (c *Console) SetAuth(a Auth) { c.auth.Store(&a) }

// Close ends every event stream; pages still answer.
func (c *Console) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.closing)
	}
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets/*
var assetFS embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"clip": clip,
}).ParseFS(templateFS, "templates/*.html"))

// ServeHTTP answers every path under Options.Path.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// The pages run only the console's own script and style: markup that
	// slipped into what they show could not run, nor load anything.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: under no-referrer a browser's form
	// POST carries "Origin: null", which the origin check refuses.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if !c.sameOrigin(r) {
		c.log.Warn("console request from another origin refused", "origin", r.Header.Get("Origin"), "path", r.URL.Path)
		http.Error(w, "Forbidden: the console answers only its own pages (cross-origin request)", http.StatusForbidden)
		return
	}
	sub := strings.TrimPrefix(r.URL.Path, c.opts.Path)
	switch {
	case sub == "" && r.Method == http.MethodGet:
		c.page(w, r)
	case sub == "/" && r.Method == http.MethodGet:
		http.Redirect(w, r, c.opts.Path, http.StatusMovedPermanently)
	case sub == "/login" && r.Method == http.MethodGet:
		c.loginPage(w, r, http.StatusOK, "")
	case sub == "/login" && r.Method == http.MethodPost:
		c.login(w, r)
	case sub == "/logout" && r.Method == http.MethodPost:
		c.logout(w, r)
	case sub == "/events" && r.Method == http.MethodGet:
		c.events(w, r)
	case sub == "/approve" && r.Method == http.MethodPost:
		c.approve(w, r)
	case strings.HasPrefix(sub, "/assets/") && r.Method == http.MethodGet:
		c.asset(w, r, strings.TrimPrefix(sub, "/assets/"))
	case sub == "/" || sub == "/login" || sub == "/logout" || sub == "/events" || sub == "/approve":
		h.Set("Allow", allowed(sub))
		http.Error(w, "Method not allowed", http.StatusMethodNotAllowed)
	default:
		http.NotFound(w, r)
	}
}

func allowed(sub string) string {
	switch sub {
	case "/login":
		return "GET, POST"
	case "/logout", "/approve":
		return "POST"
	}
	return "GET"
}

// sameOrigin reports whether a request may be from the console's own
// pages. A browser names the page's origin in Origin on every POST (and
// on an EventSource's GET), which must be the console's own; and in
// Sec-Fetch-Site, which must say same-origin, or none (an address typed
// or bookmarked): a cross-site or same-site page is refused whatever the
// method, so that it cannot make the console render, or start a session,
// for it. A non-browser client sends neither and is let through: it
// holds no cookie a page could abuse, and the CSRF tokens still apply.
func (c *Console) sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		return origin == c.origin(r) || c.opts.Origin != "" && origin == c.opts.Origin
	}
	return true
}

// origin is the console's own origin, as a browser names it: the
// scheme, and the Host it reached (which the server checked).
func (c *Console) origin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + strings.ToLower(r.Host)
}

// visitor returns the request's session, its credential checked again
// when due; nil when there is none (or it ended). Without
// authentication a visitor gets a session at once (for its CSRF token).
func (c *Console) visitor(w http.ResponseWriter, r *http.Request) *session {
	now := c.now()
	a := c.auth.Load()
	var s *session
	if ck, err := r.Cookie(c.cookie); err == nil {
		s = c.sessions.get(r.Context(), ck.Value, now)
	}
	if s == nil {
		if a.Identify != nil {
			return nil
		}
		value, ns := c.sessions.create(r.Context(), policy.Identity{}, true, "", now)
		c.setCookie(w, value, int(sessionMax/time.Second))
		return ns
	}
	if !c.recheck(r.Context(), s, a, now, false) {
		c.sessions.drop(r.Context(), s)
		c.setCookie(w, "", -1)
		return nil
	}
	return s
}

// recheck checks s's credential again when due: false when it no longer
// opens the gateway (a reload removed the key, the token expired), or
// when authentication was turned on or off since the login.
func (c *Console) recheck(ctx context.Context, s *session, a *Auth, now time.Time, force bool) bool {
	c.sessions.mu.Lock()
	due := force || now.Sub(s.checkedAt) >= recheckEvery
	c.sessions.mu.Unlock()
	if (a.Identify == nil) != (s.token == "") {
		return false
	}
	if !due {
		return true
	}
	if !c.sessions.stillShared(ctx, s) {
		return false
	}
	who, admin := policy.Identity{}, true
	if a.Identify != nil {
		var err error
		if who, err = a.Identify(s.token); err != nil {
			return false
		}
		admin = a.Admin != nil && a.Admin(who)
	}
	c.sessions.mu.Lock()
	s.who, s.admin, s.checkedAt = who, admin, now
	c.sessions.mu.Unlock()
	return true
}

// snapshot is what a session is now, read under the lock.
func (c *Console) snapshot(s *session) (who policy.Identity, admin bool) {
	c.sessions.mu.Lock()
	defer c.sessions.mu.Unlock()
	return s.who, s.admin
}

func (c *Console) setCookie(w http.ResponseWriter, value string, maxAge int) {
	path := c.opts.Path
	if c.opts.Secure {
		path = "/" // the __Host- prefix requires Path=/
	}
	http.SetCookie(w, &http.Cookie{Name: c.cookie, Value: value, Path: path, MaxAge: maxAge,
		HttpOnly: true, Secure: c.opts.Secure, SameSite: http.SameSiteStrictMode})
}

func (c *Console) page(w http.ResponseWriter, r *http.Request) {
	s := c.visitor(w, r)
	if s == nil {
		http.Redirect(w, r, c.opts.Path+"/login", http.StatusSeeOther)
		return
	}
	c.sessions.mu.Lock()
	flash, flashError := s.flash, s.flashError
	s.flash, s.flashError = "", false
	c.sessions.mu.Unlock()
	d := c.dashboard(s)
	d.Flash, d.FlashError = flash, flashError
	c.render(w, http.StatusOK, "page", d)
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request, status int, problem string) {
	if c.auth.Load().Identify == nil {
		http.Redirect(w, r, c.opts.Path, http.StatusSeeOther)
		return
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="mcp-gateway console"`)
	}
	c.render(w, status, "login", struct{ Path, Error string }{c.opts.Path, problem})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	a := c.auth.Load()
	if a.Identify == nil {
		http.Redirect(w, r, c.opts.Path, http.StatusSeeOther)
		return
	}
	// Taken before the credential is checked (so that guesses sent at
	// once are limited too), given back if it opens the gateway.
	limit := c.loginLimit(r)
	if !limit.take(c.now()) {
		w.Header().Set("Retry-After", "1")
		c.loginPage(w, r, http.StatusTooManyRequests, "Too many failed logins from your address: try again in a moment.")
		return
	}
	token, ok := formValue(w, r, "token")
	token = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(token), "Bearer "))
	if !ok || token == "" {
		c.loginPage(w, r, http.StatusBadRequest, "Give an API key or an OAuth access token.")
		return
	}
	who, err := a.Identify(token)
	if err != nil {
		c.log.Warn("console login refused", telemetry.KeyErr, err)
		c.loginPage(w, r, http.StatusUnauthorized, "That key or token is not accepted.")
		return
	}
	limit.refund()
	admin := a.Admin != nil && a.Admin(who)
	value, _ := c.sessions.create(r.Context(), who, admin, token, c.now())
	c.setCookie(w, value, int(sessionMax/time.Second))
	c.log.Info("console login", telemetry.KeyTeam, who.Team, "identity", who.Key, "admin", admin)
	http.Redirect(w, r, c.opts.Path, http.StatusSeeOther)
}

// loginLimit is the failed-login bucket of the request's client address
// (addressKey).
func (c *Console) loginLimit(r *http.Request) *bucket {
	addr := addressKey(r.RemoteAddr)
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.failed.Get(addr)
	if !ok {
		b = &bucket{tokens: failedLoginBurst}
		c.failed.Add(addr, b)
	}
	return b
}

// addressKey is whose failed logins a connection's address counts as:
// all of loopback is one (any local user may pick any 127/8 address), an
// IPv6 address counts as its /64 (what one host is given), an IPv4
// address as itself.
func addressKey(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.Is6():
		p, _ := ip.Prefix(64) // a /64 of an IPv6 address is always valid
		return p.String()
	}
	return ip.String()
}

// bucket is a token bucket of failed logins (failedLoginRate a second,
// failedLoginBurst at most) whose token a login that succeeds gives
// back.
type bucket struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// take takes a token, false when there is none.
func (b *bucket) take(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() {
		b.tokens = min(failedLoginBurst, b.tokens+now.Sub(b.last).Seconds()*failedLoginRate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// refund gives back the token of a login that succeeded.
func (b *bucket) refund() {
	b.mu.Lock()
	b.tokens = min(failedLoginBurst, b.tokens+1)
	b.mu.Unlock()
}

// poster is the session of a POST from the console's own form, its CSRF
// token checked; nil once it answered (to the login, or 403).
func (c *Console) poster(w http.ResponseWriter, r *http.Request) *session {
	s := c.visitor(w, r)
	if s == nil {
		http.Redirect(w, r, c.opts.Path+"/login", http.StatusSeeOther)
		return nil
	}
	if !c.csrfOK(w, r, s) {
		return nil
	}
	return s
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	s := c.poster(w, r)
	if s == nil {
		return
	}
	c.sessions.drop(r.Context(), s)
	c.setCookie(w, "", -1)
	http.Redirect(w, r, c.opts.Path+"/login", http.StatusSeeOther)
}

// csrfOK checks a POST's csrf field against its session's token, and
// answers 403 when it does not match.
func (c *Console) csrfOK(w http.ResponseWriter, r *http.Request, s *session) bool {
	got, ok := formValue(w, r, "csrf")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
		http.Error(w, "Forbidden: the form's CSRF token does not match your session (reload the page)", http.StatusForbidden)
		return false
	}
	return true
}

// formValue reads one field of a POSTed form (bounded, urlencoded
// only); a field given twice is refused, not guessed at.
func formValue(w http.ResponseWriter, r *http.Request, name string) (string, bool) {
	if r.PostForm == nil {
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
			return "", false
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			return "", false
		}
	}
	vs := r.PostForm[name]
	if len(vs) != 1 {
		return "", false
	}
	return vs[0], true
}

func (c *Console) approve(w http.ResponseWriter, r *http.Request) {
	s := c.poster(w, r)
	if s == nil {
		return
	}
	// Checked again now: a key a reload removed, or a team no longer an
	// admin, approves nothing even within recheckEvery.
	if !c.recheck(r.Context(), s, c.auth.Load(), c.now(), true) {
		c.sessions.drop(r.Context(), s)
		c.setCookie(w, "", -1)
		http.Redirect(w, r, c.opts.Path+"/login", http.StatusSeeOther)
		return
	}
	who, admin := c.snapshot(s)
	if !admin {
		c.log.Warn("console approval refused: not an admin", telemetry.KeyTeam, who.Team, "identity", who.Key)
		http.Error(w, "Forbidden: only an admin (auth.admins) may approve definitions", http.StatusForbidden)
		return
	}
	if c.opts.Approve == nil {
		http.Error(w, "Conflict: pinning is off: there is nothing to approve", http.StatusConflict)
		return
	}
	var a Approval
	var ok [4]bool
	a.Kind, ok[0] = formValue(w, r, "kind")
	a.Upstream, ok[1] = formValue(w, r, "upstream")
	a.Name, ok[2] = formValue(w, r, "name")
	a.SHA256, ok[3] = formValue(w, r, "sha256")
	if ok != [4]bool{true, true, true, true} || a.SHA256 == "" {
		http.Error(w, "Bad request: an approval names a kind, an upstream, a name and the sha256 shown", http.StatusBadRequest)
		return
	}
	a.By = "console"
	if who.Key != "" {
		a.By = "console:" + who.Key
	}
	err := c.opts.Approve(r.Context(), a)
	c.sessions.mu.Lock()
	if err != nil {
		s.flash, s.flashError = "Not approved: "+a.Kind+" "+a.Name+" of "+a.Upstream+": "+err.Error(), true
	} else {
		s.flash, s.flashError = "Approved "+a.Kind+" "+a.Name+" of "+a.Upstream+": hosts see it again.", false
	}
	c.sessions.mu.Unlock()
	if err != nil {
		c.log.Warn("console approval failed", "kind", a.Kind, "name", a.Name, "upstream", a.Upstream, "by", a.By, telemetry.KeyErr, err)
	} else {
		c.log.Info("console approval", "kind", a.Kind, "name", a.Name, "upstream", a.Upstream, "sha256", a.SHA256, "by", a.By)
	}
	http.Redirect(w, r, c.opts.Path, http.StatusSeeOther)
}

func (c *Console) asset(w http.ResponseWriter, r *http.Request, name string) {
	if strings.Contains(name, "/") || name == "" {
		http.NotFound(w, r)
		return
	}
	b, err := assetFS.ReadFile("assets/" + name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	switch {
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	}
	_, _ = w.Write(b)
}

// render writes a template; one that fails is logged (it cannot fail
// on data: every value is text).
func (c *Console) render(w http.ResponseWriter, status int, name string, data any) {
	var b strings.Builder
	if err := templates.ExecuteTemplate(&b, name, data); err != nil {
		c.log.Error("console template failed", "template", name, telemetry.KeyErr, err)
		http.Error(w, "Internal error rendering the console", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}
