package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// SupervisedOptions configures a Supervised: the Options of each of its
// connections, its circuit breaker and its restarts.
//
// Options.OnStateChange receives the Supervised's own state, not that of
// each connection; see NewSupervised.
type SupervisedOptions struct {
	Options
	Breaker BreakerOptions
	Restart RestartOptions
}

// RestartOptions says how a Supervised restarts a server it lost: a stdio
// process that exited, an HTTP+SSE stream that ended, or a start that
// failed (the first included). A Streamable HTTP upstream holds no
// connection to lose: its failures go to the breaker, and an expired
// legacy session is renewed in place.
type RestartOptions struct {
	// Initial is the delay before a restart after the first crash; each
	// further crash within CrashWindow doubles it, up to Max. 0 means
	// config.DefaultRestartDelay (250ms); Max 0 means
	// config.DefaultRestartMaxDelay (30s) for a stdio server, and
	// config.DefaultReconnectMaxDelay (5s) for a URL server. Each delay
	// varies by up to ±20% at random, so that upstreams that fell
	// together do not come back in step.
	Initial, Max time.Duration
	// CrashLimit crashes of a stdio server within CrashWindow stop the
	// restarts for good: the Supervised stays Failed, with an error that
	// says "crash loop". 0 means config.DefaultCrashLimit (5), and a
	// negative value means no limit. A URL server is tried again for as
	// long as the Supervised runs: a server that cannot be reached, or
	// whose HTTP+SSE stream ended, has not crashed, and is usually one
	// that starts after the gateway or restarts. CrashWindow 0 means
	// config.DefaultCrashWindow (a minute).
	CrashLimit  int
	CrashWindow time.Duration
}

// restartJitter is the largest relative change of a restart delay.
const restartJitter = 0.2

// Supervised is an upstream client that outlives its connections: it
// restarts the server when the connection is lost, guards it with a
// circuit breaker, and keeps its subscriptions across restarts. Each
// connection is a Client, made from the same Options; its calls in flight
// fail with ErrClosed when it is lost.
//
// While the server is restarting, or its breaker is open, calls fail at
// once, without I/O, with an *UnavailableError that says when the
// upstream is tried again. Its methods are safe for concurrent use.
type Supervised struct {
	name         string
	remote       bool              // a URL server: no crash limit
	opts         SupervisedOptions // with the defaults filled in
	clientOpts   Options           // for each connection
	log          *slog.Logger
	startTimeout time.Duration // of a restart

	life context.Context // done once Close begins
	stop context.CancelFunc
	wg   sync.WaitGroup // Start and the supervisor goroutine

	// brChanged is signalled when a breaker changes state.
	brChanged chan struct{}
	// changed wakes the notifier goroutine when a state is queued, and
	// final ends it once Stopped is queued.
	changed    chan struct{}
	final      chan struct{}
	notifyDone chan struct{}

	// subMu serialises Subscribe with the re-subscription that follows a
	// restart, and guards want.
	subMu sync.Mutex
	want  *Subscriptions // the last filter asked for

	// mu guards the fields below. A breaker's change callback takes it
	// with the breaker's own lock held, so nothing may call a breaker
	// with mu held.
	mu        sync.Mutex
	state     State // Breaker and RetryAt of a Ready state come from br
	started   bool
	closing   bool
	cur       *Client         // the current or last connection
	br        breaker         // the current connection's breaker
	crashes   []time.Time     // within the crash window
	resources map[string]bool // URIs of legacy resources/subscribe calls in force
	// reports holds the states OnStateChange has yet to hear of, oldest
	// first.
	reports []State

	closeDone chan struct{}
	closeErr  error
}

// maxReports bounds the states queued for a slow OnStateChange: past it
// the oldest are dropped, so that the latest always gets through.
const maxReports = 64

