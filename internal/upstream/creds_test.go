package upstream_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// countingCreds sets the gateway's own Authorization, or fails when fail
// is set.
type countingCreds struct {
	mu   sync.Mutex
	fail error
}

func (c *countingCreds) Apply(ctx context.Context, h http.Header) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail != nil {
		return c.fail
	}
	h.Set("Authorization", "Bearer gateway-own")
	return nil
}

// TestCredentialsOnEveryRequest: every HTTP request to the upstream
// (POSTs, the legacy GET stream, the DELETE that ends the session)
// carries the credentials, and
// a call whose credentials fail is not sent and fails with
// ErrCredentials.
func TestCredentialsOnEveryRequest(t *testing.T) {
	var mu sync.Mutex
	seen := map[string][]string{} // method -> Authorization values
	inspect := func(r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		seen[r.Method] = append(seen[r.Method], r.Header.Get("Authorization"))
	}
	url := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{
		Server:  mcptest.ServerOptions{Name: "remote", Versions: mcptest.LegacyVersions()},
		Inspect: inspect,
	}).URL
	creds := &countingCreds{}
	c := start(t, &upstream.Options{Name: "remote", URL: url, Transport: "streamable-http", ClientInfo: gateway, Credentials: creds})
	ctx := testCtx(t)
	if got := callTool(t, ctx, c, "echo", `{"text":"hi"}`); got != "hi" {
		t.Fatalf("echo = %q", got)
	}
	mu.Lock()
	posts := len(seen[http.MethodPost])
	mu.Unlock()
	creds.mu.Lock()
	creds.fail = &upstream.CredentialsError{Upstream: "remote", What: "could not get a token for upstream \"remote\" from idp.test", Err: errors.New("it answered 503")}
	creds.mu.Unlock()
	_, err := c.Call(ctx, "tools/call", []byte(`{"name":"echo","arguments":{"text":"x"}}`))
	if !errors.Is(err, upstream.ErrCredentials) || !strings.Contains(err.Error(), "could not get a token for upstream") {
		t.Errorf("call with failing credentials: err = %v, want ErrCredentials", err)
	}
	creds.mu.Lock()
	creds.fail = nil
	creds.mu.Unlock()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen[http.MethodPost]) != posts {
		t.Errorf("the call whose credentials failed was sent anyway")
	}
	if len(seen[http.MethodGet]) == 0 {
		t.Errorf("no GET request seen")
	}
	for m, auths := range seen {
		for _, a := range auths {
			if a != "Bearer gateway-own" {
				t.Errorf("%s with Authorization %q, want the credentials'", m, a)
			}
		}
	}
}

// failAfter are Credentials that fail once fail is set.
type failAfter struct{ fail atomic.Bool }

func (f *failAfter) Apply(context.Context, http.Header) error {
	if f.fail.Load() {
		return &upstream.CredentialsError{Upstream: "mem", What: `could not get a token for upstream "mem" from idp.test`, Err: errors.New("it answered 503 Service Unavailable")}
	}
	return nil
}

// TestBreakerIgnoresCredentials: calls that fail because the gateway has
// no credentials were never sent, and say nothing of the server's
// health: however many, the breaker stays closed, and each call says why.
func TestBreakerIgnoresCredentials(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &rawServer{answer: answerResult(`{"content":[{"type":"text","text":"hi"}]}`)}
		creds := &failAfter{}
		o := &upstream.SupervisedOptions{Options: memOptions(f), Breaker: upstream.BreakerOptions{Failures: 2, Cooldown: time.Minute}}
		o.Credentials = creds
		s, _ := startSupervised(t, o)
		defer s.Close()
		creds.fail.Store(true)
		for i := range 5 {
			_, err := s.Call(context.Background(), "tools/call", echoParams())
			if !errors.Is(err, upstream.ErrCredentials) {
				t.Fatalf("call %d: %v, want ErrCredentials", i, err)
			}
		}
		if b := s.State().Breaker; b != upstream.BreakerClosed {
			t.Errorf("breaker %v after credential failures, want closed", b)
		}
	})
}

// headerCreds sets a static secret header and an Authorization.
type headerCreds struct{}

func (headerCreds) Apply(_ context.Context, h http.Header) error {
	h.Set("Authorization", "Bearer gateway-own")
	h.Set("X-Api-Key", "upstream-secret-4d1")
	return nil
}

// TestCredentialsNotRedirectedAway: an upstream that redirects the
// gateway to another origin (an open redirect on its host, or a hostile
// upstream) does not get the gateway's credentials sent there: net/http
// strips only Authorization, and only for another host name, never a
// header such as X-Api-Key (auth.headers). The protocol's headers go
// on, so an address that needs no credentials still serves.
func TestCredentialsNotRedirectedAway(t *testing.T) {
	var mu sync.Mutex
	var leaked []string
	target := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{
		Server: mcptest.ServerOptions{Name: "elsewhere", Versions: mcptest.LegacyVersions()},
		Inspect: func(r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			for _, h := range []string{"Authorization", "X-Api-Key"} {
				if v := r.Header.Get(h); v != "" {
					leaked = append(leaked, h+": "+v)
				}
			}
		},
	}).URL
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	c := newClient(t, &upstream.Options{Name: "remote", URL: redirector.URL + "/mcp", Transport: "streamable-http", ClientInfo: gateway, Credentials: headerCreds{}})
	if err := c.Start(testCtx(t)); err != nil {
		t.Errorf("Start through a redirect to another origin: %v", err)
	} else if got := callTool(t, testCtx(t), c, "echo", `{"text":"moved"}`); got != "moved" {
		t.Errorf("echo through the redirect = %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) > 0 {
		t.Errorf("the other origin received the credentials: %v", leaked)
	}
}
