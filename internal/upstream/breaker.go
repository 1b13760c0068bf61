package upstream

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
)

// BreakerOptions configures a Supervised's circuit breaker. The breaker
// counts transport failures only: errors in reaching the server or in
// what it sent (a refused connection, an HTTP status that is no MCP
// answer, a malformed answer), and ErrTimeout of a call during which the
// server sent nothing at all on the connection (no answer to any call, no
// notification, no request) and after which it does not answer a probe
// (ping, or server/discover) either. A timeout while the server answered others
// (one caller's slow tool) or asked for input (a host that never
// answers an elicitation) says the call was slow, not that the server
// fails, and one caller must not take a server away from every other
// one. A JSON-RPC error from the server, a tool result with isError, a
// call whose caller's context ended, a call refused for overload
// (ErrOverloaded), and the calls cut short by a lost connection
// (ErrClosed, which restarts take care of) are not failures; any answer
// from the server is a success.
type BreakerOptions struct {
	// Failures is how many transport failures in a row open the breaker;
	// 0 means config.DefaultBreakerFailures (5), and a negative value
	// turns the breaker off.
	Failures int
	// Cooldown is how long an open breaker refuses calls before it lets
	// one probe through; 0 means config.DefaultBreakerCooldown (30s). The
	// Supervised sends the probe
	// itself when the cooldown ends (ping, or server/discover to a modern
	// server), so that an upstream whose tools are hidden while its
	// breaker is open does not wait for a call that cannot come. Success
	// closes the breaker; a failure opens it for another Cooldown.
	Cooldown time.Duration
}

// BreakerState is the state of a circuit breaker.
type BreakerState int

const (
	// BreakerClosed: calls go through.
	BreakerClosed BreakerState = iota
	// BreakerHalfOpen: one probe is let through; the others are refused
	// until its outcome is known.
	BreakerHalfOpen
	// BreakerOpen: calls are refused at once with ErrBreakerOpen.
	BreakerOpen
)

func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerHalfOpen:
		return "half-open"
	case BreakerOpen:
		return "open"
	}
	return "breaker(" + strconv.Itoa(int(s)) + ")"
}

// UnavailableError is the error of a call that a Supervised did not send:
// its circuit breaker is open (Err is ErrBreakerOpen), or its server is
// down: restarting, or failed for good (Err is ErrNotReady). errors.Is
// matches Err; Last is there to be read, not matched, so that a breaker
// opened by timeouts is not taken for a timeout of this call.
type UnavailableError struct {
	// Upstream is the upstream's name.
	Upstream string
	// Err is ErrBreakerOpen or ErrNotReady.
	Err error
	// Last is the failure that led here (the last transport failure, the
	// crash), when known.
	Last error
	// RetryAt is when the upstream is tried again (the breaker's probe,
	// the next restart); zero when nothing is scheduled (a probe is
	// already out, or a crash loop stopped the restarts).
	RetryAt time.Time
}

func (e *UnavailableError) Error() string {
	s := fmt.Sprintf("upstream %q: %v", e.Upstream, e.Err)
	if e.Last != nil {
		s += " (" + e.Last.Error() + ")"
	}
	if !e.RetryAt.IsZero() {
		s += "; retried at " + e.RetryAt.Format(time.RFC3339)
	}
	return s
}

// Unwrap returns Err.
func (e *UnavailableError) Unwrap() error { return e.Err }

// outcome is what a call says about the server's health.
type outcome int

const (
	// success: the server answered.
	success outcome = iota
	// failure: a transport failure or a timeout.
	failure
	// ignored: says nothing about the server (the caller gave up, the
	// call was refused before it was sent, the connection was lost).
	ignored
)

// breaker decides whether a call may go to the server. It is the only
// view the rest of the package has of gobreaker.
type breaker interface {
	// allow admits one call, returning the function that reports its
	// outcome (cause is the call's error), or refuses it with an
	// *UnavailableError wrapping ErrBreakerOpen.
	allow() (done func(o outcome, cause error), err error)
	// state returns the breaker's state and, when it is open, when it
	// lets a probe through.
	state() (BreakerState, time.Time)
}

