package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestSecretFileReread: a header from a file follows the file, checked
// at most once per second; an env secret is its loaded value.
func TestSecretFileReread(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key")
	if err := os.WriteFile(path, []byte("first-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	hc := secretHeaders("crm", map[string]config.Secret{
		"x-api-key":     {File: path},
		"Authorization": {Env: "TOKEN", Value: "env-token", Prefix: "Bearer "},
	}, clk.now)
	get := func() http.Header {
		t.Helper()
		h := http.Header{}
		if err := hc.Apply(context.Background(), h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	if h := get(); h.Get("X-Api-Key") != "first-key" || h.Get("Authorization") != "Bearer env-token" {
		t.Fatalf("headers = %v", h)
	}
	// A new value of another size, and a later modification time.
	if err := os.WriteFile(path, []byte("second-key-longer"), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	if got := get().Get("X-Api-Key"); got != "first-key" {
		t.Errorf("within a second of the last check: %q, want the cached first-key", got)
	}
	clk.add(secretCheckInterval)
	if got := get().Get("X-Api-Key"); got != "second-key-longer" {
		t.Errorf("after the interval: %q, want second-key-longer", got)
	}
	// A file that vanishes (mid-rotation) keeps its last value.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	clk.add(secretCheckInterval)
	if got := get().Get("X-Api-Key"); got != "second-key-longer" {
		t.Errorf("file gone: %q, want the last value", got)
	}
	// A file never read is an error naming the header and the upstream.
	err := secretHeaders("crm", map[string]config.Secret{"X-Api-Key": {File: filepath.Join(dir, "nope")}}, clk.now).Apply(context.Background(), http.Header{})
	if !errors.Is(err, ErrCredentials) || !strings.Contains(err.Error(), `header X-Api-Key of upstream "crm"`) {
		t.Errorf("missing file: %v", err)
	}
}

// tokenServer is a token endpoint that issues numbered tokens; gate, when
// set, holds each request until it is closed.
type tokenServer struct {
	*httptest.Server
	n    atomic.Int32
	gate chan struct{}
	in   chan url.Values
	fail atomic.Int32 // 1: an OAuth error, 2: a bare 500
	ttl  int
}

func newTokenServer(t *testing.T, ttl int) *tokenServer {
	ts := &tokenServer{ttl: ttl, in: make(chan url.Values, 16)}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		user, pass, _ := r.BasicAuth()
		form := r.PostForm
		form.Set("basic", user+":"+pass)
		select {
		case ts.in <- form:
		default:
		}
		if ts.gate != nil {
			<-ts.gate
		}
		w.Header().Set("Content-Type", "application/json")
		switch ts.fail.Load() {
		case 1:
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = fmt.Fprint(w, `{"error":"invalid_client","error_description":"unknown client","debug":"body-marker-e1"}`)
			return
		case 3: // an endpoint that quotes what it was sent
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant",
				"error_description": "subject_token " + form.Get("subject_token") + " has expired"})
			return
		case 2:
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = fmt.Fprint(w, `stack trace: body-marker-e2`)
			return
		}
		n := ts.n.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprintf("tok-%d", n), "token_type": "Bearer", "expires_in": ts.ttl})
	}))
	t.Cleanup(ts.Close)
	return ts
}

func ccOptions(ts *tokenServer, clk *fakeClock) *TokenOptions {
	return &TokenOptions{Upstream: "crm", now: clk.now, Client: config.OAuthClient{
		TokenURL: ts.URL + "/token", ClientID: "gw", ClientSecret: config.Secret{Env: "S", Value: "client-secret-9f1"},
		Scopes: []string{"crm.read"}, Resource: "https://crm.example.com/mcp",
	}}
}

func bearerOf(t *testing.T, c Credentials, ctx context.Context) string {
	t.Helper()
	h := http.Header{}
	if err := c.Apply(ctx, h); err != nil {
		t.Fatal(err)
	}
	return h.Get("Authorization")
}

// TestClientCredentialsCache: one token until shortly before it expires,
// then a new one; the request carries the client's parameters.
func TestClientCredentialsCache(t *testing.T) {
	ts := newTokenServer(t, 120)
	clk := &fakeClock{t: time.Now()}
	cc := NewClientCredentials(ccOptions(ts, clk))
	ctx := context.Background()
	if got := bearerOf(t, cc, ctx); got != "Bearer tok-1" {
		t.Fatalf("first: %q", got)
	}
	form := <-ts.in
	for k, want := range map[string]string{"grant_type": "client_credentials", "scope": "crm.read", "resource": "https://crm.example.com/mcp", "basic": "gw:client-secret-9f1"} {
		if form.Get(k) != want {
			t.Errorf("token request %s = %q, want %q", k, form.Get(k), want)
		}
	}
	clk.add(120*time.Second - config.TokenRefreshMargin - time.Second)
	if got := bearerOf(t, cc, ctx); got != "Bearer tok-1" {
		t.Errorf("before the margin: %q, want the cached tok-1", got)
	}
	clk.add(2 * time.Second)
	if got := bearerOf(t, cc, ctx); got != "Bearer tok-2" {
		t.Errorf("within the margin: %q, want a new tok-2", got)
	}
}

