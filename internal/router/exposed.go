package router

import (
	"bytes"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
)

// Found tools as native tools (search.expose_found, issue 16): in a view
// in search mode that exposes what it finds, the tools find_tools
// returns to a caller are added to that caller's own tools/list, after
// the gateway's three, so that its host asks consent for each tool by
// its own name and shows its annotations, and the model may call it
// directly. "Own" is a legacy session (another session, even of the same
// identity, does not see them), or a modern host's identity in its view
// (policy.Identity.ID: every request of it, on any connection, lists
// the same; without authentication every modern host of a view is the
// one anonymous identity). Each change of such a list is told to its
// owner only (Change.Session, Change.ForPrincipal).
//
// An exposed tool is listed only while the caller's view holds it: what
// is exposed is a set of exposed names, rendered from the view at each
// tools/list, so a tool the view hides is never listed (and is unknown
// to a direct call, as any hidden tool), and one that leaves the view
// (a reload, a catalog change) leaves the list, with list_changed. A
// directly called exposed tool is a tool of the view like any other: it
// takes the normal tools/call path.
//
// Memory is bounded: at most MaxExposed names per owner (the least
// recently found dropped first), at most MaxExposedCallers owners (the
// least recently active forgotten first), and an owner unused for
// ExposedIdle is forgotten. The lists live in this replica's memory:
// with replicas a host's exposed tools are those it found on the
// replica that answers its tools/list (find_tools and call_tool work on
// every replica).

// exposures are the exposed lists of every owner.
type exposures struct {
	mu sync.Mutex // guards the fields below
	// owners are by owner key (exposedKey); nil until the first use.
	owners *simplelru.LRU[string, *exposed]
}

// exposed is one owner's exposed tools.
type exposed struct {
	// view is the owner's view; session its legacy session's id, or ""
	// for a modern identity, principal.
	view, session, principal string
	// names are the exposed names, the least recently found first.
	names []string
	// used is when the owner last found or listed tools.
	used time.Time
}

// exposing reports whether the view adds what its callers find to their
// own tools/list.
func (v *view) exposing() bool { return v.search && v.rules.ExposeFound }

// exposedKey is the owner key of a caller: its legacy session, or its
// identity and view; "" for a legacy caller without a session, which
// has nowhere to keep a list.
func exposedKey(c *Caller) string {
	if c.Modern() {
		return "i\x00" + c.owner()
	}
	if c.Session == "" {
		return ""
	}
	return "s\x00" + c.Session
}

// exposedLimits returns the bounds in force.
func (r *Router) exposedLimits() (perOwner, owners int, idle time.Duration) {
	return orDefault(r.opts.MaxExposed, config.DefaultMaxExposed),
		orDefault(r.opts.MaxExposedCallers, config.DefaultMaxExposedCallers),
		orDefault(r.opts.ExposedIdle, config.DefaultExposedIdle)
}

// orDefault is v, or def when v is not positive.
func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

func (r *Router) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}

// ownerLocked returns the caller's live entry, or nil (create: a new one,
// which may push the least recently active owner out). r.exposed.mu
// must be held.
func (r *Router) ownerLocked(key string, create bool, now time.Time) *exposed {
	_, owners, idle := r.exposedLimits()
	x := &r.exposed
	if x.owners == nil {
		if !create {
			return nil
		}
		x.owners, _ = simplelru.NewLRU[string, *exposed](owners, nil) // a positive size never fails
	}
	e, ok := x.owners.Get(key)
	if ok && now.Sub(e.used) >= idle {
		x.owners.Remove(key)
		e, ok = nil, false
	}
	if !ok && create {
		e = &exposed{}
		x.owners.Add(key, e)
	}
	return e
}

// expose adds the tools find_tools found for c (best first) to c's own
// list, and tells c when its list changed. It reports whether c's list
// holds any of them now: not for a caller with no list of its own (a
// legacy caller without a session), nor when every name was skipped.
func (r *Router) expose(c *Caller, v *view, names []string) (kept bool) {
	key := exposedKey(c)
	if key == "" || len(names) == 0 {
		return false
	}
	perOwner, _, _ := r.exposedLimits()
	now := r.clock()
	r.exposed.mu.Lock()
	e := r.ownerLocked(key, true, now)
	e.view, e.session, e.used = c.View, c.Session, now
	if c.Modern() {
		e.session, e.principal = "", c.Principal
	}
	// The list (rendered in name order) changes when a name the view
	// holds joins it or leaves it; finding a listed tool again only
	// makes it the most recently found.
	changed := false
	// The best match last: it is the most recently found, kept longest.
	for _, name := range slices.Backward(names) {
		if isSearchTool(name) || v.tools.byName[name] == nil {
			continue // shadowed by the gateway's own, or not the view's
		}
		if i := slices.Index(e.names, name); i >= 0 {
			e.names = slices.Delete(e.names, i, i+1)
		} else {
			changed = true
		}
		e.names = append(e.names, name)
		kept = true
	}
	if over := len(e.names) - perOwner; over > 0 {
		// Only a name that joined pushes one out: changed is set.
		e.names = slices.Delete(e.names, 0, over)
	}
	ch := e.change()
	r.exposed.mu.Unlock()
	if changed && r.opts.OnChange != nil {
		r.opts.OnChange(ch)
	}
	return kept
}

