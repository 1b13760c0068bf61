package pin

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// Mode says what a definition that differs from the lock does.
type Mode string

const (
	// ModeEnforce quarantines it.
	ModeEnforce Mode = "enforce"
	// ModeWarn logs and counts it, and keeps it listed.
	ModeWarn Mode = "warn"
)

// Reason says why a definition is reported.
type Reason string

const (
	ReasonChanged    Reason = "changed"    // differs from the lock
	ReasonNew        Reason = "new"        // absent from the lock
	ReasonSuspicious Reason = "suspicious" // carries invisible or deceptive text
	// ReasonUnreadable: it has no canonical form (not I-JSON: a repeated
	// member, invalid UTF-8, a lone surrogate), so no hash can say it is
	// what was reviewed.
	ReasonUnreadable Reason = "unreadable"
)

// Options configure a Guard.
type Options struct {
	// Mode is enforce or warn; "" means warn.
	Mode Mode
	// QuarantineNew quarantines definitions absent from the lock (in
	// enforce mode); otherwise they are listed and not reported.
	QuarantineNew bool
	// QuarantineSuspicious quarantines suspicious definitions (in either
	// mode); otherwise they are flagged: logged and reported.
	QuarantineSuspicious bool
	// Logger receives a line per change, once per change; nil discards.
	Logger *slog.Logger
}

// Status is one reported definition.
type Status struct {
	Kind Kind `json:"kind"`
	// Name is the name hosts know it by (Def.Display).
	Name     string `json:"name"`
	Upstream string `json:"upstream"`
	Reason   Reason `json:"reason"`
	// Detail says what is suspicious (for any reason), or why a
	// definition has no canonical form (for reason unreadable).
	Detail string `json:"detail,omitempty"`
	// SHA256 is the hash of the definition listed now, which approving
	// it records; "" for reason unreadable (it has none).
	SHA256 string `json:"sha256,omitempty"`
	// Diff is the change from the locked definition, for reason changed.
	Diff string `json:"-"`
	// ReviewDiff is Diff with nothing cut, and Definition the live
	// definition whole (Reviewable), for whoever approves it from what
	// it is shown (the console); both "" when the definition is larger
	// than MaxReviewBytes (review it with pin --check) or unreadable.
	ReviewDiff, Definition string `json:"-"`
}

// MaxReviewBytes bounds the definitions a Status carries whole.
const MaxReviewBytes = 256 << 10

// Report is what the last Vet found.
type Report struct {
	// Quarantined are left out of every view.
	Quarantined []Status `json:"quarantined"`
	// Flagged are reported and still listed (warn mode, suspicious: flag).
	Flagged []Status `json:"flagged"`
}

// maxAbsentSeen bounds the reported definitions absent from a build
// that a Guard remembers.
const maxAbsentSeen = 1024

// Guard decides, at each catalog build, which definitions the catalog
// leaves out. It is safe for concurrent use.
type Guard struct {
	opts Options
	log  *slog.Logger
	// changes counts the changes seen (each reported once).
	changes atomic.Int64

	// mu guards the fields below.
	mu   sync.Mutex
	lock map[key]Entry // nil: no lockfile
	// seen is the hash last reported for each definition reported, so
	// that each change is logged and counted once, however often the
	// catalog is rebuilt.
	seen   map[key]string
	report Report
	// memo is what the last Vet computed of each definition's bytes: an
	// upstream lists the same bytes at every rebuild, so only what
	// changed is parsed again.
	memo map[string]digest
}

// digest is what Vet needs of a definition's bytes.
type digest struct {
	raw        string // the key, kept to carry it to the next memo
	hash       string // "" when the definition has no canonical form
	unreadable string // why it has none
	suspicious string
	// review is its reviewable form (Status.Definition), made the first
	// time it is reported; reviewed says it was made. reviewDiff is the
	// whole diff from the lock entry whose hash is reviewDiffOf.
	review, reviewDiff, reviewDiffOf string
	reviewed                         bool
}

// digestOf returns d's digest from the last Vet's memo, else computes
// it, and records it in next.
func (g *Guard) digestOf(raw []byte, next map[string]digest) digest {
	dg, ok := g.memo[string(raw)]
	if !ok {
		dg.raw = string(raw)
		var err error
		if dg.hash, err = Hash(raw); err != nil {
			dg.unreadable = err.Error()
		}
		dg.suspicious = Suspicious(raw)
	}
	next[dg.raw] = dg
	return dg
}

