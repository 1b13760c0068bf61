package config

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeUpstreamAuth(t *testing.T) {
	t.Parallel()
	src := `
auth: {mode: oauth, oauth: {resource: "https://gw.example.com/mcp", issuers: [{issuer: "https://idp.example.com"}]}}
upstreams:
  - name: gh
    url: https://gh.example.com/mcp
    auth:
      headers:
        Authorization: {env: GITHUB_TOKEN, prefix: "Bearer "}
        X-Api-Key: {file: secrets/key}
  - name: crm
    url: https://crm.example.com/mcp
    auth:
      oauth:
        token_url: https://idp.example.com/oauth/token
        client_id: gateway
        client_secret: {file: /run/secrets/crm}
        scopes: [crm.read]
        resource: https://crm.example.com/mcp
  - name: docs
    url: https://docs.example.com/mcp
    auth:
      token_exchange:
        token_url: https://idp.example.com/oauth/token
        client_id: gateway
        client_secret: {env: TX_SECRET}
        audience: docs
`
	c, err := Parse([]byte(src), "yaml", "/etc/gw", mapEnv(map[string]string{"GITHUB_TOKEN": "ghp-1", "TX_SECRET": "tx-2"}))
	if err != nil {
		t.Fatal(err)
	}
	want := []UpstreamAuth{
		{Headers: map[string]Secret{
			"Authorization": {Env: "GITHUB_TOKEN", Prefix: "Bearer ", Value: "ghp-1"},
			"X-Api-Key":     {File: "/etc/gw/secrets/key"},
		}},
		{OAuth: &OAuthClient{TokenURL: "https://idp.example.com/oauth/token", ClientID: "gateway",
			ClientSecret: Secret{File: "/run/secrets/crm"}, Scopes: []string{"crm.read"}, Resource: "https://crm.example.com/mcp"}},
		{TokenExchange: &OAuthClient{TokenURL: "https://idp.example.com/oauth/token", ClientID: "gateway",
			ClientSecret: Secret{Env: "TX_SECRET", Value: "tx-2"}, Audience: "docs"}},
	}
	var got []UpstreamAuth
	for _, u := range c.Upstreams {
		got = append(got, u.Auth)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("auth mismatch (-want +got):\n%s", diff)
	}
	if c.Upstreams[1].PerClient() || !c.Upstreams[2].PerClient() {
		t.Errorf("PerClient: crm %v, docs %v; want false, true (token_exchange implies per-client)", c.Upstreams[1].PerClient(), c.Upstreams[2].PerClient())
	}
}

