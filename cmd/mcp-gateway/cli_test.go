package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
)

// envMainArgs makes the test binary run the gateway's main with these
// arguments (a JSON array) instead of the tests: the CLI tests start the
// real program as a child process this way.
const envMainArgs = "MCP_GATEWAY_TEST_MAIN_ARGS"

// maybeRunMain is called from TestMain.
func maybeRunMain() {
	raw, ok := os.LookupEnv(envMainArgs)
	if !ok {
		return
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		panic(err)
	}
	os.Args = append([]string{"mcp-gateway"}, args...)
	main()
}

// gatewayCommand returns a command that runs mcp-gateway with args.
func gatewayCommand(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(args)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), envMainArgs+"="+string(raw), "GORACE=atexit_sleep_ms=0")
	return cmd
}

// writeConfig writes a gateway config (JSON is YAML) with one stdio fake
// per name, and returns its path.
func writeConfig(t *testing.T, extra map[string]any, fakes ...string) string {
	t.Helper()
	cfg := map[string]any{}
	var ups []map[string]any
	for _, fake := range fakes {
		command, args, env := mcptest.StdioCommand(fake)
		ups = append(ups, map[string]any{"name": strings.ReplaceAll(fake, "-", "_"), "command": command, "args": args, "env": env})
	}
	cfg["upstreams"] = ups
	for k, v := range extra {
		cfg[k] = v
	}
	raw, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code = run(ctx, args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestValidate(t *testing.T) {
	good := writeConfig(t, nil, "echo")
	if code, out, errOut := runCLI(t, "validate", "--config", good); code != exitOK || !strings.Contains(out, "ok (1 upstreams)") {
		t.Errorf("validate good config: code %d, stdout %q, stderr %q", code, out, errOut)
	}

	bad := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(bad, []byte(`listen: nowhere
prefix: sometimes
upstreams:
  - name: has space
    comand: npx
  - name: web
    url: http://127.0.0.1:9/mcp
    timeout: 60
teams:
  - name: data
`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "validate", "--config", bad)
	if code != exitError {
		t.Errorf("validate bad config: exit %d, want %d", code, exitError)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	for _, want := range []string{"listen", "prefix", "upstreams[0].name", "upstreams[0].comand", "upstreams[1].timeout"} {
		found := false
		for _, l := range lines {
			found = found || strings.Contains(l, bad+": "+want)
		}
		if !found {
			t.Errorf("no line for %s in:\n%s", want, errOut)
		}
	}
	if len(lines) < 5 {
		t.Errorf("want every problem on its own line, got:\n%s", errOut)
	}

	// jwt, the name oauth had before it was built, is refused, naming oauth.
	renamed := writeConfig(t, map[string]any{"auth": map[string]any{"mode": "jwt"}}, "echo")
	code, _, errOut = runCLI(t, "validate", "--config", renamed)
	if code != exitError || !strings.Contains(errOut, `auth.mode: jwt is now called oauth`) {
		t.Errorf("auth.mode jwt: code %d, stderr:\n%s", code, errOut)
	}
	// OAuth's own problems, each with its key path.
	badOAuth := writeConfig(t, map[string]any{"auth": map[string]any{"mode": "oauth", "oauth": map[string]any{
		"issuers": []any{map[string]any{"issuer": "https://idp.example.com", "algorithms": []any{"HS256"}}},
	}}}, "echo")
	code, _, errOut = runCLI(t, "validate", "--config", badOAuth)
	if code != exitError || !strings.Contains(errOut, "auth.oauth.resource: is required") || !strings.Contains(errOut, "auth.oauth.issuers[0].algorithms[0]: HMAC") {
		t.Errorf("auth.oauth problems: code %d, stderr:\n%s", code, errOut)
	}

	// Profiles' names, each with its key path.
	badProfiles := writeConfig(t, map[string]any{"profiles": []any{
		map[string]any{"name": "coding"}, map[string]any{"name": "coding"}, map[string]any{"name": "Chat"},
	}}, "echo")
	code, _, errOut = runCLI(t, "validate", "--config", badProfiles)
	if code != exitError || !strings.Contains(errOut, `profiles[1].name: profile name "coding" already used by profiles[0]`) ||
		!strings.Contains(errOut, "profiles[2].name: must be 1 to 64 characters from a-z, 0-9 and -") {
		t.Errorf("profiles problems: code %d, stderr:\n%s", code, errOut)
	}

	if code, _, errOut := runCLI(t, "validate", "--config", filepath.Join(t.TempDir(), "missing.yaml")); code != exitError || !strings.Contains(errOut, "no such file") {
		t.Errorf("missing file: code %d, stderr %q", code, errOut)
	}
}

func TestCommandLine(t *testing.T) {
	if code, out, _ := runCLI(t, "version"); code != exitOK || !strings.HasPrefix(out, "mcp-gateway ") {
		t.Errorf("version: %d %q", code, out)
	}
	if code, _, errOut := runCLI(t, "frobnicate"); code != exitUsage || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: %d %q", code, errOut)
	}
	if code, _, _ := runCLI(t, "serve", "--nope"); code != exitUsage {
		t.Errorf("unknown flag: exit %d, want %d", code, exitUsage)
	}
}

func TestToolsCommand(t *testing.T) {
	path := writeConfig(t, nil, "echo", "crash")
	code, out, errOut := runCLI(t, "tools", "--config", path, "--json")
	if code != exitOK {
		t.Fatalf("tools: exit %d, stderr %s", code, errOut)
	}
	var listing struct {
		Tools []struct {
			Name, Upstream string
			TokensBefore   int `json:"tokens_before"`
			TokensAfter    int `json:"tokens_after"`
		}
		TokensBefore int `json:"tokens_before"`
		TokensAfter  int `json:"tokens_after"`
		Upstreams    []struct{ Name, State string }
	}
	if err := json.Unmarshal([]byte(out), &listing); err != nil {
		t.Fatalf("tools --json output %q: %v", out, err)
	}
	names := map[string]bool{}
	sum := 0
	for _, tool := range listing.Tools {
		names[tool.Name] = tool.Upstream == "echo" && tool.TokensBefore > 0 && tool.TokensAfter > 0
		sum += tool.TokensAfter
	}
	if !names["echo__echo"] || !names["echo__add"] {
		t.Errorf("tools --json lacks echo__echo or echo__add with token figures: %s", out)
	}
	if sum != listing.TokensAfter || listing.TokensBefore == 0 {
		t.Errorf("totals %d/%d do not add up (sum after %d)", listing.TokensBefore, listing.TokensAfter, sum)
	}
	// The crashing one is being restarted (or has failed for good).
	if len(listing.Upstreams) != 2 || (listing.Upstreams[1].State != "restarting" && listing.Upstreams[1].State != "failed") {
		t.Errorf("upstreams: %+v, want the crashing one restarting or failed", listing.Upstreams)
	}

	code, out, errOut = runCLI(t, "tools", "--config", path)
	if code != exitOK || !strings.Contains(out, "echo__echo") || !strings.Contains(out, "total: ") || !strings.Contains(errOut, "upstream crash: restarting: ") {
		t.Errorf("tools table: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// TestStdioCommand runs `mcp-gateway stdio` as a real child process and
// talks to it with the Go SDK client over stdio, in both eras.
func TestStdioCommand(t *testing.T) {
	path := writeConfig(t, nil, "echo", "echo-legacy")
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			client := mcp.NewClient(&mcp.Implementation{Name: "stdio-host", Version: "1"}, nil)
			cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: gatewayCommand(t, "stdio", "--config", path)}, &mcp.ClientSessionOptions{ProtocolVersion: era})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != era {
				t.Errorf("negotiated %s, want %s", got, era)
			}
			for _, name := range []string{"echo__echo", "echo_legacy__echo"} {
				if got, err := callText(ctx, cs, name, map[string]any{"text": "over stdio"}); err != nil || got != "over stdio" {
					t.Errorf("%s = %q, %v", name, got, err)
				}
			}
		})
	}
}

// TestStdioCommandProfile: `mcp-gateway stdio --profile P` serves the
// view of P's path: a tool outside the profile is unknown there.
func TestStdioCommandProfile(t *testing.T) {
	path := writeConfig(t, map[string]any{"profiles": []any{map[string]any{"name": "plain", "allow": []any{"echo__*"}}}}, "echo", "echo-legacy")
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			client := mcp.NewClient(&mcp.Implementation{Name: "stdio-host", Version: "1"}, nil)
			cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: gatewayCommand(t, "stdio", "--config", path, "--profile", "plain")}, &mcp.ClientSessionOptions{ProtocolVersion: era})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if got, err := callText(ctx, cs, "echo__echo", map[string]any{"text": "in"}); err != nil || got != "in" {
				t.Errorf("echo__echo = %q, %v", got, err)
			}
			if got, err := callText(ctx, cs, "echo_legacy__echo", map[string]any{"text": "out"}); err == nil {
				t.Errorf("echo_legacy__echo, outside the profile, answered %q", got)
			}
		})
	}
	if code, _, errOut := runCLI(t, "stdio", "--config", path, "--profile", "nope"); code != exitUsage || !strings.Contains(errOut, `no profile "nope"`) {
		t.Errorf("stdio --profile nope: exit %d, stderr %s", code, errOut)
	}
}

