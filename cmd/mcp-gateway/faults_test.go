//go:build linux

package main

// The fault-injection suite: upstreams that crash, hang, fail in transport
// or trip their circuit breaker, while hosts keep calling. Every outcome is
// asserted; the latencies the issue asks about are logged with -v.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
)

// faultMark is an environment variable that marks the processes of one
// upstream, so that a test can find (and kill) them.
const faultMark = "MCPGW_FAULT_MARK"

// markedProcesses returns the pids of the processes whose environment
// holds faultMark=mark.
func markedProcesses(t *testing.T, mark string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	want := []byte(faultMark + "=" + mark + "\x00")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(append(env, 0), want) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// processState is the state letter of /proc/<pid>/stat ("" if gone).
func processState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// pid (comm) S ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return ""
	}
	return string(b[i+2])
}

// TestFaultKillStdioUpstream kills a stdio upstream with SIGKILL while 50
// calls to it are in flight and another upstream serves a steady load.
// The 50 calls fail at once (not at their 30s timeout), the other
// upstream's calls all succeed, the process is restarted (its tools leave
// the catalog meanwhile, and calls to them say it is restarting), its
// tools work again, and exactly one process of it is left, the killed
// one reaped.
func TestFaultKillStdioUpstream(t *testing.T) {
	mark := fmt.Sprintf("kill-%d", time.Now().UnixNano())
	// Restarts fail while the victim's working folder is gone, so that
	// the test can look at the gateway while the upstream is down.
	dir := filepath.Join(t.TempDir(), "victim")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	victim := stdioUpstream("victim", "echo", map[string]string{faultMark: mark})
	victim.Cwd = dir
	victim.Timeout = 30 * time.Second
	victim.Restart = config.Restart{Delay: 20 * time.Millisecond, MaxDelay: 100 * time.Millisecond, CrashLimit: -1}
	cfg := config.Default()
	cfg.Upstreams = []config.Upstream{victim, stdioUpstream("other", "echo", nil)}
	url, g := startGateway(t, cfg)
	cs, changed := listChanges(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	pids := markedProcesses(t, mark)
	if len(pids) != 1 {
		t.Fatalf("victim processes before the kill: %v, want one", pids)
	}

	const inFlight = 50
	type outcome struct {
		text    string
		isError bool
		err     error
		at      time.Time
	}
	outcomes := make(chan outcome, inFlight)
	for range inFlight {
		go func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "victim__block", Arguments: map[string]any{"key": "k"}})
			o := outcome{err: err, at: time.Now()}
			if err == nil {
				o.isError = res.IsError
				if len(res.Content) > 0 {
					if tc, ok := res.Content[0].(*mcp.TextContent); ok {
						o.text = tc.Text
					}
				}
			}
			outcomes <- o
		}()
	}
	if _, err := callText(ctx, cs, "victim__waiting", map[string]any{"key": "k", "n": inFlight}); err != nil {
		t.Fatalf("the %d calls never all reached the victim: %v", inFlight, err)
	}

	// The other upstream's steady load, from before the kill until the
	// victim is back.
	load := startLoad(ctx, cs, "other__echo")
	defer load.stop()

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var slowest time.Duration
	for range inFlight {
		var o outcome
		select {
		case o = <-outcomes:
		case <-ctx.Done():
			t.Fatal("the calls in flight on the killed process never ended")
		}
		slowest = max(slowest, o.at.Sub(killed))
		if o.err != nil || !o.isError || !strings.Contains(o.text, `"victim" is unavailable`) {
			t.Errorf("a call in flight on the killed process: %q, isError %v, %v; want an isError result saying it is unavailable", o.text, o.isError, o.err)
		}
	}
	// At once means well before the 30s timeout (the issue asks for
	// under a second; the time is logged, not asserted, on shared CI).
	if slowest >= victim.Timeout {
		t.Errorf("the calls in flight ended %v after the kill: at their timeout, not at once", slowest)
	}
	t.Logf("%d calls in flight failed within %v of the SIGKILL", inFlight, slowest)

	awaitTools(ctx, t, cs, changed, "the victim's tools leaving the catalog", func(names []string) bool {
		return !slices.Contains(names, "victim__echo") && slices.Contains(names, "other__echo")
	})
	text, isError := toolResult(ctx, t, cs, "victim__echo", map[string]any{"text": "x"})
	if !isError || !strings.Contains(text, `"victim" is restarting`) || !strings.Contains(text, "retried at") {
		t.Errorf("a call while the victim restarts: %q (isError %v), want it restarting with a retry time", text, isError)
	}
	if s := statusOf(g, "victim"); s.State != router.PhaseRestarting || s.Error == "" {
		t.Errorf("victim status while down: %+v", s)
	}

	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	awaitTools(ctx, t, cs, changed, "the victim's tools coming back", func(names []string) bool {
		return slices.Contains(names, "victim__echo")
	})
	if got, err := callText(ctx, cs, "victim__echo", map[string]any{"text": "back"}); err != nil || got != "back" {
		t.Errorf("the restarted victim: %q, %v", got, err)
	}
	if s := statusOf(g, "victim"); s.State != router.PhaseReady || s.Restarts < 1 {
		t.Errorf("victim status after the restart: %+v", s)
	}
	after := markedProcesses(t, mark)
	if len(after) != 1 || after[0] == pids[0] {
		t.Errorf("victim processes after the restart: %v (the killed one was %d), want one new one", after, pids[0])
	}
	if st := processState(pids[0]); st != "" {
		t.Errorf("the killed process %d is still there, state %s", pids[0], st)
	}
	load.stop()
	if n := load.failures.Load(); n > 0 {
		t.Errorf("%d of %d calls to the other upstream failed; first: %v", n, load.calls.Load(), load.firstErr.Load())
	}
	t.Logf("%d calls to the other upstream, all answered", load.calls.Load())
}

