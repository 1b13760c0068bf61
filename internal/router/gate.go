package router

import (
	"context"
	"sync"
)

// On a shared stdio connection, a request the server sends during a call
// (sampling, elicitation, roots) carries nothing that names the call: the
// gateway can only tell which host it is for if the calls in flight that
// could cause it all belong to one host. hostGate makes sure they do:
// while calls of one host that declared a relayed capability are in
// flight on the upstream, another such host's calls wait (up to the
// call's timeout) for them to end. Hosts that declared none of the
// relayed capabilities never wait, and neither do per-client sessions or
// HTTP upstreams, whose server requests come on the call's own stream.
type hostGate struct {
	mu     sync.Mutex
	holder string    // the host whose calls are in flight
	n      int       // its calls in flight
	queue  []*waiter // calls of other hosts, first come first served
}

type waiter struct {
	key   string
	admit chan struct{} // closed when the call may run
}

// enter waits until calls of key may run, then counts one in. The
// holder's new calls queue behind calls already waiting, so that no host
// waits forever.
func (g *hostGate) enter(ctx context.Context, key string) error {
	g.mu.Lock()
	if len(g.queue) == 0 && (g.n == 0 || g.holder == key) {
		g.holder = key
		g.n++
		g.mu.Unlock()
		return nil
	}
	w := &waiter{key: key, admit: make(chan struct{})}
	g.queue = append(g.queue, w)
	g.mu.Unlock()
	select {
	case <-w.admit:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		defer g.mu.Unlock()
		select {
		case <-w.admit:
			// Admitted as the context ended: give the turn back.
			g.leaveLocked()
		default:
			for i, q := range g.queue {
				if q == w {
					g.queue = append(g.queue[:i], g.queue[i+1:]...)
					break
				}
			}
		}
		return ctx.Err()
	}
}

// leave counts one call of the holder out.
func (g *hostGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.leaveLocked()
}

// leaveLocked ends a call; when it was the holder's last, the first
// waiting host takes the turn, with all its waiting calls.
func (g *hostGate) leaveLocked() {
	g.n--
	if g.n > 0 {
		return
	}
	g.holder = ""
	if len(g.queue) == 0 {
		return
	}
	g.holder = g.queue[0].key
	kept := g.queue[:0]
	for _, w := range g.queue {
		if w.key == g.holder {
			g.n++
			close(w.admit)
		} else {
			kept = append(kept, w)
		}
	}
	g.queue = kept
}

// gated reports whether a call of c on u must pass u's host gate: u is
// shared, its server requests arrive outside the calls' own streams, it
// relays sampling or elicitation, and c declared one it relays. (Roots
// do not gate: a server asks for them at any time, not only during a
// call, and a host's roots are the same for all its calls; a roots/list
// goes to the one host with calls in flight, or gets an error.)
func (u *upstreamState) gated(c *Caller) bool {
	if u.pool != nil || !u.SharedStream || u.isModern() {
		return false
	}
	for _, capability := range u.Relay {
		if (capability == "sampling" || capability == "elicitation") && c.declares(capability) {
			return true
		}
	}
	return false
}
