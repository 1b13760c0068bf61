package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

func TestStdioEraDetection(t *testing.T) {
	tests := []struct {
		fake        string
		era         upstream.Era
		version     string
		serverName  string
		shortProbe  bool
		wantProbeTO bool // the probe must have timed out
	}{
		{fake: "echo", era: upstream.EraModern, version: "2026-07-28", serverName: "echo"},
		{fake: "echo-modern", era: upstream.EraModern, version: "2026-07-28", serverName: "echo-modern"},
		{fake: "echo-legacy", era: upstream.EraLegacy, version: "2025-11-25", serverName: "echo-legacy"},
		{fake: "echo-noprobe", era: upstream.EraLegacy, version: "2025-11-25", serverName: "filtered", shortProbe: true, wantProbeTO: true},
		{fake: "late-probe", era: upstream.EraLegacy, version: "2025-11-25", serverName: "filtered", shortProbe: true, wantProbeTO: true},
	}
	for _, tt := range tests {
		t.Run(tt.fake, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			rec := newRecorder()
			opts := stdioOptions(tt.fake)
			opts.Logger = slog.New(rec)
			if tt.shortProbe {
				opts.ProbeTimeout = 300 * time.Millisecond
			}
			c := start(t, opts)
			st := c.State()
			if st.Phase != upstream.Ready || st.Era != tt.era || st.ProtocolVersion != tt.version {
				t.Errorf("state = %v %v %q, want ready %v %q", st.Phase, st.Era, st.ProtocolVersion, tt.era, tt.version)
			}
			if c.Era() != tt.era || c.ProtocolVersion() != tt.version {
				t.Errorf("Era, ProtocolVersion = %v, %q", c.Era(), c.ProtocolVersion())
			}
			var info struct{ Name string }
			if err := json.Unmarshal(c.ServerInfo(), &info); err != nil || info.Name != tt.serverName {
				t.Errorf("ServerInfo = %s, want name %q", c.ServerInfo(), tt.serverName)
			}
			if caps, ok := jsonrpc.Field(c.Capabilities(), "tools"); !ok {
				t.Errorf("Capabilities = %s, want tools", caps)
			}
			// Several calls: a late discover answer must not be taken for
			// the answer to anything else.
			for i := range 3 {
				if got, want := callTool(t, ctx, c, "add", fmt.Sprintf(`{"a":%d,"b":1}`, i)), strconv.Itoa(i+1); got != want {
					t.Errorf("add = %q, want %q", got, want)
				}
			}
			probeTO := false
			for _, r := range rec.all() {
				probeTO = probeTO || strings.Contains(r.msg, "did not answer server/discover")
			}
			if probeTO != tt.wantProbeTO {
				t.Errorf("probe timed out: %v, want %v", probeTO, tt.wantProbeTO)
			}
		})
	}
}

