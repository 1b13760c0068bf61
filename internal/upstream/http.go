package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcpheader"
)

const (
	// maxErrorBody bounds the body of an HTTP error answer that is read.
	maxErrorBody = 1 << 20
	// listenMinDelay and listenMaxDelay bound the wait before the GET
	// stream of a legacy session, or a subscriptions/listen stream, is
	// opened again.
	listenMinDelay = 250 * time.Millisecond
	listenMaxDelay = 30 * time.Second
	// streamOpenWait bounds how long the handshake waits for the server
	// to answer the GET stream of a new legacy session.
	streamOpenWait = 5 * time.Second
	// maxGETFailures attempts in a row that fail to open the GET stream
	// of a legacy session end its retries: nothing retries forever
	// against a server that keeps refusing.
	maxGETFailures = 10
)

// statusError is an HTTP answer that is not an MCP answer to the request.
type statusError struct {
	Code        int
	ContentType string
	Body        []byte // the start of the body
}

func (e *statusError) Error() string {
	if len(e.Body) == 0 {
		return fmt.Sprintf("HTTP %d", e.Code)
	}
	return fmt.Sprintf("HTTP %d: %s", e.Code, truncate(bytes.TrimSpace(e.Body), 200))
}

// rpcError returns the JSON-RPC error in the body, if it holds one.
func (e *statusError) rpcError() *jsonrpc.Error {
	if m, err := jsonrpc.Decode(e.Body); err == nil && m.Error != nil {
		return m.Error
	}
	return nil
}

// errSessionExpired: the server does not know the legacy session any more.
var errSessionExpired = errors.New("legacy session expired (HTTP 404)")

// httpWire speaks Streamable HTTP: every message is a POST; the answer to
// a request is a JSON body or an SSE stream that ends with it. A legacy
// session also gets a GET stream for messages the server starts.
type httpWire struct {
	c *Client

	mu      sync.Mutex // guards the fields below
	modern  bool
	version string             // MCP-Protocol-Version once negotiated
	session string             // legacy Mcp-Session-Id
	stopGET context.CancelFunc // ends the GET stream loop of the session

	// renewing serialises session renewals.
	renewing sync.Mutex
	// hint is the size of the last response message larger than a read
	// chunk: the next large one likely has about its size.
	hint atomic.Int64
}

func (w *httpWire) setModern(version string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.modern, w.version = true, version
}

func (w *httpWire) setLegacy(version string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.modern, w.version = false, version
}

func (w *httpWire) isModern() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.modern
}

// send POSTs a message. A legacy session the server no longer knows is
// renewed (spec 2025-11-25, transports "Session Management": "When a
// client receives HTTP 404 in response to a request containing an
// MCP-Session-Id, it MUST start a new session") and a request is then sent
// once more.
//
// Resending is safe even for tools/call: errSessionExpired stands only for
// a 404 that carries no JSON-RPC answer to the request, which in the
// legacy transport means the server rejected the session before looking at
// the request ("The server MAY terminate the session at any time, after
// which it MUST respond to requests containing that session ID with HTTP
// 404"), so the request never ran. A 404 that answers the request is
// delivered as its response and is not retried.
func (w *httpWire) send(ctx context.Context, m *outgoing) error {
	session, err := w.post(ctx, m)
	if !errors.Is(err, errSessionExpired) || m.handshake {
		return err
	}
	if err := w.renew(ctx, session); err != nil {
		return fmt.Errorf("%w; starting a new session: %w", errSessionExpired, err)
	}
	if m.id == 0 {
		return err // a notification or answer for the old session: drop it
	}
	_, err = w.post(ctx, m)
	return err
}

// renew starts a new session in place of old, unless another caller has
// already done so.
func (w *httpWire) renew(ctx context.Context, old string) error {
	w.renewing.Lock()
	defer w.renewing.Unlock()
	w.mu.Lock()
	current := w.session
	w.mu.Unlock()
	if current != old {
		return nil
	}
	w.c.log.Info("upstream session expired: starting a new one")
	return w.c.initialize(ctx, w)
}