// NewSupervised validates opts and returns a Supervised. It starts
// nothing.
//
// Options.OnStateChange, if set, hears of the Supervised's state, in
// order: Starting, Ready (State.Generation numbers the connection),
// Restarting (with the reason in State.Err and the time of the next
// start in State.RetryAt), Failed (for good: a crash loop), Stopped; and
// of changes of State.Breaker while Ready. It is called from one
// goroutine at a time, never with the Supervised's locks held, so it may
// call the Supervised's methods (but must not wait for Start or Close).
// Should it fall far behind, the oldest changes are dropped. A new
// Generation is a new server process or session, whose catalog may have
// changed: list it again before taking it for ready.
func NewSupervised(opts *SupervisedOptions) (*Supervised, error) {
	if opts == nil {
		return nil, errors.New("upstream: nil options")
	}
	o := *opts
	// A Client made only to validate the options and learn their
	// defaults; it must not report its Close.
	vo := o.Options
	vo.OnStateChange = nil
	probe, err := New(&vo)
	if err != nil {
		return nil, err
	}
	_ = probe.Close()
	r := &o.Restart
	switch {
	case r.Initial < 0 || r.Max < 0 || r.CrashWindow < 0:
		return nil, fmt.Errorf("upstream %q: negative restart delay or crash window", o.Name)
	case o.Breaker.Cooldown < 0:
		return nil, fmt.Errorf("upstream %q: negative breaker cooldown", o.Name)
	}
	if r.Initial == 0 {
		r.Initial = config.DefaultRestartDelay
	}
	remote := probe.kind != kindStdio
	if r.Max == 0 {
		r.Max = config.DefaultRestartMaxDelay
		if remote {
			r.Max = config.DefaultReconnectMaxDelay
		}
		r.Max = max(r.Max, r.Initial)
	}
	if r.Max < r.Initial {
		return nil, fmt.Errorf("upstream %q: the longest restart delay %v is shorter than the first %v", o.Name, r.Max, r.Initial)
	}
	if r.CrashLimit == 0 {
		r.CrashLimit = config.DefaultCrashLimit
	}
	if r.CrashWindow == 0 {
		r.CrashWindow = config.DefaultCrashWindow
	}
	s := &Supervised{
		name:         o.Name,
		remote:       remote,
		opts:         o,
		clientOpts:   o.Options,
		log:          probe.log,
		startTimeout: probe.probeTimeout + 2*probe.timeout,
		brChanged:    make(chan struct{}, 1),
		changed:      make(chan struct{}, 1),
		final:        make(chan struct{}),
		notifyDone:   make(chan struct{}),
		resources:    map[string]bool{},
		closeDone:    make(chan struct{}),
	}
	s.clientOpts.OnStateChange = nil // the Supervised reports its own
	s.br = s.newBreaker()
	s.life, s.stop = context.WithCancel(context.Background())
	return s, nil
}

// newBreaker returns a breaker for a new connection. Its changes are
// reported while it is the current breaker and the server is Ready.
func (s *Supervised) newBreaker() breaker {
	var br breaker
	br = newBreaker(s.name, s.opts.Breaker, func(to BreakerState, retryAt time.Time) {
		s.mu.Lock()
		if s.br == br && s.state.Phase == Ready && !s.closing {
			s.state.Since = time.Now()
			st := s.state
			st.Breaker, st.RetryAt = to, retryAt
			s.reportLocked(st)
		}
		s.mu.Unlock()
		select {
		case s.brChanged <- struct{}{}:
		default:
		}
	})
	return br
}

// Start makes the first connection: it returns once the server is Ready,
// or with the error of that first attempt. Either way the Supervised then
// watches over the upstream until Close: after a failed first start it
// is Restarting when Start returns, and tries again as after a crash;
// OnStateChange tells when it is Ready. ctx bounds the first attempt
// only. Start may be called once.
func (s *Supervised) Start(ctx context.Context) error {
	s.mu.Lock()
	switch {
	case s.closing:
		s.mu.Unlock()
		return fmt.Errorf("upstream %q: start: %w", s.name, ErrClosed)
	case s.started:
		s.mu.Unlock()
		return fmt.Errorf("upstream %q: already started", s.name)
	}
	s.started = true
	s.wg.Add(1)
	s.state.Phase, s.state.Since = Starting, time.Now()
	s.reportLocked(s.state)
	s.mu.Unlock()
	defer s.wg.Done()
	go s.notifier()

	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.life, cancel)
	c, err := s.connect(ctx)
	stop()
	cancel()
	delay, again := time.Duration(0), true
	switch {
	case s.life.Err() != nil:
		if c != nil {
			_ = c.Close()
		}
		return fmt.Errorf("upstream %q: start: %w", s.name, ErrClosed)
	case err != nil:
		delay, again = s.down(err)
	case !s.adopt(c):
		return fmt.Errorf("upstream %q: start: %w", s.name, ErrClosed)
	}
	s.mu.Lock()
	if again && !s.closing {
		s.wg.Add(1)
		go s.run(c, delay)
	}
	s.mu.Unlock()
	return err
}

