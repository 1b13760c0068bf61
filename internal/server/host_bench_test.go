package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/internal/router"
)

// BenchmarkHostSocket sends a modern tools/call to the server's handler
// over a real loopback socket, with keep-alive, and reads its JSON
// answer: the host side of the per-call path with what a socket adds
// (the body read and the read and write deadlines on the connection).
// The dispatcher answers from a table. Run:
//
//	go test -run '^$' -bench HostSocket -benchmem ./internal/server
func BenchmarkHostSocket(b *testing.B) {
	d := &fakeDispatcher{replies: map[string]*router.Reply{
		"tools/call": {Result: json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("r", 1000) + `"}]}`), LacksResultType: true},
	}}
	s := New(d, &Options{})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	defer s.Close()
	body := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"a__b",` + modernMeta + `}}`
	client := ts.Client()
	b.ReportAllocs()
	for b.Loop() {
		req, err := http.NewRequest("POST", ts.URL+"/mcp", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "a__b"} {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || n < 1000 {
			b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
		}
	}
}
