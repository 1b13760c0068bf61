package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
)

// requestStream is the answer to one POSTed request, and the way back to
// its host while the request runs (it implements router.Host). It starts
// as a plain JSON response and becomes an SSE stream the first time
// something must reach the host before the answer — progress, a log
// message, a server request — when the host accepts text/event-stream
// (2025-11-25 and 2026-07-28 streamable-http "Sending Messages").
//
// Events are written by a goroutine of the stream's own, from a bounded
// queue: whoever sends one (often the goroutine reading a shared
// upstream) never waits for a slow host. A host that takes nothing of its
// stream for the write timeout is cut off; progress and log messages that
// do not fit in the queue are dropped.
type requestStream struct {
	w       http.ResponseWriter
	out     *deadlineWriter
	accept  string
	modern  bool
	session *session // nil for modern requests

	mu sync.Mutex // guards the fields below
	// sse is set once the response is an SSE stream.
	sse bool
	// done is set once the answer is queued or written: nothing may
	// follow it.
	done bool
	// queue holds the events the writer has not written yet.
	queue []func(io.Writer)
	// writer is set while the writer goroutine runs; it closes finished
	// when it ends.
	writer   bool
	wake     chan struct{}
	finished chan struct{}
	// broken is set when a write failed: the host is gone or too slow.
	broken bool
}

// streamQueueLimit bounds a request's event queue.
const streamQueueLimit = 256

func (s *Server) newRequestStream(w http.ResponseWriter, r *http.Request, ss *session, modern bool) *requestStream {
	return &requestStream{w: w, out: newDeadlineWriter(w, s.opts.WriteTimeout), accept: r.Header.Get("Accept"), session: ss, modern: modern}
}

// deadlineWriter writes to a host's response under a write deadline:
// its writer renews it at the start of each burst (an answer, a batch of
// events), and Write renews it after each deadlineChunk bytes, so that a
// host that reads slowly but steadily gets a large answer, and one that
// takes nothing for timeout is cut off (the write fails, and net/http
// closes the connection once the handler returns).
type deadlineWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	// left is what may still be written under the current deadline.
	left int
	// unsupported is set when w has no deadlines (not a connection).
	unsupported bool
}

// deadlineChunk is the most a deadlineWriter writes under one deadline.
const deadlineChunk = 64 << 10