// connect makes one connection and performs its handshake.
func (s *Supervised) connect(ctx context.Context) (*Client, error) {
	c, err := New(&s.clientOpts)
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// adopt makes c, just started, the current connection: it subscribes c as
// its predecessor was subscribed, then reports a new generation, Ready.
// It reports false, and closes c, when Close has begun.
func (s *Supervised) adopt(c *Client) bool {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	s.mu.Lock()
	uris := slices.Sorted(maps.Keys(s.resources))
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.life, c.timeout)
	if s.want != nil && !s.want.empty() {
		if err := c.Subscribe(ctx, *s.want); err != nil {
			s.log.Warn("upstream subscription not renewed after a restart", "err", err)
		}
	}
	if c.Era() == EraLegacy {
		for _, uri := range uris {
			params := json.RawMessage(`{"uri":` + string(jsonrpc.String(uri)) + `}`)
			resp, err := c.Call(ctx, "resources/subscribe", params)
			if err == nil && resp.Error != nil {
				err = resp.Error
			}
			if err != nil {
				s.log.Warn("upstream resource subscription not renewed after a restart", "uri", uri, "err", err)
			}
		}
	}
	cancel()
	br := s.newBreaker()
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = c.Close()
		return false
	}
	st := c.State()
	s.cur, s.br = c, br
	gen := s.state.Generation + 1
	s.state = State{Phase: Ready, Era: st.Era, ProtocolVersion: st.ProtocolVersion, Since: time.Now(), Generation: gen}
	s.reportLocked(s.state)
	s.mu.Unlock()
	if gen > 1 {
		s.log.Info("upstream restarted", "generation", gen)
	}
	return true
}

// run watches over the upstream until Close or a crash loop. c is the
// connection Start made; or nil when that attempt failed, and the next
// is due after delay.
func (s *Supervised) run(c *Client, delay time.Duration) {
	defer s.wg.Done()
	for {
		if c != nil {
			if !s.serve(c) {
				return
			}
			c.mu.Lock()
			cause := fmt.Errorf("upstream %q: %w: %w", s.name, ErrClosed, c.deadErr)
			c.mu.Unlock()
			_ = c.Close()
			var again bool
			if delay, again = s.down(cause); !again {
				return
			}
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-s.life.Done():
			t.Stop()
			return
		}
		ctx, cancel := context.WithTimeout(s.life, s.startTimeout)
		var err error
		c, err = s.connect(ctx)
		cancel()
		switch {
		case s.life.Err() != nil:
			if c != nil {
				_ = c.Close()
			}
			return
		case err != nil:
			var again bool
			if delay, again = s.down(err); !again {
				return
			}
		case !s.adopt(c):
			return
		}
	}
}

// down records the loss of the connection, or a failed start, with its
// cause, as a crash. It reports Restarting, with the delay before the next
// start, or, for a stdio server, Failed when the crashes within the window
// reach the limit; it returns false then, or once Close has begun.
func (s *Supervised) down(cause error) (delay time.Duration, again bool) {
	r := &s.opts.Restart
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return 0, false
	}
	kept := s.crashes[:0]
	for _, t := range s.crashes {
		if now.Sub(t) < r.CrashWindow {
			kept = append(kept, t)
		}
	}
	s.crashes = append(kept, now)
	n := len(s.crashes)
	if r.CrashLimit > 0 && n >= r.CrashLimit && !s.remote {
		err := fmt.Errorf("upstream %q: crash loop: %d crashes within %v, the last: %w", s.name, n, r.CrashWindow, cause)
		s.log.Error("upstream restarts stopped", "err", err)
		s.setLocked(Failed, err, time.Time{})
		return 0, false
	}
	delay = jitter(backoff(n, r.Initial, r.Max), rand.Float64())
	if s.remote {
		s.log.Warn("upstream unreachable: connecting again", "err", cause, "retry_in", delay)
	} else {
		s.log.Warn("upstream down: restarting", "err", cause, "retry_in", delay)
	}
	s.setLocked(Restarting, cause, now.Add(delay))
	return delay, true
}

