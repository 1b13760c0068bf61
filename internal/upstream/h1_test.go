package upstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
)

// connCounter counts the connections an httptest server accepted.
type connCounter struct{ n atomic.Int64 }

func (c *connCounter) track(s *httptest.Server) {
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			c.n.Add(1)
		}
	}
}

func newH1(t *testing.T, url string) *h1Transport {
	t.Helper()
	tr := newH1Transport(defaultTransport(8), url, 8)
	if tr == nil {
		t.Fatalf("no h1 transport for %s", url)
	}
	t.Cleanup(tr.close)
	return tr
}

// postString posts body and returns the answer's status and body.
func postString(ctx context.Context, tr *h1Transport, h http.Header, body string) (int, string, error) {
	resp, err := tr.post(ctx, h, []byte(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func TestH1OnlyForPlainHTTP(t *testing.T) {
	base := defaultTransport(8)
	base.Proxy = func(r *http.Request) (*url.URL, error) {
		if r.URL.Hostname() == "mcp.example.com" {
			return url.Parse("http://proxy.invalid:3128")
		}
		return nil, nil
	}
	for url, want := range map[string]bool{
		"http://127.0.0.1:1/mcp":       true, // loopback never goes through a proxy
		"https://127.0.0.1:1/mcp":      false,
		"http://user:pw@127.0.0.1/mcp": false,
		"http://mcp.example.com/mcp":   false, // a proxy applies
		"ftp://127.0.0.1/mcp":          false,
	} {
		if got := newH1Transport(base, url, 8) != nil; got != want {
			t.Errorf("%s: own transport %v, want %v", url, got, want)
		}
	}
}

// The Host header is the URL's host as net/http sends it: a server that
// checks it against its allowed hosts (DNS-rebinding protection) sees
// "example.com", not the "example.com:80" the connection dials.
func TestH1HostHeader(t *testing.T) {
	for url, want := range map[string][2]string{
		"http://example.com/mcp":      {"example.com:80", "example.com"},
		"http://example.com:8080/mcp": {"example.com:8080", "example.com:8080"},
		"http://[::1]/mcp?a=b":        {"[::1]:80", "[::1]"},
	} {
		tr := newH1Transport(defaultTransport(8), url, 8)
		if tr == nil || tr.addr != want[0] || tr.host != want[1] {
			t.Errorf("%s: %+v, want address %s and Host %s", url, tr, want[0], want[1])
		}
	}
}

func TestH1ReusesConnectionsAndSendsHeaders(t *testing.T) {
	var conns connCounter
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.RequestURI() != "/mcp?x=1" || r.Host != r.Context().Value(http.LocalAddrContextKey).(net.Addr).String() ||
			r.Header.Get("Authorization") != "Bearer k" || r.ContentLength != int64(len(b)) {
			http.Error(w, "bad request: "+r.Method+" "+r.URL.RequestURI(), http.StatusBadRequest)
			return
		}
		if string(b) == "chunked" {
			// No Content-Length: net/http sends it chunked.
			w.Write([]byte("chu"))
			w.(http.Flusher).Flush()
			w.Write([]byte("nked"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	}))
	conns.track(srv)
	srv.Start()
	defer srv.Close()
	tr := newH1(t, srv.URL+"/mcp?x=1")
	h := http.Header{"Authorization": {"Bearer k"}}
	for i, body := range []string{`{"a":1}`, "chunked", "", `{"b":2}`, "chunked"} {
		code, got, err := postString(context.Background(), tr, h, body)
		if err != nil || code != 200 || got != body {
			t.Fatalf("post %d: %d %q %v, want 200 %q", i, code, got, err, body)
		}
	}
	if n := conns.n.Load(); n != 1 {
		t.Errorf("%d connections for 5 sequential posts, want 1", n)
	}
}

func TestH1ServerClosedIdleConnection(t *testing.T) {
	if !canPeek {
		// The portable watcher sees the close only once its goroutine
		// has run: a request may beat it, and fails.
		t.Skip("peeking at an idle connection is Linux only")
	}
	var conns connCounter
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	conns.track(srv)
	srv.Start()
	defer srv.Close()
	tr := newH1(t, srv.URL)
	for i := range 3 {
		if code, _, err := postString(context.Background(), tr, nil, "{}"); err != nil || code != 200 {
			t.Fatalf("post %d: %d %v", i, code, err)
		}
		// The server drops its idle keep-alive connection, as one does
		// when its idle timeout ends: the next post must not fail on it.
		srv.CloseClientConnections()
	}
	if n := conns.n.Load(); n != 3 {
		t.Errorf("%d connections, want 3 (one per post)", n)
	}
}

// rawServer answers every connection with answer (its raw bytes), after
// reading the request's head, then closes it.
func rawServer(t *testing.T, answer string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer conn.Close()
				if _, err := http.ReadRequest(bufio.NewReader(conn)); err != nil {
					return
				}
				io.WriteString(conn, answer)
			})
		}
	})
	return "http://" + ln.Addr().String() + "/mcp"
}

