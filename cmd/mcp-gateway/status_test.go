package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/server"
)

// Text an upstream controls, meant for the terminal of whoever reads the
// status: an OSC that sets the window title and rings the bell, a CSI
// that clears the screen, the same CSI as one C1 character (U+009B, which
// terminals act on in UTF-8 too), and a bidi override that reverses what
// follows.
const (
	termAttack = "\x1b]0;owned\a\x1b[2J"
	c1Attack   = "\u009b2J"
	bidiURI    = "file:///notes\u202etxt.exe" + c1Attack
)

// hostileUpstream is a Streamable HTTP server (the Go SDK's) with a tool
// whose description carries escape sequences, and a resource whose URI
// carries a bidi override and a C1 control: pinning's suspicious-text
// check reports the resource by its URI.
func hostileUpstream(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo", Description: "Echoes." + termAttack, InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: bidiURI, Name: "notes"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{}, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(func() {
		for ss := range s.Sessions() {
			_ = ss.Close()
		}
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL
}

// failingUpstream answers every request with a JSON-RPC error whose
// message carries escape sequences: the gateway's last error for it.
func failingUpstream(t *testing.T) string {
	t.Helper()
	s := mcptest.NewScripted(t)
	s.On(mcptest.Route{Reply: mcptest.ReplyError(http.StatusOK, -32603, "boom "+termAttack+c1Attack, "")})
	return s.URL
}

// statusGateway starts a gateway in the process with the hostile upstream
// and the failing one (required or not), under pinning in warn mode with
// suspicious text flagged or quarantined.
func statusGateway(t *testing.T, required bool, suspicious string) (base string) {
	t.Helper()
	src := fmt.Sprintf(`
upstreams:
  - {name: up, url: %q}
  - {name: bad, url: %q, required: %t, timeout: 2s}
pinning: {mode: warn, lockfile: %q, suspicious: %s}
`, hostileUpstream(t), failingUpstream(t), required, filepath.Join(t.TempDir(), "tools.lock"), suspicious)
	cfg, err := config.Parse([]byte(src), "yaml", "", &config.LoadOptions{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	url, _ := startGateway(t, cfg)
	return strings.TrimSuffix(url, cfg.Endpoint)
}

// row returns the cells of the line of table output whose first cell is
// first, split on runs of two or more spaces (cells may hold one).
func row(out, first string) []string {
	for l := range strings.SplitSeq(out, "\n") {
		cells := splitCells(l)
		if len(cells) > 0 && cells[0] == first {
			return cells
		}
	}
	return nil
}

func splitCells(l string) []string {
	var cells []string
	for c := range strings.SplitSeq(l, "  ") {
		if c = strings.TrimSpace(c); c != "" {
			cells = append(cells, c)
		}
	}
	return cells
}

// unprintable returns the characters of out a terminal would act on or
// not show, line breaks aside.
func unprintable(out string) []rune {
	var bad []rune
	for _, r := range out {
		if r != '\n' && !unicode.IsPrint(r) {
			bad = append(bad, r)
		}
	}
	return bad
}

// TestStatus runs `mcp-gateway status` against a real gateway with one
// upstream up and one failing: the tables' rows, the exit code (1 when
// the failing upstream is required), and hostile text from upstreams
// (escape sequences in an error, a bidi override and a C1 control in a
// resource URI) printed escaped, never raw, in the tables and in --json.
func TestStatus(t *testing.T) {
	for _, tc := range []struct {
		name       string
		required   bool
		suspicious string
		wantCode   int
		verdict    string
		pinList    string
	}{
		{"ready", false, "quarantine", exitOK, "ready", "quarantined"},
		{"not ready", true, "flag", exitError, "NOT READY", "flagged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := statusGateway(t, tc.required, tc.suspicious)
			code, out, errOut := runCLI(t, "status", "--url", base)
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d; stderr: %s", code, tc.wantCode, errOut)
			}
			t.Logf("output:\n%s", out)
			if bad := unprintable(out); len(bad) > 0 {
				t.Errorf("raw control or invisible characters %q printed to the terminal", bad)
			}
			if want := base + "/readyz: " + tc.verdict + "\n"; !strings.HasPrefix(out, want) {
				t.Errorf("first line: want %q", want)
			}
			if got, want := row(out, "UPSTREAM"), []string{"UPSTREAM", "STATE", "REQUIRED", "ERA", "TRANSPORT", "TOOLS", "PROMPTS", "RESTARTS", "BREAKER", "ERROR"}; !cmp.Equal(got, want) {
				t.Errorf("upstreams header (-want +got):\n%s", cmp.Diff(want, got))
			}
			up := row(out, "up")
			if len(up) != 9 || up[1] != "ready" || up[2] != "no" || !strings.HasPrefix(up[3], "modern ") && !strings.HasPrefix(up[3], "legacy ") ||
				up[4] != "streamable-http" || up[5] != "1" || up[7] != "0" || up[8] != "closed" {
				t.Errorf("row of up: %q, want up ready, not required, an era, streamable-http, 1 tool, no restarts, breaker closed, no error", up)
			}
			bad := row(out, "bad")
			if len(bad) != 10 || bad[1] == "ready" || bad[2] != fmt.Sprint(map[bool]string{true: "yes", false: "no"}[tc.required]) || bad[3] != "-" || bad[4] != "streamable-http" || bad[5] != "0" ||
				!strings.Contains(bad[9], `boom \u{1B}]0;owned\u{7}\u{1B}[2J\u{9B}2J`) {
				t.Errorf("row of bad: %q, want it down, no era, no tools, its error escaped", bad)
			}
			if v := row(out, "(default)"); len(v) != 6 || v[1] != "full" || v[2] != "1" || v[5] != "0" {
				t.Errorf("row of the default view: %q, want full, 1 tool, nothing cut", v)
			}
			p := row(out, tc.pinList)
			want := []string{tc.pinList, "resource", `file:///notes\u{202E}txt.exe\u{9B}2J`, "up", "suspicious", "bidirectional control U+202E at byte 13"}
			if !cmp.Equal(p, want) {
				t.Errorf("pinning row (-want +got):\n%s", cmp.Diff(want, p))
			}

			// --json: the gateway's JSON, meaning the same as /readyz's,
			// with nothing raw a terminal acts on either.
			code, out, errOut = runCLI(t, "status", "--url", base+"/readyz", "--json")
			if code != tc.wantCode {
				t.Errorf("--json: exit %d, want %d; stderr: %s", code, tc.wantCode, errOut)
			}
			if bad := unprintable(out); len(bad) > 0 {
				t.Errorf("--json: raw control or invisible characters %q printed", bad)
			}
			resp, err := http.Get(base + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			direct, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var fromStatus, fromGateway server.Readiness
			if err := json.Unmarshal([]byte(out), &fromStatus); err != nil {
				t.Fatalf("--json output is not JSON: %v\n%s", err, out)
			}
			if err := json.Unmarshal(direct, &fromGateway); err != nil {
				t.Fatal(err)
			}
			// Only the times of a restarting upstream may differ.
			opt := cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".RetryAt" || p.Last().String() == ".Since" }, cmp.Ignore())
			if diff := cmp.Diff(fromGateway, fromStatus, opt); diff != "" {
				t.Errorf("--json differs from /readyz (-gateway +status):\n%s", diff)
			}
			if len(fromStatus.Upstreams) != 2 || !strings.Contains(fromStatus.Upstreams[1].Error, termAttack) {
				t.Errorf("--json upstreams: %+v, want bad's error as the upstream sent it", fromStatus.Upstreams)
			}
		})
	}
}

