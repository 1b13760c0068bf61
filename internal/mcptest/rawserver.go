package mcptest

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
)

// RawServer is a TCP server that misbehaves on purpose: each connection
// is handed to the test's handler, which reads and writes raw bytes
// (headers without end, floods of interim answers, bytes nobody asked
// for). Its t.Cleanup closes the listener and every open connection and
// waits for the handlers to return.
type RawServer struct {
	// URL is http://<addr>/mcp.
	URL string

	ln net.Listener
	wg sync.WaitGroup

	mu      sync.Mutex // guards the fields below
	conns   map[net.Conn]struct{}
	changed chan struct{} // closed and replaced when conns changes
	closed  bool
}

// NewRawServer starts a server that runs handle for every connection,
// on a goroutine of its own; the connection is closed when handle
// returns.
func NewRawServer(t testing.TB, handle func(conn net.Conn)) *RawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &RawServer{URL: "http://" + ln.Addr().String() + "/mcp", ln: ln, conns: map[net.Conn]struct{}{}, changed: make(chan struct{})}
	s.wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			if !s.track(conn, true) {
				conn.Close()
				return
			}
			s.wg.Go(func() {
				defer s.track(conn, false)
				defer conn.Close()
				handle(conn)
			})
		}
	})
	t.Cleanup(s.close)
	return s
}

func (s *RawServer) track(conn net.Conn, open bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if open {
		if s.closed {
			return false
		}
		s.conns[conn] = struct{}{}
	} else {
		delete(s.conns, conn)
	}
	close(s.changed)
	s.changed = make(chan struct{})
	return true
}

func (s *RawServer) close() {
	s.ln.Close()
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Open returns how many connections are open: accepted, and neither
// closed by the client (as far as the handler has noticed) nor ended by
// the handler.
func (s *RawServer) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// WaitOpen waits until exactly n connections are open, or ctx is done.
func (s *RawServer) WaitOpen(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		got, changed := len(s.conns), s.changed
		s.mu.Unlock()
		if got == n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return errors.New("the open connections never reached the count")
		}
	}
}

// ReadRequest reads one request, body included, from br. A handler that
// serves keep-alive connections calls it in a loop: it fails once the
// client closes the connection.
func ReadRequest(br *bufio.Reader) (*http.Request, []byte, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, nil, err
	}
	body, err := io.ReadAll(req.Body)
	return req, body, err
}

// Repeat writes b to w n times, or until a write fails (the client gave
// up); it reports whether all were written. It allocates nothing however
// large n*len(b) is.
func Repeat(w io.Writer, b []byte, n int) bool {
	for range n {
		if _, err := w.Write(b); err != nil {
			return false
		}
	}
	return true
}
