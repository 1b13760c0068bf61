package console

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/pin"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/state"
	"github.com/mcp-gateway/mcp-gateway/internal/state/redistest"
)

// hostile is text an upstream controls, put wherever the console shows
// such text: it must arrive as text, never as markup.
const hostile = `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"><b>bold</b>"'&`

// fakeSource is a Source the test changes as it goes.
type fakeSource struct {
	mu     sync.Mutex
	status []router.UpstreamStatus
	views  []router.ViewStatus
	tools  map[string][]router.ToolInfo
	pins   *router.PinReport
}

func (f *fakeSource) Status() []router.UpstreamStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]router.UpstreamStatus(nil), f.status...)
}

func (f *fakeSource) Views() []router.ViewStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]router.ViewStatus(nil), f.views...)
}

func (f *fakeSource) Tools(view string) (router.ViewInfo, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tools[view]
	return router.ViewInfo{Name: view, Tools: t}, ok
}

func (f *fakeSource) Pinning() (router.PinReport, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pins == nil {
		return router.PinReport{}, false
	}
	return *f.pins, true
}

func (f *fakeSource) setState(name string, p router.Phase) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.status {
		if f.status[i].Name == name {
			f.status[i].State = p
		}
	}
}

func tool(name, upstream, desc string) router.ToolInfo {
	def, _ := json.Marshal(map[string]string{"name": name, "description": desc})
	return router.ToolInfo{Name: name, Upstream: upstream, Definition: def}
}

// newSource is two teams' views over two upstreams, and one definition
// quarantined.
func newSource() *fakeSource {
	return &fakeSource{
		status: []router.UpstreamStatus{
			{Name: "alpha", Transport: "stdio", State: router.PhaseReady, Era: "legacy", Tools: 2, Error: "alpha error " + hostile},
			{Name: "beta", Transport: "streamable-http", State: router.PhaseReady, Era: "modern", Tools: 1, Error: "http://10.0.0.7:9000 refused"},
		},
		views: []router.ViewStatus{
			{Name: "", Tools: 3},
			{Name: "ops", Tools: 3},
			{Name: "dev", Tools: 1, Cut: []policy.Cut{{Name: "alpha__two", Limit: "max_tools"}}},
		},
		tools: map[string][]router.ToolInfo{
			"":    {tool("alpha__one", "alpha", hostile), tool("alpha__two", "alpha", "two"), tool("beta__secret", "beta", "ops only")},
			"ops": {tool("alpha__one", "alpha", hostile), tool("alpha__two", "alpha", "two"), tool("beta__secret", "beta", "ops only")},
			"dev": {tool("alpha__one", "alpha", hostile)},
		},
		pins: &router.PinReport{Quarantined: []router.PinStatus{{Kind: pin.KindTool, Name: "beta__rug", Upstream: "beta", Reason: pin.ReasonChanged,
			Detail: hostile, Diff: "- old\n+ (cut)", ReviewDiff: "- old\n+ " + hostile, Definition: `{"description": "` + hostile + `"}`, SHA256: "abc123"}}},
	}
}

var keys = map[string]policy.Identity{
	"ops-key": {Team: "ops", Key: "sha256:opsopsopsops", ID: "key:ops"},
	"dev-key": {Team: "dev", Key: "sha256:devdevdevdev", ID: "key:dev"},
}

// fixture is a console on an httptest server, with its approvals
// recorded.
type fixture struct {
	t        *testing.T
	c        *Console
	src      *fakeSource
	srv      *httptest.Server
	calls    *Calls
	mu       sync.Mutex
	approved []Approval
	approve  error
	keys     map[string]policy.Identity
}

func newFixture(t *testing.T, withAuth bool) *fixture {
	t.Helper()
	f := &fixture{t: t, src: newSource(), calls: NewCalls(10), keys: map[string]policy.Identity{}}
	for k, v := range keys {
		f.keys[k] = v
	}
	auth := Auth{}
	if withAuth {
		auth = Auth{
			Identify: func(token string) (policy.Identity, error) {
				f.mu.Lock()
				defer f.mu.Unlock()
				id, ok := f.keys[token]
				if !ok {
					return policy.Identity{}, policy.ErrInvalidCredentials
				}
				return id, nil
			},
			Admin: func(id policy.Identity) bool { return id.Team == "ops" },
		}
	}
	f.c = New(Options{Path: config.ConsolePath, Source: f.src, Auth: auth, Calls: f.calls, Refresh: 10 * time.Millisecond,
		Approve: func(_ context.Context, a Approval) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.approved = append(f.approved, a)
			return f.approve
		}})
	f.srv = httptest.NewServer(f.c)
	t.Cleanup(func() {
		f.c.Close()
		f.srv.Close()
	})
	return f
}

