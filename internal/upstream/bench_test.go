package upstream_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"testing"

	sdkjsonrpc "github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// The benchmarks move tool results through the official SDK's transports
// (used at the raw message level: Connection.Write and Read) and through
// this package's Client, against the same fake server: the "blob" stdio
// fake, a raw server that spends as little as possible per message, or an
// HTTP handler that answers the same way. Besides -benchmem's numbers they
// report alloc/result: bytes allocated per call divided by the result's
// size, i.e. how many result-sized buffers a call costs.

var benchSizes = []int{1 << 20, 64}

func sizeName(n int) string {
	if n >= 1<<20 {
		return strconv.Itoa(n>>20) + "MiB"
	}
	return strconv.Itoa(n) + "B"
}

func blobParams(size int) json.RawMessage {
	return json.RawMessage(`{"name":"blob","arguments":{"size":` + strconv.Itoa(size) + `}}`)
}

// measure runs call b.N times and reports alloc/result.
func measure(b *testing.B, size int, call func(i int) int) {
	b.Helper()
	call(0) // warm up the server's cache and the connection
	b.SetBytes(int64(size))
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if n := call(i + 1); n < size {
			b.Fatalf("result of %d bytes, want at least %d", n, size)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/float64(size), "alloc/result")
}

func BenchmarkStdio(b *testing.B) {
	for _, size := range benchSizes {
		b.Run("sdk/"+sizeName(size), func(b *testing.B) { benchSDKStdio(b, size) })
		b.Run("own/"+sizeName(size), func(b *testing.B) { benchOwn(b, stdioOptions("blob"), size) })
	}
	b.Run("own-parallel/64B", func(b *testing.B) { benchOwnParallel(b, stdioOptions("blob"), 64) })
}

func benchSDKStdio(b *testing.B, size int) {
	command, args, env := mcptest.StdioCommand("blob")
	cmd := exec.Command(command, args...)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	ctx := context.Background()
	conn, err := (&mcp.CommandTransport{Command: cmd}).Connect(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	benchSDKConn(b, ctx, conn, size)
}

func startBench(b *testing.B, opts *upstream.Options) *upstream.Client {
	b.Helper()
	c, err := upstream.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	if err := c.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	return c
}

func benchOwn(b *testing.B, opts *upstream.Options, size int) {
	c := startBench(b, opts)
	ctx := context.Background()
	params := blobParams(size)
	measure(b, size, func(int) int {
		res, err := c.Call(ctx, "tools/call", params)
		if err != nil {
			b.Fatal(err)
		}
		return len(res.Result)
	})
}

// benchOwnParallel measures pipelined calls from many goroutines.
func benchOwnParallel(b *testing.B, opts *upstream.Options, size int) {
	c := startBench(b, opts)
	ctx := context.Background()
	params := blobParams(size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := c.Call(ctx, "tools/call", params)
			if err != nil || len(res.Result) < size {
				b.Errorf("call: %v", err)
				return
			}
		}
	})
}

// blobAnswers answers like the "blob" fake over Streamable HTTP: with a
// JSON body of known length ("json"), a chunked JSON body ("chunked"), or
// an SSE stream of one event ("sse"). It writes the result without
// copying it, so that a benchmark counts the client's allocations only.
func blobAnswers(mode string) http.Handler {
	var mu sync.Mutex
	cache := map[int]json.RawMessage{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m, err := jsonrpc.Decode(body)
		if err != nil || !m.IsRequest() {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		mu.Lock()
		res := mcptest.BlobResult(m.Method, m.Params, cache)
		mu.Unlock()
		prefix := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":`
		switch mode {
		case "json":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(prefix)+len(res)+1))
		case "chunked":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, prefix[:1])
			w.(http.Flusher).Flush()
			prefix = prefix[1:]
		case "sse":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: message\ndata: ")
		}
		io.WriteString(w, prefix)
		w.Write(res)
		io.WriteString(w, "}")
		if mode == "sse" {
			io.WriteString(w, "\n\n")
		}
	})
}

