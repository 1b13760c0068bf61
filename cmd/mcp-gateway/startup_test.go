package main

import (
	"context"
	"net"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
)

// silentServer accepts connections and never answers: an upstream that
// hangs. Its connections close at cleanup.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String() + "/mcp"
}

// lateFront reserves a port for backend and serves it there only when
// the returned function is called: until then connections are refused,
// as by a server that has not started yet.
func lateFront(t *testing.T, backend string) (endpoint string, up func()) {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	target, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(buffered(httputil.NewSingleHostReverseProxy(target)))
	return "http://" + addr, func() {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listening on the reserved %s: %v", addr, err)
		}
		srv.Listener.Close()
		srv.Listener = ln
		srv.Start()
		t.Cleanup(func() {
			srv.CloseClientConnections()
			srv.Close()
		})
	}
}

// TestHangingAndLateUpstreams: with one upstream that accepts
// connections and never answers, the others are listed and called from
// the start; Streamable HTTP and HTTP+SSE upstreams that refuse
// connections at start-up are not given up on (however many attempts
// fail), and are listed, with list_changed to hosts, once they come up.
func TestHangingAndLateUpstreams(t *testing.T) {
	good := mcptest.NewStreamableServer(t, nil)
	lateHTTP, httpUp := lateFront(t, mcptest.NewStreamableServer(t, nil).URL)
	lateSSE, sseUp := lateFront(t, mcptest.NewSSEServer(t, nil).URL)
	cfg := config.Default()
	hang := httpUpstream("hang", silentServer(t))
	hang.Timeout = time.Minute // its first start ends long after the test
	sse := httpUpstream("latesse", lateSSE)
	sse.Transport, sse.TransportInferred = config.TransportSSE, false
	cfg.Upstreams = []config.Upstream{hang, httpUpstream("good", good.URL), httpUpstream("latehttp", lateHTTP), sse}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := newGateway(cfg, recorders{log: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(g.server.Handler())
	t.Cleanup(func() {
		g.server.Close()
		ts.Close()
		if err := g.router.Close(); err != nil {
			t.Errorf("closing the router: %v", err)
		}
	})
	g.router.Start(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	awaitStatus := func(name, what string, ok func(router.UpstreamStatus) bool) router.UpstreamStatus {
		t.Helper()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if s := statusOf(g, name); ok(s) {
				return s
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				t.Fatalf("%s never %s: %+v", name, what, statusOf(g, name))
			}
		}
	}
	awaitStatus("good", "ready", func(s router.UpstreamStatus) bool { return s.State == router.PhaseReady })

	cs, changed := listChanges(t, ts.URL+cfg.Endpoint)
	awaitTools(ctx, t, cs, changed, "good's tools", func(names []string) bool { return slices.Contains(names, "good__echo") })
	if text, isErr := toolResult(ctx, t, cs, "good__echo", map[string]any{"text": "hi"}); isErr || text != "hi" {
		t.Errorf("good__echo: %q (isError %v)", text, isErr)
	}
	if s := statusOf(g, "hang"); s.State != router.PhaseStarting {
		t.Fatalf("hang is %s: the calls above were to show that nothing waits for it while it starts", s.State)
	}
	if g.router.Ready() {
		t.Error("ready while hang is in its first start")
	}

	// Five failed connects and more (the delays 250ms, 500ms, 1s, 2s
	// are behind once the next is 4s): still restarting, not failed.
	for _, name := range []string{"latehttp", "latesse"} {
		awaitStatus(name, "backed off to 4s", func(s router.UpstreamStatus) bool {
			if s.State == router.PhaseFailed {
				t.Fatalf("%s failed (%s): a server that cannot be reached has not crashed", name, s.Error)
			}
			return s.RetryAt != nil && s.RetryAt.Sub(s.Since) > 3*time.Second
		})
	}
	httpUp()
	sseUp()
	awaitTools(ctx, t, cs, changed, "the late servers' tools", func(names []string) bool {
		return slices.Contains(names, "latehttp__echo") && slices.Contains(names, "latesse__echo")
	})
	for _, name := range []string{"latehttp__echo", "latesse__echo", "good__echo"} {
		if text, isErr := toolResult(ctx, t, cs, name, map[string]any{"text": name}); isErr || text != name {
			t.Errorf("%s: %q (isError %v)", name, text, isErr)
		}
	}
}
