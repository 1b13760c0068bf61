package main

// Helpers shared by the end-to-end tests that watch the catalog change
// while hosts keep calling (faults, reload), and by those that send
// requests by hand (smuggling, identity), or through a Go proxy
// (buffered).

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
)

// postRaw POSTs body to url with headers (besides the content type and
// accept headers every POST has), and returns the status, the headers
// and the answer: the JSON body, or the last event of an SSE stream.
func postRaw(ctx context.Context, t *testing.T, url string, headers map[string]string, body string) (int, http.Header, *jsonrpc.Message) {
	t.Helper()
	resp := postResponse(ctx, t, url, headers, body)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		events := strings.Split(strings.TrimSpace(string(b)), "data: ")
		b = []byte(strings.TrimSpace(events[len(events)-1]))
	}
	m, err := jsonrpc.Decode(b)
	if err != nil {
		t.Fatalf("answer %q: %v", b, err)
	}
	return resp.StatusCode, resp.Header, m
}

// postResponse POSTs body to url with headers, as postRaw does, and
// returns the response, whose body the caller reads and closes.
func postResponse(ctx context.Context, t *testing.T, url string, headers map[string]string, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// listChanges connects a legacy host that reports every
// notifications/tools/list_changed on the returned channel.
func listChanges(t *testing.T, url string) (*mcp.ClientSession, <-chan struct{}) {
	t.Helper()
	return listChangesAs(t, url, "")
}

// listChangesAs is listChanges with an API key ("": none).
func listChangesAs(t *testing.T, url, key string) (*mcp.ClientSession, <-chan struct{}) {
	t.Helper()
	changed := make(chan struct{}, 64)
	client := mcp.NewClient(&mcp.Implementation{Name: "faults", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{key}}},
		&mcp.ClientSessionOptions{ProtocolVersion: eras[0]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, changed
}

// toolNames lists the host's tools and returns their names.
func toolNames(ctx context.Context, t *testing.T, cs *mcp.ClientSession, what string) []string {
	t.Helper()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("%s: tools/list: %v", what, err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// awaitTools lists tools, then again after each list_changed, until ok
// holds for the names listed.
func awaitTools(ctx context.Context, t *testing.T, cs *mcp.ClientSession, changed <-chan struct{}, what string, ok func(names []string) bool) {
	t.Helper()
	for {
		names := toolNames(ctx, t, cs, what)
		if ok(names) {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("%s: never came; the last tools/list: %v", what, names)
		}
	}
}

// toolResult calls a tool and returns its text and isError, failing the
// test on a JSON-RPC or transport error.
func toolResult(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	return text.String(), res.IsError
}

func statusOf(g *gateway, name string) router.UpstreamStatus {
	for _, s := range g.router.Status() {
		if s.Name == name {
			return s
		}
	}
	return router.UpstreamStatus{}
}

// load is a steady load of calls to one echo tool, by four workers,
// until stop.
type load struct {
	calls, failures atomic.Int64
	firstErr        atomic.Value
	done            chan struct{}
	stopOnce        sync.Once
	wg              sync.WaitGroup
}

// startLoad calls tool (an echo) with fresh texts, checking each answer.
func startLoad(ctx context.Context, cs *mcp.ClientSession, tool string) *load {
	l := &load{done: make(chan struct{})}
	for w := range 4 {
		l.wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-l.done:
					return
				default:
				}
				want := fmt.Sprintf("w%d-%d", w, i)
				got, err := callText(ctx, cs, tool, map[string]any{"text": want})
				l.calls.Add(1)
				if err != nil || got != want {
					l.failures.Add(1)
					l.firstErr.CompareAndSwap(nil, fmt.Sprintf("%q: %q, %v", want, got, err))
				}
			}
		})
	}
	return l
}

// stop ends the load and waits for its calls; it may be called twice.
func (l *load) stop() {
	l.stopOnce.Do(func() { close(l.done) })
	l.wg.Wait()
}

// buffered reads a request's body whole before next, a ReverseProxy,
// forwards it, as a real balancer does with a small body. A ReverseProxy
// fed the HTTP/1 server's own body cuts the response it relays at random
// (golang/go#40747): once the server behind it has the last byte, it may
// answer before the proxy's Transport makes its final read of the body,
// which looks for more; writing that answer to the client makes the
// server consume and close the body (golang/go#15527), so the read fails,
// and the Transport, taking it for a failed write of the request, closes
// the connection the answer is still streaming on. A host then sees its
// POST's SSE stream end without the response.
func buffered(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// TestBufferedProxyKeepsTheStream: behind buffered, a ReverseProxy
// relays an SSE answer whole even when its Transport's last read of the
// request body comes only after the answer began (the order a loaded
// machine may pick, held here on purpose); fed the server's body, the
// same proxy cuts the stream after the first event (golang/go#40747).
func TestBufferedProxyKeepsTheStream(t *testing.T) {
	release := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "data: answer\n\n")
	}))
	t.Cleanup(backend.Close)
	target, err := url.Parse(backend.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	front := httptest.NewServer(buffered(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := &flushSignal{ResponseWriter: w, flushed: make(chan struct{})}
		r.Body = &heldBody{ReadCloser: r.Body, left: r.ContentLength, flushed: f.flushed}
		proxy.ServeHTTP(f, r)
	})))
	t.Cleanup(front.Close)

	resp, err := http.Post(front.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, len("data: first\n\n"))
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatalf("the first event: %v", err)
	}
	close(release)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "data: answer\n\n" {
		t.Errorf("after the first event: %q, %v; want the answer, then the end", rest, err)
	}
}

// heldBody holds the read that follows the body's last byte until the
// answer's first flush.
type heldBody struct {
	io.ReadCloser
	left    int64
	flushed <-chan struct{}
}

func (b *heldBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		<-b.flushed
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// flushSignal closes flushed once the first flush reached the client.
type flushSignal struct {
	http.ResponseWriter
	once    sync.Once
	flushed chan struct{}
}

func (f *flushSignal) Flush() {
	f.ResponseWriter.(http.Flusher).Flush()
	f.once.Do(func() { close(f.flushed) })
}