// TestUpstreamAuthProblems: each mistake is reported at its key path,
// and no problem quotes a secret.
func TestUpstreamAuthProblems(t *testing.T) {
	t.Parallel()
	const secret = "the-secret-value-4d2"
	env := mapEnv(map[string]string{"SECRET": secret, "BAD": "a\r\nX-Evil: 1"})
	const oauthOn = `auth: {mode: oauth, oauth: {resource: "https://gw.example.com/mcp", issuers: [{issuer: "https://idp.example.com"}]}}` + "\n"
	const cc = `{token_url: "https://idp.example.com/token", client_id: gw, client_secret: {env: SECRET}}`
	tests := []struct {
		name, src, path, msg string
	}{
		{"inline secret", `upstreams: [{name: a, url: "http://x/mcp", auth: {headers: {X-Key: "inline"}}}]`, "upstreams[0].auth.headers.X-Key", "must be {env: VAR} or {file: PATH}"},
		{"env and file", `upstreams: [{name: a, url: "http://x/mcp", auth: {headers: {X-Key: {env: SECRET, file: /k}}}}]`, "upstreams[0].auth.headers.X-Key", "has both env and file"},
		{"neither", `upstreams: [{name: a, url: "http://x/mcp", auth: {headers: {X-Key: {prefix: "Bearer "}}}}]`, "upstreams[0].auth.headers.X-Key", "needs env"},
		{"unset variable", `upstreams: [{name: a, url: "http://x/mcp", auth: {headers: {X-Key: {env: NOPE}}}}]`, "upstreams[0].auth.headers.X-Key.env", "NOPE is not set"},
		{"value with CRLF", `upstreams: [{name: a, url: "http://x/mcp", auth: {headers: {X-Key: {env: BAD}}}}]`, "upstreams[0].auth.headers.X-Key.env", "may not contain CR, LF or NUL"},
		{"bad header name", `upstreams: [{name: a, url: "http://x/mcp", auth: {headers: {"X Key": {env: SECRET}}}}]`, `upstreams[0].auth.headers["X Key"]`, "not a valid HTTP header name"},
		{"header twice", `upstreams: [{name: a, url: "http://x/mcp", headers: {x-key: v}, auth: {headers: {X-Key: {env: SECRET}}}}]`, "upstreams[0].headers.x-key", "also set in auth.headers"},
		{"stdio", `upstreams: [{name: a, command: x, auth: {headers: {X-Key: {env: SECRET}}}}]`, "upstreams[0].auth", "only applies to url (HTTP) upstreams"},
		{"oauth and exchange", oauthOn + `upstreams: [{name: a, url: "http://x/mcp", auth: {oauth: ` + cc + `, token_exchange: ` + cc + `}}]`, "upstreams[0].auth", "has both oauth and token_exchange"},
		{"oauth and Authorization", `upstreams: [{name: a, url: "http://x/mcp", auth: {oauth: ` + cc + `, headers: {authorization: {env: SECRET}}}}]`, "upstreams[0].auth.headers.authorization", "may not be set with oauth"},
		{"oauth and plain Authorization", `upstreams: [{name: a, url: "http://x/mcp", headers: {Authorization: x}, auth: {oauth: ` + cc + `}}]`, "upstreams[0].headers.Authorization", "may not be set with auth.oauth"},
		{"no token_url", `upstreams: [{name: a, url: "http://x/mcp", auth: {oauth: {client_id: gw, client_secret: {env: SECRET}}}}]`, "upstreams[0].auth.oauth.token_url", "is required"},
		{"bad token_url", `upstreams: [{name: a, url: "http://x/mcp", auth: {oauth: {token_url: /token, client_id: gw, client_secret: {env: SECRET}}}}]`, "upstreams[0].auth.oauth.token_url", "absolute"},
		{"no client_id", `upstreams: [{name: a, url: "http://x/mcp", auth: {oauth: {token_url: "http://i/t", client_secret: {env: SECRET}}}}]`, "upstreams[0].auth.oauth.client_id", "is required"},
		{"no client_secret", `upstreams: [{name: a, url: "http://x/mcp", auth: {oauth: {token_url: "http://i/t", client_id: gw}}}]`, "upstreams[0].auth.oauth.client_secret", "is required"},
		{"inline client_secret", `upstreams: [{name: a, url: "http://x/mcp", auth: {oauth: {token_url: "http://i/t", client_id: gw, client_secret: s3cret}}}]`, "upstreams[0].auth.oauth.client_secret", "must be {env: VAR} or {file: PATH}"},
		{"prefix on client_secret", `upstreams: [{name: a, url: "http://x/mcp", auth: {oauth: {token_url: "http://i/t", client_id: gw, client_secret: {env: SECRET, prefix: x}}}}]`, "upstreams[0].auth.oauth.client_secret.prefix", "unknown key"},
		{"relative resource", `upstreams: [{name: a, url: "http://x/mcp", auth: {oauth: {token_url: "http://i/t", client_id: gw, client_secret: {env: SECRET}, resource: /mcp}}}]`, "upstreams[0].auth.oauth.resource", "absolute URL"},
		{"bad scope", `upstreams: [{name: a, url: "http://x/mcp", auth: {oauth: {token_url: "http://i/t", client_id: gw, client_secret: {env: SECRET}, scopes: ["a b"]}}}]`, "upstreams[0].auth.oauth.scopes[0]", "must be a scope"},
		{"exchange without auth.mode oauth", `upstreams: [{name: a, url: "http://x/mcp", auth: {token_exchange: {token_url: "http://i/t", client_id: gw, client_secret: {env: SECRET}, audience: a}}}]`, "upstreams[0].auth.token_exchange", "needs auth.mode oauth"},
		{"exchange without a target", oauthOn + `upstreams: [{name: a, url: "http://x/mcp", auth: {token_exchange: ` + cc + `}}]`, "upstreams[0].auth.token_exchange", "needs resource or audience"},
		{"auth in mcpServers", `mcpServers: {a: {url: "http://x/mcp", auth: {}}}`, "mcpServers.a.auth", "declare the server under upstreams"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.src), "yaml", "", env)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want a *ValidationError", err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error quotes the secret: %v", err)
			}
			for _, p := range ve.Problems {
				if p.Path == tt.path && strings.Contains(p.Message, tt.msg) {
					return
				}
			}
			t.Errorf("no problem at %s containing %q; got:\n%v", tt.path, tt.msg, err)
		})
	}
}

// TestSecretFormatsWithoutValue: a Secret, alone or inside the config
// structs that hold it, formats (fmt, slog's text and JSON handlers)
// without the value it read from the environment, so that logging a
// piece of the config never writes a secret.
func TestSecretFormatsWithoutValue(t *testing.T) {
	const value = "s3cret-value-71c"
	s := Secret{Env: "API_KEY", Value: value, Prefix: "Bearer "}
	u := UpstreamAuth{Headers: map[string]Secret{"X-Api-Key": s}, OAuth: &OAuthClient{ClientID: "gw", ClientSecret: s}}
	var b strings.Builder
	fmt.Fprintf(&b, "%v %+v %#v %s %v %+v %#v", s, s, s, s, u, u, *u.OAuth)
	slog.New(slog.NewTextHandler(&b, nil)).Info("x", "secret", s, "auth", u)
	slog.New(slog.NewJSONHandler(&b, nil)).Info("x", "secret", s, "auth", u)
	if strings.Contains(b.String(), value) {
		t.Errorf("a formatted Secret shows its value:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "API_KEY") {
		t.Errorf("a formatted Secret does not name its variable:\n%s", b.String())
	}
}
