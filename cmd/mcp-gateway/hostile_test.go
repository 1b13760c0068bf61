package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
)

// openFiles counts this process's open file descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(entries)
}

// settles waits until count() is at most want, polling: what hostile
// peers held is released asynchronously, as their connections close.
func settles(t *testing.T, what string, want int, count func() int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a bound on a failing run, not a timing claim
	for {
		got := count()
		if got <= want {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: %d after the attacks ended, want at most %d", what, got, want)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHostileHostsLeaveNoTrace runs hostile hosts against one gateway at
// once, over real sockets: slow bodies, hosts that open streams and never
// read them, malformed, oversize and forged requests of both eras, and a
// flood of sessions. Meanwhile an honest host's calls to a stdio and an
// HTTP upstream all succeed; afterwards the gateway holds no more
// goroutines or file descriptors than before, and the stdio upstream is
// still the one process it was.
func TestHostileHostsLeaveNoTrace(t *testing.T) {
	const mark = "hostile-hosts"
	web := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: mcptest.ServerOptions{Versions: mcptest.LegacyVersions()}})
	cfg := config.Default()
	cfg.MaxBodyBytes = 64 << 10
	cfg.Upstreams = []config.Upstream{stdioUpstream("local", "echo", map[string]string{faultMark: mark}), httpUpstream("web", web.URL)}
	endpoint, _ := startGateway(t, cfg)
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	addr := u.Host
	pids := markedProcesses(t, mark)
	if len(pids) != 1 {
		t.Fatalf("%d processes of the stdio upstream, want 1", len(pids))
	}

	honest := connect(t, endpoint, eras[0])
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, tool := range []string{"local__echo", "web__echo"} {
		if _, err := callText(ctx, honest, tool, map[string]any{"text": "before"}); err != nil {
			t.Fatalf("%s before the attacks: %v", tool, err)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	runtime.GC()
	baseGoroutines, baseFiles := runtime.NumGoroutine(), openFiles(t)

	stop := make(chan struct{})
	var honestErrs []error
	var honestCalls int
	var honestDone sync.WaitGroup
	honestDone.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tool := []string{"local__echo", "web__echo"}[i%2]
			text := fmt.Sprint("call ", i)
			got, err := callText(ctx, honest, tool, map[string]any{"text": text})
			if err == nil && got != text {
				err = fmt.Errorf("%s answered %q to %q", tool, got, text)
			}
			if err != nil {
				honestErrs = append(honestErrs, err)
			}
			honestCalls++
		}
	})

	var raw []*mcptest.RawConn
	post := func(headers map[string]string, body string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("POST %.40q: %v", body, err)
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	legacy := map[string]string{"MCP-Protocol-Version": "2025-11-25"}
	modern := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "web__echo"}
	// Each hostile request gets a 4xx, never a 5xx or a hang.
	for _, tt := range []struct {
		name    string
		headers map[string]string
		body    string
	}{
		{"malformed JSON", legacy, `{"jsonrpc":"2.0","id":1,"method":`},
		{"not JSON-RPC", legacy, `[1,2,3]`},
		{"oversize body", legacy, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 128<<10) + `"}}`},
		{"unknown session", map[string]string{"MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": "forged"}, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
		{"repeated member", legacy, `{"jsonrpc":"2.0","id":1,"method":"initialize","method":"ping"}`},
		{"modern, name header differs", modern, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"local__echo","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`},
		{"modern, no _meta", modern, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"web__echo"}}`},
	} {
		for range 20 {
			if code := post(tt.headers, tt.body); code < 400 || code >= 500 {
				t.Errorf("%s: HTTP %d, want a 4xx", tt.name, code)
				break
			}
		}
	}
	// Slow bodies, and streams nobody reads.
	for range 30 {
		raw = append(raw, mcptest.Trickle(t, addr, "POST "+u.Path+" HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n", make([]byte, 1000), 50*time.Millisecond))
	}
	for range 10 {
		session := rawInitialize(ctx, t, endpoint)
		raw = append(raw, mcptest.NoRead(t, addr, "GET "+u.Path+" HTTP/1.1\r\nHost: "+addr+"\r\nAccept: text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\nMcp-Session-Id: "+session+"\r\n\r\n"))
	}
	// A flood of sessions, left open.
	for range 300 {
		if code := post(legacy, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`); code != http.StatusOK {
			t.Errorf("initialize in the flood: HTTP %d", code)
			break
		}
	}
	for _, c := range raw {
		c.Close()
	}
	close(stop)
	honestDone.Wait()
	if len(honestErrs) > 0 || honestCalls == 0 {
		t.Errorf("the honest host's calls during the attacks: %d of %d failed, the first: %v", len(honestErrs), honestCalls, honestErrs)
	}
	if got := markedProcesses(t, mark); len(got) != 1 || got[0] != pids[0] {
		t.Errorf("stdio upstream processes %v after the attacks, want %v", got, pids)
	}
	http.DefaultClient.CloseIdleConnections()
	// The hosts' sessions stay (until idle_timeout) but hold no
	// goroutine or descriptor of their own.
	settles(t, "goroutines", baseGoroutines+4, func() int { runtime.GC(); return runtime.NumGoroutine() })
	settles(t, "open files", baseFiles+2, func() int { return openFiles(t) })
}

