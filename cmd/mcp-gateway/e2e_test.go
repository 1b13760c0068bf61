package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

func TestMain(m *testing.M) {
	mcptest.MaybeServeStdio()
	maybeRunMain()
	goleak.VerifyTestMain(m)
}

// eras are the two protocol eras a host may speak, as the Go SDK client
// selects them.
var eras = []string{"2025-11-25", "2026-07-28"}

// stdioUpstream returns a config entry that launches an mcptest stdio fake.
func stdioUpstream(name, fake string, env map[string]string) config.Upstream {
	u := config.DefaultUpstream()
	u.Name = name
	u.Command, u.Args, u.Env = mcptest.StdioCommand(fake)
	for k, v := range env {
		u.Env[k] = v
	}
	u.Transport, u.TransportInferred = config.TransportStdio, true
	return u
}

func httpUpstream(name, url string) config.Upstream {
	u := config.DefaultUpstream()
	u.Name, u.URL = name, url
	u.Transport, u.TransportInferred = config.TransportStreamableHTTP, true
	return u
}

// startGateway serves cfg on an httptest server and waits until every
// upstream has finished its first start. Everything stops at cleanup.
func startGateway(t *testing.T, cfg *config.Config) (url string, g *gateway) {
	t.Helper()
	url, g, _ = startGatewayWith(t, cfg, recorders{})
	return url, g
}

// testLogger discards logs unless the test runs with -v.
func testLogger() *slog.Logger {
	if testing.Verbose() {
		return telemetry.NewLogger(os.Stderr, nil)
	}
	return telemetry.NewLogger(io.Discard, nil)
}

// startGatewayWith is startGateway recording with rec (rec.log nil: the
// test logger). stop shuts the gateway down as serve does, up to the
// telemetry flush, which is the caller's: the server, then the
// upstreams. It runs at cleanup too; calls after the first do nothing.
func startGatewayWith(t testing.TB, cfg *config.Config, rec recorders) (url string, g *gateway, stop func()) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	if rec.log == nil {
		rec.log = testLogger()
	}
	g, err := newGateway(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g.router.Start(ctx)
	ts := httptest.NewServer(g.server.Handler())
	stop = sync.OnceFunc(func() {
		g.server.Close()
		ts.Close()
		if err := g.router.Close(); err != nil {
			t.Errorf("closing the router: %v", err)
		}
		g.shared.close()
	})
	t.Cleanup(stop)
	if err := g.router.WaitStarted(ctx); err != nil {
		t.Fatalf("upstreams did not finish starting: %v", err)
	}
	return ts.URL + cfg.Endpoint, g, stop
}

func connect(t *testing.T, url, version string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting in era %s: %v", version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("negotiated %s, want %s", got, version)
	}
	return cs
}

func callText(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (string, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", err
	}
	if len(res.Content) != 1 {
		return "", fmt.Errorf("%s: %d content blocks", name, len(res.Content))
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		return "", fmt.Errorf("%s: content %T", name, res.Content[0])
	}
	if res.IsError {
		return text.Text, fmt.Errorf("%s: isError: %s", name, text.Text)
	}
	return text.Text, nil
}

// TestThreeUpstreamsBothEras is the core promise: two stdio servers with
// the same tool names and one Streamable HTTP server behind one URL, for
// a Go SDK client of each era.
func TestThreeUpstreamsBothEras(t *testing.T) {
	var webCalls atomic.Int64
	web := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{
		Stateless: true,
		Server:    mcptest.ServerOptions{Name: "web"},
		Inspect: func(r *http.Request) {
			if r.Header.Get("Mcp-Method") == "tools/call" {
				webCalls.Add(1)
			}
		},
	})
	cfg := config.Default()
	cfg.Upstreams = []config.Upstream{
		stdioUpstream("alpha", "echo", map[string]string{"WHO": "alpha"}),
		stdioUpstream("beta", "echo-legacy", map[string]string{"WHO": "beta"}),
		httpUpstream("web", web.URL),
	}
	url, g := startGateway(t, cfg)
	for _, s := range g.router.Status() {
		if s.State != router.PhaseReady {
			t.Fatalf("upstream %s: %s %s", s.Name, s.State, s.Error)
		}
	}

	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cs := connect(t, url, era)
			var names []string
			for tool, err := range cs.Tools(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, tool.Name)
			}
			for _, want := range []string{"alpha__echo", "alpha__getenv", "beta__echo", "beta__getenv", "web__echo", "web__dotted_name"} {
				if !slices.Contains(names, want) {
					t.Errorf("tools/list lacks %s; got %v", want, names)
				}
			}
			for _, name := range names {
				if len(name) > 64 || strings.ContainsFunc(name, func(r rune) bool {
					return !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
				}) {
					t.Errorf("exposed name %q breaks the 64-character [A-Za-z0-9_-] rule", name)
				}
			}
			// Each call is answered by the server that owns the name.
			for _, who := range []string{"alpha", "beta"} {
				got, err := callText(ctx, cs, who+"__getenv", map[string]any{"name": "WHO"})
				if err != nil || got != who {
					t.Errorf("%s__getenv(WHO) = %q, %v; want %q", who, got, err, who)
				}
			}
			before := webCalls.Load()
			if got, err := callText(ctx, cs, "web__echo", map[string]any{"text": "over http"}); err != nil || got != "over http" {
				t.Errorf("web__echo = %q, %v", got, err)
			}
			if webCalls.Load() != before+1 {
				t.Error("web__echo did not reach the HTTP upstream")
			}
			// An unknown tool is a JSON-RPC error naming it.
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__nope"}); err == nil || !strings.Contains(err.Error(), "alpha__nope") {
				t.Errorf("unknown tool: err = %v, want one naming alpha__nope", err)
			}
			// Prompts and resources are merged too.
			prompt, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "beta__greet", Arguments: map[string]string{"name": "Ada"}})
			if err != nil || len(prompt.Messages) != 1 || prompt.Messages[0].Content.(*mcp.TextContent).Text != "Hello, Ada" {
				t.Errorf("beta__greet = %+v, %v", prompt, err)
			}
			res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://items/7"})
			if err != nil || len(res.Contents) != 1 || res.Contents[0].Text != "item 7" {
				t.Errorf("read test://items/7 = %+v, %v", res, err)
			}
		})
	}
}

