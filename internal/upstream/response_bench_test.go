package upstream_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// More benchmarks of the upstream side of the hot path (see bench_test.go
// for the helpers and alloc/result): results of 1 KiB, a Streamable HTTP
// server that answers each POST with an SSE stream (what the SDK servers
// do by default) instead of a JSON body, and calls from many goroutines
// at once on one client, whose ids the client remaps. Run:
//
//	go test -run '^$' -bench 'StreamableHTTP|Pipelined' -benchmem ./internal/upstream

func BenchmarkStreamableHTTPResponses(b *testing.B) {
	for _, h := range []struct {
		name    string
		handler http.Handler
	}{{"json", blobAnswers("json")}, {"sse", blobAnswers("sse")}} {
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
	srv := httptest.NewServer(blobAnswers("json"))
	defer srv.Close()
	b.Run("http", func(b *testing.B) {
		benchOwnParallel(b, &upstream.Options{Name: "blob", URL: srv.URL, ClientInfo: gateway}, 1<<10)
	})
}