// change is the notice of a change of the owner's list, for the owner
// only.
func (e *exposed) change() Change {
	ch := Change{Method: "notifications/tools/list_changed", View: e.view, Session: e.session}
	if e.session == "" {
		ch.ForPrincipal, ch.Principal = true, e.principal
	}
	return ch
}

// exposedTools is the caller's tools/list items in a view that exposes
// what it finds: the gateway's tools, then the caller's exposed tools.
func (r *Router) exposedTools(c *Caller, v *view) []byte {
	key := exposedKey(c)
	if key == "" {
		return []byte(searchToolsJSON)
	}
	now := r.clock()
	r.exposed.mu.Lock()
	defer r.exposed.mu.Unlock()
	e := r.ownerLocked(key, false, now)
	if e == nil || len(e.names) == 0 {
		return []byte(searchToolsJSON)
	}
	e.used = now
	out := []byte(searchToolsJSON[:len(searchToolsJSON)-1])
	return append(v.appendExposed(out, e.names, !c.Modern() && c.takesTasks()), ']')
}

// exposedEntry is the tool of that name as an exposed list shows it; nil
// when the view does not hold it or does not expose what it finds.
func (v *view) exposedEntry(name string) *entry {
	if v == nil || !v.exposing() {
		return nil
	}
	return v.tools.byName[name]
}

// appendExposed appends the named tools the view holds now to out, each
// preceded by a comma, in name order: finding a listed tool again
// changes nothing a host sees. asTasks renders them for a legacy host
// that takes tasks, as full mode lists them to it (toolsAsTasksJSON). A
// view that does not expose what it finds lists none.
func (v *view) appendExposed(out []byte, names []string, asTasks bool) []byte {
	if v == nil || !v.exposing() || len(names) == 0 {
		return out
	}
	entries := make([]*entry, 0, len(names))
	size := len(out)
	for _, name := range names {
		if e := v.tools.byName[name]; e != nil {
			entries = append(entries, e)
			size += 1 + len(e.def)
		}
	}
	slices.SortFunc(entries, func(a, b *entry) int { return strings.Compare(a.exposed, b.exposed) })
	out = slices.Grow(out, size-len(out))
	for _, e := range entries {
		def := e.def
		if asTasks {
			def, _ = e.asTask()
		}
		out = append(out, ',')
		out = append(out, def...)
	}
	return out
}

// rebuildExposed follows a catalog change in every exposed list: names
// the new view no longer has (neither listed nor down) are dropped, the
// lists of a view that no longer exposes what it finds (or no longer
// exists) are forgotten, owners unused for too long too, and each owner
// whose list changed (a tool left or came back, a definition changed)
// is told.
//
// What changed is worked out once per view, from its old and new tools;
// an owner costs a lookup per exposed name only where something did, so
// that a rebuild that changes nothing exposed walks the owners once.
func (r *Router) rebuildExposed(old, cat *catalog) {
	_, _, idle := r.exposedLimits()
	now := r.clock()
	var changes []Change
	diffs := map[string]*exposedDiff{}
	r.exposed.mu.Lock()
	if x := r.exposed.owners; x != nil {
		for _, key := range x.Keys() {
			e, _ := x.Peek(key)
			d := diffs[e.view]
			if d == nil {
				d = diffExposed(old.views[e.view], cat.views[e.view])
				diffs[e.view] = d
			}
			if len(d.differs) > 0 && slices.ContainsFunc(e.names, func(n string) bool { return d.differs[n] }) {
				changes = append(changes, e.change())
			}
			if nv := cat.views[e.view]; nv == nil || !nv.rules.ExposeFound || now.Sub(e.used) >= idle {
				x.Remove(key)
				continue
			}
			if len(d.gone) > 0 {
				e.names = slices.DeleteFunc(e.names, func(n string) bool { return d.gone[n] })
			}
		}
	}
	r.exposed.mu.Unlock()
	if r.opts.OnChange != nil {
		for _, ch := range changes {
			r.opts.OnChange(ch)
		}
	}
}

// exposedDiff is what a catalog change did to one view's tools, as
// exposed lists see them: differs are the names an exposed list shows
// differently now (joined, left, another definition), gone those the
// view no longer has at all (neither listed nor down).
type exposedDiff struct{ differs, gone map[string]bool }

func diffExposed(ov, nv *view) *exposedDiff {
	d := &exposedDiff{differs: map[string]bool{}, gone: map[string]bool{}}
	check := func(name string) {
		a, b := ov.exposedEntry(name), nv.exposedEntry(name)
		if (a == nil) != (b == nil) || (a != nil && !bytes.Equal(a.def, b.def)) {
			d.differs[name] = true
		}
		if nv == nil || (nv.tools.byName[name] == nil && nv.tools.down[name] == nil) {
			d.gone[name] = true
		}
	}
	for _, v := range []*view{ov, nv} {
		if v == nil {
			continue
		}
		for name := range v.tools.byName {
			check(name)
		}
		for name := range v.tools.down {
			check(name)
		}
	}
	return d
}

// dropExposed forgets a legacy session's exposed list (it ended).
func (r *Router) dropExposed(session string) {
	r.exposed.mu.Lock()
	defer r.exposed.mu.Unlock()
	if r.exposed.owners != nil {
		r.exposed.owners.Remove("s\x00" + session)
	}
}
