package router

import (
	"errors"
	"fmt"
	"sync"
)

// Reconfigure applies a new configuration while the router runs. An
// upstream whose name and Fingerprint are unchanged keeps running: its
// sessions, subscriptions and calls in flight are untouched. A removed
// upstream is stopped; a new one, one whose Fingerprint changed, or one
// that failed for good (a crash loop) is started. The new rules and naming apply at once, and hosts hear of the
// lists that changed. Other Options fields keep their values. On an error
// nothing changes.
func (r *Router) Reconfigure(opts *Options) error {
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	r.mu.Lock()
	life := r.life
	r.mu.Unlock()
	if life == nil || life.Err() != nil {
		return errors.New("the router is not running")
	}

	old := map[string]*upstreamState{}
	for _, u := range r.upstreams() {
		old[u.Name] = u
	}
	var next, started []*upstreamState
	keep := map[*upstreamState]bool{}
	for _, cfg := range opts.Upstreams {
		if u := old[cfg.Name]; u != nil && u.Fingerprint == cfg.Fingerprint && cfg.Fingerprint != "" && u.health().phase != PhaseFailed {
			keep[u] = true
			next = append(next, u)
			continue
		}
		u, err := r.newUpstream(cfg)
		if err != nil {
			for _, s := range started {
				_ = s.Client.Close()
			}
			return err
		}
		next = append(next, u)
		started = append(started, u)
	}
	// The priority order is the new list's: kept upstreams keep their
	// state and take their new place.
	rules, names := opts.Rules, opts.Namespace
	r.mu.Lock()
	r.ups = next
	r.rules, r.names = &rules, &names
	r.mu.Unlock()

	var removed []*upstreamState
	for _, u := range old {
		if !keep[u] {
			removed = append(removed, u)
		}
	}
	r.log.Info("configuration reloaded", "upstreams", len(next), "started", len(started), "stopped", len(removed))
	for _, u := range removed {
		r.spawn(func() { r.stopUpstream(u) })
	}
	for _, u := range started {
		r.spawn(func() { r.startUpstream(life, u) })
	}
	r.rebuild()
	return nil
}

// stopUpstream stops an upstream that left the configuration: its
// per-client sessions and its client close, and its calls in flight fail.
func (r *Router) stopUpstream(u *upstreamState) {
	if u.pool != nil {
		r.closePool(u)
	}
	if err := u.Client.Close(); err != nil {
		r.log.Warn("stopping a removed upstream", keyUpstream, u.Name, keyErr, err)
	}
	u.stop(fmt.Errorf("removed from the configuration"))
}

// closePool closes an upstream's per-client sessions.
func (r *Router) closePool(u *upstreamState) {
	u.pool.mu.Lock()
	u.pool.lru.Purge()
	retired := u.pool.retired
	u.pool.retired = nil
	u.pool.mu.Unlock()
	var wg sync.WaitGroup
	for _, hc := range retired {
		wg.Go(hc.close)
	}
	wg.Wait()
}