// browser is a client with its own cookie jar, which follows no
// redirect (the test reads them).
func (f *fixture) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (f *fixture) url(p string) string { return f.srv.URL + config.ConsolePath + p }

var _ Shared = (*state.Store)(nil)

// post sends a form as the console's own page does (Origin: its own).
func (f *fixture) post(c *http.Client, p string, form url.Values) *http.Response {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.url(p), strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", f.srv.URL)
	resp, err := c.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp
}

func (f *fixture) get(c *http.Client, p string) (*http.Response, string) {
	f.t.Helper()
	resp, err := c.Get(f.url(p))
	if err != nil {
		f.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// login logs c in with key and returns the dashboard's HTML.
func (f *fixture) login(c *http.Client, key string) string {
	f.t.Helper()
	resp := f.post(c, "/login", url.Values{"token": {key}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != config.ConsolePath {
		f.t.Fatalf("login with %q: %d to %q, want 303 to %s", key, resp.StatusCode, resp.Header.Get("Location"), config.ConsolePath)
	}
	page, body := f.get(c, "")
	if page.StatusCode != http.StatusOK {
		f.t.Fatalf("dashboard after login: %d\n%s", page.StatusCode, body)
	}
	return body
}

// csrfOf reads the CSRF token out of a page.
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	const marker = `name="csrf" value="`
	i := strings.Index(page, marker)
	if i < 0 {
		t.Fatalf("no CSRF token in the page:\n%s", page)
	}
	rest := page[i+len(marker):]
	return rest[:strings.IndexByte(rest, '"')]
}

func TestLoginFlow(t *testing.T) {
	f := newFixture(t, true)
	c := f.browser()
	resp, _ := f.get(c, "")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" {
		t.Fatalf("dashboard without a session: %d to %q, want 303 to /ui/login", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, body := f.get(c, "/login")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `<form id="login" method="post" action="/ui/login">`) {
		t.Fatalf("login page: %d\n%s", resp.StatusCode, body)
	}
	// The pages run only the console's own script.
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
	bad := f.post(c, "/login", url.Values{"token": {"wrong"}})
	b, _ := io.ReadAll(bad.Body)
	bad.Body.Close()
	if bad.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), `id="error"`) || len(bad.Cookies()) != 0 {
		t.Fatalf("login with a wrong key: %d, cookies %v\n%s", bad.StatusCode, bad.Cookies(), b)
	}

	ok := f.post(c, "/login", url.Values{"token": {"ops-key"}})
	ok.Body.Close()
	cookies := ok.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("login set %d cookies, want 1", len(cookies))
	}
	ck := cookies[0]
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/ui" || ck.Secure || strings.Contains(ck.Value, "ops-key") {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/ui, an opaque value", ck)
	}
	_, page := f.get(c, "")
	if !strings.Contains(page, `id="who" data-admin="true" data-team="ops"`) {
		t.Fatalf("dashboard does not say who is logged in:\n%s", page)
	}

	// Log out: the session ends; its cookie opens nothing any more.
	out := f.post(c, "/logout", url.Values{"csrf": {csrfOf(t, page)}})
	out.Body.Close()
	if out.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", out.StatusCode)
	}
	stale := f.browser()
	u, _ := url.Parse(f.srv.URL + "/ui")
	stale.Jar.SetCookies(u, []*http.Cookie{{Name: ck.Name, Value: ck.Value}})
	if resp, _ := f.get(stale, ""); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the logged-out cookie still opens the dashboard: %d", resp.StatusCode)
	}
}

