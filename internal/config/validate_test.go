package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// validConfig returns a small Config that passes Validate.
func validConfig() *Config {
	c := Default()
	stdio := DefaultUpstream()
	stdio.Name, stdio.Command, stdio.Transport = "local", "srv", TransportStdio
	remote := DefaultUpstream()
	remote.Name, remote.URL, remote.Transport = "remote", "https://example.com/mcp", TransportStreamableHTTP
	c.Upstreams = []Upstream{stdio, remote}
	return c
}

func TestDefaultIsValid(t *testing.T) {
	t.Parallel()
	if err := Default().Validate(); err != nil {
		t.Errorf("Default().Validate() = %v", err)
	}
	if err := validConfig().Validate(); err != nil {
		t.Errorf("validConfig().Validate() = %v", err)
	}
	want := &Config{
		Listen: "127.0.0.1:8080", Endpoint: "/mcp", Separator: "__", Prefix: PrefixAlways,
		MaxBodyBytes: 4 << 20, Auth: Auth{Mode: AuthNone, OAuth: OAuth{ClockSkew: time.Minute, Unmatched: UnmatchedDefault}},
		Telemetry: Telemetry{LogLevel: "info", Metrics: true, Audit: Audit{Enabled: false, Path: "", Arguments: AuditOmit}},
		Tasks:     Tasks{After: 0, TTL: time.Hour, MaxPerIdentity: 100},
		State:     State{Store: StoreMemory},
		Shutdown:  Shutdown{Delay: 0, Timeout: 10 * time.Second},
		Policy:    Policy{Mode: ModeFull},
	}
	if diff := cmp.Diff(want, Default()); diff != "" {
		t.Errorf("Default() mismatch (-want +got):\n%s", diff)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	digest := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	tests := []struct {
		name   string
		modify func(c *Config)
		want   []Problem
	}{
		{"valid", func(c *Config) {}, nil},
		{"listen without port", func(c *Config) { c.Listen = "localhost" },
			[]Problem{{Path: "listen", Message: "must be host:port with a numeric port, such as 127.0.0.1:8080 or :8080"}}},
		{"listen named port", func(c *Config) { c.Listen = "localhost:http" },
			[]Problem{{Path: "listen", Message: "must be host:port with a numeric port, such as 127.0.0.1:8080 or :8080"}}},
		{"listen all interfaces", func(c *Config) { c.Listen = ":8080" }, nil},
		{"tls", func(c *Config) { c.TLS = &TLS{CertFile: "/c.pem", KeyFile: "/k.pem"} }, nil},
		{"upstream tls", func(c *Config) {
			c.Upstreams[1].TLS = &UpstreamTLS{CAFile: "/ca.pem", CertFile: "/c.pem", KeyFile: "/k.pem", ServerName: "mcp.internal"}
		}, nil},
		{"upstream tls misplaced", func(c *Config) {
			c.Upstreams[0].TLS = &UpstreamTLS{CAFile: "/ca.pem"}
			c.Upstreams[1].URL = "http://example.com/mcp"
			c.Upstreams[1].TLS = &UpstreamTLS{CertFile: "/c.pem"}
		}, []Problem{
			{Path: "upstreams[0].tls", Message: "only applies to url (HTTP) upstreams"},
			{Path: "upstreams[1].tls", Message: "only applies to https:// upstreams"},
			{Path: "upstreams[1].tls", Message: "cert_file and key_file go together: the client certificate and its key"},
		}},
		{"tls without files", func(c *Config) { c.TLS = &TLS{} }, []Problem{
			{Path: "tls.cert_file", Message: "is required under tls: the PEM certificate chain of the listener"},
			{Path: "tls.key_file", Message: "is required under tls: the PEM private key of the certificate"},
		}},
		{"listen ipv6", func(c *Config) { c.Listen = "[::1]:8080" }, nil},
		{"endpoint reserved", func(c *Config) { c.Endpoint = "/metrics" },
			[]Problem{{Path: "endpoint", Message: "may not be /metrics, which the gateway serves itself"}}},
		{"endpoint with query", func(c *Config) { c.Endpoint = "/mcp?x=1" },
			[]Problem{{Path: "endpoint", Message: "must be a plain URL path, without query, fragment or spaces"}}},
		{"separator too long", func(c *Config) { c.Separator = "_____" },
			[]Problem{{Path: "separator", Message: "must be 1 to 4 characters from A-Z, a-z, 0-9, _ and -"}}},
		{"separator empty", func(c *Config) { c.Separator = "" },
			[]Problem{{Path: "separator", Message: "must be 1 to 4 characters from A-Z, a-z, 0-9, _ and -"}}},
		{"prefix empty", func(c *Config) { c.Prefix = "" },
			[]Problem{{Path: "prefix", Message: "must be always or on_conflict"}}},
		{"origins", func(c *Config) {
			c.AllowedOrigins = []string{"https://a.example", "http://b.example:8080", "https://c.example/", "c.example", "https://u@d.example", "file://x", "https://e.example?q"}
		}, []Problem{
			{Path: "allowed_origins[2]", Message: "must be an origin, scheme://host or scheme://host:port, such as https://app.example.com"},
			{Path: "allowed_origins[3]", Message: "must be an origin, scheme://host or scheme://host:port, such as https://app.example.com"},
			{Path: "allowed_origins[4]", Message: "must be an origin, scheme://host or scheme://host:port, such as https://app.example.com"},
			{Path: "allowed_origins[5]", Message: "must be an origin, scheme://host or scheme://host:port, such as https://app.example.com"},
			{Path: "allowed_origins[6]", Message: "must be an origin, scheme://host or scheme://host:port, such as https://app.example.com"},
		}},
		{"hosts", func(c *Config) {
			c.AllowedHosts = []string{"gw.example.com", "10.0.0.5:8080", "::1", "[fd00::1]:8080", "GW-2.Example.COM", "my_host",
				"", "https://gw.example.com", "gw.example.com/mcp", "*.example.com", "gw.example.com:http", "gw.example.com:99999", "a b", "[::1"}
		}, []Problem{
			{Path: "allowed_hosts[6]", Message: "must be a host name or IP, optionally with :port, such as gw.example.com or 10.0.0.5:8080"},
			{Path: "allowed_hosts[7]", Message: "must be a host name or IP, optionally with :port, such as gw.example.com or 10.0.0.5:8080"},
			{Path: "allowed_hosts[8]", Message: "must be a host name or IP, optionally with :port, such as gw.example.com or 10.0.0.5:8080"},
			{Path: "allowed_hosts[9]", Message: "must be a host name or IP, optionally with :port, such as gw.example.com or 10.0.0.5:8080"},
			{Path: "allowed_hosts[10]", Message: "must be a host name or IP, optionally with :port, such as gw.example.com or 10.0.0.5:8080"},
			{Path: "allowed_hosts[11]", Message: "must be a host name or IP, optionally with :port, such as gw.example.com or 10.0.0.5:8080"},
			{Path: "allowed_hosts[12]", Message: "must be a host name or IP, optionally with :port, such as gw.example.com or 10.0.0.5:8080"},
			{Path: "allowed_hosts[13]", Message: "must be a host name or IP, optionally with :port, such as gw.example.com or 10.0.0.5:8080"},
		}},
		{"max body negative", func(c *Config) { c.MaxBodyBytes = -1 },
			[]Problem{{Path: "max_body_bytes", Message: "must be greater than 0"}}},
		{"max body over 1 GiB", func(c *Config) { c.MaxBodyBytes = 1<<30 + 1 },
			[]Problem{{Path: "max_body_bytes", Message: "must be at most 1073741824 (1 GiB)"}}},
		{"upstream zero value", func(c *Config) { c.Upstreams = []Upstream{{}} }, []Problem{
			{Path: "upstreams[0].name", Message: "is required: 1 to 32 characters from A-Z, a-z, 0-9, _ and -"},
			{Path: "upstreams[0]", Message: "needs a command (stdio) or a url (HTTP)"},
			{Path: "upstreams[0].timeout", Message: "must be greater than 0"},
			{Path: "upstreams[0].session", Message: "must be shared or per-client"},
			{Path: "upstreams[0].breaker.failures", Message: "must be greater than 0"},
			{Path: "upstreams[0].breaker.cooldown", Message: "must be greater than 0"},
		}},
		{"resilience limits", func(c *Config) {
			u := &c.Upstreams[0]
			u.Timeout, u.MaxTimeout = time.Minute, time.Second
			u.MaxInFlight, u.MaxQueue = -1, -2
			u.MaxMessageBytes = -1
			u.Restart = Restart{Delay: time.Minute, MaxDelay: time.Second, CrashWindow: -time.Second}
		}, []Problem{
			{Path: "upstreams[0].max_timeout", Message: "must be at least timeout (1m0s): progress extends a call's timeout up to it"},
			{Path: "upstreams[0].max_in_flight", Message: "must be 0 (the default, 256) or more"},
			{Path: "upstreams[0].max_queue", Message: "must be 0 (the default, 1024) or more"},
			{Path: "upstreams[0].max_message_bytes", Message: "must be 0 (the default, 16777216) or more"},
			{Path: "upstreams[0].restart.crash_window", Message: "must be 0 (the default) or more"},
			{Path: "upstreams[0].restart.max_delay", Message: "must be at least delay (1m0s)"},
		}},
		{"max_message_bytes too large", func(c *Config) { c.Upstreams[0].MaxMessageBytes = MaxMaxMessageBytes + 1 },
			[]Problem{{Path: "upstreams[0].max_message_bytes", Message: "must be at most 1073741824 (1 GiB)"}}},
		{"transport missing in code", func(c *Config) { c.Upstreams[0].Transport = "" },
			[]Problem{{Path: "upstreams[0].transport", Message: "is required: stdio, streamable-http or sse"}}},
		{"duplicate names differ in case", func(c *Config) { c.Upstreams[1].Name = "LOCAL" },
			[]Problem{{Path: "upstreams[1].name", Message: `upstream name "LOCAL" already used by upstreams[0] (names must differ in more than letter case)`}}},
		{"mcpServers paths", func(c *Config) {
			c.Upstreams[1].Source = "mcpServers.remote"
			c.Upstreams[1].Transport = TransportStdio
			c.Upstreams[1].Name = "local"
		}, []Problem{
			{Path: "mcpServers.remote.type", Message: "stdio needs a command, not a url"},
			{Path: "mcpServers.remote", Message: `upstream name "local" already used by upstreams[0] (names must differ in more than letter case)`},
		}},
		{"env and headers", func(c *Config) {
			c.Upstreams[0].Env = map[string]string{"OK": "1", "A=B": "x", "NUL": "a\x00b"}
			c.Upstreams[1].Headers = map[string]string{"X-Ok": "v", "X-Bad:": "v", "X-Split": "a\nb"}
		}, []Problem{
			{Path: `upstreams[0].env["A=B"]`, Message: "variable names may not be empty or contain = or NUL"},
			{Path: "upstreams[0].env.NUL", Message: "value may not contain NUL"},
			{Path: `upstreams[1].headers["X-Bad:"]`, Message: "is not a valid HTTP header name"},
			{Path: "upstreams[1].headers.X-Split", Message: "value may not contain CR, LF or NUL"},
		}},
		{"args and cwd on a url upstream", func(c *Config) {
			c.Upstreams[1].Args = []string{"x"}
			c.Upstreams[1].Cwd = "/tmp"
		}, []Problem{
			{Path: "upstreams[1].args", Message: "only applies to command (stdio) upstreams"},
			{Path: "upstreams[1].cwd", Message: "only applies to command (stdio) upstreams"},
		}},
		{"team keys", func(c *Config) {
			c.Auth.Mode = AuthAPIKey
			c.Teams = []Team{
				{Name: "a", APIKeys: []string{"literal-key-000000001", digest("other-key-0000000002")}},
				{Name: "b", APIKeys: []string{digest("literal-key-000000001"), "other-key-0000000002", "sha256:zz"}},
			}
		}, []Problem{
			{Path: "teams[1].api_keys[0]", Message: "same API key as teams[0].api_keys[0] (a key selects one team)"},
			{Path: "teams[1].api_keys[1]", Message: "same API key as teams[0].api_keys[1] (a key selects one team)"},
			{Path: "teams[1].api_keys[2]", Message: `a "sha256:" key must be followed by exactly 64 hex digits`},
		}},
		{"team names", func(c *Config) {
			c.Teams = []Team{{Name: "a"}, {Name: "a"}, {Name: "b c"}, {}}
		}, []Problem{
			{Path: "teams[1].name", Message: `team name "a" already used by teams[0]`},
			{Path: "teams[2].name", Message: "must be 1 to 64 characters from A-Z, a-z, 0-9, _ and -"},
			{Path: "teams[3].name", Message: "is required: 1 to 64 characters from A-Z, a-z, 0-9, _ and -"},
		}},
		{"modes", func(c *Config) {
			c.Policy.Mode = ModeSearch
			c.Teams = []Team{{Name: "a", Mode: ModeFull}, {Name: "b", Mode: ModeSearch}, {Name: "c"}}
		}, nil},
		{"bad modes", func(c *Config) {
			c.Policy.Mode = "smart"
			c.Teams = []Team{{Name: "a", Mode: "Search"}, {Name: "b"}}
		}, []Problem{
			{Path: "policy.mode", Message: "must be full, search or auto"},
			{Path: "teams[0].mode", Message: "must be full, search or auto (or left out, to take policy.mode)"},
		}},
		{"auto modes", func(c *Config) {
			c.Policy.Mode = ModeAuto
			c.Teams = []Team{{Name: "a", Mode: ModeAuto}, {Name: "b", Mode: ModeAuto, MaxTokens: 2000}}
		}, []Problem{
			{Path: "policy.mode", Message: "auto needs policy.max_tokens: the budget past which the view switches to search mode"},
			{Path: "teams[0].mode", Message: "auto needs max_tokens (the team's or policy.max_tokens): the budget past which the view switches to search mode"},
		}},
		{"profiles", func(c *Config) {
			c.Profiles = []Profile{{Name: "coding", Allow: []string{"fs__*"}, Priority: []string{"fs__read*"}, Mode: ModeSearch}, {Name: "r-2", MaxTools: 3}}
		}, nil},
		{"bad profiles", func(c *Config) {
			c.Profiles = []Profile{{Name: "a"}, {Name: "a"}, {Name: "Coding"}, {Name: "a/b"}, {}, {Name: "b", Allow: []string{""}, Deny: []string{"[x"}, Priority: []string{""}, MaxTools: -1, MaxTokens: -1},
				{Name: "c", Mode: "Search"}, {Name: "d", Mode: ModeAuto}}
		}, []Problem{
			{Path: "profiles[1].name", Message: `profile name "a" already used by profiles[0]`},
			{Path: "profiles[2].name", Message: "must be 1 to 64 characters from a-z, 0-9 and - (it is the last segment of the profile's path)"},
			{Path: "profiles[3].name", Message: "must be 1 to 64 characters from a-z, 0-9 and - (it is the last segment of the profile's path)"},
			{Path: "profiles[4].name", Message: "is required: 1 to 64 characters from a-z, 0-9 and -"},
			{Path: "profiles[5].allow[0]", Message: "is empty"},
			{Path: "profiles[5].deny[0]", Message: "is not a valid glob: use * and ? as wildcards and [a-z] for classes, with every [ closed"},
			{Path: "profiles[5].priority[0]", Message: "is empty"},
			{Path: "profiles[5].max_tools", Message: "must be 0 (no limit) or more"},
			{Path: "profiles[5].max_tokens", Message: "must be 0 (no limit) or more"},
			{Path: "profiles[6].mode", Message: "must be full, search or auto (or left out, to take the caller's team's mode, else policy.mode)"},
			{Path: "profiles[7].mode", Message: "auto needs max_tokens (the profile's or policy.max_tokens): the budget past which the view switches to search mode"},
		}},
		{"profile on a reserved path", func(c *Config) {
			c.Endpoint = "/"
			c.Profiles = []Profile{{Name: "healthz"}, {Name: "mcp"}}
		}, []Problem{{Path: "profiles[0].name", Message: "makes the path /healthz, which the gateway serves itself"}}},
		{"api_key auth without keys", func(c *Config) {
			c.Auth.Mode = AuthAPIKey
			c.Teams = []Team{{Name: "a"}}
		}, []Problem{{Path: "auth.mode", Message: "api_key needs at least one team with api_keys"}}},
		{"jwt is refused, naming oauth", func(c *Config) { c.Auth.Mode = AuthJWT },
			[]Problem{{Path: "auth.mode", Message: "jwt is now called oauth: write mode: oauth and configure auth.oauth (resource, issuers)"}}},
		{"oauth needs resource and issuers", func(c *Config) { c.Auth.Mode = AuthOAuth }, []Problem{
			{Path: "auth.oauth.resource", Message: "is required under auth.mode oauth: the gateway's canonical URL as hosts reach it, such as https://gw.example.com/mcp"},
			{Path: "auth.oauth.issuers", Message: "must list at least one issuer under auth.mode oauth"},
		}},
		{"oauth valid, api keys alongside", func(c *Config) {
			setOAuth(c)
			c.Teams = []Team{
				{Name: "a", APIKeys: []string{"literal-key-000000001"}},
				{Name: "b", Claims: map[string][]string{"groups": {"x"}, "realm_access.roles": {"y"}}, ClaimsMatch: ClaimsAll, Scopes: []string{"mcp:b"}},
			}
		}, nil},
		{"oauth settings", func(c *Config) {
			setOAuth(c)
			c.Auth.OAuth.Resource = "https://gw.example.com/mcp#frag"
			c.Auth.OAuth.Issuers = append(c.Auth.OAuth.Issuers,
				Issuer{Issuer: "https://idp.example.com"},
				Issuer{Issuer: "idp.example.com", JWKSURL: "file:///keys", Audiences: []string{""}, Algorithms: []string{"none", "HS256", "RS1", "ES256"}},
				Issuer{})
			c.Auth.OAuth.RequiredScopes = []string{"a b", ""}
			c.Auth.OAuth.ScopesSupported = []string{`q"`}
			c.Auth.OAuth.ClockSkew = 6 * time.Minute
			c.Auth.OAuth.Unmatched = "maybe"
		}, []Problem{
			{Path: "auth.oauth.resource", Message: "may not have a fragment (RFC 8707)"},
			{Path: "auth.oauth.issuers[1].issuer", Message: "already listed as auth.oauth.issuers[0]"},
			{Path: "auth.oauth.issuers[2].issuer", Message: "must be an absolute https:// (or http://) URL without query or fragment, such as https://idp.example.com"},
			{Path: "auth.oauth.issuers[2].jwks_url", Message: "must be an absolute https:// (or http://) URL"},
			{Path: "auth.oauth.issuers[2].audiences[0]", Message: "is empty"},
			{Path: "auth.oauth.issuers[2].algorithms[0]", Message: "none is never accepted: it means an unsigned token"},
			{Path: "auth.oauth.issuers[2].algorithms[1]", Message: "HMAC algorithms are never accepted: an HMAC checked with a public key is forgeable by anyone who has it"},
			{Path: "auth.oauth.issuers[2].algorithms[2]", Message: "must be one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA"},
			{Path: "auth.oauth.issuers[3].issuer", Message: "is required: the issuer identifier, exactly as tokens carry it in iss"},
			{Path: "auth.oauth.scopes_supported[0]", Message: "must be a scope: printable ASCII characters, no spaces, quotes or backslashes"},
			{Path: "auth.oauth.required_scopes[0]", Message: "must be a scope: printable ASCII characters, no spaces, quotes or backslashes"},
			{Path: "auth.oauth.required_scopes[1]", Message: "must be a scope: printable ASCII characters, no spaces, quotes or backslashes"},
			{Path: "auth.oauth.clock_skew", Message: "must be at most 5m0s"},
			{Path: "auth.oauth.unmatched", Message: "must be default or deny"},
		}},
		{"oauth introspection", func(c *Config) {
			setOAuth(c)
			c.Auth.OAuth.Issuers = append(c.Auth.OAuth.Issuers,
				Issuer{Issuer: "https://a.example.com", Introspection: &Introspection{ClientID: "gw", ClientSecret: Secret{File: "/run/secret"}}},
				Issuer{Issuer: "https://b.example.com", Introspection: &Introspection{URL: "ftp://b/introspect"}},
				Issuer{Issuer: "https://c.example.com", Introspection: &Introspection{ClientID: "gw", ClientSecret: Secret{Env: "S", File: "/s"}}})
		}, []Problem{
			{Path: "auth.oauth.issuers[2].introspection.url", Message: "must be an absolute https:// (or http://) URL, or empty to use the issuer's discovery document"},
			{Path: "auth.oauth.issuers[2].introspection.client_id", Message: "is required: the gateway authenticates to the introspection endpoint as a client of the issuer"},
			{Path: "auth.oauth.issuers[2].introspection.client_secret", Message: "is required: {env: VAR} or {file: path}"},
			{Path: "auth.oauth.issuers[3].introspection.client_secret", Message: "must set one of env and file, not both"},
		}},
		{"oauth resource not a URL", func(c *Config) {
			setOAuth(c)
			c.Auth.OAuth.Resource = "gw.example.com/mcp"
			c.Auth.OAuth.ClockSkew = -time.Second
		},
			[]Problem{
				{Path: "auth.oauth.resource", Message: "must be an absolute https:// (or http://) URL, such as https://gw.example.com/mcp"},
				{Path: "auth.oauth.clock_skew", Message: "must be 0s or more"},
			}},
		{"team claims", func(c *Config) {
			setOAuth(c)
			c.Teams = []Team{{Name: "a", Claims: map[string][]string{"": {"x"}, "a..b": {"x"}, "groups": nil, "roles": {""}}, ClaimsMatch: "most", Scopes: []string{"a b"}}}
		}, []Problem{
			{Path: `teams[0].claims[""]`, Message: "must name a claim, or a path of claim names joined by dots"},
			{Path: `teams[0].claims["a..b"]`, Message: "must name a claim, or a path of claim names joined by dots"},
			{Path: "teams[0].claims.groups", Message: "must list at least one value that matches"},
			{Path: "teams[0].claims.roles[0]", Message: "is empty"},
			{Path: "teams[0].claims_match", Message: "must be any or all"},
			{Path: "teams[0].scopes[0]", Message: "must be a scope: printable ASCII characters, no spaces, quotes or backslashes"},
		}},
		{"log level", func(c *Config) { c.Telemetry.LogLevel = "INFO" },
			[]Problem{{Path: "telemetry.log_level", Message: "must be debug, info, warn or error"}}},
		{"otlp endpoint", func(c *Config) { c.Telemetry.OTLPEndpoint = "https://otel.example.com:4318" }, nil},
		{"otlp endpoint without scheme", func(c *Config) { c.Telemetry.OTLPEndpoint = "otel-collector:4318" },
			[]Problem{{Path: "telemetry.otlp_endpoint", Message: "must be an absolute http:// or https:// URL, such as http://otel-collector:4318"}}},
		{"otlp endpoint grpc", func(c *Config) { c.Telemetry.OTLPEndpoint = "grpc://otel:4317" },
			[]Problem{{Path: "telemetry.otlp_endpoint", Message: "must be an absolute http:// or https:// URL, such as http://otel-collector:4318"}}},
		{"audit to stderr, hashed", func(c *Config) { c.Telemetry.Audit = Audit{Enabled: true, Arguments: AuditHash} }, nil},
		{"audit to a file", func(c *Config) {
			c.Telemetry.Audit = Audit{Enabled: true, Path: "/var/log/audit.jsonl", Arguments: AuditOmit}
		}, nil},
		{"audit arguments", func(c *Config) { c.Telemetry.Audit = Audit{Enabled: true, Arguments: "full"} },
			[]Problem{{Path: "telemetry.audit.arguments", Message: "must be omit or hash"}}},
		{"audit arguments zero value", func(c *Config) { c.Telemetry.Audit = Audit{} },
			[]Problem{{Path: "telemetry.audit.arguments", Message: "must be omit or hash"}}},
		{"audit path with NUL", func(c *Config) { c.Telemetry.Audit.Path = "a\x00b" },
			[]Problem{{Path: "telemetry.audit.path", Message: "may not contain NUL"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := validConfig()
			tt.modify(c)
			err := c.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if diff := cmp.Diff(tt.want, problemsOf(t, err)); diff != "" {
				t.Errorf("problems mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		modify func(c *Config)
		want   []Problem
	}{
		{"none", func(c *Config) {}, nil},
		{"no upstreams", func(c *Config) { c.Upstreams = nil },
			[]Problem{{Path: "upstreams", Message: "no upstreams configured: the catalog is empty"}}},
		{"sse", func(c *Config) {
			c.Upstreams[1].Transport = TransportSSE
			c.Upstreams[1].Source = "mcpServers.remote"
		}, []Problem{{Path: "mcpServers.remote.type", Message: "the HTTP+SSE transport (MCP 2024-11-05) is deprecated: use streamable-http if the server supports it"}}},
		{"open listen without auth", func(c *Config) { c.Listen = "0.0.0.0:8080" },
			[]Problem{{Path: "listen", Message: "not a loopback address and auth.mode is none: anyone who can reach this address can use every upstream"}}},
		{"empty host listens everywhere", func(c *Config) { c.Listen = ":8080" },
			[]Problem{{Path: "listen", Message: "not a loopback address and auth.mode is none: anyone who can reach this address can use every upstream"}}},
		{"open listen with auth", func(c *Config) { c.Listen = "0.0.0.0:8080"; setOAuth(c) }, nil},
		{"oauth set while mode is not oauth", func(c *Config) { setOAuth(c); c.Auth.Mode = AuthNone },
			[]Problem{{Path: "auth.oauth", Message: "set, but auth.mode is not oauth: no token is checked against it"}}},
		{"oauth team without claims or keys, claims without oauth", func(c *Config) {
			setOAuth(c)
			c.Teams = []Team{{Name: "a"}, {Name: "b", Claims: map[string][]string{"groups": {"b"}}}}
		}, []Problem{{Path: "teams[0].claims", Message: "none, and no api_keys: no caller can select this team"}}},
		{"claims without oauth", func(c *Config) {
			c.Auth.Mode = AuthAPIKey
			c.Teams = []Team{{Name: "b", APIKeys: []string{"a-long-enough-key-123"}, Scopes: []string{"s"}}}
		}, []Problem{{Path: "teams[0].claims", Message: "claims and scopes have no effect unless auth.mode is oauth"}}},
		{"localhost and ipv6 loopback", func(c *Config) { c.Listen = "localhost:1" }, nil},
		{"name holds the separator", func(c *Config) { c.Upstreams[0].Name = "my__srv" },
			[]Problem{{Path: "upstreams[0].name", Message: "contains the separator, which makes exposed names ambiguous to read"}}},
		{"teams without auth", func(c *Config) { c.Teams = []Team{{Name: "a"}} },
			[]Problem{{Path: "teams", Message: "teams have no effect while auth.mode is none: every caller gets the policy view"}}},
		{"audit path while audit is off", func(c *Config) { c.Telemetry.Audit.Path = "audit.jsonl" },
			[]Problem{{Path: "telemetry.audit.path", Message: "set, but telemetry.audit.enabled is false: nothing is audited"}}},
		{"audit on", func(c *Config) { c.Telemetry.Audit = Audit{Enabled: true, Path: "audit.jsonl", Arguments: AuditHash} }, nil},
		{"expose_found without search mode", func(c *Config) { c.Search.ExposeFound = true },
			[]Problem{{Path: "search.expose_found", Message: "true, but no view is in search or auto mode (policy.mode, teams[].mode): nothing is found to expose"}}},
		{"expose_found with a search team", func(c *Config) {
			c.Search.ExposeFound = true
			c.Auth.Mode = AuthAPIKey
			c.Teams = []Team{{Name: "a", APIKeys: []string{"a-long-enough-key-123"}, Mode: ModeAuto}}
		}, nil},
		{"team expose_found on a full team", func(c *Config) {
			on := true
			c.Policy.Mode = ModeSearch
			c.Auth.Mode = AuthAPIKey
			c.Teams = []Team{{Name: "a", APIKeys: []string{"a-long-enough-key-123"}, Mode: ModeFull, Search: TeamSearch{ExposeFound: &on}}}
		}, []Problem{{Path: "teams[0].search.expose_found", Message: "true, but the team's mode is full: only a view in search or auto mode finds tools to expose"}}},
		{"team without keys, short key", func(c *Config) {
			c.Auth.Mode = AuthAPIKey
			c.Teams = []Team{{Name: "a"}, {Name: "b", APIKeys: []string{"short", "a-long-enough-key-123"}}}
		}, []Problem{
			{Path: "teams[0].api_keys", Message: "none: no caller can select this team under auth.mode api_key"},
			{Path: "teams[1].api_keys[0]", Message: "shorter than 16 characters: easy to guess"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := validConfig()
			tt.modify(c)
			if diff := cmp.Diff(tt.want, c.Warnings()); diff != "" {
				t.Errorf("Warnings() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidationError(t *testing.T) {
	t.Parallel()
	err := error(&ValidationError{Problems: []Problem{
		{Message: "invalid YAML: line 1: oops"},
		{Path: "upstreams[0].timeout", Line: 3, Message: "must be greater than 0"},
	}})
	want := "invalid YAML: line 1: oops\nupstreams[0].timeout: must be greater than 0"
	if got := err.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("errors.Is(err, ErrInvalid) = false")
	}
	if errors.Is(errors.New("other"), ErrInvalid) {
		t.Errorf("an unrelated error matches ErrInvalid")
	}
}

func TestSlogLevel(t *testing.T) {
	t.Parallel()
	for level, want := range map[string]slog.Level{
		"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError, "": slog.LevelInfo,
	} {
		if got := (Telemetry{LogLevel: level}).SlogLevel(); got != want {
			t.Errorf("SlogLevel(%q) = %v, want %v", level, got, want)
		}
	}
}

func TestDefaultUpstream(t *testing.T) {
	t.Parallel()
	want := Upstream{Timeout: 60 * time.Second, Session: SessionShared, Breaker: Breaker{Failures: 5, Cooldown: 30 * time.Second}}
	if diff := cmp.Diff(want, DefaultUpstream()); diff != "" {
		t.Errorf("DefaultUpstream() mismatch (-want +got):\n%s", diff)
	}
}

// setOAuth turns on a valid auth.mode oauth.
func setOAuth(c *Config) {
	c.Auth.Mode = AuthOAuth
	c.Auth.OAuth.Resource = "https://gw.example.com/mcp"
	c.Auth.OAuth.Issuers = []Issuer{{Issuer: "https://idp.example.com"}}
}