func TestStdioStartFailures(t *testing.T) {
	tests := []struct {
		fake    string
		wantErr error
		wantMsg string
	}{
		{fake: "silent", wantErr: upstream.ErrTimeout},
		{fake: "garbage", wantErr: upstream.ErrTimeout},
		{fake: "crash", wantErr: upstream.ErrClosed, wantMsg: "exit status 3"},
	}
	for _, tt := range tests {
		t.Run(tt.fake, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			var states []upstream.Phase
			var mu sync.Mutex
			opts := stdioOptions(tt.fake)
			opts.ProbeTimeout = 200 * time.Millisecond
			opts.Timeout = 500 * time.Millisecond
			opts.OnStateChange = func(s upstream.State) {
				mu.Lock()
				defer mu.Unlock()
				states = append(states, s.Phase)
			}
			c := newClient(t, opts)
			err := c.Start(ctx)
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("Start = %v, want %v containing %q", err, tt.wantErr, tt.wantMsg)
			}
			st := c.State()
			if st.Phase != upstream.Failed || st.Err == nil {
				t.Errorf("state = %v (%v), want failed with an error", st.Phase, st.Err)
			}
			if _, err := c.Call(ctx, "tools/list", nil); !errors.Is(err, upstream.ErrClosed) {
				t.Errorf("Call after a failed start = %v, want ErrClosed", err)
			}
			c.Close()
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff([]upstream.Phase{upstream.Starting, upstream.Failed, upstream.Stopped}, states); diff != "" {
				t.Errorf("state changes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStdioGarbageLinesSkipped(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	rec := newRecorder()
	opts := stdioOptions("noisy")
	opts.Logger = slog.New(rec)
	c := start(t, opts)
	if got := callTool(t, ctx, c, "echo", `{"text":"hi"}`); got != "hi" {
		t.Errorf("echo = %q", got)
	}
	r, err := rec.wait(ctx, msgIs("not a JSON-RPC message"))
	if err != nil {
		t.Fatal("the garbage lines were not logged")
	}
	if r.attrs["upstream"] != "noisy" || !strings.Contains(r.attrs["line"], "this is not JSON") {
		t.Errorf("log record attrs = %v", r.attrs)
	}
	// Rate-limited: at most five per window.
	n := 0
	for _, r := range rec.all() {
		if strings.Contains(r.msg, "a line that is not a JSON-RPC message") {
			n++
		}
	}
	if n > 5 {
		t.Errorf("%d garbage lines logged, want at most 5", n)
	}
}

func TestStdioPipelining(t *testing.T) {
	t.Parallel()
	c := start(t, stdioOptions("echo"))
	testPipelining(t, c)
}

// testPipelining sends n calls that the server answers only once all n
// have arrived: they complete only if they are in flight together.
func testPipelining(t *testing.T, c *upstream.Client) {
	t.Helper()
	ctx := testCtx(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			res, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"barrier","arguments":{"key":"pipe","n":`+strconv.Itoa(n)+`}}`))
			switch {
			case err != nil:
				errs <- err
			case res.Error != nil:
				errs <- res.Error
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestStdioCrashWithCallsInFlight(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := start(t, stdioOptions("echo"))
	const n = 4
	errs := make(chan error, n+1)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			_, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"block","arguments":{"key":"k"}}`))
			errs <- err
		})
	}
	callTool(t, ctx, c, "waiting", `{"key":"k","n":`+strconv.Itoa(n)+`}`)
	wg.Go(func() {
		_, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"exit","arguments":{"code":7}}`))
		errs <- err
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, upstream.ErrClosed) {
			t.Errorf("call in flight = %v, want ErrClosed", err)
		}
	}
	if ctx.Err() != nil {
		t.Fatal("calls returned only at the test deadline")
	}
	st := c.State()
	if st.Phase != upstream.Failed || st.Err == nil || !strings.Contains(st.Err.Error(), "exit status 7") {
		t.Errorf("state = %v (%v), want failed with exit status 7", st.Phase, st.Err)
	}
	if _, err := c.Call(ctx, "tools/list", nil); !errors.Is(err, upstream.ErrClosed) {
		t.Errorf("later call = %v, want ErrClosed", err)
	}
}

// pidOf returns the child's pid from the "process started" log record.
func pidOf(t *testing.T, rec *recorder) int {
	t.Helper()
	r, err := rec.wait(testCtx(t), msgIs("upstream process started"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(r.attrs["pid"])
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func assertGone(t *testing.T, pid int) {
	t.Helper()
	// Reaped: not even a zombie is left, so the pid does not exist.
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d still exists after Close (kill 0: %v)", pid, err)
	}
}

func TestStdioClose(t *testing.T) {
	t.Run("graceful", func(t *testing.T) {
		t.Parallel()
		rec := newRecorder()
		opts := stdioOptions("echo")
		opts.Logger = slog.New(rec)
		c := start(t, opts)
		pid := pidOf(t, rec)
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		assertGone(t, pid)
		if st := c.State(); st.Phase != upstream.Stopped {
			t.Errorf("state = %v, want stopped", st.Phase)
		}
		for _, r := range rec.all() {
			if strings.Contains(r.msg, "SIGTERM") {
				t.Errorf("a server that exits when its stdin closes got %q", r.msg)
			}
		}
		if _, err := c.Call(testCtx(t), "tools/list", nil); !errors.Is(err, upstream.ErrClosed) {
			t.Errorf("Call after Close = %v, want ErrClosed", err)
		}
	})
	t.Run("stubborn", func(t *testing.T) {
		t.Parallel()
		rec := newRecorder()
		opts := stdioOptions("stubborn")
		opts.Logger = slog.New(rec)
		c := newClient(t, opts)
		upstream.SetStopGrace(c, 200*time.Millisecond)
		if err := c.Start(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		pid := pidOf(t, rec)
		c.Close()
		assertGone(t, pid)
		var got []string
		for _, r := range rec.all() {
			if strings.Contains(r.msg, "sending SIG") {
				got = append(got, r.msg)
			}
		}
		want := []string{
			"upstream process still running after its stdin closed: sending SIGTERM",
			"upstream process still running after SIGTERM: sending SIGKILL",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("shutdown steps (-want +got):\n%s", diff)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		c := start(t, stdioOptions("echo"))
		done := make(chan error, 1)
		go func() {
			_, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"block","arguments":{"key":"c"}}`))
			done <- err
		}()
		callTool(t, ctx, c, "waiting", `{"key":"c","n":1}`)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() { c.Close() })
		}
		wg.Wait()
		if err := <-done; !errors.Is(err, upstream.ErrClosed) {
			t.Errorf("pending call = %v, want ErrClosed", err)
		}
	})
}

