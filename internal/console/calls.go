package console

import (
	"sync"
	"time"
)

// Call is one call a host made, as the console lists it: never its
// arguments nor its result.
type Call struct {
	At time.Time
	// View is the caller's view key (team, or team/profile).
	View string
	// Principal is who called (policy.Identity.ID), so that each caller
	// sees only its own calls; "" without authentication.
	Principal string
	// Identity names the credential (a key's id, an OAuth subject), for
	// admins.
	Identity string
	Tool     string
	Upstream string
	Duration time.Duration
	// Outcome is telemetry's: ok, error, tool_error, cancelled.
	Outcome string
}

// Calls is a bounded ring of the latest calls, safe for concurrent use:
// recording one costs a lock and a copy, and the oldest is forgotten.
type Calls struct {
	mu   sync.Mutex
	ring []Call
	next int  // where the next call goes
	full bool // ring has wrapped
	seq  uint64
}

// NewCalls returns a ring that keeps the last n calls (n >= 1).
func NewCalls(n int) *Calls { return &Calls{ring: make([]Call, max(n, 1))} }

// Add records c.
func (r *Calls) Add(c Call) {
	r.mu.Lock()
	r.ring[r.next] = c
	r.next++
	if r.next == len(r.ring) {
		r.next, r.full = 0, true
	}
	r.seq++
	r.mu.Unlock()
}

// Recent returns at most n of the calls keep accepts, newest first.
func (r *Calls) Recent(n int, keep func(*Call) bool) []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	size := r.next
	if r.full {
		size = len(r.ring)
	}
	var out []Call
	for i := 1; i <= size && len(out) < n; i++ {
		c := &r.ring[(r.next-i+len(r.ring))%len(r.ring)]
		if keep(c) {
			out = append(out, *c)
		}
	}
	return out
}
