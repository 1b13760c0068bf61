package upstream_test

import (
	"context"
	"errors"
	"net/http"
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