func newDeadlineWriter(w http.ResponseWriter, timeout time.Duration) *deadlineWriter {
	return &deadlineWriter{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// renew starts a new deadline, for the next deadlineChunk bytes.
func (d *deadlineWriter) renew() {
	d.left = deadlineChunk
	if d.unsupported {
		return
	}
	if err := d.rc.SetWriteDeadline(time.Now().Add(d.timeout)); errors.Is(err, http.ErrNotSupported) {
		d.unsupported = true
	}
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		if d.left <= 0 {
			d.renew()
		}
		n := min(len(p), d.left)
		m, err := d.w.Write(p[:n])
		written += m
		d.left -= m
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// Flush sends what is buffered to the host, under the burst's deadline.
func (d *deadlineWriter) Flush() error { return d.rc.Flush() }

// acceptsSSE reports whether the host can take an SSE stream.
func (rs *requestStream) acceptsSSE() bool {
	return rs.accept == "" || strings.Contains(rs.accept, "text/event-stream") || strings.Contains(rs.accept, "*/*")
}

// Notify queues a notification that belongs to the request.
func (rs *requestStream) Notify(method string, params json.RawMessage) {
	msg := jsonrpc.AppendNotification(nil, method, params)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.done || rs.broken || !rs.acceptsSSE() || len(rs.queue) >= streamQueueLimit {
		return
	}
	rs.enqueueLocked(func(w io.Writer) { writeEvent(w, msg) })
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
	msg := jsonrpc.AppendRequest(nil, id, method, params)
	rs.mu.Lock()
	switch {
	case rs.done:
		rs.mu.Unlock()
		return nil, fmt.Errorf("%w: the request it belongs to is answered", router.ErrHostUnreachable)
	case rs.broken:
		rs.mu.Unlock()
		return nil, fmt.Errorf("%w: its stream is broken", router.ErrHostUnreachable)
	}
	rs.enqueueLocked(func(w io.Writer) { writeEvent(w, msg) })
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

// enqueueLocked queues an event and makes sure the writer runs. rs.mu
// must be held.
func (rs *requestStream) enqueueLocked(ev func(io.Writer)) {
	rs.queue = append(rs.queue, ev)
	if !rs.writer {
		rs.writer = true
		rs.wake = make(chan struct{}, 1)
		rs.finished = make(chan struct{})
		go rs.write()
	}
	select {
	case rs.wake <- struct{}{}:
	default:
	}
}

// write is the writer goroutine: it turns the response into an SSE
// stream, then writes the queued events until the answer is written or a
// write fails.
func (rs *requestStream) write() {
	defer close(rs.finished)
	for range rs.wake {
		rs.mu.Lock()
		batch := rs.queue
		rs.queue = nil
		last := rs.done
		start := !rs.sse
		rs.sse = true
		rs.mu.Unlock()
		rs.out.renew()
		if start {
			startSSE(rs.w)
		}
		for _, ev := range batch {
			ev(rs.out)
		}
		if err := rs.out.Flush(); err != nil {
			rs.mu.Lock()
			rs.broken, rs.queue = true, nil
			rs.mu.Unlock()
			return
		}
		if last {
			return
		}
	}
}

// answer writes the final message: as the last event of the SSE stream
// when it became one, else as JSON (or as one event for a host that
// accepts only SSE). write emits the message. It returns once the
// message is written or the stream broke.
func (rs *requestStream) answer(status int, write func(io.Writer) error) {
	rs.mu.Lock()
	rs.done = true
	if !rs.writer && !wantsSSEOnly(rs.accept) {
		// Nothing was streamed: a plain JSON response, written here.
		rs.mu.Unlock()
		rs.w.Header().Set("Content-Type", "application/json")
		rs.w.WriteHeader(status)
		_ = write(rs.out)
		return
	}
	if !rs.broken {
		rs.enqueueLocked(func(w io.Writer) {
			_, _ = io.WriteString(w, "event: message\ndata: ")
			_ = write(oneLine{w})
			_, _ = io.WriteString(w, "\n\n")
		})
	}
	finished := rs.finished
	rs.mu.Unlock()
	<-finished
}

// abandon ends the request without an answer: an SSE stream just ends; a
// plain response is 204 No Content.
func (rs *requestStream) abandon() {
	rs.mu.Lock()
	rs.done = true
	if !rs.writer {
		rs.mu.Unlock()
		rs.w.WriteHeader(http.StatusNoContent)
		return
	}
	rs.enqueueLocked(func(io.Writer) {})
	finished := rs.finished
	rs.mu.Unlock()
	<-finished
}

// writeEvent writes one message as an SSE event; the caller flushes.
func writeEvent(w io.Writer, msg []byte) {
	_, _ = io.WriteString(w, "event: message\ndata: ")
	_, _ = oneLine{w}.Write(msg)
	_, _ = io.WriteString(w, "\n\n")
}

// oneLine writes JSON as one line, as an SSE data line and the stdio
// framing need. JSON strings cannot hold a raw CR or LF, so any there is
// whitespace between tokens (a pretty printed upstream result): it
// becomes a space, which keeps the JSON equal and the framing intact.
type oneLine struct{ w io.Writer }

func (d oneLine) Write(p []byte) (int, error) {
	// Two IndexByte calls, which use vector instructions, scan a large
	// result about ten times faster than IndexAny.
	if bytes.IndexByte(p, '\n') < 0 && bytes.IndexByte(p, '\r') < 0 {
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