func TestSecureCookie(t *testing.T) {
	c := New(Options{Path: "/ui", Source: newSource(), Secure: true,
		Auth: Auth{Identify: func(string) (policy.Identity, error) { return keys["ops-key"], nil }}})
	defer c.Close()
	req := httptest.NewRequest(http.MethodPost, "/ui/login", strings.NewReader("token=k"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w := httptest.NewRecorder()
	c.ServeHTTP(w, req)
	ck := w.Result().Cookies()
	if len(ck) != 1 || ck[0].Name != "__Host-mcpgw_console" || !ck[0].Secure || ck[0].Path != "/" {
		t.Fatalf("cookie over HTTPS: %+v, want __Host-mcpgw_console, Secure, Path=/", ck)
	}
}

// Everything an upstream controls (descriptions, errors, diffs, names)
// is shown as text.
func TestEscapesUntrustedText(t *testing.T) {
	f := newFixture(t, true)
	f.calls.Add(Call{At: time.Now(), View: "ops", Principal: "key:ops", Tool: hostile, Upstream: "alpha", Outcome: "ok"})
	page := f.login(f.browser(), "ops-key")
	for _, raw := range []string{"<script>", "<img", "<b>", `onerror="`} {
		if strings.Contains(page, raw) {
			t.Errorf("the page holds %q unescaped", raw)
		}
	}
	for _, want := range []string{
		`<span class="desc">&lt;script&gt;window.__pwned=1&lt;/script&gt;&lt;img src=x onerror=&#34;window.__pwned=2&#34;&gt;&lt;b&gt;bold&lt;/b&gt;&#34;&#39;&amp;</span>`,
		`&#43; &lt;script&gt;`,       // the diff
		`alpha error &lt;script&gt;`, // the upstream's error
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	// The call's tool name sits in an attribute: quoted and escaped.
	if !strings.Contains(page, `data-tool="&lt;script&gt;window.__pwned=1&lt;/script&gt;&lt;img src=x onerror=&#34;window.__pwned=2&#34;&gt;&lt;b&gt;bold&lt;/b&gt;&#34;&#39;&amp;"`) {
		t.Errorf("the call's tool name is not escaped in its attribute")
	}
}

// Only an admin sees every view, upstream and call, and may approve;
// another identity sees its own team's views, the upstreams behind them
// and its own calls.
func TestNonAdminSeesOnlyItsOwnView(t *testing.T) {
	f := newFixture(t, true)
	f.calls.Add(Call{At: time.Now(), View: "ops", Principal: "key:ops", Identity: "sha256:opsopsopsops", Tool: "beta__secret", Upstream: "beta", Outcome: "ok"})
	f.calls.Add(Call{At: time.Now(), View: "dev", Principal: "key:dev", Identity: "sha256:devdevdevdev", Tool: "alpha__one", Upstream: "alpha", Outcome: "tool_error"})
	dev := f.browser()
	page := f.login(dev, "dev-key")
	if !strings.Contains(page, `data-admin="false" data-team="dev"`) {
		t.Fatalf("who:\n%s", page)
	}
	for _, leak := range []string{`data-view="ops"`, `data-view=""`, "beta__secret", `data-upstream="beta"`, "ops only", `id="quarantine"`, "beta__rug",
		"alpha error", `class="approve"`, "sha256:opsopsopsops"} {
		if strings.Contains(page, leak) {
			t.Errorf("a dev caller sees %q", leak)
		}
	}
	for _, want := range []string{`data-view="dev"`, `data-tool="alpha__one"`, `data-upstream="alpha"`, `data-cut="alpha__two"`, `data-outcome="tool_error"`} {
		if !strings.Contains(page, want) {
			t.Errorf("a dev caller does not see %q", want)
		}
	}
	// Its approval is refused, whatever the form says.
	resp := f.post(dev, "/approve", url.Values{"csrf": {csrfOf(t, page)}, "kind": {"tool"}, "upstream": {"beta"}, "name": {"beta__rug"}, "sha256": {"abc123"}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || len(f.approved) != 0 {
		t.Fatalf("a dev caller's approval: %d, approved %v; want 403, none", resp.StatusCode, f.approved)
	}

	ops := f.login(f.browser(), "ops-key")
	for _, want := range []string{`data-view="ops"`, `data-view="dev"`, `data-view=""`, "beta__secret", `data-upstream="beta"`, "http://10.0.0.7:9000 refused",
		`data-name="beta__rug"`, `class="approve"`, "sha256:devdevdevdev", `data-tool="beta__secret"`} {
		if !strings.Contains(ops, want) {
			t.Errorf("the admin does not see %q", want)
		}
	}
}

func TestApprove(t *testing.T) {
	f := newFixture(t, true)
	c := f.browser()
	page := f.login(c, "ops-key")
	csrf := csrfOf(t, page)
	form := url.Values{"csrf": {csrf}, "kind": {"tool"}, "upstream": {"beta"}, "name": {"beta__rug"}, "sha256": {"abc123"}}

	// Without the session's CSRF token, or from another origin, or
	// with a field given twice: refused before anything is approved.
	for name, mutate := range map[string]func(url.Values){
		"no csrf":    func(v url.Values) { v.Del("csrf") },
		"wrong csrf": func(v url.Values) { v.Set("csrf", "x"+csrf) },
		"two names":  func(v url.Values) { v.Add("name", "alpha__one") },
		"no sha256":  func(v url.Values) { v.Del("sha256") },
	} {
		v := url.Values{}
		for k, vs := range form {
			v[k] = append([]string(nil), vs...)
		}
		mutate(v)
		resp := f.post(c, "/approve", v)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d, want 403 or 400", name, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, f.url("/approve"), strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("approval from another origin: %d, want 403", resp.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodPost, f.url("/approve"), strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if resp, err = c.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("approval marked cross-site: %d, want 403", resp.StatusCode)
	}
	if len(f.approved) != 0 {
		t.Fatalf("refused forms approved %v", f.approved)
	}

	resp = f.post(c, "/approve", form)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approval: %d, want 303", resp.StatusCode)
	}
	want := Approval{Kind: "tool", Upstream: "beta", Name: "beta__rug", SHA256: "abc123", By: "console:sha256:opsopsopsops"}
	if len(f.approved) != 1 || f.approved[0] != want {
		t.Fatalf("approved %+v, want %+v", f.approved, want)
	}
	_, page = f.get(c, "")
	if !strings.Contains(page, `id="flash" class="ok"`) {
		t.Errorf("no flash after the approval:\n%s", page)
	}
	// The flash is shown once.
	if _, again := f.get(c, ""); strings.Contains(again, `id="flash"`) {
		t.Errorf("the flash is shown again")
	}

	// A definition that changed again since the page: the admin is told.
	f.approve = ErrChangedAgain
	resp = f.post(c, "/approve", form)
	resp.Body.Close()
	_, page = f.get(c, "")
	if !strings.Contains(page, `id="flash" class="error"`) || !strings.Contains(page, "changed again") {
		t.Errorf("a refused approval is not reported:\n%s", page)
	}
}

// readEvent reads the next SSE event (name, data) of a stream.
func readEvent(t *testing.T, r *bufio.Reader) (string, string) {
	t.Helper()
	var name string
	var data []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("event stream ended: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if name != "" || data != nil {
				return name, strings.Join(data, "\n")
			}
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		}
	}
}

// The live part of the page follows the gateway: an upstream going down
// is sent without a reload; a session whose key is removed ends.
func TestEventsFollowChanges(t *testing.T) {
	f := newFixture(t, true)
	c := f.browser()
	f.login(c, "ops-key")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.url("/events"), nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	r := bufio.NewReader(resp.Body)
	name, data := readEvent(t, r)
	if name != "update" || !strings.Contains(data, `data-upstream="alpha" data-state="ready" class="state-ok"`) {
		t.Fatalf("first event %q:\n%s", name, data)
	}
	f.src.setState("alpha", router.PhaseRestarting)
	name, data = readEvent(t, r)
	if name != "update" || !strings.Contains(data, `data-upstream="alpha" data-state="restarting" class="state-down"`) {
		t.Fatalf("after alpha went down, event %q:\n%s", name, data)
	}

	// The key is removed (a reload): at its next check the session ends.
	f.mu.Lock()
	delete(f.keys, "ops-key")
	f.mu.Unlock()
	f.c.ahead.Store(int64(recheckEvery + time.Second))
	for {
		name, _ = readEvent(t, r)
		if name == "ended" {
			break
		}
	}
	if resp, _ := f.get(c, ""); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the removed key's session still opens the dashboard: %d", resp.StatusCode)
	}
}

func TestEventsNeedASession(t *testing.T) {
	f := newFixture(t, true)
	resp, _ := f.get(f.browser(), "/events")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("events without a session: %d, want 401", resp.StatusCode)
	}
	// A page of another origin cannot open it either (its Origin).
	c := f.browser()
	f.login(c, "ops-key")
	req, _ := http.NewRequest(http.MethodGet, f.url("/events"), nil)
	req.Header.Set("Origin", "http://evil.example")
	r, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusForbidden {
		t.Fatalf("events from another origin: %d, want 403", r.StatusCode)
	}
}