// errIgnored stands for an ignored outcome inside gobreaker.
var errIgnored = errors.New("ignored outcome")

// gobreakerBreaker is a breaker backed by gobreaker's two-step breaker,
// which, unlike Execute, lets a call report its outcome after the fact.
type gobreakerBreaker struct {
	name     string
	cooldown time.Duration
	cb       *gobreaker.TwoStepCircuitBreaker[struct{}]
	changed  func(BreakerState, time.Time)

	mu       sync.Mutex // guards the fields below
	openedAt time.Time
	last     error // the last failure
}

// newBreaker returns a closed breaker, or one that admits everything
// when o turns it off. changed, if set, is told of every change of state,
// with the time an open breaker lets a probe through; it is called with
// gobreaker's lock held, so it must not call the breaker.
func newBreaker(name string, o BreakerOptions, changed func(BreakerState, time.Time)) breaker {
	if o.Failures < 0 {
		return openDoor{}
	}
	failures := o.Failures
	if failures == 0 {
		failures = config.DefaultBreakerFailures
	}
	cooldown := o.Cooldown
	if cooldown <= 0 {
		cooldown = config.DefaultBreakerCooldown
	}
	b := &gobreakerBreaker{name: name, cooldown: cooldown, changed: changed}
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        name,
		MaxRequests: 1, // one probe when half-open; its success closes
		// gobreaker half-opens once its expiry is strictly before now,
		// that is one tick after opening + Timeout: one nanosecond less
		// makes it half-open at opening + cooldown, the RetryAt we report,
		// and not a nanosecond later, when the probe timer has fired and
		// found it still open. (gobreaker takes 0 for its 60s default.)
		Timeout:     max(cooldown-time.Nanosecond, time.Nanosecond),
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= uint32(failures) },
		IsExcluded:  func(err error) bool { return errors.Is(err, errIgnored) },
		OnStateChange: func(_ string, _, to gobreaker.State) {
			var retryAt time.Time
			if to == gobreaker.StateOpen {
				b.mu.Lock()
				b.openedAt = time.Now()
				retryAt = b.openedAt.Add(b.cooldown)
				b.mu.Unlock()
			}
			if b.changed != nil {
				b.changed(breakerState(to), retryAt)
			}
		},
	})
	return b
}

// breakerState translates gobreaker's state.
func breakerState(s gobreaker.State) BreakerState {
	switch s {
	case gobreaker.StateOpen:
		return BreakerOpen
	case gobreaker.StateHalfOpen:
		return BreakerHalfOpen
	}
	return BreakerClosed
}

func (b *gobreakerBreaker) allow() (func(outcome, error), error) {
	done, err := b.cb.Allow()
	if err != nil {
		b.mu.Lock()
		e := &UnavailableError{Upstream: b.name, Err: ErrBreakerOpen, Last: b.last}
		if errors.Is(err, gobreaker.ErrOpenState) {
			e.RetryAt = b.openedAt.Add(b.cooldown)
		}
		b.mu.Unlock()
		return nil, e
	}
	return func(o outcome, cause error) {
		switch o {
		case success:
			done(nil)
		case failure:
			b.mu.Lock()
			b.last = cause
			b.mu.Unlock()
			done(cause)
		default:
			done(errIgnored)
		}
	}, nil
}

func (b *gobreakerBreaker) state() (BreakerState, time.Time) {
	st := breakerState(b.cb.State())
	if st != BreakerOpen {
		return st, time.Time{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return BreakerOpen, b.openedAt.Add(b.cooldown)
}

// openDoor is the breaker of a Supervised whose breaker is turned off.
type openDoor struct{}

func (openDoor) allow() (func(outcome, error), error) { return func(outcome, error) {}, nil }
func (openDoor) state() (BreakerState, time.Time)     { return BreakerClosed, time.Time{} }
