package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// Per-client upstream sessions (session: per-client): a host gets its own
// upstream session — its own stdio process — created on its first call
// and declaring the host's own client capabilities, for servers that
// keep state per connection or ask the client for roots. The upstream's
// shared session still lists the catalog.
//
// A host is its legacy session, or for a modern host (which has no
// session) its identity, view and declared capabilities: the modern hosts
// of one identity that declare the same share an upstream session, so
// that what the upstream sees of the client is always true of the host;
// no session is ever shared between identities.
//
// The sessions of one upstream are kept in an LRU of bounded size. To
// make room for a new session the least recently used session of the
// same identity is closed, else that of the identity holding the most
// (one identity cannot fill the pool for all); when every session is
// another identity's only one, the new one is refused until one ends.
// The router's janitor closes the sessions unused for longer than the
// idle timeout. A session with calls in flight is closed only when they
// end. (The expirable cache of golang-lru v2.0.7 runs a cleanup
// goroutine that can never be stopped, so the router sweeps the plain
// LRU itself.)

// conn is one upstream client and the calls in flight on it.
type conn struct {
	client Upstream
	calls  callSet
}

// hostConn is a per-client upstream session.
type hostConn struct {
	conn
	key string
	// owner is the identity it counts as in the pool's fairness: its
	// principal and team, the same on every profile's path
	// (Caller.quotaOwner); key binds it to the view.
	owner string
	// ready is closed once the session's start finished; err says how.
	ready chan struct{}
	err   error

	// The fields below are guarded by the pool's mutex.
	lastUsed time.Time
	inflight int
	// evicted is set once the session left the pool; it is closed when
	// its last call ends.
	evicted bool
}

// clientPool holds an upstream's per-client sessions.
type clientPool struct {
	size int
	mu   sync.Mutex // guards lru and the hostConn fields it names
	lru  *simplelru.LRU[string, *hostConn]
	// retired are the sessions the LRU pushed out while evicting; the
	// caller closes them after releasing mu.
	retired []*hostConn
}

func newClientPool(size int) *clientPool {
	p := &clientPool{size: size}
	p.lru, _ = simplelru.NewLRU(size, func(_ string, hc *hostConn) {
		hc.evicted = true
		p.retired = append(p.retired, hc)
	})
	return p
}

// hostKey names the host of a call for per-client sessions: a legacy
// session (which is bound to one identity), or a modern host's identity,
// view and capabilities.
func hostKey(c *Caller) string {
	if c.Session != "" {
		return "session:" + c.Session
	}
	return "capabilities:" + c.owner() + "\x00" + string(c.Capabilities)
}

// errNoRoom: every per-client session of the upstream belongs to other
// identities.
var errNoRoom = errors.New("every session the gateway may open to this server is in use by other callers")

// makeRoomLocked makes room in a full pool for a session of owner by
// evicting owner's least recently used one or, when owner has none, the
// least recently used one of the identity that holds the most sessions,
// if it holds more than one. false: every session is the only one of
// another identity. p.mu must be held.
func (p *clientPool) makeRoomLocked(owner string) bool {
	if p.lru.Len() < p.size {
		return true
	}
	keys := p.lru.Keys() // oldest first
	held := map[string]int{}
	for _, k := range keys {
		hc, _ := p.lru.Peek(k)
		if hc.owner == owner {
			p.lru.Remove(k) // the eviction callback retires it
			return true
		}
		held[hc.owner]++
	}
	most := ""
	for o, n := range held {
		if n > held[most] {
			most = o
		}
	}
	if held[most] < 2 {
		return false
	}
	for _, k := range keys {
		if hc, _ := p.lru.Peek(k); hc.owner == most {
			p.lru.Remove(k)
			return true
		}
	}
	return false
}