// TestFaultBreaker: an upstream whose tool never answers. Each call gets
// an isError result at the timeout and the upstream a cancellation; two
// timeouts open the breaker, whose tools then leave tools/list, and calls
// to them are refused at once; after the cooldown the gateway's probe
// finds the server healthy, the breaker closes, and list_changed brings
// the tools back.
func TestFaultBreaker(t *testing.T) {
	hang := stdioUpstream("hang", "echo", nil)
	hang.Timeout = 1500 * time.Millisecond
	// The cooldown leaves time to look at the open breaker on a busy machine.
	hang.Breaker = config.Breaker{Failures: 2, Cooldown: 4 * time.Second}
	cfg := config.Default()
	cfg.Upstreams = []config.Upstream{hang, stdioUpstream("other", "echo", nil)}
	url, g := startGateway(t, cfg)
	cs, changed := listChanges(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The server stops answering anything, probes included: the process
	// is stopped (SIGSTOP) until SIGCONT, as a wedged server would be. A
	// server that still answered a ping would be slow for these calls,
	// not failing (see TestOneIdentityCannotStarveAnother).
	out, err := callText(ctx, cs, "hang__pid", nil)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(out)
	if err != nil {
		t.Fatalf("pid %q: %v", out, err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resume := sync.OnceFunc(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	t.Cleanup(resume)

	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			text, isError := toolResult(ctx, t, cs, "hang__block", map[string]any{"key": "never"})
			if !isError || !strings.Contains(text, `"hang" did not answer within 1.5s`) {
				t.Errorf("a call that timed out: %q (isError %v)", text, isError)
			}
		})
	}
	wg.Wait()

	awaitTools(ctx, t, cs, changed, "the open breaker's tools leaving the catalog", func(names []string) bool {
		return !slices.Contains(names, "hang__echo") && slices.Contains(names, "other__echo")
	})
	var refused []time.Duration
	for range 5 {
		start := time.Now()
		text, isError := toolResult(ctx, t, cs, "hang__echo", map[string]any{"text": "x"})
		refused = append(refused, time.Since(start))
		if !isError || !strings.Contains(text, "unavailable after repeated failures") || !strings.Contains(text, "retried at") {
			t.Errorf("a call behind the open breaker: %q (isError %v)", text, isError)
		}
	}
	slices.Sort(refused)
	t.Logf("calls behind the open breaker answered in %v (median of 5)", refused[2])
	if s := statusOf(g, "hang"); s.State != router.PhaseUnavailable || s.RetryAt == nil {
		t.Errorf("status with the breaker open: %+v", s)
	}

	resume()
	awaitTools(ctx, t, cs, changed, "the tools coming back when the breaker closes", func(names []string) bool {
		return slices.Contains(names, "hang__echo")
	})
	if got, err := callText(ctx, cs, "hang__echo", map[string]any{"text": "healthy"}); err != nil || got != "healthy" {
		t.Errorf("after the breaker closed: %q, %v", got, err)
	}
	// The upstream saw both timed-out calls cancelled.
	out, err = callText(ctx, cs, "hang__cancellations", map[string]any{"key": "never"})
	if err != nil {
		t.Fatal(err)
	}
	var seen struct{ Block, Cancelled []json.RawMessage }
	if err := json.Unmarshal([]byte(out), &seen); err != nil {
		t.Fatalf("cancellations %q: %v", out, err)
	}
	if len(seen.Block) != 2 {
		t.Fatalf("the upstream saw %d block calls, want 2: %s", len(seen.Block), out)
	}
	for _, id := range seen.Block {
		if !slices.ContainsFunc(seen.Cancelled, func(c json.RawMessage) bool { return string(c) == string(id) }) {
			t.Errorf("block call %s timed out without a cancellation: %s", id, out)
		}
	}
}

// faultyFront passes requests to an MCP server, except tools/call of the
// tool named "echo", which it answers with fault: "500" (an HTTP error),
// "hang" (an SSE stream that starts, then says nothing more), or "cut"
// (the connection closed halfway through the response).
func faultyFront(t *testing.T, fault string, backend string) *httptest.Server {
	target, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		m, err := jsonrpc.Decode(body)
		name := ""
		if err == nil && m.Method == "tools/call" {
			name, _ = jsonrpc.StringField(m.Params, "name")
		}
		if name != "echo" {
			proxy.ServeHTTP(w, r)
			return
		}
		switch fault {
		case "500":
			http.Error(w, "internal failure", http.StatusInternalServerError)
		case "hang":
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			fmt.Fprint(w, ": started\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case "cut":
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			fmt.Fprint(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":")
			buf.Flush()
			conn.Close()
		}
	}))
	t.Cleanup(front.Close)
	return front
}

