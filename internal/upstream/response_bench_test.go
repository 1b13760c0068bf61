package upstream_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// More benchmarks of the upstream side of the hot path (see bench_test.go
// for the helpers and alloc/result): results of 1 KiB, a Streamable HTTP
// server that answers each POST with an SSE stream (what the SDK servers
// do by default) instead of a JSON body, and calls from many goroutines
// at once on one client, whose ids the client remaps. Run:
//
//	go test -run '^$' -bench 'StreamableHTTP|Pipelined' -benchmem ./internal/upstream

// blobSSEResponses answers like blobHandler, with a text/event-stream of
// one event and no Content-Length.
func blobSSEResponses() http.Handler {
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
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":"+string(m.ID)+",\"result\":")
		w.Write(res)
		io.WriteString(w, "}\n\n")
	})
}

func BenchmarkStreamableHTTPResponses(b *testing.B) {
	for _, h := range []struct {
		name    string
		handler http.Handler
	}{{"json", blobHandler()}, {"sse", blobSSEResponses()}} {
		srv := httptest.NewServer(h.handler)
		for _, size := range []int{1 << 10, 1 << 20} {
			b.Run(h.name+"/"+sizeName(size), func(b *testing.B) {
				benchOwn(b, &upstream.Options{Name: "blob", URL: srv.URL, ClientInfo: gateway}, size)
			})
		}
		srv.Close()
	}
}

// BenchmarkPipelined makes calls of 1 KiB results from many goroutines on
// one client: each gets an id of the client's own, and its answer is
// routed back by that id. Over stdio the calls share one pipe
// (pipelined); over HTTP each is its own POST.
func BenchmarkPipelined(b *testing.B) {
	b.Run("stdio", func(b *testing.B) { benchOwnParallel(b, stdioOptions("blob"), 1<<10) })
	srv := httptest.NewServer(blobHandler())
	defer srv.Close()
	b.Run("http", func(b *testing.B) {
		benchOwnParallel(b, &upstream.Options{Name: "blob", URL: srv.URL, ClientInfo: gateway}, 1<<10)
	})
}