func BenchmarkStreamableHTTP(b *testing.B) {
	srv := httptest.NewServer(blobAnswers("json"))
	defer srv.Close()
	for _, size := range benchSizes {
		b.Run("sdk/"+sizeName(size), func(b *testing.B) { benchSDKHTTP(b, srv.URL, size) })
		b.Run("own/"+sizeName(size), func(b *testing.B) {
			benchOwn(b, &upstream.Options{Name: "blob", URL: srv.URL, ClientInfo: gateway}, size)
		})
		// The client on a tuned net/http transport instead of its own
		// HTTP/1.1 POST path: what the own path saves (docs/performance.md).
		b.Run("nethttp/"+sizeName(size), func(b *testing.B) {
			t := http.DefaultTransport.(*http.Transport).Clone()
			t.MaxIdleConnsPerHost, t.DisableCompression, t.ForceAttemptHTTP2 = 64, true, false
			defer t.CloseIdleConnections()
			benchOwn(b, &upstream.Options{Name: "blob", URL: srv.URL, ClientInfo: gateway, HTTPClient: &http.Client{Transport: t}}, size)
		})
	}
}

// blobSSE is a one-session HTTP+SSE server (2024-11-05) that answers like
// the "blob" fake: GET opens the stream and names /post as the endpoint;
// answers to POSTed requests go out on the stream.
type blobSSE struct {
	mu    sync.Mutex
	cache map[int]json.RawMessage
	out   chan [2][]byte // the envelope prefix and the result of an answer
}

func newBlobSSE() *blobSSE {
	return &blobSSE{cache: map[int]json.RawMessage{}, out: make(chan [2][]byte, 16)}
}

func (s *blobSSE) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: endpoint\ndata: /post\n\n")
		w.(http.Flusher).Flush()
		for {
			select {
			case m := <-s.out:
				io.WriteString(w, "event: message\ndata: ")
				w.Write(m[0])
				w.Write(m[1])
				io.WriteString(w, "}\n\n")
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	}
	body, _ := io.ReadAll(r.Body)
	w.WriteHeader(http.StatusAccepted)
	m, err := jsonrpc.Decode(body)
	if err != nil || !m.IsRequest() {
		return
	}
	s.mu.Lock()
	res := mcptest.BlobResult(m.Method, m.Params, s.cache)
	s.mu.Unlock()
	s.out <- [2][]byte{[]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":`), res}
}

func BenchmarkHTTPSSE(b *testing.B) {
	for _, size := range benchSizes {
		b.Run("sdk/"+sizeName(size), func(b *testing.B) {
			srv := httptest.NewServer(newBlobSSE())
			defer srv.Close()
			ctx := context.Background()
			t := &http.Transport{}
			defer t.CloseIdleConnections()
			conn, err := (&mcp.SSEClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: t}}).Connect(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			benchSDKConn(b, ctx, conn, size)
		})
		b.Run("own/"+sizeName(size), func(b *testing.B) {
			srv := httptest.NewServer(newBlobSSE())
			b.Cleanup(srv.Close) // after the client's Close, which ends the stream
			benchOwn(b, &upstream.Options{Name: "blob", URL: srv.URL, Transport: "sse", ClientInfo: gateway}, size)
		})
	}
}

func benchSDKConn(b *testing.B, ctx context.Context, conn mcp.Connection, size int) {
	params := blobParams(size)
	measure(b, size, func(i int) int {
		id, _ := sdkjsonrpc.MakeID(float64(i + 1))
		if err := conn.Write(ctx, &sdkjsonrpc.Request{ID: id, Method: "tools/call", Params: params}); err != nil {
			b.Fatal(err)
		}
		msg, err := conn.Read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		return len(msg.(*sdkjsonrpc.Response).Result)
	})
}

func benchSDKHTTP(b *testing.B, url string, size int) {
	ctx := context.Background()
	t := &http.Transport{}
	defer t.CloseIdleConnections()
	conn, err := (&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: t}, DisableStandaloneSSE: true}).Connect(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	benchSDKConn(b, ctx, conn, size)
}
