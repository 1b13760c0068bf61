package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
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
// is net/http's own, and with net/http's limits: a bounded head
// (maxResponseHeaderBytes) and at most five 1xx answers before it.
//
// Idle connections are closed once idle for idleTimeout (a timer the
// transport owns, stopped by close), and one on which the server sent
// anything unasked, or which it closed, is never reused: on Linux a
// peek finds out before reuse (stillOpen); elsewhere a reader goroutine
// per idle connection does (watchIdle), which can miss a close that
// happens just before the request is written.
type h1Transport struct {
	dialer net.Dialer
	addr   string // host:port the connections go to
	host   string // the Host header: the URL's host, as net/http sends it
	uri    string // the request target: the URL's path and query
	// maxIdle bounds the connections kept idle; idleTimeout closes one
	// left idle longer.
	maxIdle     int
	idleTimeout time.Duration
	// portable watches idle connections with a reader goroutine each
	// (watchIdle) instead of peeking at them (stillOpen): the only way
	// outside Linux, and testable on Linux too.
	portable bool

	mu     sync.Mutex // guards the fields below
	idle   []*h1Conn  // most recently used last, so oldest first
	busy   map[*h1Conn]struct{}
	closed bool
	// sweep closes the connections idle past idleTimeout; it is
	// scheduled while any is idle, and stopped by close.
	sweep *time.Timer

	// watchers are the goroutines of watchIdle; close waits for them.
	watchers sync.WaitGroup
}

const (
	// maxResponseHeaderBytes bounds the head of an answer, as net/http's
	// Transport.MaxResponseHeaderBytes does (its default is 10 MiB). An
	// MCP answer's head is a few hundred bytes; 1 MiB leaves room for any
	// proxy's additions and keeps what MaxInFlight calls may buffer at
	// once small.
	maxResponseHeaderBytes = 1 << 20
	// max1xxResponses interim answers (100, 103) may precede an answer,
	// as in net/http.
	max1xxResponses = 5
)

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
		portable:    !canPeek,
		busy:        map[*h1Conn]struct{}{},
	}
}

// h1Conn is one keep-alive connection.
type h1Conn struct {
	conn net.Conn
	lr   limitReader // under br: bounds the head of an answer
	br   *bufio.Reader
	bw   *bufio.Writer
	// idleFrom is when it last became idle.
	idleFrom time.Time
	// peeked, in portable mode, is closed when the watcher that reads
	// from the connection since it became idle has returned: with bytes
	// (stray ones while idle; the answer once a request is written), or
	// with an error (the server closed it). peekErr is the error.
	peeked  chan struct{}
	peekErr error
}

// limitReader reads from r, at most n bytes: an answer's head is read
// with n set to the limit, its body with no limit.
type limitReader struct {
	r net.Conn
	n int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errHeadTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

var errHeadTooLarge = fmt.Errorf("the server's answer headers exceeded %d bytes", maxResponseHeaderBytes)

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
	if pc.peeked != nil {
		// Unread, the watcher would still be reading.
		_ = pc.conn.SetReadDeadline(time.Unix(1, 0))
		<-pc.peeked
	}
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
	if pc.peeked != nil {
		// The watcher returns with the answer's first bytes.
		<-pc.peeked
		pc.peeked = nil
		if pc.peekErr != nil {
			return nil, pc.peekErr
		}
	}
	for n1xx := 0; ; n1xx++ {
		pc.lr.n = maxResponseHeaderBytes
		resp, err := http.ReadResponse(pc.br, postRequest)
		exhausted := pc.lr.n <= 0
		pc.lr.n = math.MaxInt64
		if err != nil && (exhausted || errors.Is(err, errHeadTooLarge)) {
			return nil, errHeadTooLarge
		}
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
			if n1xx == max1xxResponses {
				return nil, fmt.Errorf("too many 1xx informational answers (more than %d) before the answer", max1xxResponses)
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
		if (t.idleTimeout > 0 && time.Since(pc.idleFrom) > t.idleTimeout) || !t.usable(pc) {
			t.drop(pc)
			continue
		}
		return pc, nil
	}
	conn, err := t.dialer.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	pc := &h1Conn{conn: conn, lr: limitReader{r: conn, n: math.MaxInt64}, bw: bufio.NewWriterSize(conn, 4<<10)}
	pc.br = bufio.NewReaderSize(&pc.lr, 4<<10)
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

// usable reports whether idle pc can carry a request: the server has
// neither closed it nor sent anything on it since its last answer. Bytes
// that arrive unasked are not an answer to the next request, which they
// would be taken for.
func (t *h1Transport) usable(pc *h1Conn) bool {
	if !t.portable {
		return stillOpen(pc.conn)
	}
	select {
	case <-pc.peeked:
		return false
	default:
		return true
	}
}

// watchIdle starts the portable watcher of a connection that became
// idle: a goroutine blocked in a read, which returns when bytes come (or
// the connection closes). A request written meanwhile finds the watcher
// still reading and waits for it: it returns with the answer. (A read
// deadline in the past cannot probe instead: Go's poller then fails the
// read without trying it.)
func (t *h1Transport) watchIdle(pc *h1Conn) {
	pc.peeked = make(chan struct{})
	t.watchers.Go(func() {
		_, pc.peekErr = pc.br.Peek(1)
		close(pc.peeked)
	})
}

// drop closes a connection in use.
func (t *h1Transport) drop(pc *h1Conn) {
	t.mu.Lock()
	delete(t.busy, pc)
	t.mu.Unlock()
	_ = pc.conn.Close()
}

// put keeps pc for the next request, or closes it. Bytes read past the
// answer are not an answer to anything: a connection with some is
// closed.
func (t *h1Transport) put(pc *h1Conn) {
	keep := pc.br.Buffered() == 0
	pc.idleFrom = time.Now()
	if keep && t.portable {
		t.watchIdle(pc)
	}
	t.mu.Lock()
	delete(t.busy, pc)
	if keep && !t.closed && len(t.idle) < t.maxIdle {
		t.idle = append(t.idle, pc)
		if t.sweep == nil && t.idleTimeout > 0 {
			t.sweep = time.AfterFunc(t.idleTimeout, t.sweepIdle)
		}
		pc = nil
	}
	t.mu.Unlock()
	if pc != nil {
		_ = pc.conn.Close()
	}
}

// sweepIdle closes the connections idle for idleTimeout or more, and
// runs again when the oldest one left reaches it.
func (t *h1Transport) sweepIdle() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	now := time.Now()
	n := 0
	for n < len(t.idle) && now.Sub(t.idle[n].idleFrom) >= t.idleTimeout {
		_ = t.idle[n].conn.Close()
		n++
	}
	t.idle = append(t.idle[:0], t.idle[n:]...)
	clear(t.idle[len(t.idle):cap(t.idle)])
	if len(t.idle) == 0 {
		t.sweep = nil
		return
	}
	t.sweep.Reset(t.idle[0].idleFrom.Add(t.idleTimeout).Sub(now))
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
	if t.sweep != nil {
		t.sweep.Stop()
	}
	t.mu.Unlock()
	for _, pc := range conns {
		_ = pc.conn.Close()
	}
	t.watchers.Wait()
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
