package mcptest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Hostile hosts: raw TCP clients that misbehave the way a broken or
// malicious MCP host can, for tests of the gateway's HTTP front.

// RawConn is a raw TCP connection to an HTTP server, closed when the test
// ends.
type RawConn struct {
	conn net.Conn
	// stop ends the trickle; wg waits for its goroutine.
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

// Trickle connects to addr (host:port) and sends head, a request line and
// headers ending in a blank line, at once, then body one byte every
// interval until it is sent, the server closes the connection or the test
// ends: the slow body of a slowloris attack.
func Trickle(t testing.TB, addr, head string, body []byte, every time.Duration) *RawConn {
	t.Helper()
	c := dial(t, addr, 0)
	if _, err := io.WriteString(c.conn, head); err != nil {
		t.Fatalf("sending the request head: %v", err)
	}
	c.wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for _, b := range body {
			select {
			case <-c.stop:
				return
			case <-tick.C:
			}
			if _, err := c.conn.Write([]byte{b}); err != nil {
				return // the server closed the connection
			}
		}
	})
	return c
}

// NoRead connects to addr with a small receive buffer, sends request (a
// whole HTTP request) and reads nothing: a host that stops reading its
// stream, whose socket fills after a few kilobytes. Observe the server's
// side of the connection (http.Server.ConnState): reading it later
// can take long, as the server's zero-window probes back off.
func NoRead(t testing.TB, addr, request string) *RawConn {
	t.Helper()
	c := dial(t, addr, 4096)
	if _, err := io.WriteString(c.conn, request); err != nil {
		t.Fatalf("sending the request: %v", err)
	}
	return c
}

func dial(t testing.TB, addr string, readBuffer int) *RawConn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dialing %s: %v", addr, err)
	}
	if tc, ok := conn.(*net.TCPConn); ok && readBuffer > 0 {
		// Set after the connection opened, it still bounds the window
		// the client advertises, so the server's writes block early.
		_ = tc.SetReadBuffer(readBuffer)
	}
	c := &RawConn{conn: conn, stop: make(chan struct{})}
	t.Cleanup(c.Close)
	return c
}

// WaitClosed reads until the server closes the connection and returns
// the first 64 KiB of what it sent; it fails when the connection is still
// open after wait (a generous bound for the event, not a measurement).
func (c *RawConn) WaitClosed(wait time.Duration) (string, error) {
	if err := c.conn.SetReadDeadline(time.Now().Add(wait)); err != nil {
		return "", err
	}
	var head []byte
	buf := make([]byte, 32<<10)
	for {
		n, err := c.conn.Read(buf)
		if len(head) < 64<<10 {
			head = append(head, buf[:min(n, 64<<10-len(head))]...)
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
			return string(head), nil
		case errors.Is(err, os.ErrDeadlineExceeded):
			return string(head), fmt.Errorf("the server kept the connection open for %v", wait)
		default:
			return string(head), err
		}
	}
}

// Close stops the trickle and closes the connection. It may be called
// more than once.
func (c *RawConn) Close() {
	c.stopOnce.Do(func() {
		close(c.stop)
		_ = c.conn.Close()
	})
	c.wg.Wait()
}
