package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcpheader"
)

// sseWire speaks the deprecated HTTP+SSE transport (spec 2024-11-05;
// 2026-07-28 streamable-http "HTTP+SSE Transport (2024-11-05)"): a GET
// opens an SSE stream whose first event, "endpoint", names the URL to POST
// messages to; everything the server sends, responses included, arrives
// as "message" events on the stream.
type sseWire struct {
	c        *Client
	endpoint string
	cancel   context.CancelFunc // ends the GET stream
	done     chan struct{}      // closed when the stream reader has exited

	closeOnce sync.Once
}

// dialSSE opens the stream and waits for the endpoint event. ctx bounds
// only that wait: the stream lives until the Client closes.
func dialSSE(ctx context.Context, c *Client) (*sseWire, error) {
	sctx, cancel := context.WithCancel(c.life)
	stop := context.AfterFunc(ctx, cancel)
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, c.opts.URL, nil)
	if err != nil {
		stop()
		cancel()
		return nil, err
	}
	fail := func(resp *http.Response, err error) (*sseWire, error) {
		stop()
		cancel()
		if resp != nil {
			resp.Body.Close()
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	// ctx is the start's (it may carry a Subject); sctx outlives it.
	if err := c.addHeaders(ctx, req.Header); err != nil {
		return fail(nil, err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.hc.Do(req)
	if err != nil {
		return fail(nil, err)
	}
	ct := mcpheader.MediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		body, _ := readBody(io.LimitReader(resp.Body, 4<<10), -1, 4<<10)
		return fail(resp, &statusError{Code: resp.StatusCode, ContentType: ct, Body: body})
	}
	sr := newSSEReader(resp.Body, c.maxMessage)
	ev, err := sr.next()
	if err != nil {
		return fail(resp, fmt.Errorf("waiting for the endpoint event: %w", err))
	}
	if ev.name != "endpoint" {
		return fail(resp, fmt.Errorf("%w: the first event is %q, not \"endpoint\"", ErrMalformed, ev.name))
	}
	base, _ := url.Parse(c.opts.URL)
	ep, err := base.Parse(string(bytes.TrimSpace(ev.data)))
	if err != nil {
		return fail(resp, fmt.Errorf("%w: endpoint %q: %v", ErrMalformed, ev.data, err))
	}
	// The configured headers (credentials) go to the endpoint too: never
	// to another origin than the one configured.
	if ep.Scheme != base.Scheme || ep.Host != base.Host {
		return fail(resp, fmt.Errorf("%w: the endpoint is on another origin (%s://%s)", ErrMalformed, ep.Scheme, ep.Host))
	}
	if !stop() {
		return fail(resp, ctx.Err())
	}
	w := &sseWire{c: c, endpoint: ep.String(), cancel: cancel, done: make(chan struct{})}
	go w.read(resp.Body, sr)
	return w, nil
}

// read delivers the stream's messages; when the stream ends, so does the
// connection.
func (w *sseWire) read(body io.ReadCloser, sr *sseReader) {
	defer close(w.done)
	defer body.Close()
	err := w.c.deliverEvents(sr, nil)
	if errors.Is(err, io.EOF) {
		err = errors.New("the server ended the SSE stream")
	}
	w.c.connLost(err)
}

// send POSTs a message to the endpoint; any answer comes on the stream.
func (w *sseWire) send(ctx context.Context, m *outgoing) error {
	ctx, cancel := w.c.bound(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.endpoint, bytes.NewReader(m.data))
	if err != nil {
		return err
	}
	if err := w.c.addHeaders(ctx, req.Header); err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	w.c.injectTrace(ctx, req.Header)
	resp, err := w.c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		ct := mcpheader.MediaType(resp.Header.Get("Content-Type"))
		body, _ := readBody(io.LimitReader(resp.Body, 4<<10), -1, 4<<10)
		return &statusError{Code: resp.StatusCode, ContentType: ct, Body: body}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	return nil
}

func (w *sseWire) close() error {
	w.closeOnce.Do(func() {
		w.cancel()
		<-w.done
	})
	return nil
}

// deliverEvents delivers the messages of an SSE stream until it ends, and
// returns the error that ended it (io.EOF for a clean end). Events that
// are not messages, and messages too large or malformed, are skipped.
// afterRead, if set, runs after each read (to track Last-Event-ID).
func (c *Client) deliverEvents(sr *sseReader, afterRead func()) error {
	bad := badLines{log: c.log}
	for {
		ev, err := sr.next()
		if afterRead != nil {
			afterRead()
		}
		if err != nil {
			var tl *tooLongError
			if errors.As(err, &tl) {
				c.tooLong(tl)
				continue
			}
			return err
		}
		if (ev.name != "" && ev.name != "message") || len(ev.data) == 0 {
			continue
		}
		msg, derr := jsonrpc.Decode(ev.data)
		if derr != nil {
			bad.report(ev.data, derr)
			continue
		}
		c.deliver(msg)
	}
}
