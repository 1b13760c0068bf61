package policy

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
)

// introspectionEndpoint is an issuer's RFC 7662 endpoint over a real
// socket: it answers from a table of tokens, checks the gateway's client
// credentials, and records every token it is asked about.
type introspectionEndpoint struct {
	srv *httptest.Server
	mu  sync.Mutex
	// answers by token; a token not listed is {"active": false}.
	answers map[string]map[string]any
	asked   []string
	down    atomic.Bool
}

const (
	introspectionClient = "gateway"
	introspectionSecret = "client-s3cret"
)

func newIntrospectionEndpoint(t testing.TB) *introspectionEndpoint {
	t.Helper()
	e := &introspectionEndpoint{answers: map[string]map[string]any{}}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if id, secret, ok := r.BasicAuth(); !ok || id != introspectionClient || secret != introspectionSecret {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost || r.FormValue("token_type_hint") != "access_token" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		tok := r.PostFormValue("token")
		e.mu.Lock()
		e.asked = append(e.asked, tok)
		answer, ok := e.answers[tok]
		e.mu.Unlock()
		if !ok {
			answer = map[string]any{"active": false}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answer)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *introspectionEndpoint) set(token string, answer map[string]any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.answers[token] = answer
}

func (e *introspectionEndpoint) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.asked)
}

func (e *introspectionEndpoint) saw(token string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, a := range e.asked {
		if a == token {
			return true
		}
	}
	return false
}

// introspectionFixture is a verifier whose issuer introspects at e, with
// the client secret in a file; modify may change the config further.
func introspectionFixture(t testing.TB, modify func(c *config.Config, idp *testIdP)) (*oauthFixture, *introspectionEndpoint, *mcptest.LogBuffer) {
	t.Helper()
	e := newIntrospectionEndpoint(t)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(introspectionSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newOAuthFixture(t, func(c *config.Config, idp *testIdP) {
		c.Auth.OAuth.Issuers[0].Introspection = &config.Introspection{
			URL: e.srv.URL, ClientID: introspectionClient, ClientSecret: config.Secret{File: secret},
		}
		if modify != nil {
			modify(c, idp)
		}
	})
	logs := &mcptest.LogBuffer{}
	f.o.log = slog.New(slog.NewJSONHandler(logs, nil))
	return f, e, logs
}

// answer is an active introspection answer for the fixture's issuer.
func (f *oauthFixture) answer(extra map[string]any) map[string]any {
	a := f.claims(extra)
	a["active"] = true
	return a
}

// TestOAuthIntrospection: an opaque token is introspected at its issuer
// and, when active, gets the same checks and identity as a JWT of the
// same claims; an inactive one, or one the answer makes invalid, is
// refused.
func TestOAuthIntrospection(t *testing.T) {
	t.Parallel()
	f, e, logs := introspectionFixture(t, func(c *config.Config, _ *testIdP) {
		c.Auth.OAuth.RequiredScopes = []string{"mcp:tools"}
		c.Teams = []config.Team{{Name: "data", Claims: map[string][]string{"groups": {"data-eng"}}, Scopes: []string{"mcp:data"}}}
	})
	e.set("opaque-alice", f.answer(map[string]any{"groups": []string{"data-eng"}, "scope": "mcp:tools mcp:data"}))
	e.set("opaque-no-exp", f.answer(map[string]any{"exp": nil, "sub": "bob", "scope": "mcp:tools"}))
	e.set("opaque-lacks-scope", f.answer(map[string]any{"groups": []string{"data-eng"}, "scope": "mcp:tools"}))
	e.set("opaque-elsewhere", f.answer(map[string]any{"aud": "https://other.example.com", "scope": "mcp:tools"}))
	e.set("opaque-other-iss", f.answer(map[string]any{"iss": "https://evil.example.com", "scope": "mcp:tools"}))
	e.set("opaque-expired", f.answer(map[string]any{"exp": f.clock.Now().Add(-time.Hour).Unix(), "scope": "mcp:tools"}))
	e.set("opaque-no-sub", f.answer(map[string]any{"sub": nil, "scope": "mcp:tools"}))

	id, err := f.o.Identify("opaque-alice")
	if err != nil {
		t.Fatalf("active token: %v", err)
	}
	// The identity a JWT of the same claims gets.
	jwtID, err := f.o.Identify(f.token(t, map[string]any{"groups": []string{"data-eng"}, "scope": "mcp:tools mcp:data"}))
	if err != nil {
		t.Fatal(err)
	}
	if id != jwtID || id.Team != "data" || id.ID != "oauth:"+f.idp.srv.URL+"#alice" {
		t.Errorf("introspected identity %+v, want the JWT's %+v in team data", id, jwtID)
	}
	if id, err := f.o.Identify("opaque-no-exp"); err != nil || id.ID != "oauth:"+f.idp.srv.URL+"#bob" {
		t.Errorf("active without exp: %+v, %v", id, err)
	}
	var se *ScopeError
	if _, err := f.o.Identify("opaque-lacks-scope"); !errors.As(err, &se) || se.Scope != "mcp:tools mcp:data" {
		t.Errorf("without the team's scope: %v, want a ScopeError", err)
	}
	for tok, want := range map[string]string{
		"opaque-unknown":   "not active",
		"opaque-elsewhere": "audience",
		"opaque-other-iss": "names another issuer",
		"opaque-expired":   "expired",
		"opaque-no-sub":    "no sub",
	} {
		_, err := f.o.Identify(tok)
		if !errors.Is(err, ErrInvalidCredentials) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an invalid-credentials error saying %q", tok, err, want)
		}
		if strings.Contains(err.Error(), tok) {
			t.Errorf("%s: the error quotes the token: %v", tok, err)
		}
	}
	if strings.Contains(logs.String(), "opaque-") || strings.Contains(logs.String(), introspectionSecret) {
		t.Errorf("the log holds a token or the secret:\n%s", logs)
	}
}

