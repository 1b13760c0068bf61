package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// waitFor bounds every wait on an event: generous, since two noisy cores
// run the gateway, its upstreams and Chromium at once.
const waitFor = 30 * time.Second

// chromiumPath is where Debian's chromium package puts the browser.
const chromiumPath = "/usr/bin/chromium"

// binDir holds the gateway and fixture binaries, built once per run.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "console-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// needChromium skips the test when Chromium is missing, or fails it when
// the run requires every test peer (./test.sh sets
// MCP_GATEWAY_TEST_PEERS=require).
func needChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("MCP_GATEWAY_TEST_PEERS") == "require" {
			t.Fatalf("%s is missing and MCP_GATEWAY_TEST_PEERS=require: install Debian's chromium (.ci/run does)", chromiumPath)
		}
		t.Skipf("%s is missing: the browser tests need Chromium; ./test.sh runs them (.ci/run installs Debian's chromium)", chromiumPath)
	}
}

var builds struct {
	once             sync.Once
	gateway, fixture string
	err              error
}

// binaries builds the gateway (from the repository root, as
// tools/image does) and the fixture server, once.
func binaries(t *testing.T) (gateway, fixture string) {
	t.Helper()
	builds.once.Do(func() {
		gw := filepath.Join(binDir, "mcp-gateway")
		fx := filepath.Join(binDir, "fixture")
		for _, b := range []struct{ dir, out, pkg string }{
			{"../..", gw, "./cmd/mcp-gateway"},
			{".", fx, "./fixture"},
		} {
			cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
			cmd.Dir = b.dir
			if out, err := cmd.CombinedOutput(); err != nil {
				builds.err = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
		builds.gateway, builds.fixture = gw, fx
	})
	if builds.err != nil {
		t.Fatal(builds.err)
	}
	return builds.gateway, builds.fixture
}

// The fixture's tools. markup's description is hostile HTML: the console
// must show it as text.
const markup = `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"><b>bold</b>`

func fixtureTools() map[string]string {
	return map[string]string{
		"echo":   "Echoes its text.",
		"other":  "Echoes its text too.",
		"fail":   "Always answers with an error.",
		"markup": markup,
	}
}

// gateway is a running mcp-gateway serve with two fixture upstreams:
// fixture (tools echo, other, fail, markup) and flaky (tool ping), which
// exits when the file down exists, with restart.crash_limit 1 so that one
// crash is a crash loop: state failed. Teams: ops (the admins, every
// tool), dev (fixture's tools), tiny (fixture's, max_tools 1: three are
// cut); the profile coding narrows each view to echo and other.
type gateway struct {
	base           string // http://127.0.0.1:PORT
	dir            string
	config         string
	descs          string // fixture's descriptions file
	down           string // flaky goes down when this file exists
	opsKey, devKey string
	tinyKey        string
	log            *syncBuffer
	stop           func() // stops the gateway (once; also at the test's end)
}

const configTemplate = `listen: 127.0.0.1:%d
console: {enabled: true}
auth:
  mode: api_key
  admins: [ops]
teams:
  - name: ops
    api_keys: ["${OPS_KEY}"]
  - name: dev
    api_keys: ["${DEV_KEY}"]
    allow: ["fixture__*"]
  - name: tiny
    api_keys: ["${TINY_KEY}"]
    allow: ["fixture__*"]
    max_tools: 1
profiles:
  - {name: coding, allow: ["fixture__echo", "fixture__other"]}
pinning: {lockfile: %s, mode: enforce}
upstreams:
  - name: fixture
    command: %s
    args: ["-descriptions", %s]
  - name: flaky
    command: %s
    args: ["-name", "flaky", "-descriptions", %s, "-down", %s]
    restart: {delay: 100ms, crash_limit: 1}
`

func randomKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// startGateway writes the config and the fixtures' files into a private
// temporary folder, pins the tools (mcp-gateway pin), starts the gateway
// on a free port and waits until /readyz says both upstreams are ready.
// The gateway is stopped (SIGTERM, then SIGKILL) when the test ends.
func startGateway(t *testing.T) *gateway {
	t.Helper()
	gwBin, fxBin := binaries(t)
	dir := t.TempDir()
	g := &gateway{
		dir:     dir,
		config:  filepath.Join(dir, "gateway.yaml"),
		descs:   filepath.Join(dir, "fixture.json"),
		down:    filepath.Join(dir, "flaky.down"),
		opsKey:  randomKey(t),
		devKey:  randomKey(t),
		tinyKey: randomKey(t),
		log:     &syncBuffer{},
	}
	g.writeDescs(t, fixtureTools())
	flakyDescs := filepath.Join(dir, "flaky.json")
	writeJSON(t, flakyDescs, map[string]string{"ping": "Answers ping."})
	env := append(os.Environ(), "OPS_KEY="+g.opsKey, "DEV_KEY="+g.devKey, "TINY_KEY="+g.tinyKey)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", g.log.String())
		}
	})

	for attempt := 1; ; attempt++ {
		port := freePort(t)
		cfg := fmt.Sprintf(configTemplate, port,
			strconv.Quote(filepath.Join(dir, "tools.lock")),
			strconv.Quote(fxBin), strconv.Quote(g.descs),
			strconv.Quote(fxBin), strconv.Quote(flakyDescs), strconv.Quote(g.down))
		if err := os.WriteFile(g.config, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		if attempt == 1 {
			pin := exec.Command(gwBin, "pin", "--config", g.config)
			pin.Env = env
			if out, err := pin.CombinedOutput(); err != nil {
				t.Fatalf("mcp-gateway pin: %v\n%s", err, out)
			}
		}
		g.base = fmt.Sprintf("http://127.0.0.1:%d", port)
		cmd := exec.Command(gwBin, "serve", "--config", g.config)
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = g.log, g.log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		stop := sync.OnceFunc(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(15 * time.Second):
				cmd.Process.Kill()
				<-exited
			}
		})
		err := waitHealthy(g.base, exited)
		if err == nil {
			g.stop = stop
			t.Cleanup(stop)
			break
		}
		stop()
		if attempt < 3 && strings.Contains(g.log.String(), "address already in use") {
			t.Logf("port %d was taken before the gateway listened: trying another", port)
			continue
		}
		t.Fatalf("gateway at %s: %v", g.base, err)
	}

	g.waitReadyz(t, "both upstreams ready", func(r readyz) bool {
		return r.state("fixture") == "ready" && r.state("flaky") == "ready"
	})
	return g
}