func TestH1AnswerFraming(t *testing.T) {
	for _, tc := range []struct {
		name, answer, body string
		code               int
		pooled             bool
	}{
		{"informational answers first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "ok", 200, true},
		{"ended by close", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"x\":1}", `{"x":1}`, 200, false},
		{"connection close", "HTTP/1.1 202 Accepted\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", "", 202, false},
		{"no content", "HTTP/1.1 204 No Content\r\n\r\n", "", 204, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newH1(t, rawServer(t, tc.answer))
			code, body, err := postString(context.Background(), tr, nil, "{}")
			if err != nil || code != tc.code || body != tc.body {
				t.Fatalf("got %d %q %v, want %d %q", code, body, err, tc.code, tc.body)
			}
			tr.mu.Lock()
			pooled := len(tr.idle) == 1
			tr.mu.Unlock()
			if pooled != tc.pooled {
				t.Errorf("connection kept: %v, want %v", pooled, tc.pooled)
			}
		})
	}
	t.Run("switching protocols", func(t *testing.T) {
		tr := newH1(t, rawServer(t, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n"))
		if _, _, err := postString(context.Background(), tr, nil, "{}"); err == nil || !strings.Contains(err.Error(), "101") {
			t.Fatalf("err = %v, want one about HTTP 101", err)
		}
	})
	t.Run("not HTTP", func(t *testing.T) {
		tr := newH1(t, rawServer(t, "SSH-2.0-OpenSSH\r\n"))
		if _, _, err := postString(context.Background(), tr, nil, "{}"); err == nil {
			t.Fatal("a non-HTTP answer was accepted")
		}
	})
}

func TestH1RejectsHeaderInjection(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	tr := newH1(t, srv.URL)
	for _, h := range []http.Header{
		{"Mcp-Session-Id": {"abc\r\nX-Evil: 1"}},
		{"Bad Name": {"v"}},
		{"X": {"nul\x00"}},
	} {
		if _, _, err := postString(context.Background(), tr, h, "{}"); err == nil {
			t.Errorf("header %q was sent", h)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server got %d requests, want 0", n)
	}
}

// holdingServer reads each request's body, runs first (if set), and then
// holds the request until the client leaves or the test ends.
func holdingServer(t *testing.T, first func(http.ResponseWriter)) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // from here on, r's context sees the client leave
		if first != nil {
			first(w)
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first
	return srv
}

func TestH1Cancel(t *testing.T) {
	// Cancelled while waiting for the answer's head.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := newH1(t, holdingServer(t, nil).URL).post(ctx, nil, []byte("{}")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("post = %v, want the context's deadline", err)
	}

	// Cancelled while reading the body.
	tr := newH1(t, holdingServer(t, func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: first\n\n"))
		w.(http.Flusher).Flush()
	}).URL)
	ctx2, cancel2 := context.WithCancel(context.Background())
	resp, err := tr.post(ctx2, nil, []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := resp.Body.Read(buf); err != nil || !strings.Contains(string(buf[:n]), "first") {
		t.Fatalf("first read: %q %v", buf[:n], err)
	}
	cancel2()
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel = %v, want context.Canceled", err)
	}
	resp.Body.Close()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.idle) != 0 {
		t.Error("a cancelled request's connection went back to the pool")
	}
}

func TestH1ClosedTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	tr := newH1(t, srv.URL)
	if _, _, err := postString(context.Background(), tr, nil, "{}"); err != nil {
		t.Fatal(err)
	}
	tr.close()
	if _, _, err := postString(context.Background(), tr, nil, "{}"); err == nil {
		t.Fatal("a closed transport posted")
	}
}

func TestH1CloseEndsRequestsInFlight(t *testing.T) {
	arrived := make(chan struct{}, 1)
	tr := newH1(t, holdingServer(t, func(http.ResponseWriter) { arrived <- struct{}{} }).URL)
	errc := make(chan error, 1)
	go func() {
		_, err := tr.post(context.Background(), nil, []byte("{}"))
		errc <- err
	}()
	<-arrived
	tr.close()
	if err := <-errc; err == nil {
		t.Fatal("a request in flight outlived the transport's close")
	}
}

// okAnswer is a keep-alive answer with a body of two bytes.
const okAnswer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

// serveEach answers every request on a keep-alive connection with what
// answer returns for the i-th request of the server (from 0).
func serveEach(t *testing.T, answer func(i int, conn net.Conn)) *mcptest.RawServer {
	var n atomic.Int64
	return mcptest.NewRawServer(t, func(conn net.Conn) {
		br := bufio.NewReader(conn)
		for {
			if _, _, err := mcptest.ReadRequest(br); err != nil {
				return
			}
			answer(int(n.Add(1)-1), conn)
		}
	})
}

