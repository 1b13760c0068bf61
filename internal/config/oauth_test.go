package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeOAuth(t *testing.T) {
	t.Parallel()
	src := `
auth:
  mode: oauth
  oauth:
    resource: https://gw.example.com/mcp
    issuers:
      - issuer: https://idp.example.com/realms/main
      - issuer: https://other.example.com
        jwks_url: https://other.example.com/keys
        audiences: [gateway]
        algorithms: [ES256]
        introspection:
          url: https://other.example.com/introspect
          client_id: gateway
          client_secret: {env: GW_SECRET}
      - issuer: https://third.example.com
        introspection: {client_id: gw, client_secret: {file: secrets/gw}}
    scopes_supported: [mcp:tools, mcp:admin]
    required_scopes: [mcp:tools]
    clock_skew: 30s
    unmatched: deny
teams:
  - name: data
    claims: {groups: [data-eng, analysts], "realm_access.roles": admin, "https://example.com/Roles": [x]}
    claims_match: all
    scopes: [mcp:data]
  - name: keys
    api_keys: ["a-long-enough-key-123"]
`
	c, err := Parse([]byte(src), "yaml", "/etc/gw", mapEnv(map[string]string{"GW_SECRET": "s3cret"}))
	if err != nil {
		t.Fatal(err)
	}
	want := Auth{Mode: AuthOAuth, OAuth: OAuth{
		Resource: "https://gw.example.com/mcp",
		Issuers: []Issuer{
			{Issuer: "https://idp.example.com/realms/main"},
			{Issuer: "https://other.example.com", JWKSURL: "https://other.example.com/keys", Audiences: []string{"gateway"}, Algorithms: []string{"ES256"},
				Introspection: &Introspection{URL: "https://other.example.com/introspect", ClientID: "gateway", ClientSecret: Secret{Env: "GW_SECRET", Value: "s3cret"}}},
			{Issuer: "https://third.example.com", Introspection: &Introspection{ClientID: "gw", ClientSecret: Secret{File: "/etc/gw/secrets/gw"}}},
		},
		ScopesSupported: []string{"mcp:tools", "mcp:admin"},
		RequiredScopes:  []string{"mcp:tools"},
		ClockSkew:       30 * time.Second,
		Unmatched:       UnmatchedDeny,
	}}
	if diff := cmp.Diff(want, c.Auth); diff != "" {
		t.Errorf("auth mismatch (-want +got):\n%s", diff)
	}
	wantTeams := []Team{
		{Name: "data", Claims: map[string][]string{"groups": {"data-eng", "analysts"}, "realm_access.roles": {"admin"}, "https://example.com/Roles": {"x"}}, ClaimsMatch: ClaimsAll, Scopes: []string{"mcp:data"}},
		{Name: "keys", APIKeys: []string{"a-long-enough-key-123"}},
	}
	if diff := cmp.Diff(wantTeams, c.Teams); diff != "" {
		t.Errorf("teams mismatch (-want +got):\n%s", diff)
	}
	// The defaults, when auth.oauth leaves them out.
	c, err = Parse([]byte("auth: {mode: oauth, oauth: {resource: \"https://gw.example.com/mcp\", issuers: [{issuer: \"https://idp.example.com\"}]}}\n"), "yaml", "", mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Auth.OAuth.ClockSkew != DefaultClockSkew || c.Auth.OAuth.Unmatched != UnmatchedDefault {
		t.Errorf("defaults: clock_skew %v, unmatched %q; want %v, default", c.Auth.OAuth.ClockSkew, c.Auth.OAuth.Unmatched, DefaultClockSkew)
	}
}

// TestDecodeClientSecret: a client secret is named, never written: a
// plain string is refused, and a variable that is not set is a problem
// that does not quote anything.
func TestDecodeClientSecret(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, secret, want string }{
		{"plain string", `"s3cret"`, "auth.oauth.issuers[0].introspection.client_secret: must be {env: VAR} or {file: PATH}: a secret is not written in gateway.yaml"},
		{"unset variable", `{env: NOPE}`, "auth.oauth.issuers[0].introspection.client_secret.env: the environment variable NOPE is not set"},
		{"unknown key", `{value: x}`, "auth.oauth.issuers[0].introspection.client_secret.value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "auth: {mode: oauth, oauth: {resource: \"https://gw.example.com/mcp\", issuers: [{issuer: \"https://idp.example.com\", introspection: {client_id: gw, client_secret: " + tc.secret + "}}]}}\n"
			_, err := Parse([]byte(src), "yaml", "", mapEnv(nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse = %v, want a problem %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the problem quotes the secret: %v", err)
			}
		})
	}
}

func TestDecodeTLS(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte("tls: {cert_file: certs/gw.pem, key_file: /etc/keys/gw.key}\n"), "yaml", "/etc/gw", mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&TLS{CertFile: "/etc/gw/certs/gw.pem", KeyFile: "/etc/keys/gw.key"}, c.TLS); diff != "" {
		t.Errorf("tls mismatch (-want +got):\n%s", diff)
	}
	if _, err := Parse([]byte("tls: {cert_file: a.pem}\n"), "yaml", "", mapEnv(nil)); err == nil || !strings.Contains(err.Error(), "tls.key_file") {
		t.Errorf("tls without key_file: %v", err)
	}
	c, err = Parse([]byte("upstreams: [{name: crm, url: \"https://10.0.0.5/mcp\", tls: {ca_file: ca.pem, cert_file: /c.pem, key_file: k.pem, server_name: crm.internal}}]\n"), "yaml", "/etc/gw", mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := &UpstreamTLS{CAFile: "/etc/gw/ca.pem", CertFile: "/c.pem", KeyFile: "/etc/gw/k.pem", ServerName: "crm.internal"}
	if diff := cmp.Diff(want, c.Upstreams[0].TLS); diff != "" {
		t.Errorf("upstream tls mismatch (-want +got):\n%s", diff)
	}
}
