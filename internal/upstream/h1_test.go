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
	if runtime.GOOS != "linux" {
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
