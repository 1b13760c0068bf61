package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
)

// Benchmarks of what the server writes to a host: one notification as an
// SSE event, and the answer to a request as a JSON body or as the last
// event of an SSE stream (once a progress notification made the response
// a stream), for results of 1 KiB and 1 MiB, compact or pretty-printed
// (whose line breaks SSE framing must replace). Run:
//
//	go test -run '^$' -bench 'SSE|WriteReply' -benchmem ./internal/server

// sseBenchWriter is a ResponseWriter and Flusher that counts bytes.
type sseBenchWriter struct {
	header http.Header
	n      int
}

func (w *sseBenchWriter) Header() http.Header         { return w.header }
func (w *sseBenchWriter) WriteHeader(int)             {}
func (w *sseBenchWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }
func (w *sseBenchWriter) Flush()                      {}

func sseBenchResult(size int, pretty bool) json.RawMessage {
	text := `"` + strings.Repeat("x", size) + `"`
	if pretty {
		return json.RawMessage("{\n  \"content\": [\n    {\n      \"type\": \"text\",\n      \"text\": " + text + "\n    }\n  ]\n}")
	}
	return json.RawMessage(`{"content":[{"type":"text","text":` + text + `}]}`)
}

func BenchmarkSSEFraming(b *testing.B) {
	progress := jsonrpc.AppendNotification(nil, "notifications/progress", json.RawMessage(`{"progressToken":"t-1","progress":3,"total":10}`))
	b.Run("progress", func(b *testing.B) {
		w := &sseBenchWriter{header: http.Header{}}
		b.SetBytes(int64(len(progress)))
		b.ReportAllocs()
		for b.Loop() {
			writeEvent(w, progress)
		}
	})
	for _, size := range []struct {
		name string
		n    int
	}{{"1KiB", 1 << 10}, {"1MiB", 1 << 20}} {
		for _, pretty := range []bool{false, true} {
			msg := jsonrpc.AppendResult(nil, json.RawMessage(`7`), sseBenchResult(size.n, pretty))
			name := "result-" + size.name
			if pretty {
				name += "-pretty"
			}
			b.Run(name, func(b *testing.B) {
				w := &sseBenchWriter{header: http.Header{}}
				b.SetBytes(int64(len(msg)))
				b.ReportAllocs()
				for b.Loop() {
					writeEvent(w, msg)
				}
			})
		}
	}
}

// BenchmarkWriteReply answers a legacy request through its requestStream:
// "json" as a plain body, "sse" after a progress notification turned the
// response into a stream (the writer goroutine, the queue and the final
// event included).
func BenchmarkWriteReply(b *testing.B) {
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	req.Header.Set("Accept", "application/json, text/event-stream")
	progress := json.RawMessage(`{"progressToken":"t-1","progress":1}`)
	for _, size := range []struct {
		name string
		n    int
	}{{"1KiB", 1 << 10}, {"1MiB", 1 << 20}} {
		reply := &router.Reply{Result: sseBenchResult(size.n, false)}
		for _, mode := range []string{"json", "sse"} {
			b.Run(mode+"/"+size.name, func(b *testing.B) {
				w := &sseBenchWriter{header: http.Header{}}
				b.SetBytes(int64(len(reply.Result)))
				b.ReportAllocs()
				for b.Loop() {
					rs := (&Server{opts: Options{WriteTimeout: time.Minute}}).newRequestStream(w, req, nil, false)
					if mode == "sse" {
						rs.Notify("notifications/progress", progress)
					}
					writeReply(rs, json.RawMessage(`7`), reply)
				}
				if w.n < len(reply.Result) {
					b.Fatalf("wrote %d bytes", w.n)
				}
			})
		}
	}
}

// TestSSEBenchResultFraming keeps the benchmark's input honest: the
// pretty result does need reframing, and reframed it stays one line.
func TestSSEBenchResultFraming(t *testing.T) {
	var buf bytes.Buffer
	writeEvent(&buf, jsonrpc.AppendResult(nil, json.RawMessage(`7`), sseBenchResult(16, true)))
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "data: {") || !json.Valid([]byte(strings.TrimPrefix(lines[1], "data: "))) {
		t.Errorf("event %q: want an event line and one data line of valid JSON", buf.String())
	}
}

// BenchmarkLineBreakScan compares oneLine's check for line breaks,
// bytes.IndexAny, with two bytes.IndexByte calls, which use the vector
// instructions IndexAny's byte-set loop does not: a compact 1 MiB result
// has no line break, so the whole check is a full scan.
func BenchmarkLineBreakScan(b *testing.B) {
	msg := jsonrpc.AppendResult(nil, json.RawMessage(`7`), sseBenchResult(1<<20, false))
	b.Run("IndexAny", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			if bytes.IndexAny(msg, "\r\n") >= 0 {
				b.Fatal("line break")
			}
		}
	})
	b.Run("IndexByte-twice", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			if bytes.IndexByte(msg, '\n') >= 0 || bytes.IndexByte(msg, '\r') >= 0 {
				b.Fatal("line break")
			}
		}
	})
}