// TestStatusFromConfig: without --url, status asks the gateway of the
// config: its listen address, over https with tls set, trusting the
// gateway's own (self-signed) certificate.
func TestStatusFromConfig(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "gw.pem"), filepath.Join(dir, "gw.key")
	mcptest.NewCert(t, 9, false).Write(t, certFile, keyFile, time.Time{})
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	path := writeConfig(t, map[string]any{"listen": addr, "tls": map[string]any{"cert_file": certFile, "key_file": keyFile}}, "echo")
	ctx, stop := context.WithCancel(context.Background())
	logs := &mcptest.LogBuffer{}
	exited := make(chan int, 1)
	go func() { exited <- run(ctx, []string{"serve", "--config", path}, nil, io.Discard, logs) }()
	defer func() {
		stop()
		if code := <-exited; code != exitOK {
			t.Errorf("serve exited %d:\n%s", code, logs)
		}
	}()
	want := "https://" + addr + "/readyz: ready\n"
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out, errOut := runCmd(t, "status", "--config", path)
		if code == exitOK && strings.HasPrefix(out, want) && row(out, "echo") != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status --config: exit %d, want 0 and first line %q\nstdout:\n%s\nstderr:\n%s\ngateway log:\n%s", code, want, out, errOut, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestStatusErrors: what status says when there is no gateway to read,