// An identity holds at most maxStreamsPerIdentity streams; Close ends them.
func TestStreamBounds(t *testing.T) {
	f := newFixture(t, true)
	c := f.browser()
	f.login(c, "ops-key")
	var bodies []io.ReadCloser
	for range maxStreamsPerIdentity {
		resp, err := c.Get(f.url("/events"))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream: %d", resp.StatusCode)
		}
		bodies = append(bodies, resp.Body)
	}
	resp, _ := f.get(c, "/events")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("one stream too many: %d, want 429", resp.StatusCode)
	}
	f.c.Close()
	for _, b := range bodies {
		if _, err := io.Copy(io.Discard, b); err != nil {
			t.Errorf("stream did not end cleanly at Close: %v", err)
		}
		b.Close()
	}
}

// Failed logins come from one bucket: a guessing flood gets 429 (and a
// good key still works once the bucket refills).
func TestFailedLoginsAreLimited(t *testing.T) {
	f := newFixture(t, true)
	c := f.browser()
	limited := false
	for i := range failedLoginBurst + 5 {
		resp := f.post(c, "/login", url.Values{"token": {"guess"}})
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			limited = true
			if resp.Header.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
			break
		}
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d", i, resp.StatusCode)
		}
	}
	if !limited {
		t.Fatalf("%d failed logins were never limited", failedLoginBurst+5)
	}
}