// TestDefaultConfigIsValid keeps the README's first command working: the
// gateway.yaml at the top of the repository must load.
func TestDefaultConfigIsValid(t *testing.T) {
	if code, out, errOut := runCLI(t, "validate", "--config", "../../gateway.yaml"); code != exitOK || errOut != "" {
		t.Errorf("validate gateway.yaml: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}

// TestEnvKeyCaseReachesChild follows an env key from a YAML file to the
// upstream process: YAML loaders that lowercase map keys would turn
// API_KEY into api_key on the way.
func TestEnvKeyCaseReachesChild(t *testing.T) {
	command, args, env := mcptest.StdioCommand("echo")
	var b strings.Builder
	b.WriteString("upstreams:\n  - name: Keys\n    command: " + strconvQuote(command) + "\n    args: [")
	for i, a := range args {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconvQuote(a))
	}
	b.WriteString("]\n    env:\n      API_KEY: from-yaml\n      MixedCase_Var: mixed\n")
	for k, v := range env {
		b.WriteString("      " + k + ": " + strconvQuote(v) + "\n")
	}
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(path, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	url, _ := startGateway(t, cfg)
	cs := connect(t, url, eras[0])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, want := range map[string]string{"API_KEY": "from-yaml", "MixedCase_Var": "mixed", "api_key": "<unset>"} {
		if got, err := callText(ctx, cs, "Keys__getenv", map[string]any{"name": name}); err != nil || got != want {
			t.Errorf("child's %s = %q, %v; want %q", name, got, err, want)
		}
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