// freePort picks a free loopback port (listen on :0, close). Another
// process may take it before the gateway listens: startGateway retries.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// plain is the client of the tests' own HTTP requests: it follows no
// redirect, and its idle connections are closed after each test.
var plain = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func waitHealthy(base string, exited <-chan struct{}) error {
	deadline := time.Now().Add(waitFor)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := plain.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("the gateway exited before it served /healthz")
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no 200 from /healthz within %v (last error: %v)", waitFor, err)
		}
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	// Written whole then renamed, so the fixture never reads half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// writeDescs sets the fixture's tool descriptions; the running fixture
// sees the change within 100 ms and sends tools/list_changed.
func (g *gateway) writeDescs(t *testing.T, descs map[string]string) {
	t.Helper()
	writeJSON(t, g.descs, descs)
}

// takeFlakyDown makes the flaky upstream exit, now and at each restart.
func (g *gateway) takeFlakyDown(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(g.down, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

type readyz struct {
	Ready     bool `json:"ready"`
	Upstreams []struct {
		Name  string `json:"name"`
		State string `json:"state"`
		Error string `json:"error"`
	} `json:"upstreams"`
	Views []struct {
		View string `json:"view"`
		Cut  []struct {
			Name  string `json:"name"`
			Limit string `json:"limit"`
		} `json:"cut"`
	} `json:"views"`
	Quarantined []definition `json:"quarantined"`
	Flagged     []definition `json:"flagged"`
}

type definition struct {
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	Upstream string `json:"upstream"`
	Reason   string `json:"reason"`
}

func (r readyz) state(upstream string) string {
	for _, u := range r.Upstreams {
		if u.Name == upstream {
			return u.State
		}
	}
	return ""
}

func (r readyz) quarantined(name string) *definition {
	for i, d := range r.Quarantined {
		if d.Name == name {
			return &r.Quarantined[i]
		}
	}
	return nil
}

func (g *gateway) readyz() (readyz, error) {
	var r readyz
	resp, err := plain.Get(g.base + "/readyz")
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	// 503 (not ready) carries the same JSON.
	err = json.NewDecoder(resp.Body).Decode(&r)
	return r, err
}

// waitReadyz polls /readyz until ok says yes, or fails the test after
// waitFor.
func (g *gateway) waitReadyz(t *testing.T, what string, ok func(readyz) bool) readyz {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		r, err := g.readyz()
		if err == nil && ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			b, _ := json.Marshal(r)
			t.Fatalf("/readyz: not %s within %v (error %v, last %s)", what, waitFor, err, b)
		}
		<-tick.C
	}
}

// syncBuffer collects the gateway's output, written from its process's
// copying goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// --- the SDK client ---

type bearer struct {
	key  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.base.RoundTrip(r)
}

// connect opens a Go SDK client session through the gateway with key,
// closed when the test ends.
func (g *gateway) connect(t *testing.T, key string) *mcp.ClientSession {
	t.Helper()
	cs, closeSession := g.dial(t, key)
	t.Cleanup(closeSession)
	return cs
}