// Without authentication (loopback only) a visitor is an admin at once,
// with a session for its CSRF token; there is no login page.
func TestNoAuthentication(t *testing.T) {
	f := newFixture(t, false)
	c := f.browser()
	resp, page := f.get(c, "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `data-admin="true"`) || strings.Contains(page, `id="logout"`) {
		t.Fatalf("dashboard without authentication: %d\n%s", resp.StatusCode, page)
	}
	if resp, _ := f.get(c, "/login"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("login page without authentication: %d, want 303 to the dashboard", resp.StatusCode)
	}
	r := f.post(c, "/approve", url.Values{"csrf": {csrfOf(t, page)}, "kind": {"tool"}, "upstream": {"beta"}, "name": {"beta__rug"}, "sha256": {"abc123"}})
	r.Body.Close()
	if r.StatusCode != http.StatusSeeOther || len(f.approved) != 1 || f.approved[0].By != "console" {
		t.Fatalf("approval without authentication: %d, %+v", r.StatusCode, f.approved)
	}
	// Another visitor's session is not this one's: its CSRF token
	// differs.
	_, other := f.get(f.browser(), "")
	if csrfOf(t, other) == csrfOf(t, page) {
		t.Fatal("two visitors share a CSRF token")
	}
}

func TestCallsRing(t *testing.T) {
	r := NewCalls(3)
	for i := range 5 {
		r.Add(Call{Tool: string(rune('a' + i))})
	}
	got := r.Recent(10, func(*Call) bool { return true })
	if len(got) != 3 || got[0].Tool != "e" || got[2].Tool != "c" {
		t.Fatalf("ring holds %+v, want e, d, c", got)
	}
	only := r.Recent(10, func(c *Call) bool { return c.Tool == "d" })
	if len(only) != 1 {
		t.Fatalf("filtered: %+v", only)
	}
}

func TestClip(t *testing.T) {
	if got := clip("héllo", 3); got != "hél…" {
		t.Errorf("clip = %q", got)
	}
	if got := clip("abc", 3); got != "abc" {
		t.Errorf("clip = %q", got)
	}
}

func TestSSEEventLines(t *testing.T) {
	got := string(sseEvent("update", []byte("a\nb\rc")))
	if got != "event: update\ndata: a\ndata: b&#13;c\n\n" {
		t.Fatalf("sseEvent = %q", got)
	}
}

// BenchmarkCallsAdd is what the console adds to each tools/call: two
// clock reads and one record in the ring, from every core at once.
func BenchmarkCallsAdd(b *testing.B) {
	r := NewCalls(config.DefaultRecentCalls)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			start := time.Now()
			r.Add(Call{At: start, View: "ops", Principal: "key:ops", Identity: "sha256:opsopsopsops", Tool: "up__echo", Upstream: "up",
				Duration: time.Since(start), Outcome: "ok"})
		}
	})
}

