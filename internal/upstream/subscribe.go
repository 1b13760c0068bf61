package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// Subscriptions is what the gateway wants to hear from a modern server on
// its subscriptions/listen stream (spec 2026-07-28,
// basic/patterns/subscriptions). The zero value asks for nothing.
type Subscriptions struct {
	// ToolsListChanged, PromptsListChanged and ResourcesListChanged ask
	// for notifications/tools/list_changed, prompts/list_changed and
	// resources/list_changed.
	ToolsListChanged, PromptsListChanged, ResourcesListChanged bool
	// ResourceURIs asks for notifications/resources/updated for these
	// resources (the filter's resourceSubscriptions).
	ResourceURIs []string
}

func (s *Subscriptions) empty() bool {
	return !s.ToolsListChanged && !s.PromptsListChanged && !s.ResourcesListChanged && len(s.ResourceURIs) == 0
}

// normal returns s with its URIs sorted and without duplicates, in a slice
// of its own.
func (s Subscriptions) normal() Subscriptions {
	s.ResourceURIs = slices.Compact(slices.Sorted(slices.Values(s.ResourceURIs)))
	return s
}

func (s *Subscriptions) equal(o *Subscriptions) bool {
	return s.ToolsListChanged == o.ToolsListChanged && s.PromptsListChanged == o.PromptsListChanged &&
		s.ResourcesListChanged == o.ResourcesListChanged && slices.Equal(s.ResourceURIs, o.ResourceURIs)
}

// listenFilter is the notifications object of subscriptions/listen and of
// its acknowledgement.
type listenFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

func (s *Subscriptions) filter() listenFilter {
	return listenFilter{s.ToolsListChanged, s.PromptsListChanged, s.ResourcesListChanged, s.ResourceURIs}
}

// subscription is one Subscribe stream, kept open by keepListening.
type subscription struct {
	want   Subscriptions
	params json.RawMessage // of subscriptions/listen, with the modern _meta
	header http.Header
	cancel context.CancelFunc
	done   chan struct{} // closed when keepListening has returned
}

// stop closes the stream and waits until it is closed.
func (s *subscription) stop() {
	s.cancel()
	<-s.done
}

// Subscribe sets what the client listens for. On a modern server it opens
// one subscriptions/listen stream with that filter and keeps it open,
// delivering every notification it carries (list_changed,
// resources/updated) to Options.OnNotification, with the
// io.modelcontextprotocol/subscriptionId _meta key removed (it means
// nothing to the gateway's hosts). Over Streamable HTTP the stream is the
// SSE response to a POST; over stdio the notifications arrive on stdout
// tagged with the request's id, which the Client uses to tell them apart.
//
// Subscribe returns once the server has acknowledged the new stream
// (notifications/subscriptions/acknowledged), or with the error that
// prevented it: a *jsonrpc.Error the server answered with, ErrTimeout
// after Options.Timeout, ctx's error, ErrNotReady or ErrClosed. Only then
// is the previous stream closed, so no change in between is missed, and
// on error the previous stream stays as it was. The filter already in
// place changes nothing (URIs are compared as sets); an empty filter
// closes the stream. A server that honours only part of the filter (its
// acknowledgement lists what it agreed to) is logged, not an error.
//
// While the Client is Ready, a stream that drops, or that the server ends,
// is opened again, after a delay that doubles from 250ms up to 30s (and
// starts over once a stream has lasted 30s). Once the new stream is
// acknowledged, one list_changed of each kind it carries, and one
// resources/updated for each of its resources, go to
// Options.OnNotification: a change made while no stream was open would
// otherwise be missed, and a needless refresh is cheaper than a stale
// list. Close, or a lost connection, stops the stream for good.
//
// On a legacy server Subscribe does nothing and returns nil: legacy
// servers send list_changed unasked, and resources/subscribe is an
// ordinary Call. Calls to Subscribe are serialised.
func (c *Client) Subscribe(ctx context.Context, s Subscriptions) error {
	w, err := c.readyWire(methodListen)
	if err != nil {
		return err
	}
	if c.Era() != EraModern {
		return nil
	}
	s = s.normal()
	c.subMu.Lock()
	defer c.subMu.Unlock()
	c.mu.Lock()
	current := c.sub
	c.mu.Unlock()
	switch {
	case current == nil && s.empty():
		return nil
	case current != nil && current.want.equal(&s):
		return nil
	}
	// On stdio every listen request shares the server's one session, and
	// a server may keep its subscriptions per session (the Go SDK v1.8.0
	// does): ending the old stream after the new one is acknowledged would
	// then end the new one's subscriptions too. So on stdio the old stream
	// ends first — its stop waits for the server's answer to the
	// cancellation, which comes after the server's cleanup — and the new
	// one replays its list changes once acknowledged (see replayLists).
	_, stdio := w.(*stdioWire)
	if stdio && current != nil {
		current.stop()
		c.mu.Lock()
		c.sub = nil
		c.mu.Unlock()
	}
	var next *subscription
	if !s.empty() {
		replay := replayNone
		if stdio && current != nil {
			replay = replayLists
		}
		if next, err = c.openSubscription(ctx, w, s, replay); err != nil {
			return err
		}
	}
	c.mu.Lock()
	old := c.sub
	c.sub = next
	c.mu.Unlock()
	if old != nil {
		old.stop()
	}
	return nil
}