// post sends one message and handles the answer. It returns the session it
// sent.
func (w *httpWire) post(ctx context.Context, m *outgoing) (string, error) {
	// Keys are set canonical, as net/http's Set would make them.
	h := make(http.Header, len(w.c.headers)+len(m.header)+6)
	if err := w.c.addHeaders(ctx, h); err != nil {
		return "", err
	}
	h["Content-Type"] = contentTypeJSON
	h["Accept"] = acceptJSONOrSSE
	w.mu.Lock()
	modern, version, session := w.modern, w.version, w.session
	w.mu.Unlock()
	if m.method == "initialize" {
		session = "" // a new session: no session id, no version yet
	} else if version != "" {
		h["Mcp-Protocol-Version"] = []string{version}
	}
	if modern {
		session = ""
		if m.method != "" {
			h["Mcp-Method"] = []string{m.method}
		}
		if m.req != nil {
			if name, ok := mcpName(m.method, m.req); ok {
				h["Mcp-Name"] = []string{mcpheader.Encode(name)}
			}
		}
	} else if session != "" {
		h["Mcp-Session-Id"] = []string{session}
	}
	for k, v := range m.header {
		h[k] = v
	}
	w.c.injectTrace(ctx, h)
	resp, done, err := w.do(ctx, h, m.data)
	if err == nil && resp.StatusCode == http.StatusUnauthorized && w.c.rejected(h) {
		// The upstream refused the token the gateway sent (revoked, or
		// its key rotated early): it is dropped, and the request, which
		// a 401 says was not served, goes once more with a new one.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		done()
		if err := w.c.addHeaders(ctx, h); err != nil {
			return session, err
		}
		resp, done, err = w.do(ctx, h, m.data)
	}
	if err != nil {
		return session, err
	}
	defer done()
	defer resp.Body.Close()
	return session, w.answer(ctx, resp, m, session != "")
}

var (
	contentTypeJSON = []string{"application/json"}
	acceptJSONOrSSE = []string{"application/json, text/event-stream"}
)

// do POSTs body: on the Client's own connections when it has them
// (h1Transport), through its http.Client otherwise, and for a redirect,
// which net/http follows. Either way the request ends when the Client
// closes. done is called once the answer's body is closed.
func (w *httpWire) do(ctx context.Context, h http.Header, body []byte) (resp *http.Response, done func(), err error) {
	if w.c.h1 != nil {
		resp, err := w.c.h1.post(ctx, h, body)
		if err != nil || !isRedirect(resp.StatusCode) {
			return resp, noop, err
		}
		resp.Body.Close()
	}
	ctx, cancel := w.c.bound(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.c.opts.URL, bytes.NewReader(body))
	if err == nil {
		req.Header = h
		resp, err = w.c.hc.Do(req)
	}
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return resp, cancel, nil
}

func noop() {}

// isRedirect reports whether code is a redirect that net/http's Client
// follows for a POST.
func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// answer handles the HTTP response to a POST. ctx is the POST's.
func (w *httpWire) answer(ctx context.Context, resp *http.Response, m *outgoing, withSession bool) error {
	ct := mcpheader.MediaType(resp.Header.Get("Content-Type"))
	switch code := resp.StatusCode; {
	case code == http.StatusAccepted || code == http.StatusNoContent:
		if m.id != 0 {
			return fmt.Errorf("%w: HTTP %d without an answer to the request", ErrMalformed, code)
		}
		return nil
	case code >= 200 && code < 300:
		if m.method == "initialize" {
			w.mu.Lock()
			w.session = resp.Header.Get("Mcp-Session-Id")
			w.mu.Unlock()
		}
		if m.id == 0 {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
			return nil
		}
		switch ct {
		case "text/event-stream":
			return w.readStream(ctx, resp.Body, m)
		case "application/json":
			body, err := readBody(resp.Body, resp.ContentLength, w.c.maxMessage)
			if err != nil {
				return err
			}
			msg, err := jsonrpc.Decode(body)
			if err != nil {
				return fmt.Errorf("%w: %v", ErrMalformed, err)
			}
			if !answers(msg, m.id) {
				return fmt.Errorf("%w: the body does not answer request %d", ErrMalformed, m.id)
			}
			w.c.deliver(msg)
			return nil
		}
		return fmt.Errorf("%w: unexpected content type %q", ErrMalformed, ct)
	default:
		body, err := readBody(io.LimitReader(resp.Body, maxErrorBody), -1, maxErrorBody)
		if err != nil && !errors.Is(err, ErrMalformed) {
			return fmt.Errorf("HTTP %d: reading the body: %w", code, err)
		}
		// Modern servers send JSON-RPC errors with 4xx statuses (400 for
		// an invalid or unsupported request, 404 for an unknown method):
		// those answer the request.
		if m.id != 0 && ct == "application/json" {
			if msg, err := jsonrpc.Decode(body); err == nil && answers(msg, m.id) {
				w.c.deliver(msg)
				return nil
			}
		}
		if code == http.StatusNotFound && withSession {
			return errSessionExpired
		}
		return &statusError{Code: code, ContentType: ct, Body: body}
	}
}