// TestFaultHTTPUpstreams: HTTP upstreams that answer a call with 500,
// hang in the middle of an SSE response, or close the connection in the
// middle of a response. The host gets a clear isError result each time,
// the healthy upstream keeps working, and once the gateway has answered,
// none of its goroutines is left behind (goleak, with idle keep-alive
// connections allowed).
func TestFaultHTTPUpstreams(t *testing.T) {
	backend := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: mcptest.ServerOptions{Name: "backend", Versions: mcptest.LegacyVersions()}})
	cfg := config.Default()
	for _, fault := range []string{"500", "hang", "cut"} {
		u := httpUpstream("f"+fault, faultyFront(t, fault, backend.URL).URL)
		u.Timeout = 2 * time.Second
		u.Breaker.Failures = 100 // this test is about each failure, not the breaker
		cfg.Upstreams = append(cfg.Upstreams, u)
	}
	cfg.Upstreams = append(cfg.Upstreams, httpUpstream("good", backend.URL))
	url, _ := startGateway(t, cfg)
	cs := connect(t, url, eras[0])
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if got, err := callText(ctx, cs, "good__echo", map[string]any{"text": "warm"}); err != nil || got != "warm" {
		t.Fatalf("warm-up: %q, %v", got, err)
	}
	baseline := goleak.IgnoreCurrent()

	want := map[string]string{
		"f500":  `"f500" is unavailable`,
		"fhang": `"fhang" did not answer within 2s`,
		"fcut":  `"fcut" is unavailable`,
	}
	for _, name := range []string{"f500", "fhang", "fcut"} {
		for range 3 {
			text, isError := toolResult(ctx, t, cs, name+"__echo", map[string]any{"text": "x"})
			if !isError || !strings.Contains(text, want[name]) {
				t.Errorf("%s: %q (isError %v), want an isError result saying %s", name, text, isError, want[name])
			}
		}
		if got, err := callText(ctx, cs, "good__echo", map[string]any{"text": name}); err != nil || got != name {
			t.Errorf("the good upstream after %s: %q, %v", name, got, err)
		}
	}
	goleak.VerifyNone(t, baseline,
		// Idle keep-alive connections (the host's, the gateway's to its
		// upstreams, the fake servers') wait in a network read.
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	)
}