// openSubscription opens a stream and waits for its acknowledgement.
func (c *Client) openSubscription(ctx context.Context, w wire, want Subscriptions, replay replayMode) (*subscription, error) {
	f, err := json.Marshal(want.filter())
	if err != nil {
		return nil, c.errorf(methodListen, err)
	}
	req := jsonrpc.NewOutgoing(methodListen, json.RawMessage(`{"notifications":`+string(f)+`}`))
	header, err := c.prepare(ctx, req)
	if err != nil {
		return nil, c.errorf(methodListen, err)
	}
	params := req.Params()
	lctx, cancel := context.WithCancel(c.life)
	sub := &subscription{want: want, params: params, header: header, cancel: cancel, done: make(chan struct{})}
	l := newListener(c, replay)
	first := make(chan error, 1)
	if !c.spawn(func() { c.keepListening(lctx, w, sub, l, first) }) {
		cancel()
		return nil, c.closedErr(methodListen)
	}
	t := time.NewTimer(c.timeout)
	defer t.Stop()
	select {
	case <-l.acked:
		if g := l.grantedFilter(); !want.equal(&g) {
			granted, _ := json.Marshal(g.filter())
			c.log.Info("upstream honours only part of the subscription", "asked", string(f), "granted", string(granted))
		}
		return sub, nil
	case err := <-first:
		sub.stop()
		return nil, err
	case <-ctx.Done():
	case <-t.C:
	}
	sub.stop()
	return nil, c.ctxErr(ctx, methodListen, c.timeout.String())
}

// keepListening runs a subscription's listen requests, one after the
// other, until ctx is done or the Client is no longer Ready. The first
// request, whose listener is l, reports on first if it ends before it is
// acknowledged, and then nothing more is tried.
func (c *Client) keepListening(ctx context.Context, w wire, sub *subscription, l *listener, first chan<- error) {
	defer close(sub.done)
	var delay time.Duration
	for {
		resp, err := c.roundTrip(ctx, w, methodListen, sub.params, callOpts{header: sub.header, handler: l, listen: true, drain: c.listenDrain(w)})
		ackedAt, acked := l.ackTime()
		if first != nil && !acked {
			if err == nil && resp.Error == nil {
				err = c.errorf(methodListen, fmt.Errorf("%w: the server answered without acknowledging a subscription", ErrMalformed))
			}
			first <- c.listenFailure(resp, err)
			return
		}
		first = nil
		if ctx.Err() != nil {
			return
		}
		if acked && time.Since(ackedAt) >= listenMaxDelay {
			delay = 0
		}
		delay = min(max(2*delay, listenMinDelay), listenMaxDelay)
		if acked {
			c.log.Debug("upstream subscription ended: listening again", "reason", c.listenFailure(resp, err), "retry_in", delay)
		} else {
			c.log.Warn("upstream subscription not reopened", "err", c.listenFailure(resp, err), "retry_in", delay)
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		case <-c.dead:
			t.Stop()
			return
		}
		if w, err = c.readyWire(methodListen); err != nil {
			return
		}
		l = newListener(c, replayAll)
	}
}