// allocated returns the bytes f allocates (in the whole process).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// An answer's head is read with net/http's limits: a bounded size, and at
// most five interim answers. Either excess is a clear error, reached
// without allocating anything like what the server sends.
func TestH1AnswerHeadLimits(t *testing.T) {
	line := []byte("X-Filler: " + strings.Repeat("a", 1000) + "\r\n")
	hints := []byte("HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n")
	for _, tc := range []struct {
		name   string
		answer func(conn net.Conn)
		want   string
	}{
		{"32 MiB header", func(conn net.Conn) {
			io.WriteString(conn, "HTTP/1.1 200 OK\r\n")
			mcptest.Repeat(conn, line, 32<<10)
			conn.Close() // the head never ends
		}, "headers exceeded"},
		{"10,000 interim answers", func(conn net.Conn) {
			if mcptest.Repeat(conn, hints, 10000) {
				io.WriteString(conn, okAnswer)
			}
		}, "too many 1xx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serveEach(t, func(_ int, conn net.Conn) { tc.answer(conn) })
			tr := newH1(t, srv.URL)
			var err error
			n := allocated(func() { _, _, err = postString(testContext(t), tr, nil, "{}") })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
			if n > 8<<20 {
				t.Errorf("%d MiB allocated to refuse the answer", n>>20)
			}
		})
	}
	t.Run("five interim answers pass", func(t *testing.T) {
		srv := serveEach(t, func(_ int, conn net.Conn) {
			mcptest.Repeat(conn, hints, 5)
			io.WriteString(conn, okAnswer)
		})
		if code, body, err := postString(context.Background(), newH1(t, srv.URL), nil, "{}"); err != nil || code != 200 || body != "ok" {
			t.Fatalf("got %d %q %v", code, body, err)
		}
	})
}

// Connections left idle past the idle timeout are closed by the
// transport, not only when a request would pick them.
func TestH1ClosesIdleConnectionsOnTime(t *testing.T) {
	release := make(chan struct{})
	srv := serveEach(t, func(i int, conn net.Conn) {
		if i < 3 {
			<-release // three requests in flight at once: three connections
		}
		io.WriteString(conn, okAnswer)
	})
	tr := newH1(t, srv.URL)
	tr.idleTimeout = 20 * time.Millisecond
	ctx := testContext(t)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if _, _, err := postString(ctx, tr, nil, "{}"); err != nil {
				t.Error(err)
			}
		})
	}
	if err := srv.WaitOpen(ctx, 3); err != nil {
		t.Fatal(err)
	}
	close(release)
	wg.Wait()
	if err := srv.WaitOpen(ctx, 0); err != nil {
		t.Fatalf("%v: %d idle connections still open after the idle timeout", err, srv.Open())
	}
	// The transport still works, and sweeps again.
	if _, _, err := postString(ctx, tr, nil, "{}"); err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitOpen(ctx, 0); err != nil {
		t.Fatal(err)
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Bytes a server sends on a connection it is not answering are never
// taken for the answer to the next request: the connection is dropped.
// Both ways of watching idle connections are tested, the Linux peek and
// the portable reader goroutine.
func TestH1StrayBytesOnIdleConnection(t *testing.T) {
	const stray = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray"
	for _, portable := range []bool{false, true} {
		if !portable && !canPeek {
			continue
		}
		name := map[bool]string{false: "peek", true: "portable"}[portable]
		t.Run(name+"/with the answer", func(t *testing.T) {
			srv := serveEach(t, func(i int, conn net.Conn) {
				if i == 0 {
					io.WriteString(conn, okAnswer+stray) // one write
					return
				}
				io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nreal")
			})
			tr := newH1(t, srv.URL)
			tr.portable = portable
			for i, want := range []string{"ok", "real"} {
				if _, body, err := postString(testContext(t), tr, nil, "{}"); err != nil || body != want {
					t.Fatalf("post %d: %q %v, want %q", i, body, err, want)
				}
			}
		})
		t.Run(name+"/while idle", func(t *testing.T) {
			sendStray := make(chan net.Conn)
			srv := serveEach(t, func(i int, conn net.Conn) {
				if i == 0 {
					io.WriteString(conn, okAnswer)
					sendStray <- conn
					return
				}
				io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nreal")
			})
			tr := newH1(t, srv.URL)
			tr.portable = portable
			ctx := testContext(t)
			if _, body, err := postString(ctx, tr, nil, "{}"); err != nil || body != "ok" {
				t.Fatalf("first post: %q %v", body, err)
			}
			io.WriteString(<-sendStray, stray)
			// Wait until the client side can see the bytes (they cross a
			// real socket): the portable watcher has read them, or a
			// peek finds them.
			tr.mu.Lock()
			pc := tr.idle[0]
			tr.mu.Unlock()
			for !strayed(pc, portable) {
				if ctx.Err() != nil {
					t.Fatal("the stray bytes never arrived")
				}
				time.Sleep(time.Millisecond)
			}
			if _, body, err := postString(ctx, tr, nil, "{}"); err != nil || body != "real" {
				t.Fatalf("post after stray bytes: %q %v, want \"real\"", body, err)
			}
		})
	}
}

// strayed reports whether the client side has seen bytes on idle pc.
func strayed(pc *h1Conn, portable bool) bool {
	if portable {
		select {
		case <-pc.peeked:
			return true
		default:
			return false
		}
	}
	return !stillOpen(pc.conn)
}
