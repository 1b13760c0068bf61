package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/server"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// BenchmarkPassThrough sends tools/call through the whole gateway in one
// process: the HTTP handler of server, the router, an upstream.Supervised
// client (as cmd/mcp-gateway builds it) and a real socket to an upstream
// that answers with a cached result of 1 KiB or 1 MiB, as JSON or as an
// SSE stream. The host side calls the handler directly, without a socket,
// so that the allocations counted are the gateway's (and the small ones
// of the upstream's net/http server). Run:
//
//	go test -run '^$' -bench PassThrough -benchmem ./internal/server
//
// alloc/result is the bytes allocated per call divided by the result's
// size: the number of result-sized buffers a call costs. The issue's
// budget is 2 for a 1 MiB result.
func BenchmarkPassThrough(b *testing.B) {
	metered, err := telemetry.New(context.Background(), telemetry.Options{Prometheus: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = metered.Shutdown(context.Background()) })
	for _, size := range []struct {
		name string
		n    int
	}{{"1KiB", 1 << 10}, {"1MiB", 1 << 20}} {
		for _, sse := range []bool{false, true} {
			for _, host := range []string{"legacy", "modern"} {
				for _, tc := range []struct {
					name string
					tel  *telemetry.Telemetry
				}{{"plain", nil}, {"metrics", metered}} {
					up := "upstream-json"
					if sse {
						up = "upstream-sse"
					}
					b.Run(strings.Join([]string{size.name, up, host + "-host", tc.name}, "/"), func(b *testing.B) {
						benchPassThrough(b, size.n, sse, host == "modern", tc.tel)
					})
				}
			}
		}
	}
}

func benchPassThrough(b *testing.B, size int, sse, modern bool, tel *telemetry.Telemetry) {
	up := httptest.NewServer(&blobUpstream{sse: sse, results: map[int]json.RawMessage{}})
	b.Cleanup(up.Close)
	rt, err := router.New(&router.Options{
		ListWait: -1,
		Upstreams: []router.UpstreamConfig{{
			Name: "blob",
			Connect: func(o router.ConnectOptions) (router.Upstream, error) {
				return upstream.NewSupervised(&upstream.SupervisedOptions{Options: upstream.Options{
					Name: "blob", URL: up.URL, ClientInfo: upstream.Implementation{Name: "bench", Version: "1"},
					OnNotification: o.Notify, OnRequest: o.Request, OnStateChange: o.OnState,
				}})
			},
		}},
	})
	if err != nil {
		b.Fatal(err)
	}
	rt.Start(context.Background())
	b.Cleanup(func() { _ = rt.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.WaitStarted(ctx); err != nil {
		b.Fatal(err)
	}
	srv := server.New(rt, &server.Options{Telemetry: tel})
	b.Cleanup(srv.Close)
	h := srv.Handler()

	header := http.Header{
		"Content-Type": {"application/json"},
		"Accept":       {"application/json, text/event-stream"},
	}
	meta := ""
	if modern {
		header.Set("MCP-Protocol-Version", router.ModernVersion)
		header.Set("Mcp-Method", "tools/call")
		header.Set("Mcp-Name", "blob__blob")
		meta = `,"_meta":{"io.modelcontextprotocol/protocolVersion":"` + router.ModernVersion + `","io.modelcontextprotocol/clientCapabilities":{}}`
	} else {
		w := &discardWriter{header: http.Header{}}
		h.ServeHTTP(w, hostRequest(header, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`))
		id := w.header.Get("Mcp-Session-Id")
		if id == "" {
			b.Fatalf("initialize: HTTP %d, no session", w.status)
		}
		header.Set("Mcp-Session-Id", id)
		header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"blob__blob","arguments":{"size":` + strconv.Itoa(size) + `}` + meta + `}}`
	w := &discardWriter{header: http.Header{}}
	call := func() {
		w.reset()
		h.ServeHTTP(w, hostRequest(header, body))
		if w.status != http.StatusOK || w.n < size {
			b.Fatalf("tools/call: HTTP %d, %d bytes", w.status, w.n)
		}
	}
	call()
	call()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for range b.N {
		call()
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/float64(size), "alloc/result")
}

func hostRequest(header http.Header, body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(body))
	r.Header = header.Clone()
	r.RemoteAddr = "127.0.0.1:50000"
	return r
}

// discardWriter is a ResponseWriter that counts what is written.
type discardWriter struct {
	header http.Header
	status int
	n      int
}

func (w *discardWriter) reset() {
	clear(w.header)
	w.status, w.n = 0, 0
}
func (w *discardWriter) Header() http.Header { return w.header }
func (w *discardWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *discardWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.n += len(p)
	return len(p), nil
}
func (w *discardWriter) Flush() {}

// SetReadDeadline and SetWriteDeadline stand for a connection's: the
// server sets deadlines on every request, which a writer without them
// answers with a new error each time.
func (w *discardWriter) SetReadDeadline(time.Time) error  { return nil }
func (w *discardWriter) SetWriteDeadline(time.Time) error { return nil }

// blobUpstream is a legacy Streamable HTTP server that spends as little
// as it can: tools/call {size} returns a cached text result of size
// bytes, written without a copy, as a JSON body or one SSE event.
type blobUpstream struct {
	sse     bool
	mu      sync.Mutex // guards results
	results map[int]json.RawMessage
}

func (s *blobUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
		return
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	m, err := jsonrpc.Decode(body)
	if err != nil || !m.IsRequest() {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var res json.RawMessage
	switch m.Method {
	case "initialize":
		w.Header().Set("Mcp-Session-Id", "s-1")
		res = json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"blob","version":"1"}}`)
	case "tools/list":
		res = json.RawMessage(`{"tools":[{"name":"blob","inputSchema":{"type":"object","properties":{"size":{"type":"integer"}}}}]}`)
	case "tools/call":
		a, _ := jsonrpc.Field(m.Params, "arguments")
		raw, _ := jsonrpc.Field(a, "size")
		n, _ := strconv.Atoi(string(raw))
		s.mu.Lock()
		res = s.results[n]
		if res == nil {
			res = json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("x", n) + `"}],"isError":false}`)
			s.results[n] = res
		}
		s.mu.Unlock()
	case "server/discover":
		// Legacy only: an unknown method.
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jsonrpc.AppendError(nil, m.ID, jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "Method not found")))
		return
	default:
		res = json.RawMessage(`{}`)
	}
	head := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":`
	if s.sse {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message\ndata: "+head)
		_, _ = w.Write(res)
		_, _ = io.WriteString(w, "}\n\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(head)+len(res)+1))
	_, _ = io.WriteString(w, head)
	_, _ = w.Write(res)
	_, _ = io.WriteString(w, "}")
}
