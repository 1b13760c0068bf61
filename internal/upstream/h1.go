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
// else (GET streams, DELETE, redirects, https://, proxies) goes through
// the Client's http.Client.
//
// Why: net/http's Client and Transport copy the request's headers for
// redirects and hand every request to two goroutines of the connection
// (one writes, one reads) and back. On the gateway's hot path (a small
// tools/call to a local server) that cost about a third of the gateway's
// CPU per call (docs/performance.md). The answer is still read with
// http.ReadResponse, so its framing (Content-Length, chunked, 1xx, close)
// is net/http's own.
type h1Transport struct {
	dialer net.Dialer
	addr   string // host:port the connections go to
	host   string // the Host header: the URL's host, as net/http sends it
	uri    string // the request target: the URL's path and query
	// maxIdle bounds the connections kept idle; idleTimeout closes one
	// left idle longer.
	maxIdle     int
	idleTimeout time.Duration

	mu     sync.Mutex
	idle   []*h1Conn // most recently used last
	busy   map[*h1Conn]struct{}
	closed bool
}

// newH1Transport returns a transport for POSTs to target, or nil when
// they need what only net/http has: TLS (and HTTP/2), or the proxy that
// base would use.
func newH1Transport(base *http.Transport, target string, maxIdle int) *h1Transport {
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.User != nil || !httpguts.ValidHostHeader(u.Host) {
		return nil
	}
	if base.Proxy != nil {
		if p, err := base.Proxy(&http.Request{Method: http.MethodPost, URL: u}); err != nil || p != nil {
			return nil
		}
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	return &h1Transport{
		dialer:      net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second},
		addr:        addr,
		host:        u.Host,
		uri:         u.RequestURI(),
		maxIdle:     maxIdle,
		idleTimeout: base.IdleConnTimeout,
		busy:        map[*h1Conn]struct{}{},
	}
}

// h1Conn is one keep-alive connection.
type h1Conn struct {
	conn     net.Conn
	br       *bufio.Reader
	bw       *bufio.Writer
	idleFrom time.Time
}

// postRequest is what http.ReadResponse is told of the request: a POST.
var postRequest = &http.Request{Method: http.MethodPost}

// post sends body with header and returns the answer, whose body the
// caller must close. Cancelling ctx, or closing t, ends the request at
// once, in the write or in the reading of the answer.
func (t *h1Transport) post(ctx context.Context, header http.Header, body []byte) (*http.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pc, err := t.get(ctx)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = pc.conn.SetDeadline(time.Unix(1, 0)) })
	resp, err := pc.roundTrip(t, header, body)
	if err != nil {
		stop()
		t.drop(pc)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	resp.Body = &h1Body{t: t, pc: pc, resp: resp, body: resp.Body, stop: stop, ctx: ctx}
	return resp, nil
}

// roundTrip writes a request and reads the head of its answer.
func (pc *h1Conn) roundTrip(t *h1Transport, header http.Header, body []byte) (*http.Response, error) {
	if err := writeRequest(pc.bw, t, header, body); err != nil {
		return nil, err
	}
	for {
		resp, err := http.ReadResponse(pc.br, postRequest)
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

// writeRequest writes a POST of body as HTTP/1.1. Header names and values
// are checked as net/http checks them, so that no value (a configured
// header, a session id) can split the request.
func writeRequest(bw *bufio.Writer, t *h1Transport, header http.Header, body []byte) error {
	bw.WriteString("POST ")
	bw.WriteString(t.uri)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(t.host)
	bw.WriteString("\r\n")
	if _, ok := header["User-Agent"]; !ok {
		bw.WriteString("User-Agent: Go-http-client/1.1\r\n")
	}
	for name, values := range header {
		switch name {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Trailer":
			continue // framing is ours
		}
		if !httpguts.ValidHeaderFieldName(name) {
			return fmt.Errorf("invalid header name %q", name)
		}
		for _, v := range values {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("invalid value for header %q", name)
			}
			bw.WriteString(name)
			bw.WriteString(": ")
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	bw.WriteString("Content-Length: ")
	var num [20]byte
	bw.Write(strconv.AppendInt(num[:0], int64(len(body)), 10))
	bw.WriteString("\r\n\r\n")
	bw.Write(body)
	return bw.Flush()
}

// get returns an idle connection that the server has not closed, or a new
// one.
func (t *h1Transport) get(ctx context.Context) (*h1Conn, error) {
	for {
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			return nil, errors.New("client closed")
		}
		var pc *h1Conn
		if n := len(t.idle); n > 0 {
			pc = t.idle[n-1]
			t.idle[n-1] = nil
			t.idle = t.idle[:n-1]
			t.busy[pc] = struct{}{}
		}
		t.mu.Unlock()
		if pc == nil {
			break
		}
		if (t.idleTimeout > 0 && time.Since(pc.idleFrom) > t.idleTimeout) || !stillOpen(pc.conn) {
			t.drop(pc)
			continue
		}
		return pc, nil
	}
	conn, err := t.dialer.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	pc := &h1Conn{conn: conn, br: bufio.NewReaderSize(conn, 4<<10), bw: bufio.NewWriterSize(conn, 4<<10)}
	t.mu.Lock()
	closed := t.closed
	if !closed {
		t.busy[pc] = struct{}{}
	}
	t.mu.Unlock()
	if closed {
		_ = conn.Close()
		return nil, errors.New("client closed")
	}
	return pc, nil
}

// drop closes a connection in use.
func (t *h1Transport) drop(pc *h1Conn) {
	t.mu.Lock()
	delete(t.busy, pc)
	t.mu.Unlock()
	_ = pc.conn.Close()
}

// put keeps pc for the next request, or closes it.
func (t *h1Transport) put(pc *h1Conn) {
	pc.idleFrom = time.Now()
	t.mu.Lock()
	delete(t.busy, pc)
	if !t.closed && len(t.idle) < t.maxIdle {
		t.idle = append(t.idle, pc)
		pc = nil
	}
	t.mu.Unlock()
	if pc != nil {
		_ = pc.conn.Close()
	}
}

// close closes every connection, ending the requests in flight, and
// keeps no more.
func (t *h1Transport) close() {
	t.mu.Lock()
	conns := t.idle
	for pc := range t.busy {
		conns = append(conns, pc)
	}
	t.idle, t.busy, t.closed = nil, nil, true
	t.mu.Unlock()
	for _, pc := range conns {
		_ = pc.conn.Close()
	}
}

// h1Body is the body of an answer on an h1Conn: once it has been read to
// its end, the connection goes back to the pool; closed before that, or
// after the request was cancelled, the connection is closed. Read and
// Close are called by the one goroutine that made the request (the
// wire's post); cancelling its context or closing the transport is how
// another goroutine ends a read.
type h1Body struct {
	t    *h1Transport
	pc   *h1Conn
	resp *http.Response
	body io.ReadCloser
	stop func() bool
	ctx  context.Context
	done bool
	eof  bool
}

func (b *h1Body) Read(p []byte) (int, error) {
	if b.done {
		return 0, errors.New("read on a closed body")
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
	b.t.drop(b.pc)
	return nil
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