// answers reports whether msg is the response to request id.
func answers(msg *jsonrpc.Message, id int64) bool {
	n, ok := jsonrpc.Int64ID(msg.ID)
	return msg.IsResponse() && ok && n == id
}

// readStream delivers the messages of the SSE response stream of request
// m until its response (which ends the request; spec 2026-07-28 says the
// response SHOULD terminate the stream, and nothing after it concerns the
// request). The other messages relate to the request (spec 2025-11-25,
// transports "Sending Messages to the Server"): they go to m's handler,
// if it has one. ctx is the POST's.
func (w *httpWire) readStream(ctx context.Context, body io.Reader, m *outgoing) error {
	sr := newResponseSSEReader(body, w.c.maxMessage, int(w.hint.Load()))
	bad := badLines{log: w.c.log}
	for {
		ev, err := sr.next()
		if err != nil {
			var tl *tooLongError
			if errors.As(err, &tl) {
				// Most likely the response: the request fails, and the
				// stream is closed unread (the caller closes the body).
				// A request or notification of the server's is skipped.
				id, _, method := scanHead(tl.head)
				w.c.log.Error("upstream message too large: skipped", "limit_bytes", tl.max, "id", id)
				if method {
					continue
				}
				return &TooLargeError{Limit: tl.max}
			}
			if errors.Is(err, io.EOF) {
				return errors.New("the response stream ended without the response")
			}
			return fmt.Errorf("reading the response stream: %w", err)
		}
		if (ev.name != "" && ev.name != "message") || len(ev.data) == 0 {
			continue // e.g. the priming event of a resumable stream
		}
		msg, err := jsonrpc.Decode(ev.data)
		if err != nil {
			bad.report(ev.data, err)
			continue
		}
		switch {
		case m.handler == nil || msg.IsResponse():
			w.c.deliver(msg)
		case msg.IsNotification():
			w.c.heard.Add(1)
			w.c.progressed(msg)
			w.c.notifyHandler(m.handler, msg)
		default:
			w.c.heard.Add(1)
			w.c.serveRequest(ctx, msg, m.handler)
		}
		if answers(msg, m.id) {
			if len(ev.data) > chunkSize {
				w.hint.Store(int64(len(ev.data)))
			}
			return nil
		}
	}
}

// listenGET keeps the optional GET stream of the legacy session just
// initialized open (spec 2025-11-25, transports "Listening for Messages
// from the Server"), in place of an earlier session's. It returns once
// the server has answered the first GET, or after streamOpenWait, or when
// ctx is done, so that a message the server sends once the session is
// initialized finds the stream open: a server without an event store
// drops what it cannot deliver.
func (w *httpWire) listenGET(ctx context.Context) {
	lctx, cancel := context.WithCancel(w.c.life)
	w.mu.Lock()
	old := w.stopGET
	w.stopGET = cancel
	w.mu.Unlock()
	if old != nil {
		old()
	}
	answered := make(chan struct{})
	if !w.c.spawn(func() { w.getLoop(lctx, sync.OnceFunc(func() { close(answered) })) }) {
		cancel()
		return
	}
	t := time.NewTimer(streamOpenWait)
	defer t.Stop()
	select {
	case <-answered:
	case <-ctx.Done():
	case <-t.C:
		w.c.log.Debug("upstream has not answered the GET stream yet: going on", "waited", streamOpenWait)
	}
}

