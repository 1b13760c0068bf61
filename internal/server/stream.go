package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
)

// requestStream is the answer to one POSTed request, and the way back to
// its host while the request runs (it implements router.Host). It starts
// as a plain JSON response and becomes an SSE stream the first time
// something must reach the host before the answer — progress, a log
// message, a server request — when the host accepts text/event-stream
// (2025-11-25 and 2026-07-28 streamable-http "Sending Messages").
type requestStream struct {
	w       http.ResponseWriter
	accept  string
	modern  bool
	session *session // nil for modern requests

	mu sync.Mutex // guards the fields below, and writes to w
	// sse is set once the SSE headers are out.
	sse bool
	// done is set once the answer is written: nothing may follow it.
	done bool
}

func newRequestStream(w http.ResponseWriter, r *http.Request, ss *session, modern bool) *requestStream {
	return &requestStream{w: w, accept: r.Header.Get("Accept"), session: ss, modern: modern}
}

// acceptsSSE reports whether the host can take an SSE stream.
func (rs *requestStream) acceptsSSE() bool {
	return rs.accept == "" || strings.Contains(rs.accept, "text/event-stream") || strings.Contains(rs.accept, "*/*")
}

// Notify sends a notification that belongs to the request.
func (rs *requestStream) Notify(method string, params json.RawMessage) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.done || !rs.acceptsSSE() {
		return
	}
	rs.startLocked()
	writeEvent(rs.w, jsonrpc.AppendNotification(nil, method, params))
}

// Request sends a server request on the request's stream and waits for
// the host to POST its response. Only legacy hosts can be asked: the
// modern era has no server requests.
func (rs *requestStream) Request(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error) {
	ss := rs.session
	if ss == nil || !rs.acceptsSSE() {
		return nil, router.ErrHostUnreachable
	}
	id, answer := ss.link.expect()
	defer ss.link.forget(id)
	rs.mu.Lock()
	if rs.done {
		rs.mu.Unlock()
		return nil, fmt.Errorf("%w: the request it belongs to is answered", router.ErrHostUnreachable)
	}
	rs.startLocked()
	writeEvent(rs.w, jsonrpc.AppendRequest(nil, id, method, params))
	rs.mu.Unlock()
	select {
	case resp := <-answer:
		return resp, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-ss.done:
		return nil, fmt.Errorf("%w: the session ended", router.ErrHostUnreachable)
	}
}

// startLocked turns the response into an SSE stream. rs.mu must be held.
func (rs *requestStream) startLocked() {
	if !rs.sse {
		rs.sse = true
		startSSE(rs.w)
	}
}

// answer writes the final message: as the last event of the SSE stream
// when it became one, else as JSON (or as one event for a host that
// accepts only SSE). write emits the message.
func (rs *requestStream) answer(status int, write func(io.Writer) error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.done = true
	if !rs.sse && wantsSSEOnly(rs.accept) {
		rs.startLocked()
	}
	if rs.sse {
		_, _ = io.WriteString(rs.w, "event: message\ndata: ")
		_ = write(oneLine{rs.w})
		_, _ = io.WriteString(rs.w, "\n\n")
		flush(rs.w)
		return
	}
	rs.w.Header().Set("Content-Type", "application/json")
	rs.w.WriteHeader(status)
	_ = write(rs.w)
}

// abandon ends the request without an answer: an SSE stream just ends; a
// plain response is 204 No Content.
func (rs *requestStream) abandon() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.done = true
	if !rs.sse {
		rs.w.WriteHeader(http.StatusNoContent)
	}
}

// writeEvent writes one message as an SSE event and flushes it.
func writeEvent(w io.Writer, msg []byte) {
	_, _ = io.WriteString(w, "event: message\ndata: ")
	_, _ = oneLine{w}.Write(msg)
	_, _ = io.WriteString(w, "\n\n")
	flush(w)
}

func flush(w io.Writer) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// oneLine writes JSON as one line, as an SSE data line and the stdio
// framing need. JSON strings cannot hold a raw CR or LF, so any there is
// whitespace between tokens (a pretty printed upstream result): it
// becomes a space, which keeps the JSON equal and the framing intact.
type oneLine struct{ w io.Writer }

func (d oneLine) Write(p []byte) (int, error) {
	if bytes.IndexAny(p, "\r\n") < 0 {
		return d.w.Write(p)
	}
	q := append([]byte(nil), p...)
	for i, c := range q {
		if c == '\r' || c == '\n' {
			q[i] = ' '
		}
	}
	if _, err := d.w.Write(q); err != nil {
		return 0, err
	}
	return len(p), nil
}