// TestOAuthIntrospectionCache: an answer, active or not, is kept for
// config.IntrospectionCacheTTL, or until the token's exp if sooner.
func TestOAuthIntrospectionCache(t *testing.T) {
	t.Parallel()
	f, e, _ := introspectionFixture(t, nil)
	e.set("opaque", f.answer(nil))
	for range 3 {
		if _, err := f.o.Identify("opaque"); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.count(); n != 1 {
		t.Errorf("three uses of a token asked %d times, want once", n)
	}
	f.clock.Advance(config.IntrospectionCacheTTL)
	if _, err := f.o.Identify("opaque"); err != nil {
		t.Fatal(err)
	}
	if n := e.count(); n != 2 {
		t.Errorf("after %s: asked %d times in all, want 2", config.IntrospectionCacheTTL, n)
	}

	// An inactive answer is kept too.
	for range 2 {
		if _, err := f.o.Identify("opaque-unknown"); err == nil {
			t.Fatal("an unknown token passed")
		}
	}
	if n := e.count(); n != 3 {
		t.Errorf("two uses of an inactive token: %d requests in all, want 3", n)
	}

	// A token that expires sooner is asked about again at its exp.
	e.set("opaque-short", f.answer(map[string]any{"exp": f.clock.Now().Add(5 * time.Second).Unix()}))
	if _, err := f.o.Identify("opaque-short"); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(5 * time.Second)
	e.set("opaque-short", map[string]any{"active": false}) // the issuer no longer vouches for it
	if _, err := f.o.Identify("opaque-short"); err == nil {
		t.Error("a token past its exp passed from the cache, without asking its issuer")
	}
	if n := e.count(); n != 5 {
		t.Errorf("a token asked again at its exp: %d requests in all, want 5", n)
	}
}

// TestOAuthIntrospectionAPIKeys: a team's API key matches first and is
// never sent to the introspection endpoint.
func TestOAuthIntrospectionAPIKeys(t *testing.T) {
	t.Parallel()
	const key = "scripts-key-0123456789"
	f, e, _ := introspectionFixture(t, func(c *config.Config, _ *testIdP) {
		c.Teams = []config.Team{{Name: "scripts", APIKeys: []string{key}}}
	})
	id, err := f.o.Identify(key)
	if err != nil || id.Team != "scripts" {
		t.Fatalf("API key: %+v, %v", id, err)
	}
	if e.saw(key) || e.count() != 0 {
		t.Errorf("the API key reached the introspection endpoint (%d requests)", e.count())
	}
	// Anything else that is not a JWT is introspected.
	if _, err := f.o.Identify(key + "x"); !errors.Is(err, ErrInvalidCredentials) || e.count() != 1 {
		t.Errorf("a wrong key: %v after %d requests, want refused after one", err, e.count())
	}
}

// TestOAuthIntrospectionFailure: an endpoint that cannot answer refuses
// the token with a log line saying why (never the token), and its
// failure is not kept: the next request asks again.
func TestOAuthIntrospectionFailure(t *testing.T) {
	t.Parallel()
	f, e, logs := introspectionFixture(t, nil)
	e.set("opaque-token-value", f.answer(nil))
	e.down.Store(true)
	_, err := f.o.Identify("opaque-token-value")
	if !errors.Is(err, ErrInvalidCredentials) || !strings.Contains(err.Error(), "503") {
		t.Errorf("endpoint down: %v, want an invalid-credentials error naming the 503", err)
	}
	if l := logs.String(); !strings.Contains(l, "oauth introspection failed") || !strings.Contains(l, "503") || strings.Contains(l, "opaque-token-value") {
		t.Errorf("log %q: want the failure and its cause, never the token", l)
	}
	e.down.Store(false)
	if _, err := f.o.Identify("opaque-token-value"); err != nil {
		t.Errorf("the endpoint is back: %v", err)
	}

	// A wrong client secret is the endpoint's 401, and the secret is in
	// no log or error.
	g, _, glogs := introspectionFixture(t, nil)
	if err := os.WriteFile(g.o.introspecting[0].intro.secret.File, []byte("wrong-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = g.o.Identify("opaque")
	if !errors.Is(err, ErrInvalidCredentials) || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "wrong-secret") || strings.Contains(glogs.String(), "wrong-secret") {
		t.Errorf("a wrong secret: %v; log %s", err, glogs)
	}
}

// TestOAuthIntrospectionDiscovery: without url, the endpoint is the
// discovery document's introspection_endpoint.
func TestOAuthIntrospectionDiscovery(t *testing.T) {
	t.Parallel()
	e := newIntrospectionEndpoint(t)
	f, _, _ := introspectionFixture(t, func(c *config.Config, idp *testIdP) {
		c.Auth.OAuth.Issuers[0].Introspection.URL = ""
		idp.introspection = e.srv.URL
	})
	e.set("opaque", f.answer(nil))
	if _, err := f.o.Identify("opaque"); err != nil || e.count() != 1 {
		t.Errorf("through discovery: %v after %d requests", err, e.count())
	}
	// A discovery document without one is a clear error.
	g, _, _ := introspectionFixture(t, func(c *config.Config, _ *testIdP) { c.Auth.OAuth.Issuers[0].Introspection.URL = "" })
	if _, err := g.o.Identify("opaque"); err == nil || !strings.Contains(err.Error(), "introspection_endpoint") {
		t.Errorf("no introspection_endpoint: %v", err)
	}
}

// TestOAuthIntrospectionOnce: requests that carry the same new token at
// once wait for one introspection instead of each asking.
func TestOAuthIntrospectionOnce(t *testing.T) {
	t.Parallel()
	const n = 8
	f, e, _ := introspectionFixture(t, nil)
	e.set("opaque", f.answer(nil))
	arrived, release := holdIntrospections(e.srv, n)
	waiting := make(chan struct{}, n)
	f.o.onWait = func() { waiting <- struct{}{} }
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := f.o.Identify("opaque")
			errs <- err
		}()
	}
	<-arrived
	for i := 0; i < n-1; i++ {
		select {
		case <-waiting:
		case <-arrived:
			t.Errorf("a second introspection of the same token")
			i = n // stop waiting: the others ask too
		}
	}
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("Identify: %v", err)
		}
	}
	if got := e.count(); got != 1 {
		t.Errorf("%d concurrent uses of a token asked %d times, want once", n, got)
	}
}