func TestStdioEnvironment(t *testing.T) {
	t.Setenv("GATEWAY_ONLY_SECRET", "do-not-pass")
	t.Setenv("LANG", "C.UTF-8")
	ctx := testCtx(t)
	opts := stdioOptions("echo")
	opts.Env["API_KEY"] = "k-123"
	opts.Env["MixedCase_Var"] = "mixed"
	c := start(t, opts)
	for name, want := range map[string]string{
		"API_KEY":             "k-123",
		"api_key":             "<unset>",
		"MixedCase_Var":       "mixed",
		"MIXEDCASE_VAR":       "<unset>",
		"GATEWAY_ONLY_SECRET": "<unset>",
		"LANG":                "C.UTF-8",
	} {
		if got := callTool(t, ctx, c, "getenv", `{"name":"`+name+`"}`); got != want {
			t.Errorf("child's %s = %q, want %q", name, got, want)
		}
	}
}

func TestStdioStderrLogged(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	opts := stdioOptions("echo")
	opts.Name = "my-upstream"
	opts.Logger = slog.New(rec)
	start(t, opts)
	r, err := rec.wait(testCtx(t), msgIs("upstream stderr"))
	if err != nil {
		t.Fatal("no stderr line logged")
	}
	if diff := cmp.Diff(map[string]string{"upstream": "my-upstream", "line": "mcptest fake echo: ready"}, r.attrs); diff != "" {
		t.Errorf("stderr record attrs (-want +got):\n%s", diff)
	}
}

func TestStdioLargeResult(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := start(t, stdioOptions("echo"))
	const size = 10 << 20
	got := callTool(t, ctx, c, "big", `{"size":`+strconv.Itoa(size)+`}`)
	if len(got) != size || strings.Trim(got, "x") != "" {
		t.Errorf("big result has %d bytes, want %d", len(got), size)
	}
	// The connection is still in step afterwards.
	if got := callTool(t, ctx, c, "echo", `{"text":"after"}`); got != "after" {
		t.Errorf("echo = %q", got)
	}
}

func TestStdioServerRequests(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	t.Run("default answer", func(t *testing.T) {
		c := start(t, stdioOptions("echo-legacy"))
		got := callTool(t, ctx, c, "roots", `{}`)
		if !strings.Contains(got, "error") || !strings.Contains(got, "does not handle") {
			t.Errorf("roots = %q, want the gateway's method-not-found error", got)
		}
	})
	t.Run("OnRequest", func(t *testing.T) {
		opts := stdioOptions("echo-legacy")
		var gotMethod string
		opts.OnRequest = func(_ context.Context, req *jsonrpc.Message) *jsonrpc.Message {
			gotMethod = req.Method
			return &jsonrpc.Message{ID: json.RawMessage(`"ignored"`), Result: json.RawMessage(`{"roots":[{"uri":"file:///tmp","name":"tmp"}]}`)}
		}
		c := start(t, opts)
		got := callTool(t, ctx, c, "roots", `{}`)
		if !strings.Contains(got, "file:///tmp") {
			t.Errorf("roots = %q, want the answer of OnRequest", got)
		}
		if gotMethod != "roots/list" {
			t.Errorf("OnRequest saw %q", gotMethod)
		}
	})
}

