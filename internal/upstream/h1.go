package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// h1Transport makes the POSTs of a plain-HTTP (http://, no proxy)
// upstream on keep-alive HTTP/1.1 connections of its own, writing the
// request and reading the answer on the caller's goroutine. Everything
// else (GET streams, DELETE, https://, proxies) goes to base.
//
// Why: net/http's Transport hands every request to two goroutines of the
// connection (one writes, one reads) and back, and keeps a third watching
// an idle connection. On the gateway's hot path (a small tools/call to a
// local server) that machinery cost about as much CPU as the rest of the
// gateway's work (docs/performance.md). The answer is read with
// http.ReadResponse, so its framing (Content-Length, chunked, 1xx, close)
// is net/http's own.
type h1Transport struct {
	base   *http.Transport
	dialer net.Dialer
	host   string // host:port the connections go to
	// maxIdle bounds the connections kept idle; idleTimeout closes one
	// left idle longer, as base does.
	maxIdle     int
	idleTimeout time.Duration

	mu     sync.Mutex
	idle   []*h1Conn // most recently used last
	closed bool
}

// newH1Transport returns a transport for the upstream at target, or nil
// when its POSTs need what only net/http has: TLS (and HTTP/2), or a
// proxy from the environment.
func newH1Transport(base *http.Transport, target string, maxIdle int) *h1Transport {
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.User != nil {
		return nil
	}
	if base.Proxy != nil {
		if p, err := base.Proxy(&http.Request{Method: http.MethodPost, URL: u}); err != nil || p != nil {
			return nil
		}
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "80")
	}
	return &h1Transport{
		base:        base,
		dialer:      net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second},
		host:        host,
		maxIdle:     maxIdle,
		idleTimeout: base.IdleConnTimeout,
	}
}

// h1Conn is one keep-alive connection.
type h1Conn struct {
	conn     net.Conn
	br       *bufio.Reader
	bw       *bufio.Writer
	idleFrom time.Time
}

// errBrokenConn marks a connection that may not be used again.
var errBrokenConn = errors.New("connection not reusable")