// TestIntrospectionCacheBound: the cache never holds more than
// maxIntrospected answers.
func TestIntrospectionCacheBound(t *testing.T) {
	t.Parallel()
	f, _, _ := introspectionFixture(t, nil)
	until := f.clock.Now().Add(time.Minute)
	for i := range maxIntrospected + 10 {
		f.o.remember([32]byte{byte(i), byte(i >> 8)}, introspected{until: until})
	}
	if n := len(f.o.answers); n > maxIntrospected {
		t.Errorf("the cache holds %d answers, more than %d", n, maxIntrospected)
	}
}

// BenchmarkIdentifyOpaque: an opaque token whose answer is cached, beside
// BenchmarkIdentify's JWT and API key.
func BenchmarkIdentifyOpaque(b *testing.B) {
	f, e, _ := introspectionFixture(b, nil)
	e.set("opaque", f.answer(map[string]any{"exp": f.clock.Now().Add(time.Hour).Unix()}))
	if _, err := f.o.Identify("opaque"); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := f.o.Identify("opaque"); err != nil {
			b.Fatal(err)
		}
	}
	if e.count() != 1 {
		b.Errorf("asked %d times, want once", e.count())
	}
}

// TestOAuthHugeToken: a bearer credential longer than maxTokenBytes is
// refused as such, before any parsing, and is never sent to an issuer:
// a junk "token" of up to the server's header limit (1 MB) would
// otherwise be posted to the introspection endpoint for each request.
func TestOAuthHugeToken(t *testing.T) {
	t.Parallel()
	f, e, _ := introspectionFixture(t, nil)
	huge := strings.Repeat("a", maxTokenBytes+1)
	e.set(huge, f.answer(nil))
	for name, tok := range map[string]string{
		"opaque": huge,
		"jwt":    f.token(t, map[string]any{"pad": strings.Repeat("x", maxTokenBytes)}),
	} {
		_, err := f.o.Identify(tok)
		if !errors.Is(err, ErrInvalidCredentials) || !strings.Contains(err.Error(), "longer than") {
			t.Errorf("%s token of %d bytes: %v, want an invalid-credentials error saying it is too long", name, len(tok), err)
		}
	}
	if n := e.count(); n != 0 {
		t.Errorf("the introspection endpoint was asked %d times about a huge token", n)
	}
	// A token at the bound is still asked about.
	atBound := strings.Repeat("b", maxTokenBytes)
	e.set(atBound, f.answer(nil))
	if _, err := f.o.Identify(atBound); err != nil {
		t.Errorf("a token of exactly %d bytes: %v", maxTokenBytes, err)
	}
}