// NewGuard returns a guard over lock (nil: no lockfile: every
// definition is new).
func NewGuard(lock *Lock, opts Options) *Guard {
	if opts.Mode == "" {
		opts.Mode = ModeWarn
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Guard{opts: opts, log: log, seen: map[key]string{}}
	g.SetLock(lock)
	return g
}

// SetLock replaces the lock (a re-read lockfile); the next Vet applies
// it. Call the router's rebuild after it.
func (g *Guard) SetLock(lock *Lock) {
	var m map[key]Entry
	if lock != nil {
		m = make(map[key]Entry, len(lock.Entries))
		for _, e := range lock.Entries {
			m[e.key()] = e
		}
	}
	g.mu.Lock()
	g.lock = m
	g.mu.Unlock()
}

// Vet checks the definitions a catalog build is about to list and
// returns which to leave out (withheld[i] for defs[i]). A definition
// with no canonical form (Canonical) fails closed: no hash can say it is
// the reviewed one, so it is quarantined in enforce mode and flagged in
// warn mode (ReasonUnreadable).
func (g *Guard) Vet(defs []Def) (withheld []bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	withheld = make([]bool, len(defs))
	var rep Report
	// A definition absent from this build (its upstream restarting)
	// keeps what was reported of it, so that its return with the same
	// change is not a new change.
	seen := maps.Clone(g.seen)
	memo := make(map[string]digest, len(defs))
	for i, d := range defs {
		dg := g.digestOf(d.Raw, memo)
		st, hash, quarantine := g.check(d, &dg)
		memo[dg.raw] = dg // with what check made for review
		if st == nil {
			delete(seen, d.key())
			continue
		}
		withheld[i] = quarantine
		if quarantine {
			rep.Quarantined = append(rep.Quarantined, *st)
		} else {
			rep.Flagged = append(rep.Flagged, *st)
		}
		k := d.key()
		tag := string(st.Reason) + ":" + hash
		seen[k] = tag
		if g.seen[k] == tag {
			continue
		}
		g.changes.Add(1)
		attrs := []any{"kind", d.Kind, "name", d.Display(), "upstream", d.Upstream, "reason", st.Reason, "quarantined", quarantine}
		switch st.Reason {
		case ReasonChanged:
			g.log.Warn("definition differs from the lockfile", append(attrs, "diff", st.Diff, "detail", st.Detail)...)
		case ReasonNew:
			g.log.Warn("definition absent from the lockfile", append(attrs, "detail", st.Detail)...)
		case ReasonSuspicious:
			g.log.Warn("definition carries suspicious text", append(attrs, "detail", st.Detail)...)
		case ReasonUnreadable:
			g.log.Warn("definition has no canonical form", append(attrs, "detail", st.Detail)...)
		}
	}
	// A definition back to its pinned form (or approved) is forgotten:
	// its next change is reported again. So are absent ones past a
	// bound, so that an upstream listing ever new names cannot grow the
	// table.
	if len(seen) > len(defs)+maxAbsentSeen {
		present := make(map[key]bool, len(defs))
		for _, d := range defs {
			present[d.key()] = true
		}
		maps.DeleteFunc(seen, func(k key, _ string) bool { return !present[k] })
	}
	g.seen = seen
	g.memo = memo
	sortStatus(rep.Quarantined)
	sortStatus(rep.Flagged)
	g.report = rep
	return withheld
}

// check is what d is reported for (nil: nothing), the hash that report
// is about, and whether d is quarantined. A definition both changed (or
// new) and suspicious is reported for the change, with the suspicious
// text as detail, and quarantined if either says so.
func (g *Guard) check(d Def, dg *digest) (*Status, string, bool) {
	enforce := g.opts.Mode == ModeEnforce
	if dg.hash == "" {
		// Reported by the bytes themselves: each new spelling once.
		sum := sha256.Sum256([]byte(dg.raw))
		st := &Status{Kind: d.Kind, Name: d.Display(), Upstream: d.Upstream, Reason: ReasonUnreadable, Detail: dg.unreadable}
		return st, "raw:" + hex.EncodeToString(sum[:]), enforce || dg.suspicious != "" && g.opts.QuarantineSuspicious
	}
	st := &Status{Kind: d.Kind, Name: d.Display(), Upstream: d.Upstream, Detail: dg.suspicious, SHA256: dg.hash}
	quarantine := dg.suspicious != "" && g.opts.QuarantineSuspicious
	e, pinned := g.lock[d.key()]
	switch {
	case !pinned && g.opts.QuarantineNew:
		st.Reason = ReasonNew
		quarantine = quarantine || enforce
	case pinned && dg.hash != e.SHA256:
		st.Reason = ReasonChanged
		quarantine = quarantine || enforce
		if live, err := NewEntry(d); err == nil {
			st.Diff = Diff(e, live)
			if dg.reviewDiffOf != e.SHA256 {
				dg.reviewDiff, dg.reviewDiffOf = "", e.SHA256
				if len(live.Definition) <= MaxReviewBytes && len(e.Definition) <= MaxReviewBytes {
					dg.reviewDiff = FullDiff(e, live)
				}
			}
			st.ReviewDiff = dg.reviewDiff
		}
	case dg.suspicious != "":
		st.Reason = ReasonSuspicious
	default:
		return nil, "", false
	}
	if !dg.reviewed {
		dg.reviewed = true
		if len(d.Raw) <= MaxReviewBytes {
			if c, err := Canonical(d.Raw); err == nil {
				dg.review = Reviewable(c)
			}
		}
	}
	st.Definition = dg.review
	return st, dg.hash, quarantine
}

// Report returns what the last Vet found.
func (g *Guard) Report() Report {
	g.mu.Lock()
	defer g.mu.Unlock()
	return Report{Quarantined: slices.Clone(g.report.Quarantined), Flagged: slices.Clone(g.report.Flagged)}
}

// Changes is how many changes (and new or suspicious definitions) have
// been reported since the guard was made.
func (g *Guard) Changes() int64 { return g.changes.Load() }

func sortStatus(s []Status) {
	slices.SortFunc(s, func(a, b Status) int { return less(a.Kind, a.Name, a.Upstream, b.Kind, b.Name, b.Upstream) })
}
