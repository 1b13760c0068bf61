package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
)

// seenRequest is what an upstream received: the request's headers, as
// sent.
type seenRequest struct {
	method string
	header http.Header
}

// recorder keeps every request an upstream received.
type recorder struct {
	mu   sync.Mutex
	reqs []seenRequest
}

func (rc *recorder) inspect(r *http.Request) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.reqs = append(rc.reqs, seenRequest{r.Method, r.Header.Clone()})
}

func (rc *recorder) all() []seenRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.reqs)
}

// bearers returns the distinct bearer tokens the upstream received.
func (rc *recorder) bearers() []string {
	var out []string
	for _, r := range rc.all() {
		if tok, ok := strings.CutPrefix(r.header.Get("Authorization"), "Bearer "); ok && !slices.Contains(out, tok) {
			out = append(out, tok)
		}
	}
	return out
}

// TestUpstreamCredentials runs the serve command under auth.mode oauth
// with a real authorization server (interop/idp) and three Streamable
// HTTP upstreams: one with headers from a secret file and an environment
// variable, one behind OAuth client credentials, one behind per-user
// token exchange. Each upstream receives a token for its own audience,
// never a host's; two users of the token-exchange upstream get their own
// tokens and sessions; the file secret follows the file; a failing token
// endpoint gives the call a clear isError; and no secret or token
// appears in the logs, /readyz or /metrics.
func TestUpstreamCredentials(t *testing.T) {
	const (
		gwResource   = "https://gw.example.com/mcp"
		crmResource  = "https://crm.example.com/mcp"
		docsResource = "https://docs.example.com/mcp"
		clientSecret = "gw-client-secret-5e7a"
		staticToken  = "static-env-token-41c9"
		fileKey1     = "file-api-key-one-88d1"
		fileKey2     = "file-api-key-two-2b6f"
		hostKey      = "host-api-key-secret-c3d0"
	)
	// Upstream tokens live 4s, so that the gateway fetches new ones while
	// the test runs (at half their lifetime, 2s).
	idp := startIDP(t, idpOptions{Audience: gwResource, TokenTTL: 4 * time.Second,
		Clients: []idpClient{{ID: "gw", Secret: clientSecret}}})
	_, jwks := idp.Get("/keys")

	// The crm upstream reaches the token endpoint through a switch that
	// can make it fail.
	var tokenDown atomic.Bool
	target, _ := url.Parse(idp.Issuer)
	proxy := httputil.NewSingleHostReverseProxy(target)
	tokenSwitch := httptest.NewServer(buffered(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tokenDown.Load() {
			http.Error(w, `{"error":"temporarily_unavailable"}`, http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	})))
	t.Cleanup(tokenSwitch.Close)
	// The docs upstream reaches the token endpoint through a recorder of
	// the requests' bodies.
	var formsMu sync.Mutex
	var forms []string
	tokenRecorder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		formsMu.Lock()
		forms = append(forms, r.Header.Get("Authorization")+" "+string(body))
		formsMu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(tokenRecorder.Close)

	var static, crm, docs recorder
	legacy := mcptest.ServerOptions{Versions: mcptest.LegacyVersions()}
	staticURL := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: legacy, Inspect: static.inspect}).URL
	crmURL := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: legacy, Inspect: crm.inspect}).URL
	docsURL := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: legacy, Inspect: docs.inspect}).URL

	dir := t.TempDir()
	keyFile := filepath.Join(dir, "api-key")
	secretFile := filepath.Join(dir, "client-secret")
	for path, v := range map[string]string{keyFile: fileKey1 + "\n", secretFile: clientSecret + "\n"} {
		if err := os.WriteFile(path, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("UPCREDS_STATIC_TOKEN", staticToken)
	t.Setenv("UPCREDS_CLIENT_SECRET", clientSecret)
	path := writeConfig(t, map[string]any{
		"upstreams": []map[string]any{
			{"name": "static", "url": staticURL, "auth": map[string]any{"headers": map[string]any{
				"Authorization": map[string]any{"env": "UPCREDS_STATIC_TOKEN", "prefix": "Bearer "},
				"X-Api-Key":     map[string]any{"file": keyFile},
			}}},
			{"name": "crm", "url": crmURL, "auth": map[string]any{"oauth": map[string]any{
				"token_url": tokenSwitch.URL + "/oauth/token", "client_id": "gw",
				"client_secret": map[string]any{"file": secretFile}, "resource": crmResource,
			}}},
			{"name": "docs", "url": docsURL, "auth": map[string]any{"token_exchange": map[string]any{
				"token_url": tokenRecorder.URL + "/oauth/token", "client_id": "gw",
				"client_secret": map[string]any{"env": "UPCREDS_CLIENT_SECRET"}, "resource": docsResource,
			}}},
		},
		"teams":     []map[string]any{{"name": "scripts", "api_keys": []string{hostKey}}},
		"auth":      map[string]any{"mode": "oauth", "oauth": map[string]any{"resource": gwResource, "issuers": []map[string]any{{"issuer": idp.Issuer}}}},
		"telemetry": map[string]any{"log_level": "debug", "audit": map[string]any{"enabled": true}},
	})
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ctx, stop := context.WithCancel(context.Background())
	logs := &mcptest.LogBuffer{}
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"serve", "--config", path, "--listen", addr}, nil, io.Discard, logs)
	}()
	secrets := []string{clientSecret, staticToken, fileKey1, fileKey2, hostKey}
	defer func() {
		stop()
		<-exited
		out := logs.String()
		for _, s := range append(secrets, upstreamTokens(&static, &crm, &docs)...) {
			if strings.Contains(out, s) {
				t.Errorf("the gateway's output holds the secret %q", s)
			}
		}
		if !strings.Contains(out, `"msg":"audit"`) {
			t.Error("no audit record in the output")
		}
	}()
	waitReady(t, "http://"+addr+"/readyz")
	gw := "http://" + addr + "/mcp"

	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	user := func(sub string) string {
		return idp.UserToken(idpUser{Sub: sub, Resources: []string{gwResource}, TTL: time.Hour})
	}
	alice, bob := user("alice"), user("bob")
	secrets = append(secrets, alice, bob)
	hosts := map[string]string{"alice": alice, "bob": bob}
	for i, sub := range []string{"alice", "bob"} {
		cs, err := connectAs(t, gw, eras[i%len(eras)], hosts[sub])
		if err != nil {
			t.Fatalf("%s connects: %v", sub, err)
		}
		for _, tool := range []string{"static__echo", "crm__echo", "docs__echo"} {
			if got, err := callText(cctx, cs, tool, map[string]any{"text": sub}); err != nil || got != sub {
				t.Fatalf("%s calls %s: %q, %v", sub, tool, got, err)
			}
		}
	}

	// Static headers: the env value and the file's; after the file
	// changes, its new value (checked at most once per second).
	for _, r := range static.all() {
		if r.header.Get("Authorization") != "Bearer "+staticToken || r.header.Get("X-Api-Key") != fileKey1 {
			t.Fatalf("static upstream got Authorization %q, X-Api-Key %q", r.header.Get("Authorization"), r.header.Get("X-Api-Key"))
		}
	}
	if err := os.WriteFile(keyFile, []byte(fileKey2+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cs, err := connectAs(t, gw, eras[0], alice)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		if _, err := callText(cctx, cs, "static__echo", map[string]any{"text": "x"}); err != nil {
			t.Fatal(err)
		}
		reqs := static.all()
		if reqs[len(reqs)-1].header.Get("X-Api-Key") == fileKey2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the static upstream never got the file's new value")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Client credentials: the gateway's own token, for crm's audience.
	for _, tok := range crm.bearers() {
		claims := verifyRS256(t, jwks, tok)
		if !audHas(claims["aud"], crmResource) || claims["sub"] != "gw" {
			t.Errorf("crm got a token with aud %v, sub %v; want aud %s, sub gw", claims["aud"], claims["sub"], crmResource)
		}
	}
	// Token exchange: each user's calls carry a token with the user's
	// sub and docs' audience, in a session of the user's own; the shared
	// session that lists the catalog carries the gateway's own.
	sessionSubs := map[string]map[string]bool{}
	subs := map[string]bool{}
	for _, r := range docs.all() {
		tok, ok := strings.CutPrefix(r.header.Get("Authorization"), "Bearer ")
		if !ok {
			t.Fatalf("docs got Authorization %q", r.header.Get("Authorization"))
		}
		claims := verifyRS256(t, jwks, tok)
		sub, _ := claims["sub"].(string)
		if !audHas(claims["aud"], docsResource) {
			t.Errorf("docs got a token for %v, want %s", claims["aud"], docsResource)
		}
		subs[sub] = true
		if id := r.header.Get("Mcp-Session-Id"); id != "" {
			if sessionSubs[id] == nil {
				sessionSubs[id] = map[string]bool{}
			}
			sessionSubs[id][sub] = true
		}
	}
	if !subs["alice"] || !subs["bob"] || !subs["gw"] {
		t.Errorf("docs saw the subjects %v, want alice, bob and gw (the catalog's session)", subs)
	}
	for id, s := range sessionSubs {
		if len(s) != 1 {
			t.Errorf("docs session %s carried the tokens of %v: sessions are per user", id, s)
		}
	}
	if len(sessionSubs) < 3 {
		t.Errorf("docs had %d sessions, want the catalog's, alice's and bob's", len(sessionSubs))
	}

	// A caller with an API key has no token to exchange: the call says
	// so, and the key goes neither to the token endpoint nor upstream.
	kcs, err := connectAs(t, gw, eras[0], hostKey)
	if err != nil {
		t.Fatal(err)
	}
	if text, isErr := toolResult(cctx, t, kcs, "docs__echo", map[string]any{"text": "x"}); !isErr || !strings.Contains(text, "no OAuth token of a host to exchange") {
		t.Errorf("docs__echo with an API key: %q (isError %v), want an error saying there is no token to exchange", text, isErr)
	}
	formsMu.Lock()
	for _, f := range forms {
		if strings.Contains(f, hostKey) || strings.Contains(f, url.QueryEscape(hostKey)) {
			t.Errorf("the token endpoint got the host's API key: %s", f)
		}
	}
	formsMu.Unlock()

	// No host credential reached any upstream, in any header.
	for name, rc := range map[string]*recorder{"static": &static, "crm": &crm, "docs": &docs} {
		for _, r := range rc.all() {
			for k, vs := range r.header {
				for _, v := range vs {
					if strings.Contains(v, alice) || strings.Contains(v, bob) || strings.Contains(v, hostKey) {
						t.Errorf("%s got a host's credential in %s (%s)", name, k, r.method)
					}
				}
			}
		}
	}

	// The token endpoint fails: once crm's token is due, its call gets a
	// tool result with isError naming the upstream and the endpoint.
	tokenDown.Store(true)
	want := fmt.Sprintf(`could not get a token for upstream "crm" from %s`, strings.TrimPrefix(tokenSwitch.URL, "http://"))
	for deadline := time.Now().Add(30 * time.Second); ; {
		text, isErr := toolResult(cctx, t, cs, "crm__echo", map[string]any{"text": "x"})
		if isErr {
			if !strings.Contains(text, want) {
				t.Errorf("crm__echo with the token endpoint down: %q, want it to say %q", text, want)
			}
			for _, s := range secrets {
				if strings.Contains(text, s) {
					t.Errorf("the tool error holds a secret: %q", text)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("crm__echo kept working with its token endpoint down")
		}
		time.Sleep(100 * time.Millisecond)
	}

	for _, page := range []string{"/readyz", "/metrics"} {
		resp, err := http.Get("http://" + addr + page)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, s := range append(secrets, upstreamTokens(&static, &crm, &docs)...) {
			if strings.Contains(string(body), s) {
				t.Errorf("%s holds the secret %q", page, s)
			}
		}
	}
}

// upstreamTokens are the tokens the gateway sent the upstreams.
func upstreamTokens(rcs ...*recorder) []string {
	var out []string
	for _, rc := range rcs {
		out = append(out, rc.bearers()...)
	}
	return out
}

// audHas reports whether a token's aud claim (a string or a list) holds
// want.
func audHas(aud any, want string) bool {
	switch a := aud.(type) {
	case string:
		return a == want
	case []any:
		return slices.Contains(a, any(want))
	}
	return false
}