// TestOAuthIntrospectionConcurrency: a flood of distinct made-up opaque
// tokens never has more than config.IntrospectionConcurrency
// introspections in flight at the issuer; the others wait for a slot,
// and are answered once the issuer answers.
func TestOAuthIntrospectionConcurrency(t *testing.T) {
	t.Parallel()
	limit := config.IntrospectionConcurrency
	n := limit + 3
	f, e, _ := introspectionFixture(t, nil)
	arrived, release := holdIntrospections(e.srv, n)
	queued := make(chan struct{}, n)
	f.o.onQueue = func() { queued <- struct{}{} }
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := f.o.Identify("junk-" + strconv.Itoa(i))
			errs <- err
		}()
	}
	inFlight, waiting := 0, 0
	for inFlight+waiting < n && inFlight <= limit {
		select {
		case <-arrived:
			inFlight++
		case <-queued:
			waiting++
		}
	}
	if inFlight > limit {
		t.Errorf("more than %d introspections in flight at once", limit)
	}
	close(release)
	for range n {
		if err := <-errs; !errors.Is(err, ErrInvalidCredentials) || !strings.Contains(err.Error(), "not active") {
			t.Errorf("a made-up token: %v, want the issuer's not-active answer", err)
		}
	}
	if got := e.count(); got != n {
		t.Errorf("the issuer was asked %d times about %d tokens", got, n)
	}
}