// TestClientCredentialsOneFetch: callers that need a token while one is
// being fetched wait for it: the endpoint sees one request.
func TestClientCredentialsOneFetch(t *testing.T) {
	ts := newTokenServer(t, 3600)
	ts.gate = make(chan struct{})
	clk := &fakeClock{t: time.Now()}
	cc := NewClientCredentials(ccOptions(ts, clk)).(*clientCredentials)
	const callers = 8
	waits := make(chan struct{}, callers)
	cc.cache.waiting = func() { waits <- struct{}{} }
	var wg sync.WaitGroup
	got := make(chan string, callers)
	for range callers {
		wg.Go(func() {
			h := http.Header{}
			if err := cc.Apply(context.Background(), h); err != nil {
				got <- err.Error()
				return
			}
			got <- h.Get("Authorization")
		})
	}
	<-ts.in // the one fetch is in flight
	for waiting := 0; waiting < callers-1; {
		select {
		case <-waits:
			waiting++
		case <-ts.in:
			close(ts.gate)
			wg.Wait()
			t.Fatal("a second token request while one was in flight")
		}
	}
	close(ts.gate)
	wg.Wait()
	close(got)
	for g := range got {
		if g != "Bearer tok-1" {
			t.Errorf("a caller got %q, want Bearer tok-1", g)
		}
	}
	if n := ts.n.Load(); n != 1 {
		t.Errorf("the endpoint issued %d tokens, want 1", n)
	}
}

// TestClientCredentialsFailure: a failing endpoint gives an error that
// names the upstream and the endpoint's host, with the status and the
// OAuth error, never the secret or the response body as such.
func TestClientCredentialsFailure(t *testing.T) {
	ts := newTokenServer(t, 3600)
	clk := &fakeClock{t: time.Now()}
	host := strings.TrimPrefix(ts.URL, "http://")
	prefix := fmt.Sprintf(`the gateway could not get a token for upstream "crm" from %s: `, host)
	for _, tt := range []struct {
		mode int32
		want string
	}{
		{1, `it answered 401 Unauthorized: invalid_client "unknown client"`},
		{2, `it answered 500 Internal Server Error`},
	} {
		ts.fail.Store(tt.mode)
		err := NewClientCredentials(ccOptions(ts, clk)).Apply(context.Background(), http.Header{})
		if !errors.Is(err, ErrCredentials) {
			t.Fatalf("err = %v, want ErrCredentials", err)
		}
		if err.Error() != prefix+tt.want {
			t.Errorf("err = %q, want %q", err, prefix+tt.want)
		}
	}
	ts.Close()
	err := NewClientCredentials(ccOptions(ts, clk)).Apply(context.Background(), http.Header{})
	if !errors.Is(err, ErrCredentials) || !strings.HasPrefix(err.Error(), prefix) || strings.Contains(err.Error(), "client-secret-9f1") {
		t.Errorf("unreachable endpoint: %v", err)
	}
}