func (g *gateway) dial(t *testing.T, key string) (*mcp.ClientSession, func()) {
	t.Helper()
	tr := &http.Transport{}
	c := mcp.NewClient(&mcp.Implementation{Name: "console-test", Version: "1.0.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             g.base + "/mcp",
		HTTPClient:           &http.Client{Transport: bearer{key, tr}},
		DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		tr.CloseIdleConnections()
		t.Fatalf("connect through the gateway: %v", err)
	}
	return cs, func() {
		cs.Close()
		tr.CloseIdleConnections()
	}
}

// tools lists the tools key sees, exposed name -> description, on a new
// client session each time: the SDK caches a modern session's lists for
// the TTL the server gives (SEP-2549), and a session with no stream of its
// own hears of no list_changed.
func (g *gateway) tools(t *testing.T, key string) map[string]string {
	t.Helper()
	cs, closeSession := g.dial(t, key)
	defer closeSession()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	tools := map[string]string{}
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		tools[tool.Name] = tool.Description
	}
	return tools
}

// waitTools lists key's tools until ok says yes, or fails after waitFor.
func (g *gateway) waitTools(t *testing.T, key, what string, ok func(map[string]string) bool) map[string]string {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		tools := g.tools(t, key)
		if ok(tools) {
			return tools
		}
		if time.Now().After(deadline) {
			t.Fatalf("tools/list: not %s within %v; got %q", what, waitFor, tools)
		}
		<-tick.C
	}
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

// --- the browser ---

// newBrowser starts headless Chromium with a fresh profile under the
// test's temporary folder; it is closed (and its process waited for) when
// the test ends. Without the background-networking flags Chromium's own
// connections are refused on a closed network and it stalls.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	needChromium(t)
	profile := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc() // waits for the process to exit
	})
	// The first run starts the browser; it has no timeout of its own (a
	// timeout there would stop the browser).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", chromiumPath, err)
	}
	return ctx
}

// newTab opens a tab of the same browser in a new browser context (its own
// cookie jar), for a second user.
func newTab(t *testing.T, browser context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("new tab: %v", err)
	}
	return ctx
}

// do runs browser steps, each run bounded by waitFor.
func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// eval evaluates a JavaScript expression in the page and decodes its
// value into T.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS polls a JavaScript predicate in the page every 100 ms until it is
// truthy, or fails the test after waitFor saying what did not happen.
func waitJS(t *testing.T, ctx context.Context, what, predicate string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, waitFor+5*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](predicate,
		chromedp.WithPollingInterval(100*time.Millisecond),
		chromedp.WithPollingTimeout(waitFor)))
	if err != nil {
		html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
		t.Fatalf("page: not %s within %v (%v); the page:\n%s", what, waitFor, err, html)
	}
}

// css returns a CSS selector for chromedp.
func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// login signs in with key through the login form and waits for the
// dashboard with its event stream open.
func login(t *testing.T, ctx context.Context, g *gateway, key string) {
	t.Helper()
	do(t, ctx,
		chromedp.Navigate(g.base+"/ui"),
		chromedp.WaitVisible(css(`form#login input[name="token"][type="password"]`)),
	)
	if loc := eval[string](t, ctx, `location.pathname`); loc != "/ui/login" {
		t.Fatalf("/ui without a session went to %s, want /ui/login", loc)
	}
	do(t, ctx, chromedp.SendKeys(css(`form#login input[name="token"]`), key))
	submitLogin(t, ctx)
}

// submitLogin clicks the login form's button and waits for the dashboard,
// failing at once, with the page's text, when the answer is not a 200
// page (after the 303 to /ui).
func submitLogin(t *testing.T, ctx context.Context) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	resp, err := chromedp.RunResponse(tctx, chromedp.Click(css(`form#login button[type="submit"]`)))
	if err != nil {
		t.Fatalf("login: %v", err)
	}
	if resp.Status != http.StatusOK || !strings.HasSuffix(resp.URL, "/ui") {
		text, _ := chromedp.Run(tctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		t.Fatalf("login: %d at %s, want the dashboard (303 to /ui, 200); the page says: %q", resp.Status, resp.URL, text)
	}
	do(t, ctx, chromedp.WaitVisible(css(`header#who`)))
	waitLive(t, ctx)
}

// waitLive waits until the page's EventSource is open.
func waitLive(t *testing.T, ctx context.Context) {
	t.Helper()
	waitJS(t, ctx, `live (body[data-live="on"])`, `document.body.dataset.live === "on"`)
}

// markPage sets a value on window that a reload would drop; noReload
// checks it is still there.
func markPage(t *testing.T, ctx context.Context) {
	t.Helper()
	eval[chromedp.Void](t, ctx, `window.__noReload = "still here"; undefined`)
}

func noReload(t *testing.T, ctx context.Context) {
	t.Helper()
	if v := eval[string](t, ctx, `String(window.__noReload)`); v != "still here" {
		t.Fatalf("the page reloaded (window.__noReload = %q): the dashboard must update in place", v)
	}
}

// screenshot saves a full-page screenshot in the test's artifact folder
// (kept with go test -artifacts -outputdir DIR).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if len(png) < 8 || string(png[1:4]) != "PNG" {
		t.Fatalf("screenshot %s: not a PNG (%d bytes)", name, len(png))
	}
	p := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}

// jsString quotes s for a JavaScript expression.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// readAll reads and closes a body.
func readAll(t *testing.T, r io.ReadCloser) string {
	t.Helper()
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