// misbehaving serves next, but answers every tools/call in its own bad
// way: what a broken or hostile server does once it has been listed.
func misbehaving(t *testing.T, next http.Handler, mode string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || !strings.Contains(string(body), `"method":"tools/call"`) {
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			next.ServeHTTP(w, r)
			return
		}
		switch mode {
		case "garbage":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`)
		case "huge":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"`+strings.Repeat("x", 2<<20)+`"}]}}`)
		case "sse-junk":
			w.Header().Set("Content-Type", "text/event-stream")
			for range 1000 {
				io.WriteString(w, "junk without a field\n: comment\nevent: nothing\n")
			}
		case "stall":
			// Headers and a first byte, then nothing until the gateway
			// gives up.
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, "{")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case "hang":
			<-r.Context().Done()
		}
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv
}

// TestHostileUpstreamsLeaveOthersAlone: upstreams that, once listed,
// answer calls with broken JSON, an answer over max_message_bytes, an
// SSE stream of junk, a body that stalls, or nothing at all each give
// their caller an isError result within their timeout, while a good
// upstream's calls, made at the same time, all succeed; afterwards the
// gateway holds no more goroutines or descriptors than before.
func TestHostileUpstreamsLeaveOthersAlone(t *testing.T) {
	good := mcptest.NewStreamableServer(t, nil)
	cfg := config.Default()
	cfg.Upstreams = []config.Upstream{httpUpstream("good", good.URL)}
	modes := []string{"garbage", "huge", "sse-junk", "stall", "hang"}
	for _, mode := range modes {
		backend := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: mcptest.ServerOptions{Versions: mcptest.LegacyVersions()}})
		target, _ := url.Parse(backend.URL)
		u := httpUpstream(strings.ReplaceAll(mode, "-", ""), misbehaving(t, httputil.NewSingleHostReverseProxy(target), mode).URL)
		u.Timeout, u.MaxMessageBytes = 2*time.Second, 1<<20
		cfg.Upstreams = append(cfg.Upstreams, u)
	}
	endpoint, _ := startGateway(t, cfg)
	host := connect(t, endpoint, eras[0])
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := callText(ctx, host, "good__echo", map[string]any{"text": "before"}); err != nil {
		t.Fatal(err)
	}
	http.DefaultClient.CloseIdleConnections()
	runtime.GC()
	baseGoroutines, baseFiles := runtime.NumGoroutine(), openFiles(t)

	var wg sync.WaitGroup
	for _, mode := range modes {
		for range 3 {
			wg.Go(func() {
				tool := strings.ReplaceAll(mode, "-", "") + "__echo"
				res, err := host.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "x"}})
				if err != nil || !res.IsError {
					t.Errorf("%s: %v %+v, want an isError result", tool, err, res)
				}
			})
		}
	}
	for i := range 50 {
		text := fmt.Sprint("call ", i)
		if got, err := callText(ctx, host, "good__echo", map[string]any{"text": text}); err != nil || got != text {
			t.Errorf("good__echo during the hostile calls: %q, %v", got, err)
		}
	}
	wg.Wait()
	http.DefaultClient.CloseIdleConnections()
	settles(t, "goroutines", baseGoroutines+4, func() int { runtime.GC(); return runtime.NumGoroutine() })
	settles(t, "open files", baseFiles+2, func() int { return openFiles(t) })
}
