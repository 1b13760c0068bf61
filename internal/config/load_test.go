package config

import (
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/invalid")

// testEnv is the environment every fixture is loaded with. Values are
// secrets as far as the tests are concerned: no problem message may contain
// one.
var testEnv = map[string]string{
	"EVERYTHING_KEY": "everything-secret-0001",
	"SEARCH_TOKEN":   "search-secret-0002",
	"SEARCH_KEY":     "search-key-secret-0003",
	"GITHUB_TOKEN":   "ghp-secret-0004",
	"DOCS_TOKEN":     "docs-secret-0005",
	"DATA_TEAM_KEY":  "data-team-secret-key-0006",
	"OPS_TEAM_KEY":   "ops-team-secret-key-0007",
	"BRAVE_API_KEY":  "brave-secret-0008",
	"NOTION_TOKEN":   "notion-secret-0009",
	"SECRET_VALUE":   "hunter2-SECRET-0010",
	"LISTEN_ADDR":    "not-an-address-SECRET-0011",
	"SEARCH_URL":     "not a url SECRET-0012",
	"TEAM_KEY":       "shared-team-key-SECRET-0013",
	"NEWLINE_VALUE":  "a\r\nX-Evil: SECRET-0014",
	"EMPTY":          "",
}

// mapEnv returns a LookupEnv over m.
func mapEnv(m map[string]string) *LoadOptions {
	return &LoadOptions{LookupEnv: func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}}
}

// problemsOf returns the problems of a *ValidationError, failing the test
// for any other error.
func problemsOf(t *testing.T, err error) []Problem {
	t.Helper()
	if err == nil {
		t.Fatal("got no error, want a *ValidationError")
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %T (%v) is not a *ValidationError", err, err)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("errors.Is(err, ErrInvalid) = false")
	}
	return ve.Problems
}

func testdataDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLoadFull(t *testing.T) {
	t.Parallel()
	dir := testdataDir(t)
	got, err := Load(filepath.Join("testdata", "full.yaml"), mapEnv(testEnv))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := &Config{
		Listen:         "0.0.0.0:9090",
		Endpoint:       "/gateway/mcp",
		Separator:      "-_",
		Prefix:         PrefixOnConflict,
		AllowedOrigins: []string{"https://app.example.com", "http://localhost:3000"},
		AllowedHosts:   []string{"gw.example.com", "10.0.0.5:9090"},
		MaxBodyBytes:   1 << 20,
		Upstreams: []Upstream{
			{
				Name:      "Everything",
				Command:   "npx",
				Args:      []string{"-y", "@modelcontextprotocol/server-everything", "${NOT_EXPANDED}"},
				Env:       map[string]string{"LOG_LEVEL": "debug", "API_KEY": "everything-secret-0001", "camelCase": "1"},
				Cwd:       filepath.Join(dir, "work", "everything"),
				Transport: TransportStdio,
				Timeout:   90 * time.Second,
				Session:   SessionShared,
				Required:  true,
				MaxTools:  7,
				Tools: ToolFilter{
					Allow: []string{"echo", "get_*", "Add?"},
					Deny:  []string{"*_Admin", "[xy]*"},
					Rename: []Rename{
						{From: "printEnv", To: "print_env"},
						{From: "longRunningOperation", To: "long-op"},
					},
				},
				Breaker:         Breaker{Failures: 3, Cooldown: time.Minute},
				MaxTimeout:      10 * time.Minute,
				MaxInFlight:     16,
				MaxQueue:        100,
				MaxMessageBytes: 32 << 20,
				Restart:         Restart{Delay: time.Second, MaxDelay: time.Minute, CrashLimit: 3, CrashWindow: 5 * time.Minute},
				Source:          "upstreams[0]",
			},
			{
				Name:      "search",
				URL:       "https://search.example.com/mcp",
				Transport: TransportStreamableHTTP,
				Headers:   map[string]string{"Authorization": "Bearer search-secret-0002", "X-Api-Key": "search-key-secret-0003"},
				Timeout:   45 * time.Second,
				Session:   SessionPerClient,
				MaxTools:  20,
				Breaker:   Breaker{Failures: 5, Cooldown: 30 * time.Second},
				Source:    "upstreams[1]",
			},
			{
				Name:      "legacy_sse",
				URL:       "http://127.0.0.1:9001/sse",
				Transport: TransportSSE,
				Timeout:   5 * time.Second,
				Session:   SessionShared,
				Breaker:   Breaker{Failures: 5, Cooldown: 30 * time.Second},
				Source:    "upstreams[2]",
			},
			{
				Name:              "GitHub",
				Command:           "/usr/local/bin/github-mcp",
				Args:              []string{"stdio"},
				Env:               map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp-secret-0004"},
				Cwd:               "/srv/github",
				Transport:         TransportStdio,
				TransportInferred: true,
				Timeout:           DefaultTimeout,
				Session:           SessionShared,
				Breaker:           Breaker{Failures: 5, Cooldown: 30 * time.Second},
				Source:            "mcpServers.GitHub",
			},
			{
				Name:      "Remote-Docs",
				URL:       "https://docs.example.com/mcp",
				Transport: TransportStreamableHTTP,
				Headers:   map[string]string{"Authorization": "Bearer docs-secret-0005"},
				Timeout:   DefaultTimeout,
				Session:   SessionShared,
				Breaker:   Breaker{Failures: 5, Cooldown: 30 * time.Second},
				Source:    "mcpServers.Remote-Docs",
			},
		},
		Policy: Policy{MaxTools: 128, DescriptionMaxChars: 1024, Mode: ModeFull},
		Teams: []Team{
			{
				Name:     "data",
				APIKeys:  []string{"data-team-secret-key-0006", "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
				Allow:    []string{"Everything-_*", "search-_*"},
				Deny:     []string{"*-_print_env"},
				MaxTools: 20,
			},
			{Name: "ops", APIKeys: []string{"ops-team-secret-key-0007"}, Mode: ModeSearch},
		},
		Auth: Auth{Mode: AuthAPIKey, OAuth: OAuth{ClockSkew: DefaultClockSkew, Unmatched: UnmatchedDefault}},
		Telemetry: Telemetry{
			LogLevel: "debug", Metrics: false, OTLPEndpoint: "http://otel-collector:4318",
			Audit: Audit{Enabled: true, Path: filepath.Join(dir, "logs", "audit.jsonl"), Arguments: AuditHash},
		},
		Tasks: Tasks{TTL: DefaultTaskTTL, MaxPerIdentity: DefaultMaxTasks},
		State: State{Store: StoreMemory}, Shutdown: Shutdown{Timeout: DefaultShutdownTimeout},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load(full.yaml) mismatch (-want +got):\n%s", diff)
	}

	wantWarnings := []Problem{
		{Path: "upstreams[2].transport", Message: "the HTTP+SSE transport (MCP 2024-11-05) is deprecated: use streamable-http if the server supports it"},
	}
	if diff := cmp.Diff(wantWarnings, got.Warnings()); diff != "" {
		t.Errorf("Warnings() mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadClaudeDesktop(t *testing.T) {
	t.Parallel()
	got, err := Load(filepath.Join("testdata", "claude_desktop_config.json"), mapEnv(testEnv))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := Default()
	def := DefaultUpstream()
	stdio := func(name string, args []string, env map[string]string) Upstream {
		u := def
		u.Name, u.Command, u.Args, u.Env = name, "npx", args, env
		u.Transport, u.TransportInferred = TransportStdio, true
		u.Source = "mcpServers." + name
		return u
	}
	linear, notion := def, def
	linear.Name, linear.URL, linear.Transport, linear.Source = "Linear", "https://mcp.linear.app/sse", TransportSSE, "mcpServers.Linear"
	notion.Name, notion.URL, notion.Transport, notion.Source = "notion", "https://mcp.notion.com/mcp", TransportStreamableHTTP, "mcpServers.notion"
	notion.Headers = map[string]string{"Authorization": "Bearer notion-secret-0009", "Notion-Version": "2022-06-28"}
	memory := stdio("memory", []string{"-y", "@modelcontextprotocol/server-memory"}, nil)
	memory.TransportInferred = false // "type": "stdio" was written
	want.Upstreams = []Upstream{
		stdio("filesystem", []string{"-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop", "/Users/me/Downloads"}, nil),
		stdio("GitHub", []string{"-y", "@modelcontextprotocol/server-github"}, map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_exampleexampleexample"}),
		stdio("brave-search", []string{"-y", "@modelcontextprotocol/server-brave-search"}, map[string]string{"BRAVE_API_KEY": "brave-secret-0008", "Mixed_Case": "x"}),
		linear,
		notion,
		memory,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load(claude_desktop_config.json) mismatch (-want +got):\n%s", diff)
	}
}

// TestCasePreserved proves that names keep their case, in both formats:
// a loader that lowercases map keys (as viper does) is a bug.
func TestCasePreserved(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		format string
		src    string
	}{
		{"yaml", "yaml", `
upstreams:
  - name: MyServer
    command: x
    env: {API_KEY: a, camelKey: b}
    tools:
      allow: [GetThing]
      rename: [{from: GetThing, to: Get_Thing}]
  - name: Web
    url: https://example.com/mcp
    headers: {X-Api-Key: k, authorization: b}
mcpServers:
  GitHub: {command: gh, env: {GH_TOKEN: t}}
`},
		{"json", "json", `{
  "upstreams": [
    {"name": "MyServer", "command": "x", "env": {"API_KEY": "a", "camelKey": "b"},
     "tools": {"allow": ["GetThing"], "rename": [{"from": "GetThing", "to": "Get_Thing"}]}},
    {"name": "Web", "url": "https://example.com/mcp", "headers": {"X-Api-Key": "k", "authorization": "b"}}
  ],
  "mcpServers": {"GitHub": {"command": "gh", "env": {"GH_TOKEN": "t"}}}
}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse([]byte(tt.src), tt.format, "", mapEnv(nil))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			type names struct {
				Upstreams []string
				Env       map[string]string
				Headers   map[string]string
				Allow     []string
				Rename    []Rename
				GitHubEnv map[string]string
			}
			got := names{
				Env:       c.Upstreams[0].Env,
				Headers:   c.Upstreams[1].Headers,
				Allow:     c.Upstreams[0].Tools.Allow,
				Rename:    c.Upstreams[0].Tools.Rename,
				GitHubEnv: c.Upstreams[2].Env,
			}
			for _, u := range c.Upstreams {
				got.Upstreams = append(got.Upstreams, u.Name)
			}
			want := names{
				Upstreams: []string{"MyServer", "Web", "GitHub"},
				Env:       map[string]string{"API_KEY": "a", "camelKey": "b"},
				Headers:   map[string]string{"X-Api-Key": "k", "authorization": "b"},
				Allow:     []string{"GetThing"},
				Rename:    []Rename{{From: "GetThing", To: "Get_Thing"}},
				GitHubEnv: map[string]string{"GH_TOKEN": "t"},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("names mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestUpstreamOrder checks the priority order: the upstreams list first,
// then mcpServers in file order, whatever the order of the two keys.
func TestUpstreamOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		format string
		src    string
		want   []string
	}{
		{"mcpServers first in the file", "yaml", `
mcpServers:
  zeta: {command: z}
  Alpha: {command: a}
  mid: {command: m}
upstreams:
  - {name: second, command: s}
  - {name: first, command: f}
`, []string{"second", "first", "zeta", "Alpha", "mid"}},
		{"json keys not sorted", "json", `{"mcpServers": {"b": {"command": "x"}, "a": {"command": "x"}, "C": {"command": "x"}}}`,
			[]string{"b", "a", "C"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse([]byte(tt.src), tt.format, "", mapEnv(nil))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var got []string
			for _, u := range c.Upstreams {
				got = append(got, u.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("order mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestInvalidFixtures loads each file in testdata/invalid and compares the
// problems with its .golden file. Run with -update to rewrite the goldens.
func TestInvalidFixtures(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "invalid", "*"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, file := range files {
		if strings.HasSuffix(file, ".golden") {
			continue
		}
		n++
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			c, err := Load(file, mapEnv(testEnv))
			if c != nil {
				t.Errorf("Load returned a Config along with the error")
			}
			ps := problemsOf(t, err)
			var b strings.Builder
			for _, p := range ps {
				fmt.Fprintf(&b, "line %d: %s\n", p.Line, p)
				assertNoSecret(t, p)
			}
			got := b.String()
			golden := file + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, rerr := os.ReadFile(golden)
			if rerr != nil {
				t.Fatalf("%v (run go test -update to create it)", rerr)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("problems mismatch (-want +got):\n%s", diff)
			}
			// Error() is the same list, one "<path>: <message>" per line.
			var lines []string
			for _, p := range ps {
				lines = append(lines, p.String())
			}
			if diff := cmp.Diff(strings.Join(lines, "\n"), err.Error()); diff != "" {
				t.Errorf("Error() mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if n < 10 {
		t.Errorf("found %d invalid fixtures, want at least 10", n)
	}
}

// assertNoSecret fails when p mentions the value of any test variable.
func assertNoSecret(t *testing.T, p Problem) {
	t.Helper()
	for name, v := range testEnv {
		if len(v) >= 4 && (strings.Contains(p.Message, v) || strings.Contains(p.Path, v)) {
			t.Errorf("problem %q leaks the value of %s", p, name)
		}
	}
	for _, frag := range []string{"SECRET", "secret"} {
		if strings.Contains(p.Message, frag) || strings.Contains(p.Path, frag) {
			t.Errorf("problem %q contains %q, part of a variable's value", p, frag)
		}
	}
}

func TestExpansionInParse(t *testing.T) {
	t.Parallel()
	src := `
upstreams:
  - name: a
    command: "${CMD}"
    args: ["${A}-${B}", "$${A}", "$$A", "${A}$${B}"]
    env: {"${A}": "${B}"}
`
	env := map[string]string{"CMD": "/bin/srv", "A": "x", "B": "y"}
	c, err := Parse([]byte(src), "yaml", "", mapEnv(env))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	u := c.Upstreams[0]
	if diff := cmp.Diff([]string{"x-y", "${A}", "$$A", "x${B}"}, u.Args); diff != "" {
		t.Errorf("args mismatch (-want +got):\n%s", diff)
	}
	if u.Command != "/bin/srv" {
		t.Errorf("command = %q, want /bin/srv", u.Command)
	}
	// Keys are never expanded.
	if diff := cmp.Diff(map[string]string{"${A}": "y"}, u.Env); diff != "" {
		t.Errorf("env mismatch (-want +got):\n%s", diff)
	}
}

func TestMissingVariable(t *testing.T) {
	t.Parallel()
	src := "upstreams:\n  - name: a\n    url: https://example.com/mcp\n    headers: {Authorization: \"Bearer ${TOKEN}\"}\n"
	_, err := Parse([]byte(src), "yaml", "", mapEnv(map[string]string{"OTHER": "hunter2"}))
	want := []Problem{{Path: "upstreams[0].headers.Authorization", Line: 4, Message: "environment variable TOKEN is not set"}}
	if diff := cmp.Diff(want, problemsOf(t, err)); diff != "" {
		t.Errorf("problems mismatch (-want +got):\n%s", diff)
	}
	// A variable set to "" is set: it expands to nothing.
	c, err := Parse([]byte(src), "yaml", "", mapEnv(map[string]string{"TOKEN": ""}))
	if err != nil {
		t.Fatalf("Parse with TOKEN empty: %v", err)
	}
	if got := c.Upstreams[0].Headers["Authorization"]; got != "Bearer " {
		t.Errorf("Authorization = %q, want %q", got, "Bearer ")
	}
}

func TestEnvOverrides(t *testing.T) {
	t.Parallel()
	file := `
listen: 127.0.0.1:1111
endpoint: /from-file
policy: {max_tools: 3}
telemetry: {log_level: "${MISSING}"}
auth: {oauth: {resource: "https://gw.example.com/mcp", issuers: [{issuer: "https://idp.example.com"}]}}
upstreams:
  - {name: a, command: x}
`
	tests := []struct {
		env   string
		value string
		check func(c *Config) any
		want  any
	}{
		{"MCP_GATEWAY_LISTEN", ":9999", func(c *Config) any { return c.Listen }, ":9999"},
		{"MCP_GATEWAY_ENDPOINT", "/env", func(c *Config) any { return c.Endpoint }, "/env"},
		{"MCP_GATEWAY_SEPARATOR", "-", func(c *Config) any { return c.Separator }, "-"},
		{"MCP_GATEWAY_PREFIX", "on_conflict", func(c *Config) any { return c.Prefix }, PrefixOnConflict},
		{"MCP_GATEWAY_MAX_BODY_BYTES", "1024", func(c *Config) any { return c.MaxBodyBytes }, int64(1024)},
		{"MCP_GATEWAY_POLICY_MAX_TOOLS", "50", func(c *Config) any { return c.Policy.MaxTools }, 50},
		{"MCP_GATEWAY_POLICY_DESCRIPTION_MAX_CHARS", "200", func(c *Config) any { return c.Policy.DescriptionMaxChars }, 200},
		{"MCP_GATEWAY_AUTH_MODE", "oauth", func(c *Config) any { return c.Auth.Mode }, AuthOAuth},
		{"MCP_GATEWAY_TELEMETRY_METRICS", "false", func(c *Config) any { return c.Telemetry.Metrics }, false},
		{"MCP_GATEWAY_TELEMETRY_OTLP_ENDPOINT", "http://otel:4318", func(c *Config) any { return c.Telemetry.OTLPEndpoint }, "http://otel:4318"},
		{"MCP_GATEWAY_TELEMETRY_AUDIT_ENABLED", "true", func(c *Config) any { return c.Telemetry.Audit.Enabled }, true},
		{"MCP_GATEWAY_TELEMETRY_AUDIT_PATH", "/var/log/audit.jsonl", func(c *Config) any { return c.Telemetry.Audit.Path }, "/var/log/audit.jsonl"},
		{"MCP_GATEWAY_TELEMETRY_AUDIT_ARGUMENTS", "hash", func(c *Config) any { return c.Telemetry.Audit.Arguments }, AuditHash},
		// Overriding a value whose ${VAR} is missing makes the file valid.
		{"MCP_GATEWAY_TELEMETRY_LOG_LEVEL", "warn", func(c *Config) any { return c.Telemetry.LogLevel }, "warn"},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.env] = true
		t.Run(tt.env, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{tt.env: tt.value}
			if tt.env != "MCP_GATEWAY_TELEMETRY_LOG_LEVEL" {
				env["MCP_GATEWAY_TELEMETRY_LOG_LEVEL"] = "info"
			}
			c, err := Parse([]byte(file), "yaml", "", mapEnv(env))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tt.want, tt.check(c)); diff != "" {
				t.Errorf("overridden value mismatch (-want +got):\n%s", diff)
			}
		})
	}
	// Every overridable key has a row above, and the rows are exactly the
	// documented variables.
	for _, p := range overrides {
		if !covered[envName(p)] {
			t.Errorf("override %s (%s) has no test", p, envName(p))
		}
	}
	if len(covered) != len(overrides) {
		t.Errorf("%d test rows for %d overrides", len(covered), len(overrides))
	}
}

func TestEnvOverrideRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		file  string
		env   map[string]string
		check func(t *testing.T, c *Config, err error)
	}{
		{
			name: "bad value names the variable, not the value",
			file: "upstreams: [{name: a, command: x}]\n",
			env:  map[string]string{"MCP_GATEWAY_POLICY_MAX_TOOLS": "lots-SECRET", "MCP_GATEWAY_ENDPOINT": "no-slash-SECRET"},
			check: func(t *testing.T, c *Config, err error) {
				want := []Problem{
					{Path: "policy.max_tools", Message: "must be a whole number written in decimal digits (set by MCP_GATEWAY_POLICY_MAX_TOOLS)"},
					{Path: "endpoint", Message: `must be a URL path starting with "/", such as /mcp (set by MCP_GATEWAY_ENDPOINT)`},
				}
				if diff := cmp.Diff(want, problemsOf(t, err)); diff != "" {
					t.Errorf("problems mismatch (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "taken literally, no expansion",
			file: "",
			env:  map[string]string{"MCP_GATEWAY_TELEMETRY_OTLP_ENDPOINT": "http://otel:4318/${PREFIX}"},
			check: func(t *testing.T, c *Config, err error) {
				if err != nil {
					t.Fatal(err)
				}
				if got, want := c.Telemetry.OTLPEndpoint, "http://otel:4318/${PREFIX}"; got != want {
					t.Errorf("otlp_endpoint = %q, want %q", got, want)
				}
			},
		},
		{
			name: "empty value is ignored",
			file: "listen: 127.0.0.1:1234\n",
			env:  map[string]string{"MCP_GATEWAY_LISTEN": ""},
			check: func(t *testing.T, c *Config, err error) {
				if err != nil {
					t.Fatal(err)
				}
				if c.Listen != "127.0.0.1:1234" {
					t.Errorf("listen = %q, want the file's value", c.Listen)
				}
			},
		},
		{
			name: "lists are not overridable",
			file: "upstreams: [{name: a, command: x}]\n",
			env: map[string]string{
				"MCP_GATEWAY_UPSTREAMS":       "[]",
				"MCP_GATEWAY_UPSTREAMS_0_URL": "http://x",
				"MCP_GATEWAY_TEAMS":           "x",
				"MCP_GATEWAY_ALLOWED_ORIGINS": "https://evil.example.com",
			},
			check: func(t *testing.T, c *Config, err error) {
				if err != nil {
					t.Fatal(err)
				}
				if len(c.Upstreams) != 1 || c.Upstreams[0].Command != "x" || c.AllowedOrigins != nil || c.Teams != nil {
					t.Errorf("lists changed by the environment: %+v", c)
				}
			},
		},
		{
			name: "section that is an alias is copied, not changed in place",
			file: "x-t: &t {log_level: debug, metrics: false}\ntelemetry: *t\n",
			env:  map[string]string{"MCP_GATEWAY_TELEMETRY_LOG_LEVEL": "error"},
			check: func(t *testing.T, c *Config, err error) {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(Telemetry{LogLevel: "error", Metrics: false, Audit: Audit{Arguments: AuditOmit}}, c.Telemetry); diff != "" {
					t.Errorf("telemetry mismatch (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "section that is not a mapping is reported, not replaced",
			file: "telemetry: verbose\n",
			env:  map[string]string{"MCP_GATEWAY_TELEMETRY_LOG_LEVEL": "error"},
			check: func(t *testing.T, c *Config, err error) {
				want := []Problem{{Path: "telemetry", Line: 1, Message: "must be a mapping of keys to values"}}
				if diff := cmp.Diff(want, problemsOf(t, err)); diff != "" {
					t.Errorf("problems mismatch (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "applies to JSON files too",
			file: `{"mcpServers": {}, "auth": {"oauth": {"resource": "https://gw.example.com/mcp", "issuers": [{"issuer": "https://idp.example.com"}]}}}`,
			env:  map[string]string{"MCP_GATEWAY_AUTH_MODE": "oauth"},
			check: func(t *testing.T, c *Config, err error) {
				if err != nil {
					t.Fatal(err)
				}
				if c.Auth.Mode != AuthOAuth {
					t.Errorf("auth.mode = %q, want oauth", c.Auth.Mode)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			format := "yaml"
			if strings.HasPrefix(tt.file, "{") {
				format = "json"
			}
			c, err := Parse([]byte(tt.file), format, "", mapEnv(tt.env))
			if err != nil {
				for _, p := range problemsOf(t, err) {
					if strings.Contains(p.Message, "SECRET") {
						t.Errorf("problem %q quotes the variable's value", p)
					}
				}
			}
			tt.check(t, c, err)
		})
	}
}

func TestParseSmallCases(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		format string
		src    string
		want   []Problem // nil: must load
	}{
		{"empty yaml", "yaml", "", nil},
		{"comment only", "yaml", "# nothing\n", nil},
		{"empty json", "json", " \n", nil},
		{"null document", "yaml", "~\n", nil},
		{"null sections keep defaults", "yaml", "policy:\nauth:\ntelemetry:\nupstreams:\nlisten:\n", nil},
		{"x- keys are ignored", "yaml", "x-anything: {whatever: [1, 2]}\n", nil},
		{"bare number duration", "yaml", "upstreams: [{name: a, command: x, timeout: 30}]\n",
			[]Problem{{Path: "upstreams[0].timeout", Line: 1, Message: `must be a duration with a unit, such as "30s", "1m30s" or "500ms": a bare number has no unit`}}},
		{"bare number duration in json", "json", `{"upstreams": [{"name": "a", "command": "x", "breaker": {"cooldown": 1.5}}]}`,
			[]Problem{{Path: "upstreams[0].breaker.cooldown", Line: 1, Message: `must be a duration with a unit, such as "30s", "1m30s" or "500ms": a bare number has no unit`}}},
		{"bare number from a variable", "yaml", "upstreams: [{name: a, command: x, timeout: \"${T}\"}]\n",
			[]Problem{{Path: "upstreams[0].timeout", Line: 1, Message: `must be a duration with a unit, such as "30s", "1m30s" or "500ms": a bare number has no unit`}}},
		{"json top level array", "json", `[1]`,
			[]Problem{{Path: "", Line: 1, Message: "the file must hold a mapping of keys to values at the top level"}}},
		{"json with byte order mark", "json", "\xef\xbb\xbf{\"listen\": \"127.0.0.1:8080\"}", nil},
		{"upstreams as a map", "yaml", "upstreams:\n  a: {command: x}\n",
			[]Problem{{Path: "upstreams", Line: 2, Message: "must be a list of upstreams, each with a name (use mcpServers for a map of name: server)"}}},
		{"json trailing data", "json", "{}\n{}",
			[]Problem{{Line: 2, Message: "invalid JSON: unexpected data after the top-level value"}}},
		{"json truncated", "json", `{"mcpServers": {`,
			[]Problem{{Line: 1, Message: "invalid JSON: unexpected end of file"}}},
		{"yaml in a json file", "json", "listen: x\n",
			[]Problem{{Line: 1, Message: "invalid JSON: line 1: invalid character 'l' looking for beginning of value"}}},
		{"non-string key", "yaml", "upstreams:\n  - name: a\n    command: x\n    env: {[a]: b}\n",
			[]Problem{{Path: "upstreams[0].env", Line: 4, Message: "keys must be plain strings"}}},
		{"unusual key in path", "yaml", "upstreams:\n  - name: a\n    url: https://x.example/mcp\n    headers: {\"Bad Name\": v, \"Fine\": \"a\\nb\"}\n",
			[]Problem{
				{Path: `upstreams[0].headers["Bad Name"]`, Line: 4, Message: "is not a valid HTTP header name"},
				{Path: `upstreams[0].headers.Fine`, Line: 4, Message: "value may not contain CR, LF or NUL"},
			}},
		{"command as a list", "yaml", "mcpServers:\n  a:\n    command: [npx, -y, srv]\n",
			[]Problem{{Path: "mcpServers.a.command", Line: 3, Message: "must be one string, the program: put its arguments in args"}}},
		{"yaml tag is kept out of values", "yaml", "listen: !!binary aGVsbG8=\n",
			[]Problem{{Path: "listen", Line: 1, Message: "must be host:port with a numeric port, such as 127.0.0.1:8080 or :8080"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse([]byte(tt.src), tt.format, "", mapEnv(map[string]string{"T": "30"}))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if diff := cmp.Diff(Default(), c); diff != "" {
					t.Errorf("want the defaults (-want +got):\n%s", diff)
				}
				return
			}
			if diff := cmp.Diff(tt.want, problemsOf(t, err)); diff != "" {
				t.Errorf("problems mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHostAppKeys: a Claude Desktop JSON file may hold the app's own
// settings beside mcpServers; they are ignored there, and only there.
func TestHostAppKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		format string
		src    string
		want   []Problem
	}{
		{"desktop settings ignored", "json", `{"globalShortcut": "Alt+Space", "preferences": {"x": 1}, "mcpServers": {}}`, nil},
		{"typo of a gateway key still caught", "json", `{"mcpServers": {}, "Listen": "127.0.0.1:1"}`,
			[]Problem{{Path: "Listen", Line: 1, Message: `unknown key (did you mean "listen"?)`}}},
		{"json without mcpServers is strict", "json", `{"globalShortcut": "Alt+Space"}`,
			[]Problem{{Path: "globalShortcut", Line: 1, Message: "unknown key"}}},
		{"yaml with mcpServers is strict", "yaml", "globalShortcut: x\nmcpServers: {}\n",
			[]Problem{{Path: "globalShortcut", Line: 1, Message: "unknown key"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.src), tt.format, "", mapEnv(nil))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			if diff := cmp.Diff(tt.want, problemsOf(t, err)); diff != "" {
				t.Errorf("problems mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCwd(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, baseDir, cwd, want string
	}{
		{"relative joins the base", "/etc/gw", "servers/a", "/etc/gw/servers/a"},
		{"dot is the base", "/etc/gw", ".", "/etc/gw"},
		{"absolute is kept", "/etc/gw", "/srv/a", "/srv/a"},
		{"no base keeps it relative", "", "servers/a", "servers/a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := fmt.Sprintf("mcpServers: {a: {command: x, cwd: %q}}", tt.cwd)
			c, err := Parse([]byte(src), "yaml", tt.baseDir, mapEnv(nil))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Upstreams[0].Cwd; got != filepath.FromSlash(tt.want) {
				t.Errorf("cwd = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestAuditPath: a relative audit path is relative to the config file, as
// cwd is, whether the file or MCP_GATEWAY_TELEMETRY_AUDIT_PATH sets it.
func TestAuditPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, baseDir, file, env, want string
	}{
		{"relative joins the base", "/etc/gw", "logs/audit.jsonl", "", "/etc/gw/logs/audit.jsonl"},
		{"absolute is kept", "/etc/gw", "/var/log/audit.jsonl", "", "/var/log/audit.jsonl"},
		{"no base keeps it relative", "", "audit.jsonl", "", "audit.jsonl"},
		{"empty is stderr", "/etc/gw", "", "", ""},
		{"from the environment", "/etc/gw", "file.jsonl", "env.jsonl", "/etc/gw/env.jsonl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := fmt.Sprintf("telemetry: {audit: {enabled: true, path: %q}}", tt.file)
			env := map[string]string{}
			if tt.env != "" {
				env["MCP_GATEWAY_TELEMETRY_AUDIT_PATH"] = tt.env
			}
			c, err := Parse([]byte(src), "yaml", tt.baseDir, mapEnv(env))
			if err != nil {
				t.Fatal(err)
			}
			want := Audit{Enabled: true, Path: filepath.FromSlash(tt.want), Arguments: AuditOmit}
			if diff := cmp.Diff(want, c.Telemetry.Audit); diff != "" {
				t.Errorf("audit mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	_, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), nil)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want fs.ErrNotExist", err)
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		t.Errorf("a missing file is not a *ValidationError")
	}
	if _, err := Parse(nil, "toml", "", nil); err == nil || errors.As(err, &ve) {
		t.Errorf("Parse(format toml) = %v, want a plain error", err)
	}
}

// TestAliasBomb: aliases that expand to millions of nodes stop with a
// problem instead of eating memory and time.
func TestAliasBomb(t *testing.T) {
	t.Parallel()
	// keys returns a mapping of n distinct keys.
	keys := func(n int) string {
		var ks []string
		for i := range n {
			ks = append(ks, fmt.Sprintf("k%d: v", i))
		}
		return "{" + strings.Join(ks, ", ") + "}"
	}
	tests := []struct {
		name string
		src  string
	}{
		{"aliased lists", "x-a: &a [" + strings.Repeat("x,", 2000) + "x]\n" +
			"x-u: &u {name: u, command: c, args: *a}\n" +
			"upstreams: [" + strings.Repeat("*u,", 1000) + "*u]\n"},
		{"nested merges", "x-0: &m0 " + keys(500) + "\n" +
			"x-1: &m1 {<<: [" + strings.Repeat("*m0,", 500) + "*m0]}\n" +
			"x-2: &m2 {<<: [" + strings.Repeat("*m1,", 500) + "*m1]}\n" +
			"upstreams: [{name: a, command: x, env: {<<: [" + strings.Repeat("*m2,", 500) + "*m2]}}]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.src), "yaml", "", mapEnv(nil))
			want := []Problem{{Message: "the document is too large once YAML aliases are expanded"}}
			if diff := cmp.Diff(want, problemsOf(t, err), cmpopts.IgnoreFields(Problem{}, "Line")); diff != "" {
				t.Errorf("problems mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMergeKeys(t *testing.T) {
	t.Parallel()
	src := `
x-http: &http {timeout: 10s, session: per-client, headers: {X-Team: a}}
upstreams:
  - name: a
    url: https://a.example/mcp
    <<: *http
    timeout: 20s
`
	c, err := Parse([]byte(src), "yaml", "", mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	u := c.Upstreams[0]
	got := []any{u.Timeout, u.Session, u.Headers}
	want := []any{20 * time.Second, SessionPerClient, map[string]string{"X-Team": "a"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("merged upstream mismatch (-want +got):\n%s", diff)
	}
}

func TestRelay(t *testing.T) {
	cfg, err := Parse([]byte("upstreams:\n  - name: a\n    command: x\n    relay: [sampling, roots]\n"), "yaml", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Upstreams[0].Relay; len(got) != 2 || got[0] != "sampling" || got[1] != "roots" {
		t.Errorf("relay = %v", got)
	}
	_, err = Parse([]byte("upstreams:\n  - name: a\n    command: x\n    relay: [sampling, mind-reading, sampling]\n"), "yaml", "", nil)
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 2 ||
		ve.Problems[0].Path != "upstreams[0].relay[1]" || ve.Problems[1].Message != "is listed twice" {
		t.Errorf("bad relay: %v", err)
	}
}

// TestRelayDefault: without the key, HTTP upstreams and per-client
// sessions relay everything and a shared stdio upstream nothing;
// relay: [] relays nothing anywhere.
func TestRelayDefault(t *testing.T) {
	all := []string{"sampling", "elicitation", "roots"}
	for _, tt := range []struct {
		name, yaml string
		want       []string
	}{
		{"http", "url: http://127.0.0.1:1/mcp", all},
		{"shared sse", "url: http://127.0.0.1:1/sse\n    transport: sse", []string{}},
		{"per-client sse", "url: http://127.0.0.1:1/sse\n    transport: sse\n    session: per-client", all},
		{"shared stdio", "command: x", []string{}},
		{"per-client stdio", "command: x\n    session: per-client", all},
		{"http, relay: []", "url: http://127.0.0.1:1/mcp\n    relay: []", []string{}},
		{"per-client, relay: []", "command: x\n    session: per-client\n    relay: []", []string{}},
		{"shared stdio, relay set", "command: x\n    relay: [roots]", []string{"roots"}},
	} {
		cfg, err := Parse([]byte("upstreams:\n  - name: a\n    "+tt.yaml+"\n"), "yaml", "", nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if diff := cmp.Diff(tt.want, cfg.Upstreams[0].Relayed()); diff != "" {
			t.Errorf("%s: relayed (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestMCPServersKeysAsWritten: an mcpServers key that breaks the name
// rule (Claude Desktop accepts any string) is accepted: the upstream's
// name is derived from it, stable and unique, and the key is kept.
func TestMCPServersKeysAsWritten(t *testing.T) {
	src := `{"upstreams":[{"name":"a_b","command":"x"}],"mcpServers":{
		"my.server with spaces":{"command":"x"},
		"GitHub":{"command":"x"},
		"a.b":{"command":"x"},
		"a b":{"command":"x"},
		"":{"command":"x"},
		"日本語":{"command":"x"},
		"a very long server name, longer than thirty-two characters":{"command":"x"}}}`
	load := func() []Upstream {
		t.Helper()
		cfg, err := Parse([]byte(src), "json", "", &LoadOptions{LookupEnv: func(string) (string, bool) { return "", false }})
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Upstreams
	}
	ups := load()
	type nk struct{ Name, Key string }
	var got []nk
	for _, u := range ups {
		got = append(got, nk{u.Name, u.Key})
	}
	hash := func(key string) string {
		sum := sha256.Sum256([]byte(key))
		return strings.ToLower(base32.StdEncoding.EncodeToString(sum[:])[:6])
	}
	want := []nk{
		{"a_b", ""},
		{"my_server_with_spaces", "my.server with spaces"},
		{"GitHub", ""},
		{"a_b_" + hash("a.b"), "a.b"}, // a_b is taken by upstreams[0]
		{"a_b_" + hash("a b"), "a b"},
		{"server", ""},
		{"server_" + hash("日本語"), "日本語"},
		{"a_very_long_server_name_longer_t", "a very long server name, longer than thirty-two characters"},
	}
	want[5].Key = "" // an empty key is kept too, as ""
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(got, func() (again []nk) {
		for _, u := range load() {
			again = append(again, nk{u.Name, u.Key})
		}
		return again
	}()); diff != "" {
		t.Errorf("a second load named them otherwise (-first +second):\n%s", diff)
	}
}

// TestProfiles: profiles decode with every view key, a team key (or a
// typo) in a profile is refused with its key path, and bad names are
// reported at profiles[i].name.
func TestProfiles(t *testing.T) {
	t.Parallel()
	src := "upstreams: [{name: a, command: x}]\nprofiles:\n" +
		"  - {name: coding, allow: [\"a__*\"], deny: [\"a__rm\"], max_tools: 5, max_tokens: 900, priority: [\"a__read*\"], mode: search}\n" +
		"  - name: ops\n"
	c, err := Parse([]byte(src), "yaml", "", mapEnv(nil))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := []Profile{
		{Name: "coding", Allow: []string{"a__*"}, Deny: []string{"a__rm"}, MaxTools: 5, MaxTokens: 900, Priority: []string{"a__read*"}, Mode: ModeSearch},
		{Name: "ops"},
	}
	if diff := cmp.Diff(want, c.Profiles); diff != "" {
		t.Errorf("profiles (-want +got):\n%s", diff)
	}

	bad := "upstreams: [{name: a, command: x}]\nprofiles:\n  - {name: x, api_keys: [k]}\n  - {name: Bad}\n  - [x]\n"
	_, err = Parse([]byte(bad), "yaml", "", mapEnv(nil))
	got := problemsOf(t, err)
	wantPaths := []string{"profiles[0].api_keys", "profiles[1].name", "profiles[2]"}
	var paths []string
	for _, p := range got {
		paths = append(paths, p.Path)
	}
	if diff := cmp.Diff(wantPaths, paths); diff != "" {
		t.Errorf("problem paths (-want +got):\n%s\nproblems: %v", diff, got)
	}
}