// backoff is the delay after the nth crash in a row: initial, doubled
// for each crash before, at most most.
func backoff(n int, initial, most time.Duration) time.Duration {
	d := initial
	for i := 1; i < n && d < most; i++ {
		d *= 2
	}
	return min(d, most)
}

// jitter moves d by up to ±restartJitter: f in [0, 1) picks where.
func jitter(d time.Duration, f float64) time.Duration {
	return time.Duration(float64(d) * (1 + restartJitter*(2*f-1)))
}

// serve watches a Ready connection: it sends the breaker's probe when
// the breaker's cooldown ends. It returns true when the connection is
// lost, false when Close begins.
func (s *Supervised) serve(c *Client) bool {
	s.mu.Lock()
	br := s.br
	s.mu.Unlock()
	t := time.NewTimer(0)
	defer t.Stop()
	// probed: a half-open breaker had our probe and is still half-open
	// (the outcome said nothing, as when the probe was refused for
	// overload); wait before the next.
	probed := false
	for {
		t.Stop()
		var wake <-chan time.Time
		switch st, at := br.state(); st {
		case BreakerOpen:
			// The breaker half-opens at at (see newBreaker); should
			// it not have yet, wait a little rather than spin.
			t.Reset(max(time.Until(at), time.Millisecond))
			wake = t.C
		case BreakerHalfOpen:
			if !probed && s.probe(c, br) {
				probed = true
				continue
			}
			// A call of a host's holds the probe, or ours said
			// nothing: try again after a while.
			t.Reset(c.timeout)
			wake = t.C
		default:
			probed = false
		}
		select {
		case <-c.dead:
			return true
		case <-s.life.Done():
			return false
		case <-s.brChanged:
		case <-wake:
			probed = false
		}
	}
}

// probe sends the breaker's probe, if the breaker lets it through: ping,
// or server/discover to a modern server, which has no ping. It reports
// whether it was sent.
func (s *Supervised) probe(c *Client, br breaker) bool {
	done, err := br.allow()
	if err != nil {
		return false
	}
	method := "ping"
	if c.Era() == EraModern {
		method = "server/discover"
	}
	ctx, cancel := context.WithCancel(s.life)
	defer cancel()
	_, err = c.Call(ctx, method, nil)
	done(outcomeOf(ctx, err), err)
	if err != nil {
		s.log.Info("upstream breaker probe failed", "err", err)
	}
	return true
}

// silenceProbeTimeout bounds the probe of a server whose call timed out
// in silence: the caller, whose call has already timed out, waits for it.
const silenceProbeTimeout = 2 * time.Second

// answersProbe asks the server of a call that timed out in silence
// whether it is still there: ping, or server/discover to a modern server,
// within silenceProbeTimeout (or the shorter probe timeout). Whether it
// answers decides if the timeout counts against the breaker; the probe
// itself does not pass through the breaker.
func (s *Supervised) answersProbe(c *Client) bool {
	method := "ping"
	if c.Era() == EraModern {
		method = "server/discover"
	}
	ctx, cancel := context.WithTimeout(s.life, min(c.probeTimeout, silenceProbeTimeout))
	defer cancel()
	_, err := c.Call(ctx, method, nil)
	return err == nil
}

// outcomeOf says what a call's error, err, tells of the server's health;
// ctx is the call's.
func outcomeOf(ctx context.Context, err error) outcome {
	switch {
	case err == nil:
		return success
	case errors.Is(err, ErrTimeout):
		return failure
	case ctx.Err() != nil, errors.Is(err, ErrClosed), errors.Is(err, ErrNotReady),
		errors.Is(err, ErrOverloaded), errors.Is(err, errInvalidParams),
		// Not sent: the gateway had no credentials for it (a token
		// endpoint down says nothing of the server, and an open breaker
		// would hide why calls fail).
		errors.Is(err, ErrCredentials):
		return ignored
	}
	return failure
}

