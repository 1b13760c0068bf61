package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
)

// tokenRecorder is a reverse proxy in front of the IdP that records the
// token of every introspection request it passes on.
type tokenRecorder struct {
	srv *httptest.Server
	mu  sync.Mutex
	// tokens are the token parameters of the requests, in order.
	tokens []string
}

func newTokenRecorder(t *testing.T, target string) *tokenRecorder {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rec := &tokenRecorder{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		form, _ := url.ParseQuery(string(body))
		rec.mu.Lock()
		rec.tokens = append(rec.tokens, form.Get("token"))
		rec.mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		r.URL.Path = "/oauth/introspect"
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (rec *tokenRecorder) seen() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]string(nil), rec.tokens...)
}

// TestOpaqueTokensWithARealAuthorizationServer: the gateway introspects
// opaque tokens at a real authorization server (interop/idp): an active
// one sees its team's view in both eras, an expired or unknown one gets
// 401 naming the resource metadata, and a team's API key passes without
// ever being sent to the IdP.
func TestOpaqueTokensWithARealAuthorizationServer(t *testing.T) {
	const resource = "https://gw.example.com/mcp"
	const metadata = `resource_metadata="https://gw.example.com/.well-known/oauth-protected-resource/mcp"`
	const apiKey = "scripts-key-0123456789abcdef"
	idp := startIDP(t, idpOptions{Audience: resource, Clients: []idpClient{{ID: "mcp-gateway", Secret: "introspection-s3cret"}}})
	// Without url the gateway would take the endpoint from discovery.
	if _, disc := idp.Get("/.well-known/openid-configuration"); disc["introspection_endpoint"] != idp.Issuer+"/oauth/introspect" {
		t.Errorf("discovery names introspection_endpoint %v", disc["introspection_endpoint"])
	}
	rec := newTokenRecorder(t, idp.Issuer)
	secret := filepath.Join(t.TempDir(), "idp-secret")
	if err := os.WriteFile(secret, []byte("introspection-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	cfg := config.Default()
	cfg.Upstreams = []config.Upstream{stdioUpstream("alpha", "echo", nil), stdioUpstream("beta", "echo-legacy", nil)}
	cfg.Auth.Mode = config.AuthOAuth
	cfg.Auth.OAuth.Resource = resource
	cfg.Auth.OAuth.Issuers = []config.Issuer{{Issuer: idp.Issuer, Introspection: &config.Introspection{
		URL: rec.srv.URL, ClientID: "mcp-gateway", ClientSecret: config.Secret{File: secret},
	}}}
	cfg.Auth.OAuth.RequiredScopes = []string{"mcp:tools"}
	cfg.Auth.OAuth.Unmatched = config.UnmatchedDeny
	cfg.Teams = []config.Team{
		{Name: "data", Claims: map[string][]string{"groups": {"data-eng"}}, Allow: []string{"alpha__*"}},
		{Name: "scripts", APIKeys: []string{apiKey}, Allow: []string{"beta__*"}},
	}
	url, _ := startGateway(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	user := idpUser{Sub: "alice", Groups: []string{"data-eng"}, Scopes: []string{"mcp:tools"}, Resources: []string{resource}, Opaque: true}
	alice := idp.UserToken(user)
	if strings.Count(alice, ".") == 2 {
		t.Fatal("the IdP's opaque token looks like a JWT")
	}
	sees := func(t *testing.T, era, token, prefix string) {
		t.Helper()
		cs, err := connectAs(t, url, era, token)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		names := toolNames(ctx, t, cs, "tools/list")
		if len(names) == 0 || !allPrefixed(names, prefix) {
			t.Errorf("%s sees %v, want only %s tools", era, names, prefix)
		}
	}
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			sees(t, era, alice, "alpha__")
			sees(t, era, apiKey, "beta__")
		})
	}
	for _, tok := range rec.seen() {
		if tok != alice {
			t.Errorf("the IdP was asked about %q, want only alice's token", tok)
		}
	}
	if len(rec.seen()) == 0 {
		t.Error("alice's token was never introspected")
	}

	refused := func(what, token string) {
		t.Helper()
		code, header, _ := postRaw(ctx, t, url, map[string]string{"Authorization": "Bearer " + token},
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}`)
		challenge := header.Get("WWW-Authenticate")
		if code != http.StatusUnauthorized || !strings.Contains(challenge, metadata) || !strings.Contains(challenge, `error="invalid_token"`) {
			t.Errorf("%s: %d %q, want 401 invalid_token naming the resource metadata", what, code, challenge)
		}
	}
	expired := user
	expired.TTL = -time.Minute
	refused("expired", idp.UserToken(expired))
	refused("unknown", alice+"x")
	refused("wrong API key", apiKey+"x")
	for _, tok := range rec.seen() {
		if tok == apiKey {
			t.Error("the API key was sent to the IdP")
		}
	}
}

func allPrefixed(names []string, prefix string) bool {
	for _, n := range names {
		if !strings.HasPrefix(n, prefix) {
			return false
		}
	}
	return true
}