// TestTokenExchangeSubjects: each subject gets its own exchanged token,
// cached; a session remembers its subject for its own requests and
// refuses another's.
func TestTokenExchangeSubjects(t *testing.T) {
	ts := newTokenServer(t, 3600)
	clk := &fakeClock{t: time.Now()}
	o := ccOptions(ts, clk)
	o.Client.Audience = "crm"
	x := NewTokenExchange(o)
	alice, bob := x.For(), x.For()
	actx := WithSubject(context.Background(), NewSubject("oauth:idp#alice", "alice-host-token"))
	bctx := WithSubject(context.Background(), NewSubject("oauth:idp#bob", "bob-host-token"))

	if err := alice.Apply(context.Background(), http.Header{}); !errors.Is(err, ErrCredentials) {
		t.Errorf("no subject yet: err = %v, want ErrCredentials", err)
	}
	a1 := bearerOf(t, alice, actx)
	form := <-ts.in
	for k, want := range map[string]string{
		"grant_type": grantTokenExchange, "subject_token": "alice-host-token", "subject_token_type": tokenTypeAccessToken,
		"audience": "crm", "resource": "https://crm.example.com/mcp", "basic": "gw:client-secret-9f1",
	} {
		if form.Get(k) != want {
			t.Errorf("exchange request %s = %q, want %q", k, form.Get(k), want)
		}
	}
	b1 := bearerOf(t, bob, bctx)
	<-ts.in
	if a1 == b1 {
		t.Errorf("alice and bob got the same token %q", a1)
	}
	if got := bearerOf(t, alice, context.Background()); got != a1 {
		t.Errorf("alice's session on its own: %q, want her cached %q", got, a1)
	}
	if got := bearerOf(t, x.For(), actx); got != a1 {
		t.Errorf("alice's second session: %q, want her cached %q", got, a1)
	}
	if err := alice.Apply(bctx, http.Header{}); !errors.Is(err, ErrCredentials) {
		t.Errorf("bob on alice's session: err = %v, want ErrCredentials", err)
	}
	if n := ts.n.Load(); n != 2 {
		t.Errorf("%d exchanges, want 2", n)
	}
	if s := fmt.Sprintf("%v %+v %#v %s", NewSubject("x", "alice-host-token"), NewSubject("x", "alice-host-token"), NewSubject("x", "alice-host-token"), NewSubject("x", "alice-host-token")); strings.Contains(s, "alice-host-token") {
		t.Errorf("a Subject formats its token: %s", s)
	}
}

// TestRejectedTokenRenewed: an upstream that answers 401 to the cached
// token makes the gateway drop it and send the request once more with a
// new one; a second 401 is the call's failure, without a loop.
func TestRejectedTokenRenewed(t *testing.T) {
	ts := newTokenServer(t, 3600)
	var refused atomic.Value // the token the upstream refuses
	refused.Store("Bearer tok-1")
	var posts atomic.Int32
	inner := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: mcptest.ServerOptions{Name: "remote", Versions: mcptest.LegacyVersions()}})
	target, _ := url.Parse(inner.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
		}
		if r.Header.Get("Authorization") == refused.Load() || refused.Load() == "all" {
			http.Error(w, "invalid token", http.StatusUnauthorized)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	clk := &fakeClock{t: time.Now()}
	c, err := New(&Options{Name: "remote", URL: front.URL, Transport: "streamable-http", Credentials: NewClientCredentials(ccOptions(ts, clk))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if n := ts.n.Load(); n != 2 {
		t.Errorf("%d tokens fetched, want 2: tok-1, refused, then tok-2", n)
	}
	refused.Store("all")
	before := posts.Load()
	_, err = c.Call(ctx, "tools/call", []byte(`{"name":"echo","arguments":{"text":"x"}}`))
	if err == nil {
		t.Fatal("a call refused with 401 twice succeeded")
	}
	if n := posts.Load() - before; n != 2 {
		t.Errorf("%d POSTs for a call refused twice, want 2 (one retry)", n)
	}
}

// TestTokenExchangeErrorHidesHostToken: a token endpoint whose
// error_description quotes the subject_token it refused (some do) does
// not put the host's token into the error, which reaches logs and the
// host.
func TestTokenExchangeErrorHidesHostToken(t *testing.T) {
	ts := newTokenServer(t, 3600)
	ts.fail.Store(3)
	clk := &fakeClock{t: time.Now()}
	x := NewTokenExchange(ccOptions(ts, clk))
	ctx := WithSubject(context.Background(), NewSubject("oauth:idp#alice", "alice-host-token-5e2"))
	err := x.For().Apply(ctx, http.Header{})
	if !errors.Is(err, ErrCredentials) || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("err = %v, want the endpoint's invalid_grant", err)
	}
	if strings.Contains(err.Error(), "alice-host-token-5e2") {
		t.Errorf("the error quotes the host's token: %v", err)
	}
}

// TestTokenEndpointNotRedirected: a token endpoint that redirects (307
// keeps the body: the host's subject_token, and the client's
// credentials) is not followed; the failure names the status.
func TestTokenEndpointNotRedirected(t *testing.T) {
	var reached atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
	t.Cleanup(elsewhere.Close)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(ts.Close)
	clk := &fakeClock{t: time.Now()}
	o := ccOptions(&tokenServer{Server: ts}, clk)
	ctx := WithSubject(context.Background(), NewSubject("oauth:idp#alice", "alice-host-token"))
	err := NewTokenExchange(o).For().Apply(ctx, http.Header{})
	if !errors.Is(err, ErrCredentials) || !strings.Contains(err.Error(), "307") {
		t.Errorf("a redirected token request: %v, want the endpoint's 307", err)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the redirect was followed %d times, with the host's token and the client secret", n)
	}
}
