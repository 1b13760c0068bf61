package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Defaults of the limits (see [Limits]).
const (
	// DefaultConcurrentCalls is the calls one identity may have in flight
	// on one upstream at once, when callers authenticate. With auth mode
	// none every caller is one identity and there is no per-identity
	// default, so the single-user case keeps every slot it had.
	DefaultConcurrentCalls = 64
	// DefaultStreams is the GET and subscriptions/listen streams one
	// identity may hold open at once, when callers authenticate.
	DefaultStreams = 100
)

// Limits are the gateway's quotas and rate limits. An identity is one API
// key (or, later, one token subject); with auth mode none every caller is
// the same identity. What one identity uses never counts against another.
type Limits struct {
	// MaxSessions bounds the live legacy sessions of all identities
	// together. Key: max_sessions. 0 means DefaultMaxSessions (10000).
	// When the table is full, idle sessions are expired first; then a new
	// session takes the room of the least recently used session (one
	// without an open GET stream) of the identity holding the most, which
	// may be the caller's own: one identity's flood displaces only its
	// own sessions once it holds the most.
	MaxSessions int
	// SessionIdleTimeout ends a legacy session that has had no request
	// and no open GET stream for this long. Key: session_idle_timeout, a
	// Go duration. 0 means DefaultSessionIdleTimeout (30m).
	SessionIdleTimeout time.Duration
	// PerIdentity limits each identity. Key: per_identity.
	PerIdentity IdentityLimits
	// Team limits all identities of one team together (the callers of
	// the default view, without teams). Key: team.
	Team TeamLimits
}

// IdentityLimits limit one identity.
type IdentityLimits struct {
	// Rate is how many requests (HTTP POSTs to the endpoint) the identity
	// may make, as "N/s", "N/m" or "N/h"; more get 429 with Retry-After.
	// Key: rate. Default empty: no limit.
	Rate Rate
	// Burst is how many requests may come at once above Rate. Key: burst.
	// 0 means Rate per second rounded up, at least 1.
	Burst int
	// ConcurrentCalls is how many calls the identity may have in flight
	// on one upstream; a call over it is refused at once with an error
	// naming the limit. Key: concurrent_calls. 0 means
	// DefaultConcurrentCalls (64) when callers authenticate and no limit
	// with auth mode none; negative means no limit.
	ConcurrentCalls int
	// Sessions is how many legacy sessions the identity may hold; its
	// next initialize ends its own least recently used session. Key:
	// sessions. 0 means no limit of its own (max_sessions applies).
	Sessions int
	// Streams is how many GET and subscriptions/listen streams the
	// identity may hold open; more get 429. Key: streams. 0 means
	// DefaultStreams (100) when callers authenticate and no limit with
	// auth mode none; negative means no limit.
	Streams int
}

// TeamLimits limit a team's identities together.
type TeamLimits struct {
	// Rate is how many requests the team's identities may make together;
	// see IdentityLimits.Rate. Key: rate. Default empty: no limit.
	Rate Rate
	// Burst; see IdentityLimits.Burst. Key: burst.
	Burst int
}

// TeamLimitOverrides replace, field by field, the limits of a team's
// identities. A field that is not set keeps the top-level value.
type TeamLimitOverrides struct {
	// PerIdentity: see Limits.PerIdentity. Key: per_identity.
	PerIdentity IdentityLimits
	// Team: see Limits.Team. Key: team.
	Team TeamLimits
}

// Rate is a number of events per second; 0 means no limit. It is written
// "N/s", "N/m" or "N/h", N a positive integer.
type Rate float64

// ParseRate reads "N/s", "N/m" or "N/h".
func ParseRate(s string) (Rate, error) {
	n, unit, ok := strings.Cut(s, "/")
	per := map[string]float64{"s": 1, "m": 60, "h": 3600}[unit]
	count, err := strconv.ParseUint(n, 10, 32)
	if !ok || per == 0 || err != nil || count == 0 {
		return 0, fmt.Errorf("must be N/s, N/m or N/h with N a whole number above 0, such as 10/s or 600/m")
	}
	return Rate(float64(count) / per), nil
}

// BurstOf is the burst of rate r when burst is not set: r per second
// rounded up, at least 1.
func BurstOf(r Rate, burst int) int {
	if burst > 0 {
		return burst
	}
	return max(1, int(math.Ceil(float64(r))))
}

// Effective returns the limits of an identity of a team, o (nil for the
// default view) over l.
func (l *Limits) Effective(o *TeamLimitOverrides) (IdentityLimits, TeamLimits) {
	id, team := l.PerIdentity, l.Team
	if o == nil {
		return id, team
	}
	if o.PerIdentity.Rate != 0 {
		id.Rate, id.Burst = o.PerIdentity.Rate, o.PerIdentity.Burst
	}
	if o.PerIdentity.Burst != 0 {
		id.Burst = o.PerIdentity.Burst
	}
	if o.PerIdentity.ConcurrentCalls != 0 {
		id.ConcurrentCalls = o.PerIdentity.ConcurrentCalls
	}
	if o.PerIdentity.Sessions != 0 {
		id.Sessions = o.PerIdentity.Sessions
	}
	if o.PerIdentity.Streams != 0 {
		id.Streams = o.PerIdentity.Streams
	}
	if o.Team.Rate != 0 {
		team.Rate, team.Burst = o.Team.Rate, o.Team.Burst
	}
	if o.Team.Burst != 0 {
		team.Burst = o.Team.Burst
	}
	return id, team
}

func (l *IdentityLimits) validate(p string, ps *problems) {
	if l.Burst < 0 {
		ps.add(p+".burst", "must be 0 (the rate per second) or more")
	}
	if l.Sessions < 0 {
		ps.add(p+".sessions", "must be 0 (no limit of its own) or more")
	}
}

func (l *TeamLimits) validate(p string, ps *problems) {
	if l.Burst < 0 {
		ps.add(p+".burst", "must be 0 (the rate per second) or more")
	}
}

func (l *Limits) validate(ps *problems) {
	if l.MaxSessions < 0 {
		ps.add("limits.max_sessions", "must be 0 (the default, 10000) or more")
	}
	if l.SessionIdleTimeout < 0 {
		ps.add("limits.session_idle_timeout", "must be 0 (the default, 30m) or more")
	}
	l.PerIdentity.validate("limits.per_identity", ps)
	l.Team.validate("limits.team", ps)
}