// listenFailure says why a listen request ended: err, the server's
// JSON-RPC error, or its graceful ending.
func (c *Client) listenFailure(resp *jsonrpc.Message, err error) error {
	switch {
	case err != nil:
		return err
	case resp.Error != nil:
		return c.errorf(methodListen, resp.Error)
	}
	return c.errorf(methodListen, errors.New("the server ended the subscription"))
}

// replayMode says which events a new listen stream reports as having
// happened once it is acknowledged.
type replayMode int

const (
	// replayNone: a first stream, or one that replaced another only once
	// acknowledged: nothing can have been missed.
	replayNone replayMode = iota
	// replayLists: a stream that replaced one ended on purpose just
	// before (stdio): the list changes are replayed, which the gateway
	// checks against the lists it has, but not resource updates, which
	// would reach every host that subscribed for a change that is
	// unlikely to have happened in those milliseconds.
	replayLists
	// replayAll: a stream that replaces one that dropped, for an unknown
	// while: every event it carries is replayed.
	replayAll
)

// listener is the CallHandler of one subscriptions/listen request.
type listener struct {
	c *Client
	// replay says what to report once acknowledged.
	replay replayMode
	acked  chan struct{} // closed on the acknowledgement
	once   sync.Once

	mu      sync.Mutex // guards the fields below
	ackedAt time.Time
	granted json.RawMessage // the acknowledged filter
}

func newListener(c *Client, replay replayMode) *listener {
	return &listener{c: c, replay: replay, acked: make(chan struct{})}
}

func (l *listener) Notify(n *jsonrpc.Message) {
	if n.Method != methodAcknowledged {
		l.c.notifyOptions(n)
		return
	}
	l.once.Do(func() {
		granted, _ := jsonrpc.Field(n.Params, "notifications")
		l.mu.Lock()
		l.ackedAt, l.granted = time.Now(), clone(granted)
		l.mu.Unlock()
		close(l.acked)
		switch f := l.grantedFilter(); l.replay {
		case replayLists:
			f.ResourceURIs = nil
			l.c.replay(f)
		case replayAll:
			l.c.replay(f)
		}
	})
}

// Request answers what a server should not send on a listen stream the
// way any other request is answered.
func (l *listener) Request(ctx context.Context, req *jsonrpc.Message) *jsonrpc.Message {
	return l.c.answerOptions(ctx, req)
}

func (l *listener) ackTime() (time.Time, bool) {
	select {
	case <-l.acked:
	default:
		return time.Time{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ackedAt, true
}

// grantedFilter returns the acknowledged filter.
func (l *listener) grantedFilter() Subscriptions {
	l.mu.Lock()
	defer l.mu.Unlock()
	var f listenFilter
	_ = json.Unmarshal(l.granted, &f) // what does not parse was not granted
	return Subscriptions{f.ToolsListChanged, f.PromptsListChanged, f.ResourcesListChanged, f.ResourceSubscriptions}.normal()
}

// replay reports every event of f as having happened.
func (c *Client) replay(f Subscriptions) {
	for _, k := range []struct {
		on     bool
		method string
	}{
		{f.ToolsListChanged, "notifications/tools/list_changed"},
		{f.PromptsListChanged, "notifications/prompts/list_changed"},
		{f.ResourcesListChanged, "notifications/resources/list_changed"},
	} {
		if k.on {
			c.notifyOptions(&jsonrpc.Message{Method: k.method})
		}
	}
	for _, uri := range f.ResourceURIs {
		c.notifyOptions(&jsonrpc.Message{Method: "notifications/resources/updated", Params: json.RawMessage(`{"uri":` + string(jsonrpc.String(uri)) + `}`)})
	}
}

var _ CallHandler = (*listener)(nil)

// listenDrain is how long a cancelled listen request waits for the
// server's answer: on stdio only, where it tells that the server has
// finished with the request (see Subscribe).
func (c *Client) listenDrain(w wire) time.Duration {
	if _, stdio := w.(*stdioWire); stdio {
		return min(c.timeout, 5*time.Second)
	}
	return 0
}
