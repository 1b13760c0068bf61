package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

// testIssuer is an OpenID provider as far as a resource server sees
// one: discovery, a key set, and tokens it signs.
type testIssuer struct {
	srv *httptest.Server
	key *rsa.PrivateKey
}

func newTestIssuer(t *testing.T) *testIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &testIssuer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": is.srv.URL, "jwks_uri": is.srv.URL + "/jwks"})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

// token signs an access token for the gateway with claims added.
func (is *testIssuer) token(t *testing.T, extra map[string]any) string {
	t.Helper()
	now := time.Now().Unix()
	claims := map[string]any{"iss": is.srv.URL, "sub": "alice", "aud": "https://gw.example.com/mcp", "exp": now + 600, "iat": now}
	for k, v := range extra {
		claims[k] = v
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: is.key}, (&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	obj, err := sig.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOAuthEndToEnd: the gateway under auth.mode oauth, in front of two
// upstreams, with a team per group. Hosts of both eras with a token see
// their team's view; without a token, or with a bad one, they get 401
// naming the resource metadata, which answers; a token without the
// required scope gets 403 insufficient_scope. No token reaches the logs.
func TestOAuthEndToEnd(t *testing.T) {
	is := newTestIssuer(t)
	cfg := config.Default()
	cfg.Upstreams = []config.Upstream{stdioUpstream("alpha", "echo", nil), stdioUpstream("beta", "echo-legacy", nil)}
	cfg.Auth.Mode = config.AuthOAuth
	cfg.Auth.OAuth.Resource = "https://gw.example.com/mcp"
	cfg.Auth.OAuth.Issuers = []config.Issuer{{Issuer: is.srv.URL}}
	cfg.Auth.OAuth.RequiredScopes = []string{"mcp:tools"}
	cfg.Auth.OAuth.Unmatched = config.UnmatchedDeny
	cfg.Teams = []config.Team{
		{Name: "data", Claims: map[string][]string{"groups": {"data-eng"}}, Allow: []string{"alpha__*"}},
		{Name: "ops", Claims: map[string][]string{"realm_access.roles": {"ops"}}, Allow: []string{"beta__*"}},
	}
	logs := &mcptest.LogBuffer{}
	url, _, _ := startGatewayWith(t, cfg, recorders{log: telemetry.NewLogger(logs, slog.LevelDebug)})
	base := strings.TrimSuffix(url, "/mcp")
	const metadataURL = "https://gw.example.com/.well-known/oauth-protected-resource/mcp"

	dataToken := is.token(t, map[string]any{"groups": []string{"data-eng"}, "scope": "openid mcp:tools"})
	opsToken := is.token(t, map[string]any{"sub": "bob", "realm_access": map[string]any{"roles": []string{"ops"}}, "scp": []string{"mcp:tools"}})
	noScope := is.token(t, map[string]any{"groups": []string{"data-eng"}})
	expired := is.token(t, map[string]any{"groups": []string{"data-eng"}, "scope": "mcp:tools", "exp": time.Now().Unix() - 3600})
	noTeam := is.token(t, map[string]any{"scope": "mcp:tools"})
	defer func() {
		out := logs.String()
		for _, tok := range []string{dataToken, opsToken, noScope, expired, noTeam} {
			sig := tok[strings.LastIndexByte(tok, '.')+1:]
			if strings.Contains(out, tok) || strings.Contains(out, sig) {
				t.Errorf("the logs hold a token:\n%s", out)
			}
		}
		if !strings.Contains(out, "expired") {
			t.Errorf("the logs do not say why the expired token failed:\n%s", out)
		}
	}()

	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			names := func(token string) []string {
				cs, err := connectAs(t, url, era, token)
				if err != nil {
					t.Fatal(err)
				}
				res, err := cs.ListTools(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				var out []string
				for _, tool := range res.Tools {
					out = append(out, tool.Name)
				}
				return out
			}
			data, ops := names(dataToken), names(opsToken)
			if !slices.Contains(data, "alpha__echo") || slices.ContainsFunc(data, func(n string) bool { return !strings.HasPrefix(n, "alpha__") }) {
				t.Errorf("data sees %v", data)
			}
			if !slices.Contains(ops, "beta__echo") || slices.ContainsFunc(ops, func(n string) bool { return !strings.HasPrefix(n, "beta__") }) {
				t.Errorf("ops sees %v", ops)
			}
			cs, err := connectAs(t, url, era, dataToken)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := callText(ctx, cs, "alpha__echo", map[string]any{"text": "hi"}); err != nil || got != "hi" {
				t.Errorf("data calling alpha__echo: %q, %v", got, err)
			}
			// A host that is refused cannot connect.
			for _, token := range []string{"", expired, noScope, noTeam} {
				if _, err := connectAs(t, url, era, token); err == nil {
					t.Errorf("a host connected with a refused token")
				}
			}
		})
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	modern := func(token string) map[string]string {
		h := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
		if token != "" {
			h["Authorization"] = "Bearer " + token
		}
		return h
	}
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, tc := range []struct {
		name, token, body string
		status            int
		challenge         string
	}{
		{"modern, no token", "", list, 401, `Bearer resource_metadata="` + metadataURL + `", scope="mcp:tools"`},
		{"legacy, no token", "", initialize, 401, `Bearer resource_metadata="` + metadataURL + `", scope="mcp:tools"`},
		{"expired", expired, list, 401, `Bearer error="invalid_token", resource_metadata="` + metadataURL + `", scope="mcp:tools"`},
		{"not a JWT", "opaque-0123456789", initialize, 401, `Bearer error="invalid_token", resource_metadata="` + metadataURL + `", scope="mcp:tools"`},
		{"no scope, modern", noScope, list, 403, `Bearer error="insufficient_scope", scope="mcp:tools", resource_metadata="` + metadataURL + `"`},
		{"no scope, legacy", noScope, initialize, 403, `Bearer error="insufficient_scope", scope="mcp:tools", resource_metadata="` + metadataURL + `"`},
		{"no team", noTeam, list, 403, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := modern(tc.token)
			if tc.body == initialize {
				h = map[string]string{}
				if tc.token != "" {
					h["Authorization"] = "Bearer " + tc.token
				}
			}
			status, header, m := postRaw(ctx, t, url, h, tc.body)
			if status != tc.status || m.Error == nil {
				t.Errorf("status %d, error %v; want %d and an error", status, m.Error, tc.status)
			}
			if got := header.Get("WWW-Authenticate"); got != tc.challenge {
				t.Errorf("WWW-Authenticate = %q, want %q", got, tc.challenge)
			}
		})
	}

	// The metadata, at both forms, without a token.
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var md struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
			ScopesSupported      []string `json:"scopes_supported"`
			BearerMethods        []string `json:"bearer_methods_supported"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(b, &md) != nil {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
		if md.Resource != "https://gw.example.com/mcp" || !slices.Equal(md.AuthorizationServers, []string{is.srv.URL}) ||
			!slices.Equal(md.ScopesSupported, []string{"mcp:tools"}) || !slices.Equal(md.BearerMethods, []string{"header"}) {
			t.Errorf("%s: %+v", path, md)
		}
	}
}

// TestOAuthIssuerDownAtStart: an issuer that cannot be reached does not
// keep the gateway from starting or serving; its tokens fail (401) until
// it can be reached.
func TestOAuthIssuerDownAtStart(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	cfg := config.Default()
	cfg.Upstreams = []config.Upstream{stdioUpstream("alpha", "echo", nil)}
	cfg.Auth.Mode = config.AuthOAuth
	cfg.Auth.OAuth.Resource = "https://gw.example.com/mcp"
	cfg.Auth.OAuth.Issuers = []config.Issuer{{Issuer: deadURL}}
	url, _ := startGateway(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok := (&testIssuer{srv: &httptest.Server{URL: deadURL}, key: mustRSA(t)}).token(t, nil)
	status, header, _ := postRaw(ctx, t, url, map[string]string{"Authorization": "Bearer " + tok}, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if status != 401 || !strings.Contains(header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("token of an unreachable issuer: %d %q, want 401 invalid_token", status, header.Get("WWW-Authenticate"))
	}
}

func mustRSA(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestOAuthReload: a reload that leaves auth and the teams' claims as they
// are keeps the OAuth sessions; one that changes them ends them (their
// hosts initialize again with their tokens, under the new rules).
func TestOAuthReload(t *testing.T) {
	is := newTestIssuer(t)
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	write := func(allow string, required []string) {
		t.Helper()
		command, args, env := mcptest.StdioCommand("echo")
		raw, _ := json.Marshal(map[string]any{
			"upstreams": []any{map[string]any{"name": "alpha", "command": command, "args": args, "env": env}},
			"auth": map[string]any{"mode": "oauth", "oauth": map[string]any{
				"resource": "https://gw.example.com/mcp", "issuers": []any{map[string]any{"issuer": is.srv.URL}}, "required_scopes": required,
			}},
			"teams": []any{map[string]any{"name": "data", "claims": map[string]any{"groups": []string{"data-eng"}}, "allow": []string{allow}}},
		})
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("alpha__*", []string{})
	var logs mcptest.LogBuffer
	current, err := loadConfig(path, &logs)
	if err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	log := telemetry.NewLogger(&logs, nil)
	url, g, _ := startGatewayWith(t, current, recorders{log: log})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	token := is.token(t, map[string]any{"groups": "data-eng", "scope": "mcp:tools"})
	auth := map[string]string{"Authorization": "Bearer " + token}
	status, header, _ := postRaw(ctx, t, url, auth, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := header.Get("Mcp-Session-Id")
	if status != 200 || sid == "" {
		t.Fatalf("initialize: %d, session %q", status, sid)
	}
	inSession := map[string]string{"Authorization": "Bearer " + token, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
	list := func() int {
		status, _, _ := postRaw(ctx, t, url, inSession, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		return status
	}
	if s := list(); s != 200 {
		t.Fatalf("tools/list in the session: %d", s)
	}

	// The team's allow changes, not its claims: the session stays.
	write("alpha__e*", []string{})
	current = g.reload(path, current, log)
	if s := list(); s != 200 {
		t.Fatalf("tools/list after a reload that kept auth: %d, want 200\n%s", s, logs.String())
	}
	// auth.oauth changes: the session ends.
	write("alpha__e*", []string{"mcp:tools"})
	g.reload(path, current, log)
	if s := list(); s != 404 {
		t.Fatalf("tools/list after a reload that changed auth: %d, want 404 (session ended)", s)
	}
}