// RoundTrip implements http.RoundTripper.
func (t *h1Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || req.URL.Scheme != "http" || canonicalHost(req.URL) != t.host {
		return t.base.RoundTrip(req)
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		closeBody(req)
		return nil, err
	}
	pc, err := t.get(ctx)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	// A cancelled request ends the connection's reads and writes at once;
	// stop reports whether that has happened.
	stop := context.AfterFunc(ctx, func() { _ = pc.conn.SetDeadline(time.Unix(1, 0)) })
	resp, err := pc.roundTrip(req)
	if err != nil {
		stop()
		_ = pc.conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	resp.Body = &h1Body{t: t, pc: pc, resp: resp, body: resp.Body, stop: stop, ctx: ctx}
	return resp, nil
}

// canonicalHost is u's host:port, with the scheme's port when u has none.
func canonicalHost(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// roundTrip writes req and reads the head of its answer.
func (pc *h1Conn) roundTrip(req *http.Request) (*http.Response, error) {
	defer closeBody(req)
	if err := writeRequest(pc.bw, req); err != nil {
		return nil, err
	}
	for {
		resp, err := http.ReadResponse(pc.br, req)
		if err != nil {
			return nil, err
		}
		// Informational answers (100 Continue, 103 Early Hints) precede
		// the real one; 101 would switch protocols, which a POST never
		// asked for.
		if resp.StatusCode >= 100 && resp.StatusCode < 200 {
			if resp.StatusCode == http.StatusSwitchingProtocols {
				return nil, fmt.Errorf("unexpected HTTP %d to a POST", resp.StatusCode)
			}
			continue
		}
		return resp, nil
	}
}

// writeRequest writes req as HTTP/1.1 with a Content-Length body.
// Header names and values are checked as net/http checks them, so that
// no value (a configured header, a session id) can split the request.
func writeRequest(bw *bufio.Writer, req *http.Request) error {
	if req.ContentLength < 0 || (req.ContentLength > 0 && req.Body == nil) {
		return errors.New("h1: a POST needs a body of known length")
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if !httpguts.ValidHostHeader(host) {
		return fmt.Errorf("h1: invalid Host %q", host)
	}
	bw.WriteString("POST ")
	bw.WriteString(req.URL.RequestURI())
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\n")
	if _, ok := req.Header["User-Agent"]; !ok {
		bw.WriteString("User-Agent: Go-http-client/1.1\r\n")
	}
	for name, values := range req.Header {
		switch name {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Trailer":
			continue // framing is ours
		}
		if !httpguts.ValidHeaderFieldName(name) {
			return fmt.Errorf("h1: invalid header name %q", name)
		}
		for _, v := range values {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("h1: invalid value for header %q", name)
			}
			bw.WriteString(name)
			bw.WriteString(": ")
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	bw.WriteString("Content-Length: ")
	bw.WriteString(strconv.FormatInt(req.ContentLength, 10))
	bw.WriteString("\r\n\r\n")
	if req.ContentLength > 0 {
		n, err := io.Copy(bw, io.LimitReader(req.Body, req.ContentLength))
		if err != nil {
			return err
		}
		if n != req.ContentLength {
			return fmt.Errorf("h1: body of %d bytes, Content-Length %d", n, req.ContentLength)
		}
	}
	return bw.Flush()
}

// get returns an idle connection that the server has not closed, or a new
// one.
func (t *h1Transport) get(ctx context.Context) (*h1Conn, error) {
	for {
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			return nil, errors.New("h1: transport closed")
		}
		var pc *h1Conn
		if n := len(t.idle); n > 0 {
			pc = t.idle[n-1]
			t.idle[n-1] = nil
			t.idle = t.idle[:n-1]
		}
		t.mu.Unlock()
		if pc == nil {
			break
		}
		if (t.idleTimeout > 0 && time.Since(pc.idleFrom) > t.idleTimeout) || !stillOpen(pc.conn) {
			_ = pc.conn.Close()
			continue
		}
		return pc, nil
	}
	conn, err := t.dialer.DialContext(ctx, "tcp", t.host)
	if err != nil {
		return nil, err
	}
	return &h1Conn{conn: conn, br: bufio.NewReaderSize(conn, 4<<10), bw: bufio.NewWriterSize(conn, 4<<10)}, nil
}

// put keeps pc for the next request, or closes it.
func (t *h1Transport) put(pc *h1Conn) {
	pc.idleFrom = time.Now()
	t.mu.Lock()
	if !t.closed && len(t.idle) < t.maxIdle {
		t.idle = append(t.idle, pc)
		pc = nil
	}
	t.mu.Unlock()
	if pc != nil {
		_ = pc.conn.Close()
	}
}

// CloseIdleConnections closes the idle connections, and base's.
func (t *h1Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, pc := range idle {
		_ = pc.conn.Close()
	}
	t.base.CloseIdleConnections()
}

// h1Body is the body of an answer on an h1Conn: once it has been read to
// its end, the connection goes back to the pool; closed before that, or
// after the request was cancelled, the connection is closed.
type h1Body struct {
	t    *h1Transport
	pc   *h1Conn
	resp *http.Response
	body io.ReadCloser
	stop func() bool
	ctx  context.Context

	mu   sync.Mutex // Read and Close may come from different goroutines
	done bool
	eof  bool
}

func (b *h1Body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return 0, errors.New("h1: read on a closed body")
	}
	n, err := b.body.Read(p)
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil && b.ctx.Err() != nil:
		err = b.ctx.Err()
	}
	return n, err
}

// maxDrain is how much of an unread answer of known length Close reads to
// keep its connection.
const maxDrain = 64 << 10

func (b *h1Body) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return nil
	}
	b.done = true
	if !b.eof && b.resp.ContentLength >= 0 && b.resp.ContentLength <= maxDrain && b.ctx.Err() == nil {
		if _, err := io.Copy(io.Discard, b.body); err == nil {
			b.eof = true
		}
	}
	cancelled := !b.stop()
	if b.eof && !cancelled && !b.resp.Close && framed(b.resp) {
		b.t.put(b.pc)
		return nil
	}
	return b.pc.conn.Close()
}

// framed reports whether the answer's end was marked (a length, chunks,
// or a status without a body) rather than by closing the connection.
func framed(resp *http.Response) bool {
	switch {
	case resp.ContentLength >= 0, len(resp.TransferEncoding) > 0:
		return true
	case resp.StatusCode == http.StatusNoContent, resp.StatusCode == http.StatusNotModified:
		return true
	}
	return false
}