// setLocked moves to phase p (not Ready, which adopt sets) and reports
// it. s.mu is held.
func (s *Supervised) setLocked(p Phase, err error, retryAt time.Time) {
	if s.closing && p != Stopped {
		return
	}
	s.state.Phase, s.state.Err, s.state.RetryAt, s.state.Since = p, err, retryAt, time.Now()
	s.state.Breaker = BreakerClosed
	s.reportLocked(s.state)
}

// reportLocked queues st for OnStateChange. s.mu is held.
func (s *Supervised) reportLocked(st State) {
	if len(s.reports) == maxReports {
		s.reports = slices.Delete(s.reports, 0, 1)
	}
	s.reports = append(s.reports, st)
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// notifier calls OnStateChange with the queued states, one call at a
// time, until Close has queued Stopped.
func (s *Supervised) notifier() {
	defer close(s.notifyDone)
	var last State
	deliver := func() {
		for {
			s.mu.Lock()
			if len(s.reports) == 0 {
				s.mu.Unlock()
				return
			}
			st := s.reports[0]
			s.reports = slices.Delete(s.reports, 0, 1)
			s.mu.Unlock()
			if st.Phase == Ready && st.Breaker != last.Breaker {
				switch st.Breaker {
				case BreakerOpen:
					s.log.Warn("upstream circuit breaker open", "retry_at", st.RetryAt, "err", s.lastFailure())
				case BreakerClosed:
					s.log.Info("upstream circuit breaker closed")
				}
			}
			last = st
			if f := s.opts.OnStateChange; f != nil {
				f(st)
			}
		}
	}
	for {
		select {
		case <-s.changed:
			deliver()
		case <-s.final:
			deliver()
			return
		}
	}
}

// lastFailure returns the current breaker's last failure, if any.
func (s *Supervised) lastFailure() error {
	s.mu.Lock()
	br := s.br
	s.mu.Unlock()
	if b, ok := br.(*gobreakerBreaker); ok {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.last
	}
	return nil
}

// State returns the Supervised's state.
func (s *Supervised) State() State {
	s.mu.Lock()
	st, br := s.state, s.br
	s.mu.Unlock()
	if st.Phase == Ready {
		st.Breaker, st.RetryAt = br.state()
	}
	return st
}

// current returns the connection and breaker for a call, or the error
// that stops the call: an *UnavailableError while the server is
// restarting or failed for good.
func (s *Supervised) current(op string) (*Client, breaker, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch st := s.state; {
	case s.closing:
		return nil, nil, fmt.Errorf("upstream %q: %s: %w", s.name, op, ErrClosed)
	case st.Phase == Ready:
		return s.cur, s.br, nil
	case st.Phase == Restarting || st.Phase == Failed:
		return nil, nil, &UnavailableError{Upstream: s.name, Err: ErrNotReady, Last: st.Err, RetryAt: st.RetryAt}
	}
	return nil, nil, fmt.Errorf("upstream %q: %s: %w", s.name, op, ErrNotReady)
}

// Call sends one request with params of the caller's own; see Send.
func (s *Supervised) Call(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error) {
	return s.Send(ctx, jsonrpc.NewOutgoing(method, params))
}

// Send sends one request on the current connection, as Client.Send does,
// when the breaker lets it through; see Supervised for the errors of a
// call that is not sent. The call's outcome counts for the breaker (see
// BreakerOptions). A legacy resources/subscribe that succeeds is
// remembered, and made again on the next connection.
func (s *Supervised) Send(ctx context.Context, req *jsonrpc.Outgoing) (*jsonrpc.Message, error) {
	c, br, err := s.current(req.Method)
	if err != nil {
		return nil, err
	}
	return s.sendOn(ctx, c, br, req)
}

func (s *Supervised) sendOn(ctx context.Context, c *Client, br breaker, req *jsonrpc.Outgoing) (*jsonrpc.Message, error) {
	done, err := br.allow()
	if err != nil {
		return nil, err
	}
	method := req.Method
	heard := c.heard.Load()
	resp, err := c.Send(ctx, req)
	o := outcomeOf(ctx, err)
	if o == failure && errors.Is(err, ErrTimeout) && (c.heard.Load() != heard || s.answersProbe(c)) {
		// The server sent something (an answer to another caller's call,
		// a notification, a request for input) while this call waited, or
		// answers a probe now: it is slow for this call, not failing for
		// everyone, and one caller's slow calls must not take it away from
		// all the others.
		o = ignored
	}
	done(o, err)
	if err == nil && resp.Error == nil && (method == "resources/subscribe" || method == "resources/unsubscribe") {
		if uri, ok := req.StringParam("uri"); ok {
			s.mu.Lock()
			if method == "resources/subscribe" {
				s.resources[uri] = true
			} else {
				delete(s.resources, uri)
			}
			s.mu.Unlock()
		}
	}
	return resp, err
}

// List lists on the current connection, as Client.List does; each page
// is a call for the breaker.
func (s *Supervised) List(ctx context.Context, method, itemsKey string) ([]json.RawMessage, error) {
	c, br, err := s.current(method)
	if err != nil {
		return nil, err
	}
	return c.list(ctx, method, itemsKey, func(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error) {
		return s.sendOn(ctx, c, br, jsonrpc.NewOutgoing(method, params))
	})
}

// Notify sends a notification on the current connection.
func (s *Supervised) Notify(ctx context.Context, method string, params json.RawMessage) error {
	c, _, err := s.current(method)
	if err != nil {
		return err
	}
	return c.Notify(ctx, method, params)
}

// Subscribe sets what the upstream listens for, as Client.Subscribe does,
// and keeps it across restarts: each new connection is subscribed with
// the last filter asked for before it is reported Ready. A filter asked
// for while the server is down is kept for the next connection (and the
// call returns the *UnavailableError).
func (s *Supervised) Subscribe(ctx context.Context, want Subscriptions) error {
	want = want.normal()
	s.subMu.Lock()
	defer s.subMu.Unlock()
	c, _, err := s.current(methodListen)
	if err != nil {
		if !errors.Is(err, ErrClosed) {
			s.want = &want
		}
		return err
	}
	if err := c.Subscribe(ctx, want); err != nil {
		return err
	}
	s.want = &want
	return nil
}

// client returns the current or last connection; nil before Start.
func (s *Supervised) client() *Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Era returns the era of the current or last connection.
func (s *Supervised) Era() Era {
	if c := s.client(); c != nil {
		return c.Era()
	}
	return EraUnknown
}

// ProtocolVersion returns the protocol version of the current or last
// connection; "" before one was negotiated.
func (s *Supervised) ProtocolVersion() string {
	if c := s.client(); c != nil {
		return c.ProtocolVersion()
	}
	return ""
}

// Capabilities returns the server capabilities of the current or last
// connection, raw; nil when unknown.
func (s *Supervised) Capabilities() json.RawMessage {
	if c := s.client(); c != nil {
		return c.Capabilities()
	}
	return nil
}

// ServerInfo returns the server's Implementation from the current or
// last connection, raw; nil when unknown.
func (s *Supervised) ServerInfo() json.RawMessage {
	if c := s.client(); c != nil {
		return c.ServerInfo()
	}
	return nil
}

// Instructions returns the server's instructions from the current or
// last connection.
func (s *Supervised) Instructions() string {
	if c := s.client(); c != nil {
		return c.Instructions()
	}
	return ""
}

// Close stops the supervision and closes the connection as Client.Close
// does; every goroutine the Supervised started has exited, and its last
// OnStateChange call (Stopped) has returned, when Close returns. It may
// be called more than once and concurrently; every call returns the
// first one's result.
func (s *Supervised) Close() error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		<-s.closeDone
		return s.closeErr
	}
	s.closing = true
	started := s.started
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
	var err error
	if c := s.client(); c != nil {
		err = c.Close()
	}
	s.mu.Lock()
	s.state.Phase, s.state.Err, s.state.RetryAt, s.state.Since = Stopped, nil, time.Time{}, time.Now()
	s.state.Breaker = BreakerClosed
	st := s.state
	if started {
		s.reportLocked(st)
	}
	s.mu.Unlock()
	if started {
		close(s.final)
		<-s.notifyDone
	} else if f := s.opts.OnStateChange; f != nil {
		f(st)
	}
	s.closeErr = err
	close(s.closeDone)
	return err
}