// acquire returns the host's session on u, creating and starting it on
// first use, and counts a call on it; release must follow.
func (r *Router) acquire(ctx context.Context, u *upstreamState, c *Caller) (*hostConn, error) {
	p := u.pool
	key := hostKey(c)
	p.mu.Lock()
	hc, ok := p.lru.Get(key)
	if !ok {
		if !p.makeRoomLocked(c.quotaOwner()) {
			p.mu.Unlock()
			return nil, fmt.Errorf("%w: %w (%d sessions)", upstream.ErrOverloaded, errNoRoom, p.size)
		}
		hc = &hostConn{key: key, owner: c.quotaOwner(), ready: make(chan struct{})}
		p.lru.Add(key, hc)
	}
	hc.inflight++
	hc.lastUsed = time.Now()
	retired := p.takeRetired()
	p.mu.Unlock()
	r.closeRetired(retired)

	if !ok {
		caps := u.relayedCapabilities(c.Capabilities)
		if len(caps) == 0 {
			caps = json.RawMessage("{}")
		}
		client, err := u.Connect(ConnectOptions{Handlers: r.handlers(u, &hc.calls), Capabilities: caps})
		if err != nil {
			hc.err = err
			close(hc.ready)
		} else {
			hc.client = client
			// The session starts with its host's token, for an upstream
			// that exchanges it (token_exchange).
			life := withSubject(r.life, c)
			if !r.spawn(func() {
				startCtx, cancel := context.WithTimeout(life, u.Timeout)
				defer cancel()
				hc.err = client.Start(startCtx)
				if hc.err == nil && isModern(client.ProtocolVersion()) {
					// A modern client mirrors tool arguments into headers
					// (x-mcp-header) from the tool list it has seen.
					_, _ = client.List(startCtx, "tools/list", "tools")
				}
				close(hc.ready)
			}) {
				hc.err = errors.New("the gateway is shutting down")
				close(hc.ready)
			}
		}
	}
	select {
	case <-hc.ready:
	case <-ctx.Done():
		r.release(u, hc)
		return nil, ctx.Err()
	}
	if hc.err != nil {
		r.log.Warn("per-client upstream session failed to start", keyUpstream, u.Name, keyErr, hc.err)
		r.release(u, hc)
		p.mu.Lock()
		if cur, ok := p.lru.Peek(key); ok && cur == hc {
			p.lru.Remove(key) // the next call tries again
		}
		retired := p.takeRetired()
		p.mu.Unlock()
		r.closeRetired(retired)
		return nil, hc.err
	}
	return hc, nil
}

// discard takes a per-client session that was lost out of the pool; it
// is closed once its last call has ended.
func (r *Router) discard(u *upstreamState, hc *hostConn) {
	p := u.pool
	p.mu.Lock()
	if cur, ok := p.lru.Peek(hc.key); ok && cur == hc {
		p.lru.Remove(hc.key) // evicted: retired until its calls end
	}
	p.mu.Unlock()
}

// release ends a call's use of a per-client session.
func (r *Router) release(u *upstreamState, hc *hostConn) {
	p := u.pool
	p.mu.Lock()
	hc.inflight--
	hc.lastUsed = time.Now()
	retired := p.takeRetired()
	p.mu.Unlock()
	r.closeRetired(retired)
}

// takeRetired returns the evicted sessions that can be closed now and
// keeps those with calls in flight. p.mu must be held.
func (p *clientPool) takeRetired() []*hostConn {
	var now, later []*hostConn
	for _, hc := range p.retired {
		if hc.inflight == 0 {
			now = append(now, hc)
		} else {
			later = append(later, hc)
		}
	}
	p.retired = later
	return now
}

// closeRetired closes sessions off the caller's goroutine: closing a
// stdio process takes time.
func (r *Router) closeRetired(hcs []*hostConn) {
	for _, hc := range hcs {
		if !r.spawn(func() { hc.close() }) {
			hc.close()
		}
	}
}

func (hc *hostConn) close() {
	<-hc.ready
	if hc.client != nil {
		_ = hc.client.Close()
	}
}

// sweepIdle closes the per-client sessions unused for longer than their
// upstream's idle timeout.
func (r *Router) sweepIdle(now time.Time) {
	for _, u := range r.upstreams() {
		if u.pool == nil {
			continue
		}
		p := u.pool
		p.mu.Lock()
		for _, key := range p.lru.Keys() {
			hc, _ := p.lru.Peek(key)
			if hc.inflight == 0 && now.Sub(hc.lastUsed) > u.ClientIdle {
				p.lru.Remove(key) // the eviction callback retires it
			}
		}
		retired := p.takeRetired()
		p.mu.Unlock()
		r.closeRetired(retired)
	}
}

// dropHost closes the per-client sessions of a host that is gone.
func (r *Router) dropHost(key string) {
	for _, u := range r.upstreams() {
		if u.pool == nil {
			continue
		}
		u.pool.mu.Lock()
		u.pool.lru.Remove("session:" + key)
		retired := u.pool.takeRetired()
		u.pool.mu.Unlock()
		r.closeRetired(retired)
	}
}

// closePools closes every per-client session.
func (r *Router) closePools() {
	var wg sync.WaitGroup
	for _, u := range r.upstreams() {
		if u.pool != nil {
			wg.Go(func() { r.closePool(u) })
		}
	}
	wg.Wait()
}

// janitor sweeps idle per-client sessions until the router closes.
func (r *Router) janitor(every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-r.life.Done():
			return
		case now := <-tick.C:
			r.sweepIdle(now)
		}
	}
}

// handlers returns the handlers of one upstream connection: what it
// sends outside a call's own stream is attributed among its own calls.
func (r *Router) handlers(u *upstreamState, calls *callSet) Handlers {
	return Handlers{
		Notify: func(n *jsonrpc.Message) { r.upstreamNotification(u, calls, n) },
		Request: func(ctx context.Context, req *jsonrpc.Message) *jsonrpc.Message {
			return r.upstreamRequest(ctx, u, calls, req)
		},
	}
}