// getLoop opens the GET stream again with backoff whenever it drops, until
// the server answers 405 (it offers none), 400 or 404 (the session is
// gone), fails to open it maxGETFailures times in a row, or ctx is done.
// answered is called once the first GET has its answer.
func (w *httpWire) getLoop(ctx context.Context, answered func()) {
	defer answered()
	delay, lastID, failures := time.Duration(0), "", 0
	for {
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		opened, retry, err := w.getStream(ctx, &lastID, answered)
		var se *statusError
		switch {
		case ctx.Err() != nil:
			return
		case errors.As(err, &se) && (se.Code == http.StatusMethodNotAllowed || se.Code == http.StatusBadRequest):
			// 405 is the spec's "no stream here"; a 400 will not get
			// better by asking again.
			w.c.log.Debug("upstream offers no GET stream", "status", se.Code)
			return
		case errors.As(err, &se) && se.Code == http.StatusNotFound:
			// The session is gone; the next POST starts a new one, with
			// a stream of its own.
			w.c.log.Debug("upstream GET stream: the session expired")
			return
		case opened:
			delay, failures = max(retry, listenMinDelay), 0
		default:
			if failures++; failures == maxGETFailures {
				w.c.log.Warn("upstream GET stream given up: it failed to open too often", "attempts", failures, "err", err)
				return
			}
			delay = min(max(2*delay, listenMinDelay), listenMaxDelay)
		}
		w.c.log.Debug("upstream GET stream ended", "err", err, "retry_in", delay)
	}
}

// getStream opens the GET stream once and reads it to its end. It calls
// answered once the server has answered, and reports whether the stream
// was opened and the server's retry hint.
func (w *httpWire) getStream(ctx context.Context, lastID *string, answered func()) (opened bool, retry time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.c.opts.URL, nil)
	if err != nil {
		return false, 0, err
	}
	if err := w.c.addHeaders(ctx, req.Header); err != nil {
		answered()
		return false, 0, err
	}
	req.Header.Set("Accept", "text/event-stream")
	w.mu.Lock()
	if w.version != "" {
		req.Header.Set("MCP-Protocol-Version", w.version)
	}
	if w.session != "" {
		req.Header.Set("Mcp-Session-Id", w.session)
	}
	w.mu.Unlock()
	if *lastID != "" {
		req.Header.Set("Last-Event-ID", *lastID)
	}
	resp, err := w.c.hc.Do(req)
	answered()
	if err != nil {
		return false, 0, err
	}
	defer resp.Body.Close()
	ct := mcpheader.MediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		body, _ := readBody(io.LimitReader(resp.Body, 4<<10), -1, 4<<10)
		return false, 0, &statusError{Code: resp.StatusCode, ContentType: ct, Body: body}
	}
	sr := newSSEReader(resp.Body, w.c.maxMessage)
	err = w.c.deliverEvents(sr, func() { *lastID = sr.lastID })
	return true, sr.retry, err
}

// close ends a legacy session with DELETE (spec 2025-11-25, "Session
// Management"; a 405 means the server does not allow it).
func (w *httpWire) close() error {
	w.mu.Lock()
	session, version, stopGET := w.session, w.version, w.stopGET
	w.session = ""
	w.mu.Unlock()
	if stopGET != nil {
		stopGET()
	}
	if session == "" {
		return nil
	}
	// Close has no context of its own; the DELETE is best effort.
	ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, w.c.opts.URL, nil)
	if err != nil {
		return nil
	}
	if err := w.c.addHeaders(ctx, req.Header); err != nil {
		w.c.log.Debug("upstream session not ended", "err", err)
		return nil
	}
	req.Header.Set("Mcp-Session-Id", session)
	if version != "" {
		req.Header.Set("MCP-Protocol-Version", version)
	}
	resp, err := w.c.hc.Do(req)
	if err != nil {
		w.c.log.Debug("upstream session not ended", "err", err)
		return nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusMethodNotAllowed {
		w.c.log.Debug("upstream session not ended", "status", resp.StatusCode)
	}
	return nil
}

// injectTrace writes the trace context of ctx, the call's, into h (see
// Options.Propagator). Without a span in ctx the propagator writes
// nothing.
func (c *Client) injectTrace(ctx context.Context, h http.Header) {
	if c.opts.Propagator != nil {
		c.opts.Propagator.Inject(ctx, propagation.HeaderCarrier(h))
	}
}