// TestConcurrentClientsGetTheirOwnAnswers runs 8 clients (both eras) with
// 200 calls each over one shared stdio upstream and one HTTP upstream:
// every answer must belong to its own request.
func TestConcurrentClientsGetTheirOwnAnswers(t *testing.T) {
	web := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Stateless: true, JSONResponse: true})
	cfg := config.Default()
	cfg.Upstreams = []config.Upstream{stdioUpstream("alpha", "echo", nil), httpUpstream("web", web.URL)}
	url, _ := startGateway(t, cfg)

	const clients, calls = 8, 200
	sessions := make([]*mcp.ClientSession, clients)
	for i := range sessions {
		sessions[i] = connect(t, url, eras[i%2])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, clients*calls)
	for i, cs := range sessions {
		wg.Go(func() {
			for j := range calls {
				tool := []string{"alpha__echo", "web__echo"}[j%2]
				want := fmt.Sprintf("client %d call %d", i, j)
				got, err := callText(ctx, cs, tool, map[string]any{"text": want})
				if err != nil || got != want {
					errs <- fmt.Errorf("client %d: %s(%q) = %q, %v", i, tool, want, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestBrokenUpstreamsLeaveOthersUsable starts a dead upstream, one that
// never answers, and one that prints garbage, next to a good one.
func TestBrokenUpstreamsLeaveOthersUsable(t *testing.T) {
	cfg := config.Default()
	silent := stdioUpstream("silent", "silent", nil)
	silent.Timeout = 2 * time.Second
	garbage := stdioUpstream("garbage", "garbage", nil)
	garbage.Timeout = 2 * time.Second
	cfg.Upstreams = []config.Upstream{
		stdioUpstream("dead", "crash", nil),
		silent,
		garbage,
		stdioUpstream("good", "echo", nil),
	}
	url, g := startGateway(t, cfg)

	states := map[string]router.UpstreamStatus{}
	for _, s := range g.router.Status() {
		states[s.Name] = s
	}
	// Each is restarted with backoff (until its crash loop stops the
	// restarts), and says why and when it is tried again.
	for _, name := range []string{"dead", "silent", "garbage"} {
		s := states[name]
		switch {
		case s.State == router.PhaseRestarting && s.Error != "" && s.RetryAt != nil:
		case s.State == router.PhaseFailed && s.Error != "":
		default:
			t.Errorf("upstream %s: state %s, error %q, retry at %v; want restarting or failed, with a reason", name, s.State, s.Error, s.RetryAt)
		}
	}
	if s := states["good"]; s.State != router.PhaseReady {
		t.Fatalf("good upstream: %+v", s)
	}
	resp, err := http.Get(strings.TrimSuffix(url, "/mcp") + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`"name":"dead","state":"`, `"name":"silent","state":"`, `"name":"good","state":"ready"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/readyz body lacks %s:\n%s", want, body)
		}
	}

	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cs := connect(t, url, era)
			res, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, tool := range res.Tools {
				if !strings.HasPrefix(tool.Name, "good__") {
					t.Errorf("tool %s from a broken upstream is listed", tool.Name)
				}
			}
			if got, err := callText(ctx, cs, "good__echo", map[string]any{"text": "still here"}); err != nil || got != "still here" {
				t.Errorf("good__echo = %q, %v", got, err)
			}
		})
	}
}

func TestExposedNamesFitTheLimit(t *testing.T) {
	cfg := config.Default()
	cfg.Upstreams = []config.Upstream{stdioUpstream("alpha", "echo", nil)}
	url, _ := startGateway(t, cfg)
	cs := connect(t, url, eras[0])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var long []string
	for _, tool := range res.Tools {
		if strings.HasPrefix(tool.Name, "alpha__a_tool_with") {
			long = append(long, tool.Name)
		}
	}
	if len(long) != 1 || len(long[0]) != 64 {
		t.Fatalf("the long tool is exposed as %v, want one 64-character name", long)
	}
	got, err := callText(ctx, cs, long[0], nil)
	if diff := cmp.Diff("ok", got); diff != "" || err != nil {
		t.Errorf("calling the cut name: %v (-want +got):\n%s", err, diff)
	}
}
