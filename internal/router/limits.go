package router

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcp-gateway/mcp-gateway/internal/policy"
)

// The limits Limits refuses for, as Admit returns them and Rejected is
// told: the values of telemetry.AttrLimit (Limit*), spelled
// here because the router does not import telemetry.
const (
	LimitRate            = "rate"
	LimitTeamRate        = "team_rate"
	LimitToolRate        = "tool_rate"
	LimitConcurrentCalls = "concurrent_calls"
)

// Rate is a token bucket's refill rate (per second) and burst; a zero
// Per is no limit.
type Rate struct {
	Per   float64
	Burst int
}

// IdentityQuotas are the limits of each identity of one view.
type IdentityQuotas struct {
	// Rate limits the identity's requests (Limits.Admit).
	Rate Rate
	// ConcurrentCalls bounds its calls in flight on one upstream; 0 is
	// no limit.
	ConcurrentCalls int
	// Sessions and Streams are its legacy sessions and open streams
	// (Limits.Quotas); 0 is no quota of its own.
	Sessions, Streams int
}

// LimitsOptions configure Limits.
type LimitsOptions struct {
	// Identity gives the quotas of each identity of a view ("" is the
	// default view). A view that is missing (a team added by a reload,
	// while limits are read at start) gets the default view's, so that
	// no caller is ever without limits.
	Identity map[string]IdentityQuotas
	// Team gives the rate of all identities of a view together; a view
	// that is missing has none (it does not share the default view's).
	Team map[string]Rate
	// Tools gives, by upstream name and then by the tool's original
	// name, the rate of calls of that tool for each identity.
	Tools map[string]map[string]Rate
	// MaxBuckets bounds the buckets kept for identities; past it, the
	// full buckets (which are as good as new ones) are dropped. 0 means
	// 100000.
	MaxBuckets int
	// Rejected, if set, is told of each refusal, with its Limit* value
	// (for the mcp_gateway.rejections metric). It must not block.
	Rejected func(limit string)
}

// Limits are the per-identity quotas and rate limits: token buckets by
// identity, by team and by identity and tool, and counts of calls in
// flight by identity and upstream. Its methods are safe for concurrent
// use.
type Limits struct {
	opts LimitsOptions

	mu      sync.Mutex // guards the fields below
	buckets map[bucketKey]*bucket
	flight  map[flightKey]int
}

type bucketKey struct {
	kind byte // 'i' identity, 't' team, 'c' tool
	who  string
	// view is an identity bucket's view: a key moved to another team
	// gets a bucket of its new team's rate.
	view     string
	upstream string
	tool     string
}

type bucket struct {
	lim   *rate.Limiter
	burst int
}

type flightKey struct{ who, upstream string }

// NewLimits returns the limits o describes.
func NewLimits(o LimitsOptions) *Limits {
	l := &Limits{opts: o, buckets: map[bucketKey]*bucket{}, flight: map[flightKey]int{}}
	if l.opts.MaxBuckets <= 0 {
		l.opts.MaxBuckets = 100000
	}
	return l
}

// quotas returns the quotas of the identities of a view: the default
// view's for a view the limits do not know.
func (l *Limits) quotas(view string) IdentityQuotas {
	if q, ok := l.opts.Identity[view]; ok {
		return q
	}
	return l.opts.Identity[""]
}

func (l *Limits) reject(limit string) {
	if l.opts.Rejected != nil {
		l.opts.Rejected(limit)
	}
}

// take reserves one token of the bucket k at now, or returns how long
// until one is free. l.mu is held.
func (l *Limits) takeLocked(k bucketKey, r Rate, now time.Time) (*rate.Reservation, time.Duration) {
	b := l.buckets[k]
	if b == nil {
		if len(l.buckets) >= l.opts.MaxBuckets {
			l.sweepLocked(now)
		}
		burst := max(1, r.Burst)
		b = &bucket{lim: rate.NewLimiter(rate.Limit(r.Per), burst), burst: burst}
		l.buckets[k] = b
	}
	res := b.lim.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 || !res.OK() {
		res.CancelAt(now)
		if d <= 0 {
			d = time.Second
		}
		return nil, d
	}
	return res, 0
}

// sweepLocked drops the full buckets: a full bucket is the same as a new
// one, so forgetting it changes nothing. l.mu is held.
func (l *Limits) sweepLocked(now time.Time) {
	for k, b := range l.buckets {
		if b.lim.TokensAt(now) >= float64(b.burst) {
			delete(l.buckets, k)
		}
	}
}

// Admit takes one request of an identity from its own rate and its
// team's, or says which refused it and how long until it would pass.
func (l *Limits) Admit(who policy.Identity) (limit string, retry time.Duration, ok bool) {
	own, team := l.quotas(who.Team).Rate, l.opts.Team[who.Team]
	if own.Per == 0 && team.Per == 0 {
		return "", 0, true
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var mine *rate.Reservation
	if own.Per > 0 {
		var d time.Duration
		if mine, d = l.takeLocked(bucketKey{kind: 'i', who: who.ID, view: who.Team}, own, now); mine == nil {
			l.reject(LimitRate)
			return LimitRate, d, false
		}
	}
	if team.Per > 0 {
		if res, d := l.takeLocked(bucketKey{kind: 't', who: who.Team}, team, now); res == nil {
			if mine != nil {
				mine.CancelAt(now) // the identity's token goes back
			}
			l.reject(LimitTeamRate)
			return LimitTeamRate, d, false
		}
	}
	return "", 0, true
}

// Quotas returns an identity's session and stream quotas.
func (l *Limits) Quotas(who policy.Identity) (sessions, streams int) {
	q := l.quotas(who.Team)
	return q.Sessions, q.Streams
}

// call admits one call of caller c to a tool of an upstream (tool is the
// original name; "" for a call that names no tool): its calls in flight
// on the upstream, then the tool's rate for the identity. The tool's
// token is taken only once the call has a slot, so that a call refused
// for concurrency spends none. It returns the function that ends the
// call, or why it was refused.
func (l *Limits) call(c *Caller, upstream, tool string) (func(), string) {
	if l == nil {
		return func() {}, ""
	}
	r, rated := l.opts.Tools[upstream][tool]
	rated = rated && tool != "" && r.Per > 0
	n := l.quotas(c.team()).ConcurrentCalls
	if !rated && n <= 0 {
		return func() {}, ""
	}
	k := flightKey{c.Principal, upstream}
	l.mu.Lock()
	if n > 0 && l.flight[k] >= n {
		l.mu.Unlock()
		l.reject(LimitConcurrentCalls)
		return nil, fmt.Sprintf("this caller already has %d calls in flight on the server %q, its limit (concurrent_calls); wait for one to finish", n, upstream)
	}
	if rated {
		if res, d := l.takeLocked(bucketKey{kind: 'c', who: c.Principal, upstream: upstream, tool: tool}, r, time.Now()); res == nil {
			l.mu.Unlock()
			l.reject(LimitToolRate)
			return nil, fmt.Sprintf("this tool's rate limit for this caller is reached; try again in %s", d.Round(time.Millisecond))
		}
	}
	if n <= 0 {
		l.mu.Unlock()
		return func() {}, ""
	}
	l.flight[k]++
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.flight[k]--; l.flight[k] <= 0 {
			delete(l.flight, k)
		}
	}, ""
}
