package main

import (
	"context"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
)

// TestOAuthWithARealAuthorizationServer: the gateway as the resource
// server of a real OpenID Provider (interop/idp, zitadel/oidc). A host
// with a valid token sees its team's view in both eras; expired,
// wrong-audience, wrong-issuer, alg none and tampered tokens get 401
// naming the resource metadata; a token without the needed scope gets
// 403 insufficient_scope; after the issuer rotates its signing key, its
// new tokens pass (and, the old key dropped, so do no old ones).
func TestOAuthWithARealAuthorizationServer(t *testing.T) {
	const resource = "https://gw.example.com/mcp"
	const metadata = `resource_metadata="https://gw.example.com/.well-known/oauth-protected-resource/mcp"`
	idp := startIDP(t, idpOptions{Audience: resource, DropOldKeys: true})
	stranger := startIDP(t, idpOptions{Audience: resource})

	cfg := config.Default()
	cfg.Upstreams = []config.Upstream{stdioUpstream("alpha", "echo", nil), stdioUpstream("beta", "echo-legacy", nil)}
	cfg.Auth.Mode = config.AuthOAuth
	cfg.Auth.OAuth.Resource = resource
	cfg.Auth.OAuth.Issuers = []config.Issuer{{Issuer: idp.Issuer}}
	cfg.Auth.OAuth.RequiredScopes = []string{"mcp:tools"}
	cfg.Auth.OAuth.Unmatched = config.UnmatchedDeny
	cfg.Teams = []config.Team{
		{Name: "data", Claims: map[string][]string{"groups": {"data-eng"}}, Allow: []string{"alpha__*"}},
		{Name: "ops", Claims: map[string][]string{"groups": {"ops"}}, Allow: []string{"beta__*"}},
	}
	url, _ := startGateway(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	user := func(sub, group string, scopes ...string) idpUser {
		return idpUser{Sub: sub, Groups: []string{group}, Scopes: scopes, Resources: []string{resource}}
	}
	sees := func(t *testing.T, era, token, prefix string) {
		t.Helper()
		cs, err := connectAs(t, url, era, token)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		names := toolNames(ctx, t, cs, "tools/list")
		if len(names) == 0 || slices.ContainsFunc(names, func(n string) bool { return !strings.HasPrefix(n, prefix) }) {
			t.Errorf("%s sees %v, want only %s tools", era, names, prefix)
		}
	}
	alice := idp.UserToken(user("alice", "data-eng", "mcp:tools"))
	bob := idp.UserToken(user("bob", "ops", "mcp:tools"))
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			sees(t, era, alice, "alpha__")
			sees(t, era, bob, "beta__")
		})
	}

	refused := func(what, token string, status int, want ...string) {
		t.Helper()
		code, header, _ := postRaw(ctx, t, url, map[string]string{"Authorization": "Bearer " + token},
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}`)
		challenge := header.Get("WWW-Authenticate")
		if code != status || !strings.Contains(challenge, metadata) {
			t.Errorf("%s: %d %q, want %d naming the resource metadata", what, code, challenge, status)
		}
		for _, w := range want {
			if !strings.Contains(challenge, w) {
				t.Errorf("%s: challenge %q lacks %s", what, challenge, w)
			}
		}
	}
	expiredUser := user("alice", "data-eng", "mcp:tools")
	expiredUser.TTL = -time.Minute
	elsewhere := user("alice", "data-eng", "mcp:tools")
	elsewhere.Resources = []string{"https://other.example.com/api"}
	parts := strings.Split(alice, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	forged := strings.Replace(string(payload), `"data-eng"`, `"ops"`, 1)
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
	refused("expired", idp.UserToken(expiredUser), http.StatusUnauthorized, `error="invalid_token"`)
	refused("wrong audience", idp.UserToken(elsewhere), http.StatusUnauthorized, `error="invalid_token"`)
	refused("wrong issuer", stranger.UserToken(user("alice", "data-eng", "mcp:tools")), http.StatusUnauthorized, `error="invalid_token"`)
	refused("alg none", none, http.StatusUnauthorized, `error="invalid_token"`)
	refused("tampered", parts[0]+"."+base64.RawURLEncoding.EncodeToString([]byte(forged))+"."+parts[2], http.StatusUnauthorized, `error="invalid_token"`)
	refused("no token", "", http.StatusUnauthorized)
	refused("without the scope", idp.UserToken(user("alice", "data-eng", "openid")), http.StatusForbidden, `error="insufficient_scope"`, `scope="mcp:tools"`)

	// The issuer rotates its signing key and drops the old one: its new
	// tokens pass at once, the old key's no longer do.
	idp.Rotate(false)
	for _, era := range eras {
		sees(t, era, idp.UserToken(user("carol", "data-eng", "mcp:tools")), "alpha__")
	}
	refused("a token of the dropped key", alice, http.StatusUnauthorized, `error="invalid_token"`)
}