// or what answers is not the gateway's /readyz.
func TestStatusErrors(t *testing.T) {
	answer := func(status int, contentType, body string, header ...string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			for i := 0; i+1 < len(header); i += 2 {
				w.Header().Set(header[i], header[i+1])
			}
			w.Header().Set("Content-Type", contentType)
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	hang := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hang.Close)
	closed := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))

	// A gateway that allows one Host name only: localhost is refused.
	cfg, err := config.Parse([]byte("upstreams: []\nallowed_hosts: [gw.example.com]\n"), "yaml", "", &config.LoadOptions{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	gw, _ := startGateway(t, cfg)
	foreign := strings.Replace(strings.TrimSuffix(gw, cfg.Endpoint), "127.0.0.1", "localhost", 1)

	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"unreachable", []string{"--url", closed}, exitError, []string{"cannot reach the gateway at " + closed + "/readyz", "connection refused"}},
		{"timeout", []string{"--url", hang.URL, "--timeout", "200ms"}, exitError, []string{"no answer from " + hang.URL + "/readyz within 200ms"}},
		{"html page", []string{"--url", answer(http.StatusOK, "text/html", "<html>hello</html>")}, exitError, []string{"answered 200 OK with text/html", "not the gateway's /readyz JSON"}},
		{"other JSON", []string{"--url", answer(http.StatusOK, "application/json", `{"ready":true}`)}, exitError, []string{"not the gateway's /readyz JSON"}},
		{"balancer 503", []string{"--url", answer(http.StatusServiceUnavailable, "text/plain", "no healthy upstream\x1b[2J")}, exitError,
			[]string{"answered 503 Service Unavailable", `no healthy upstream\u{1B}[2J`, "not the gateway's /readyz JSON"}},
		{"credentials", []string{"--url", answer(http.StatusUnauthorized, "text/plain", "login")}, exitError, []string{"401 Unauthorized", "asks for credentials"}},
		{"redirect", []string{"--url", answer(http.StatusFound, "text/html", "", "Location", "https://sso.example.com/login")}, exitError,
			[]string{"302 Found to https://sso.example.com/login", "something in front of it"}},
		{"not found", []string{"--url", answer(http.StatusNotFound, "text/plain", "404")}, exitError, []string{"no /readyz there"}},
		{"foreign host", []string{"--url", foreign}, exitError, []string{`answered 403: Forbidden: Host "localhost:`, "allowed_hosts"}},
		{"no scheme", []string{"--url", "127.0.0.1:8080"}, exitUsage, []string{"want the gateway's http:// or https:// URL"}},
		{"no config", []string{"--config", filepath.Join(t.TempDir(), "gateway.yaml")}, exitError, []string{"no such file", "give --url"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, append([]string{"status"}, tc.args...)...)
			if code != tc.code || out != "" {
				t.Errorf("exit %d, stdout %q; want exit %d and no output", code, out, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if bad := unprintable(errOut); len(bad) > 0 {
				t.Errorf("raw control characters %q on stderr", bad)
			}
		})
	}
}

// TestStatusURL: the /readyz URL of --url and of a config's listen
// address.
func TestStatusURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8080":               "http://127.0.0.1:8080/readyz",
		"http://127.0.0.1:8080/":              "http://127.0.0.1:8080/readyz",
		"https://gw.example.com/readyz":       "https://gw.example.com/readyz",
		"https://gw.example.com/team-a/":      "https://gw.example.com/team-a/readyz",
		"http://[::1]:8080/readyz#fragment":   "http://[::1]:8080/readyz",
		"https://gw.example.com/readyz?x=1":   "https://gw.example.com/readyz?x=1",
		"https://gw.example.com/mcp/../other": "https://gw.example.com/other/readyz",
	} {
		if got, err := readyzURL(in); err != nil || got != want {
			t.Errorf("readyzURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"127.0.0.1:8080", "ftp://gw/", "http:///readyz", "::"} {
		if got, err := readyzURL(in); err == nil {
			t.Errorf("readyzURL(%q) = %q, want an error", in, got)
		}
	}
	for _, tc := range []struct {
		listen string
		tls    bool
		want   string
	}{
		{"127.0.0.1:8080", false, "http://127.0.0.1:8080/readyz"},
		{":8080", false, "http://127.0.0.1:8080/readyz"},
		{"0.0.0.0:9000", true, "https://127.0.0.1:9000/readyz"},
		{"[::]:8080", false, "http://[::1]:8080/readyz"},
		{"[::1]:8080", false, "http://[::1]:8080/readyz"},
		{"gw.internal:443", true, "https://gw.internal:443/readyz"},
	} {
		cfg := &config.Config{Listen: tc.listen}
		if tc.tls {
			cfg.TLS = &config.TLS{}
		}
		if got := configReadyzURL(cfg); got != tc.want {
			t.Errorf("listen %q, tls %t: %q, want %q", tc.listen, tc.tls, got, tc.want)
		}
	}
}

// TestStatusColour: on a terminal rows are painted whole, after
// alignment, so that the columns line up as without colour.
func TestStatusColour(t *testing.T) {
	r := &server.Readiness{
		Upstreams: []router.UpstreamStatus{{Name: "a", State: router.PhaseReady}, {Name: "long-name", State: router.PhaseFailed, Error: "x"}},
		Views:     []router.ViewStatus{{Mode: config.ModeFull}},
	}
	var plain, painted strings.Builder
	writeStatus(&plain, "u", r, false)
	writeStatus(&painted, "u", r, true)
	if strings.Contains(plain.String(), "\x1b") {
		t.Errorf("colour without a terminal:\n%q", plain.String())
	}
	if !strings.Contains(painted.String(), "\x1b[31mlong-name") {
		t.Errorf("the failed upstream's row is not red:\n%q", painted.String())
	}
	stripped := painted.String()
	for _, sgr := range []string{"\x1b[0m", "\x1b[1m", "\x1b[31m", "\x1b[32m", "\x1b[33m"} {
		stripped = strings.ReplaceAll(stripped, sgr, "")
	}
	if diff := cmp.Diff(plain.String(), stripped); diff != "" {
		t.Errorf("painted output, colour removed, differs (-plain +painted):\n%s", diff)
	}
}