func TestStdioNotifications(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	got := make(chan *jsonrpc.Message, 10)
	opts := stdioOptions("echo")
	opts.OnNotification = func(n *jsonrpc.Message) {
		got <- &jsonrpc.Message{Method: n.Method, Params: append(json.RawMessage(nil), n.Params...)}
	}
	c := start(t, opts)
	res, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"progress","arguments":{"text":"step"},"_meta":{"progressToken":"tok-1"}}`))
	if err != nil || res.Error != nil {
		t.Fatalf("progress: %v %v", err, res.Error)
	}
	select {
	case n := <-got:
		if n.Method != "notifications/progress" {
			t.Errorf("notification %s", n.Method)
		}
		if tok, _ := jsonrpc.StringField(n.Params, "progressToken"); tok != "tok-1" {
			t.Errorf("progress params %s", n.Params)
		}
	case <-ctx.Done():
		t.Fatal("no progress notification")
	}
}

func TestStdioPagination(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := start(t, stdioOptions("echo-paged"))
	testLists(t, ctx, c)
}

// testLists lists everything the mcptest server has.
func testLists(t *testing.T, ctx context.Context, c *upstream.Client) {
	t.Helper()
	tests := []struct {
		method, key string
		field       string
		want        []string
	}{
		{"tools/list", "tools", "name", []string{
			mcptest.LongToolName, "aborted", "add", "addtool", "ask", "barrier", "big", "block", "cancellations", "capabilities",
			"dotted.name", "echo", "elicit", "headers", "progress", "release", "roots", "sample", "sleep", "touch", "waiting",
		}},
		{"prompts/list", "prompts", "name", []string{"greet"}},
		{"resources/list", "resources", "uri", []string{"test://static/hello", "test://static/world"}},
		{"resources/templates/list", "resourceTemplates", "uriTemplate", []string{"test://items/{id}"}},
	}
	for _, tt := range tests {
		items, err := c.List(ctx, tt.method, tt.key)
		if err != nil {
			t.Fatalf("List %s: %v", tt.method, err)
		}
		var got []string
		for _, it := range items {
			s, _ := jsonrpc.StringField(it, tt.field)
			if s == "getenv" || s == "meta" || s == "exit" || s == "note" || s == "pid" { // stdio fakes only
				continue
			}
			got = append(got, s)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("List %s (-want +got):\n%s", tt.method, diff)
		}
	}
}

func TestOptionsValidation(t *testing.T) {
	tests := []struct {
		name string
		opts *upstream.Options
		want string
	}{
		{"nil", nil, "nil options"},
		{"no name", &upstream.Options{Command: "x"}, "name is required"},
		{"neither", &upstream.Options{Name: "a"}, "set command or url"},
		{"both", &upstream.Options{Name: "a", Command: "x", URL: "http://h/"}, "not both"},
		{"bad transport", &upstream.Options{Name: "a", URL: "http://h/", Transport: "websocket"}, "unknown transport"},
		{"stdio without command", &upstream.Options{Name: "a", URL: "http://h/", Transport: "stdio"}, "needs a command"},
		{"sse without url", &upstream.Options{Name: "a", Command: "x", Transport: "sse"}, "needs a url"},
		{"relative url", &upstream.Options{Name: "a", URL: "/mcp"}, "absolute http"},
		{"ftp url", &upstream.Options{Name: "a", URL: "ftp://h/"}, "absolute http"},
		{"negative timeout", &upstream.Options{Name: "a", Command: "x", Timeout: -1}, "negative timeout"},
		{"capabilities not an object", &upstream.Options{Name: "a", Command: "x", Capabilities: json.RawMessage(`["sampling"]`)}, "capabilities must be a JSON object"},
		{"capabilities not JSON", &upstream.Options{Name: "a", Command: "x", Capabilities: json.RawMessage(`{sampling}`)}, "capabilities must be a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := upstream.New(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestLifecycleMisuse(t *testing.T) {
	ctx := testCtx(t)
	c, err := upstream.New(stdioOptions("echo"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(ctx, "tools/list", nil); !errors.Is(err, upstream.ErrNotReady) {
		t.Errorf("Call before Start = %v, want ErrNotReady", err)
	}
	if st := c.State(); st.Phase != upstream.Idle {
		t.Errorf("state before Start = %v", st.Phase)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err == nil {
		t.Error("a second Start succeeded")
	}
	c.Close()
	if err := c.Start(ctx); !errors.Is(err, upstream.ErrClosed) {
		t.Errorf("Start after Close = %v, want ErrClosed", err)
	}
	// Close before Start starts nothing and returns.
	c2, _ := upstream.New(stdioOptions("echo"))
	if err := c2.Close(); err != nil {
		t.Errorf("Close before Start: %v", err)
	}
}

func TestStartCancelled(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	opts := stdioOptions("silent")
	opts.Logger = slog.New(rec)
	opts.ProbeTimeout = time.Minute
	c := newClient(t, opts)
	upstream.SetStopGrace(c, time.Second)
	ctx, cancel := context.WithCancel(testCtx(t))
	go func() {
		// Cancel once the process is up and the probe is out.
		if _, err := rec.wait(ctx, msgIs("process started")); err == nil {
			cancel()
		}
	}()
	err := c.Start(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Start = %v, want context.Canceled", err)
	}
	assertGone(t, pidOf(t, rec))
}