// TestOAuthTeamOfOneIssuer: with two issuers, one of them able to mint
// any claims (another organisation's IdP), a team restricted to one
// issuer by the claim iss (claims_match: all) is never given to the
// other's tokens, however their groups read; and an introspection answer
// that leaves iss out (RFC 7662 makes it optional) is the asked
// issuer's, so it still matches such a team.
func TestOAuthTeamOfOneIssuer(t *testing.T) {
	t.Parallel()
	var other *testIdP
	f, e, _ := introspectionFixture(t, func(c *config.Config, idp *testIdP) {
		other = newTestIdP(t)
		c.Auth.OAuth.Issuers = append(c.Auth.OAuth.Issuers, config.Issuer{Issuer: other.srv.URL})
		c.Teams = []config.Team{{Name: "admins", ClaimsMatch: config.ClaimsAll,
			Claims: map[string][]string{"iss": {idp.srv.URL}, "groups": {"admins"}}}}
	})
	otherKey := newRSA(t, "k1")
	other.publish(otherKey)
	admins := map[string]any{"groups": []string{"admins"}}

	if id, err := f.o.Identify(f.token(t, admins)); err != nil || id.Team != "admins" {
		t.Errorf("the issuer's own admin: %+v, %v, want team admins", id, err)
	}
	forged := mint(t, otherKey, f.claims(map[string]any{"iss": other.srv.URL, "groups": []string{"admins"}}))
	if id, err := f.o.Identify(forged); err != nil || id.Team != "" || id.ID != "oauth:"+other.srv.URL+"#alice" {
		t.Errorf("the other issuer's admin: %+v, %v, want the default view as its own identity", id, err)
	}
	e.set("opaque-admin", f.answer(map[string]any{"iss": nil, "groups": []string{"admins"}}))
	if id, err := f.o.Identify("opaque-admin"); err != nil || id.Team != "admins" {
		t.Errorf("an introspected admin without iss: %+v, %v, want team admins", id, err)
	}
}

// TestOAuthIntrospectionNotRedirected: an introspection endpoint that
// redirects (307 keeps the body: the token, and Basic the secret) is not
// followed: the token and the client secret never reach the other
// address, and the token is refused as the endpoint's failure.
func TestOAuthIntrospectionNotRedirected(t *testing.T) {
	t.Parallel()
	var reached atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
	}))
	t.Cleanup(elsewhere.Close)
	f, e, _ := introspectionFixture(t, nil)
	e.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL, http.StatusTemporaryRedirect)
	})
	if _, err := f.o.Identify("opaque-redirected"); !errors.Is(err, ErrInvalidCredentials) || !strings.Contains(err.Error(), "307") {
		t.Errorf("a redirected introspection: %v, want the endpoint's 307 as the failure", err)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the redirect was followed %d times, with the token and the secret", n)
	}
}

// holdIntrospections makes the introspection endpoint hold each request
// until release is closed; arrived gets a token as each one arrives (up
// to n without blocking).
func holdIntrospections(srv *httptest.Server, n int) (arrived, release chan struct{}) {
	arrived, release = make(chan struct{}, n), make(chan struct{})
	inner := srv.Config.Handler
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		inner.ServeHTTP(w, r)
	})
	return arrived, release
}
