package upstream

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// errDeadline is the cause of a call context ended by its deadline.
var errDeadline = errors.New("upstream request deadline")

// deadline is the timeout of one call, which the server's progress
// notifications push back (see Options.MaxTimeout). Its context is done
// when the timeout elapses, with errDeadline as the cause.
type deadline struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	start  time.Time
	// timeout is how long the call may go without news; limit is the
	// latest it may end, whatever the news.
	timeout time.Duration
	limit   time.Time
	timer   *time.Timer

	mu       sync.Mutex // guards the fields below
	at       time.Time  // when the call times out, as things stand
	over     bool       // timed out or stopped: the timer is not set again
	extended bool
}

// newDeadline starts the clock of a call made with parent: timeout from
// now, extendable by progress up to maxTimeout from now.
func newDeadline(parent context.Context, timeout, maxTimeout time.Duration) *deadline {
	ctx, cancel := context.WithCancelCause(parent)
	now := time.Now()
	d := &deadline{ctx: ctx, cancel: cancel, start: now, timeout: timeout, limit: now.Add(maxTimeout), at: now.Add(timeout)}
	d.timer = time.AfterFunc(timeout, d.fire)
	return d
}

// fire runs when the timer goes off. Extensions only move d.at: the timer
// is set again from here, so that extend never races a firing timer.
func (d *deadline) fire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.over {
		return
	}
	if wait := time.Until(d.at); wait > 0 {
		d.timer.Reset(wait)
		return
	}
	d.over = true
	d.cancel(errDeadline)
}

// extend restarts the timeout from now, up to the limit. Once the call
// has timed out, it is too late.
func (d *deadline) extend() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.over {
		return
	}
	at := time.Now().Add(d.timeout)
	if at.After(d.limit) {
		at = d.limit
	}
	if at.After(d.at) {
		d.at, d.extended = at, true
	}
}

// stop releases the timer and the context. (A fire already running sees
// over and does not set the timer again.)
func (d *deadline) stop() {
	d.mu.Lock()
	d.over = true
	d.mu.Unlock()
	d.timer.Stop()
	d.cancel(context.Canceled)
}

// describe says how long the call had, for ErrTimeout's message.
func (d *deadline) describe() string {
	d.mu.Lock()
	extended := d.extended
	d.mu.Unlock()
	s := d.timeout.String()
	if extended {
		s = time.Since(d.start).Round(time.Millisecond).String() + " (extended by progress, at most " + d.limit.Sub(d.start).String() + ")"
	}
	return s
}

// progressToken returns the raw params._meta.progressToken of a request,
// or "" when it has none.
func progressToken(req *jsonrpc.Outgoing) string {
	tok, ok := req.MetaParam("progressToken")
	if !ok || string(tok) == "null" {
		return ""
	}
	return string(tok)
}

// watchProgress makes progress notifications carrying tok extend d,
// until the returned function is called. An empty tok watches nothing.
func (c *Client) watchProgress(tok string, d *deadline) func() {
	if tok == "" {
		return func() {}
	}
	c.mu.Lock()
	c.progress[tok] = d
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		if c.progress[tok] == d {
			delete(c.progress, tok)
		}
		c.mu.Unlock()
	}
}

// progressed extends the deadline of the call a notifications/progress
// is about. Other messages are ignored.
func (c *Client) progressed(m *jsonrpc.Message) {
	if m.Method != "notifications/progress" {
		return
	}
	tok, ok := jsonrpc.Field(m.Params, "progressToken")
	if !ok {
		return
	}
	c.mu.Lock()
	d := c.progress[string(tok)]
	c.mu.Unlock()
	if d != nil {
		d.extend()
	}
}