// Behind a load balancer (state.store redis, a real Redis): a session
// made on one replica is served by another, its CSRF token with it; the
// cookie is a random value, the credential unreadable in Redis; a
// logout on one ends it on all; a replica on another Redis (or none)
// knows nothing of it.
func TestSharedSessionsAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	store := func() *state.Store {
		st, err := state.Open(state.Options{URL: srv.URL, Sealer: state.RandomSealer(), SessionTTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	sealer := state.RandomSealer()
	shared := func() *state.Store {
		st, err := state.Open(state.Options{URL: srv.URL, Sealer: sealer, SessionTTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	consoles := map[*httptest.Server]*Console{}
	replica := func(s Shared) *httptest.Server {
		c := New(Options{Path: "/ui", Source: newSource(), Shared: s,
			Auth: Auth{Identify: func(token string) (policy.Identity, error) {
				if id, ok := keys[token]; ok {
					return id, nil
				}
				return policy.Identity{}, policy.ErrInvalidCredentials
			}, Admin: func(id policy.Identity) bool { return id.Team == "ops" }},
			Approve: func(context.Context, Approval) error { return nil }})
		srv := httptest.NewServer(c)
		t.Cleanup(func() { c.Close(); srv.Close() })
		consoles[srv] = c
		return srv
	}
	a, b := replica(shared()), replica(shared())
	otherKey, local := replica(store()), replica(nil)
	fa := &fixture{t: t, srv: a}
	jar := fa.browser()
	page := fa.login(jar, "ops-key")
	u, _ := url.Parse(a.URL + "/ui")
	cookie := jar.Jar.Cookies(u)[0]
	if len(cookie.Value) > 64 || strings.Contains(cookie.Value, "ops-key") {
		t.Fatalf("cookie value %q: want a short random value", cookie.Value)
	}
	on := func(srv *httptest.Server, method, path string, form url.Values) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(form.Encode()))
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		req.AddCookie(&http.Cookie{Name: cookie.Name, Value: cookie.Value})
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(body)
	}
	code, pageB := on(b, http.MethodGet, "/ui", nil)
	if code != http.StatusOK || !strings.Contains(pageB, `data-admin="true" data-team="ops"`) || csrfOf(t, pageB) != csrfOf(t, page) {
		t.Fatalf("the session on another replica: %d, or another CSRF token", code)
	}
	for name, srv := range map[string]*httptest.Server{"a replica whose Redis values do not open": otherKey, "a replica without Redis": local} {
		if code, _ := on(srv, http.MethodGet, "/ui", nil); code != http.StatusSeeOther {
			t.Errorf("%s took the session: %d", name, code)
		}
	}
	// The form made on one replica posts to the other.
	form := url.Values{"csrf": {csrfOf(t, page)}, "kind": {"tool"}, "upstream": {"beta"}, "name": {"beta__rug"}, "sha256": {"abc123"}}
	if code, _ := on(b, http.MethodPost, "/ui/approve", form); code != http.StatusSeeOther {
		t.Errorf("approval on the other replica: %d", code)
	}
	// A logout on b ends it on a too, at a's next check of it.
	if code, _ := on(b, http.MethodPost, "/ui/logout", url.Values{"csrf": {csrfOf(t, page)}}); code != http.StatusSeeOther {
		t.Fatalf("logout: %d", code)
	}
	if code, _ := on(b, http.MethodGet, "/ui", nil); code != http.StatusSeeOther {
		t.Errorf("the replica that ended the session still serves it: %d", code)
	}
	consoles[a].ahead.Store(int64(recheckEvery + time.Second))
	if code, _ := on(a, http.MethodGet, "/ui", nil); code != http.StatusSeeOther {
		t.Errorf("the other replica still serves the ended session at its next check: %d", code)
	}
}

// What an admin approves from is the whole live definition and the whole
// diff, never the log's cut diff; a definition the guard could not carry
// whole gets no approve form.
func TestQuarantineShowsWhatIsApproved(t *testing.T) {
	f := newFixture(t, true)
	f.src.mu.Lock()
	f.src.pins.Quarantined = append(f.src.pins.Quarantined, router.PinStatus{Kind: pin.KindTool, Name: "beta__huge", Upstream: "beta",
		Reason: pin.ReasonChanged, Diff: "- a\n+ b", SHA256: "def456"})
	f.src.mu.Unlock()
	page := f.login(f.browser(), "ops-key")
	if strings.Contains(page, "(cut)") || !strings.Contains(page, `<pre class="definition">{&#34;description&#34;: &#34;&lt;script&gt;`) {
		t.Errorf("the quarantine shows the cut diff, or not the whole definition")
	}
	if strings.Count(page, `<form class="approve"`) != 1 || strings.Contains(page, `value="def456"`) || !strings.Contains(page, "Not approvable here") {
		t.Errorf("a definition not shown whole is offered for approval")
	}
}

// A page of another site cannot make the console render for it, nor
// start a session (Sec-Fetch-Site), whatever the method.
func TestCrossSiteFetchesRefused(t *testing.T) {
	f := newFixture(t, false)
	for _, site := range []string{"cross-site", "same-site"} {
		req, _ := http.NewRequest(http.MethodGet, f.url(""), nil)
		req.Header.Set("Sec-Fetch-Site", site)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
			t.Errorf("GET with Sec-Fetch-Site %s: %d, cookies %v; want 403, none", site, resp.StatusCode, resp.Cookies())
		}
	}
	for _, site := range []string{"same-origin", "none"} {
		req, _ := http.NewRequest(http.MethodGet, f.url(""), nil)
		req.Header.Set("Sec-Fetch-Site", site)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET with Sec-Fetch-Site %s: %d, want 200", site, resp.StatusCode)
		}
	}
}

// Guesses sent at once are limited as guesses sent one by one, per
// client address; a good key is not counted.
func TestFailedLoginsLimitedAtOnce(t *testing.T) {
	f := newFixture(t, true)
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for range 3 * failedLoginBurst {
		wg.Go(func() {
			resp := f.post(f.browser(), "/login", url.Values{"token": {"guess"}})
			resp.Body.Close()
			mu.Lock()
			codes[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if codes[http.StatusUnauthorized] > failedLoginBurst+2 || codes[http.StatusTooManyRequests] == 0 {
		t.Fatalf("%d guesses at once: %v; want at most about %d checked, the rest 429", 3*failedLoginBurst, codes, failedLoginBurst)
	}
}

func TestGoodLoginsAreNotCounted(t *testing.T) {
	f := newFixture(t, true)
	for range 2 * failedLoginBurst {
		f.login(f.browser(), "ops-key") // fails the test on anything but 303
	}
}

// A host's text is bounded in the ring: a name as long as a body costs
// the console a short string.
func TestCallsBoundHostText(t *testing.T) {
	r := NewCalls(1)
	long := strings.Repeat("A", 3<<20)
	r.Add(Call{Tool: long, Principal: "key:" + long})
	got := r.Recent(1, func(*Call) bool { return true })[0]
	if len([]rune(got.Tool)) > maxCallField+1 {
		t.Errorf("a tool name of %d bytes kept as %d", len(long), len(got.Tool))
	}
	if got.Principal != "key:"+long {
		t.Error("the principal was cut: callers sharing a prefix would see each other's calls")
	}
}

// Long lists (an upstream listing thousands of changed tools, a view
// cutting thousands) are shown up to a bound, and counted.
func TestListsAreBounded(t *testing.T) {
	f := newFixture(t, true)
	f.src.mu.Lock()
	for i := range 3 * maxRowsShown {
		n := fmt.Sprintf("beta__t%d", i)
		f.src.pins.Quarantined = append(f.src.pins.Quarantined, router.PinStatus{Kind: pin.KindTool, Name: n, Upstream: "beta", Reason: pin.ReasonNew})
		f.src.views[2].Cut = append(f.src.views[2].Cut, policy.Cut{Name: n, Limit: "max_tools"})
	}
	f.src.mu.Unlock()
	page := f.login(f.browser(), "ops-key")
	if n := strings.Count(page, `<tr data-kind="tool" data-name=`); n != maxRowsShown {
		t.Errorf("%d quarantine rows shown, want %d", n, maxRowsShown)
	}
	if n := strings.Count(page, `data-cut="beta__t`); n > maxRowsShown {
		t.Errorf("%d cut rows shown, want at most %d", n, maxRowsShown)
	}
	if !strings.Contains(page, fmt.Sprintf("and %d more", 2*maxRowsShown+1)) {
		t.Errorf("the rows not shown are not counted")
	}
}

// One page carries at most maxReviewBytes of whole definitions: an
// upstream listing many large changed definitions cannot make every
// render of the page huge; the rows past it have no form.
func TestReviewBudget(t *testing.T) {
	f := newFixture(t, true)
	big := strings.Repeat("x", 200<<10)
	f.src.mu.Lock()
	f.src.pins.Quarantined = nil
	for i := range 10 {
		f.src.pins.Quarantined = append(f.src.pins.Quarantined, router.PinStatus{Kind: pin.KindTool, Name: fmt.Sprintf("beta__big%d", i), Upstream: "beta",
			Reason: pin.ReasonChanged, Diff: "- a\n+ (cut)", ReviewDiff: "- a\n+ " + big, Definition: big, SHA256: fmt.Sprintf("h%d", i)})
	}
	f.src.mu.Unlock()
	page := f.login(f.browser(), "ops-key")
	forms := strings.Count(page, `<form class="approve"`)
	if forms == 0 || forms > maxReviewBytes/(400<<10)+1 || len(page) > 2*maxReviewBytes {
		t.Errorf("%d approve forms in a page of %d bytes; want some, within %d bytes of definitions", forms, len(page), maxReviewBytes)
	}
	if !strings.Contains(page, "(cut)") {
		t.Errorf("the rows past the budget do not show the cut diff")
	}
}

// One identity logging in again and again pushes out only its own
// sessions, never an admin's.
func TestLoginFloodKeepsOthersSessions(t *testing.T) {
	f := newFixture(t, true)
	admin := f.browser()
	f.login(admin, "ops-key")
	for range maxSessions + 10 {
		resp := f.post(f.browser(), "/login", url.Values{"token": {"dev-key"}})
		resp.Body.Close()
	}
	if resp, _ := f.get(admin, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("the admin's session after another identity's %d logins: %d", maxSessions+10, resp.StatusCode)
	}
	f.c.sessions.mu.Lock()
	n := len(f.c.sessions.m)
	f.c.sessions.mu.Unlock()
	if n > maxSessionsPerIdentity+1 {
		t.Errorf("%d sessions kept, want at most %d of dev's and the admin's", n, maxSessionsPerIdentity)
	}
}

// flakyShared is Redis that can be down.
type flakyShared struct {
	mu   sync.Mutex
	m    map[string][]byte
	down bool
}

func (s *flakyShared) PutConsoleSession(_ context.Context, d string, v []byte, _ time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return state.ErrUnavailable
	}
	s.m[d] = v
	return nil
}

func (s *flakyShared) ConsoleSession(_ context.Context, d string, _ time.Duration) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return nil, state.ErrUnavailable
	}
	if v, ok := s.m[d]; ok {
		return v, nil
	}
	return nil, state.ErrNoConsoleSession
}

func (s *flakyShared) EndConsoleSession(_ context.Context, d string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return state.ErrUnavailable
	}
	delete(s.m, d)
	return nil
}

// A logout while Redis is down still ends the session on the replica
// that logged it out, when Redis comes back.
func TestLogoutWhileRedisIsDown(t *testing.T) {
	shared := &flakyShared{m: map[string][]byte{}}
	c := New(Options{Path: "/ui", Source: newSource(), Shared: shared,
		Auth: Auth{Identify: func(token string) (policy.Identity, error) {
			if id, ok := keys[token]; ok {
				return id, nil
			}
			return policy.Identity{}, policy.ErrInvalidCredentials
		}, Admin: func(id policy.Identity) bool { return id.Team == "ops" }}})
	srv := httptest.NewServer(c)
	defer func() { c.Close(); srv.Close() }()
	f := &fixture{t: t, srv: srv}
	b := f.browser()
	page := f.login(b, "ops-key")
	u, _ := url.Parse(srv.URL + "/ui")
	cookie := b.Jar.Cookies(u)[0]
	shared.mu.Lock()
	shared.down = true
	shared.mu.Unlock()
	if r := f.post(b, "/logout", url.Values{"csrf": {csrfOf(t, page)}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", r.StatusCode)
	}
	shared.mu.Lock()
	shared.down = false
	shared.mu.Unlock()
	stale := f.browser()
	stale.Jar.SetCookies(u, []*http.Cookie{{Name: cookie.Name, Value: cookie.Value}})
	if resp, _ := f.get(stale, ""); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the session logged out while Redis was down is taken over again: %d", resp.StatusCode)
	}
}

func TestAddressKey(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:5000":           "loopback",
		"127.9.8.7:1":              "loopback",
		"[::1]:80":                 "loopback",
		"[::ffff:127.0.0.1]:80":    "loopback",
		"10.1.2.3:999":             "10.1.2.3",
		"[2001:db8:1:2:3:4:5:6]:1": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ff::1]:1":   "2001:db8:1:2::/64",
	} {
		if got := addressKey(in); got != want {
			t.Errorf("addressKey(%q) = %q, want %q", in, got, want)
		}
	}
}
