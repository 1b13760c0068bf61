package pin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// LockVersion is the version of the lockfile format this package writes
// and reads.
//
// Version 2 knows tools and prompts by their upstream's own names;
// version 1 knew them by their exposed names, which change with the
// naming settings and other upstreams, and is refused.
const LockVersion = 2

// Lock is the lockfile: every reviewed definition, one entry each.
type Lock struct {
	Version int     `json:"version"`
	Entries []Entry `json:"entries"`
}

// Entry is one reviewed definition.
type Entry struct {
	Kind Kind `json:"kind"`
	// Name is the definition's Def.Name: for a tool or prompt, the
	// upstream's own name.
	Name     string `json:"name"`
	Upstream string `json:"upstream"`
	// Exposed is the name hosts knew a tool or prompt by when it was
	// pinned, for the reader of the file; it identifies nothing.
	Exposed string `json:"exposed,omitempty"`
	// SHA256 is the hex SHA-256 of Definition's canonical form.
	SHA256 string `json:"sha256"`
	// Approvals record each accepted change of the definition, oldest
	// first.
	Approvals []Approval `json:"approvals,omitempty"`
	// Definition is the upstream's own definition, in canonical form.
	Definition json.RawMessage `json:"definition"`
}

// Approval is one accepted change.
type Approval struct {
	By string    `json:"by"`
	At time.Time `json:"at"`
	// SHA256 is the hash approved; Previous the one it replaced ("" for
	// a definition new to the lock).
	SHA256   string `json:"sha256"`
	Previous string `json:"previous,omitempty"`
}

// ErrNoLockfile is wrapped by ReadLock when the file does not exist.
var ErrNoLockfile = errors.New("no lockfile")

// ReadLock reads and checks the lockfile at path.
func ReadLock(path string) (*Lock, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w (run mcp-gateway pin to write it)", path, ErrNoLockfile)
	}
	if err != nil {
		return nil, err
	}
	l, err := ParseLock(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// ParseLock decodes a lockfile and checks every entry: a known kind, a
// name, an upstream, a definition in canonical form (only the file's
// indentation aside) with a hash that matches it, and no entry twice.
// The file must be one I-JSON value (jsonrpc.CheckIJSON): a repeated
// member (two "entries", two "definition"s in an entry) is read as its
// last by encoding/json and may be read as its first by whoever reviews
// the file, so it is refused, as is data after the value.
func ParseLock(raw []byte) (*Lock, error) {
	if err := jsonrpc.CheckIJSON(raw); err != nil {
		return nil, fmt.Errorf("not a lockfile: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var l Lock
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("not a lockfile: %w", err)
	}
	switch {
	case l.Version == 1:
		return nil, fmt.Errorf("lockfile version 1 knows tools and prompts by their exposed names, which renames change: run mcp-gateway pin again to write version %d", LockVersion)
	case l.Version != LockVersion:
		return nil, fmt.Errorf("lockfile version %d, want %d", l.Version, LockVersion)
	}
	seen := map[key]bool{}
	for i, e := range l.Entries {
		if !slices.Contains(kindOrder, e.Kind) {
			return nil, fmt.Errorf("entries[%d]: unknown kind %q", i, e.Kind)
		}
		if e.Name == "" {
			return nil, fmt.Errorf("entries[%d]: no name", i)
		}
		if e.Upstream == "" {
			return nil, fmt.Errorf("entries[%d] (%s %q): no upstream", i, e.Kind, e.Name)
		}
		k := e.key()
		if seen[k] {
			return nil, fmt.Errorf("entries[%d]: %s %q of %s listed twice", i, e.Kind, e.Name, e.Upstream)
		}
		seen[k] = true
		c, err := Canonical(e.Definition)
		if err != nil {
			return nil, fmt.Errorf("entries[%d] (%s %q): %w", i, e.Kind, e.Name, err)
		}
		// The file indents the definition; what it holds must otherwise
		// be the canonical form, byte for byte, so that what a reviewer
		// reads is what was hashed.
		var compact bytes.Buffer
		if err := json.Compact(&compact, e.Definition); err != nil || !bytes.Equal(c, compact.Bytes()) {
			return nil, fmt.Errorf("entries[%d] (%s %q): definition is not in canonical form (keys sorted, strings without needless escapes; edited by hand? run mcp-gateway pin --approve %s)", i, e.Kind, e.Name, approveName(e))
		}
		e.Definition = c
		l.Entries[i].Definition = c
		sum := sha256.Sum256(c)
		h := hex.EncodeToString(sum[:])
		if h != e.SHA256 {
			return nil, fmt.Errorf("entries[%d] (%s %q): sha256 does not match the definition (edited by hand? run mcp-gateway pin --approve %s)", i, e.Kind, e.Name, approveName(e))
		}
	}
	return &l, nil
}

// Marshal renders the lock for review: entries sorted by kind, name and
// upstream, two-space indented, keys in a fixed order, so that a change
// of one definition is a diff of its own lines.
func (l *Lock) Marshal() ([]byte, error) {
	out := *l
	out.Version = LockVersion
	out.Entries = slices.Clone(l.Entries)
	slices.SortFunc(out.Entries, func(a, b Entry) int { return less(a.Kind, a.Name, a.Upstream, b.Kind, b.Name, b.Upstream) })
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// WriteLock writes the lock to path atomically: to a temporary file in
// the same folder, synced, then renamed over path, so that a reader (the
// gateway re-reading it) sees the old file or the new one, never a part.
func WriteLock(path string, l *Lock) error {
	raw, err := l.Marshal()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// approveName is a name of e that Approve accepts whatever it is
// exposed as now.
func approveName(e Entry) string {
	if q := qualified(e.Kind, e.Upstream, e.Name); q != "" {
		return q
	}
	return e.Name
}

// NewEntry is the lock entry of d, without approvals.
func NewEntry(d Def) (Entry, error) {
	c, err := Canonical(d.Raw)
	if err != nil {
		return Entry{}, fmt.Errorf("%s %q of %s: %w", d.Kind, d.Display(), d.Upstream, err)
	}
	h, _ := Hash(c)
	return Entry{Kind: d.Kind, Name: d.Name, Upstream: d.Upstream, Exposed: d.Exposed, SHA256: h, Definition: c}, nil
}

// Summary counts what Pin changed.
type Summary struct {
	Added, Changed, Removed, Unchanged int
}

// Pin makes the lock of the live definitions defs, keeping prev's
// approval history (prev may be nil). A definition that is new, or whose
// hash changed, is recorded as approved by by at at.
func Pin(prev *Lock, defs []Def, by string, at time.Time) (*Lock, Summary, error) {
	old := map[key]Entry{}
	if prev != nil {
		for _, e := range prev.Entries {
			old[e.key()] = e
		}
	}
	var sum Summary
	l := &Lock{Version: LockVersion}
	seen := map[key]bool{}
	for _, d := range defs {
		if seen[d.key()] {
			continue
		}
		seen[d.key()] = true
		e, err := NewEntry(d)
		if err != nil {
			return nil, sum, err
		}
		o, had := old[d.key()]
		e.Approvals = o.Approvals
		switch {
		case !had:
			sum.Added++
			e.Approvals = append(e.Approvals, Approval{By: by, At: at, SHA256: e.SHA256})
		case o.SHA256 != e.SHA256 || o.Upstream != e.Upstream:
			sum.Changed++
			e.Approvals = append(slices.Clone(e.Approvals), Approval{By: by, At: at, SHA256: e.SHA256, Previous: o.SHA256})
		default:
			sum.Unchanged++
		}
		l.Entries = append(l.Entries, e)
	}
	for k := range old {
		if !seen[k] {
			sum.Removed++
		}
	}
	return l, sum, nil
}

// ErrUnknownName is wrapped by Approve for a name no live definition has.
var ErrUnknownName = errors.New("no such tool, prompt, resource or upstream")

// Approve returns prev with the live definitions of names (every kind a
// name has) recorded as approved by by at at; other entries are kept as
// they are. A tool or prompt is named by its exposed name or as
// upstream/name (its upstream's own name); a resource by its URI, a
// template by its URI template, instructions by their upstream. A name
// that no definition in defs has is an error wrapping ErrUnknownName,
// and nothing is approved.
func Approve(prev *Lock, defs []Def, names []string, by string, at time.Time) (*Lock, []Entry, error) {
	byName := map[string][]Def{}
	for _, d := range defs {
		byName[d.Display()] = append(byName[d.Display()], d)
		if q := qualified(d.Kind, d.Upstream, d.Name); q != "" && q != d.Display() {
			byName[q] = append(byName[q], d)
		}
	}
	var unknown []string
	for _, n := range names {
		if len(byName[n]) == 0 {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return nil, nil, fmt.Errorf("%w: %q", ErrUnknownName, unknown)
	}
	l := &Lock{Version: LockVersion}
	idx := map[key]int{}
	if prev != nil {
		for _, e := range prev.Entries {
			idx[e.key()] = len(l.Entries)
			l.Entries = append(l.Entries, e)
		}
	}
	var approved []Entry
	for _, n := range slices.Compact(slices.Sorted(slices.Values(names))) {
		for _, d := range byName[n] {
			e, err := NewEntry(d)
			if err != nil {
				return nil, nil, err
			}
			i, had := idx[d.key()]
			if had {
				o := l.Entries[i]
				e.Approvals = slices.Clone(o.Approvals)
				if o.SHA256 == e.SHA256 && o.Upstream == e.Upstream {
					continue // already what is pinned
				}
				e.Approvals = append(e.Approvals, Approval{By: by, At: at, SHA256: e.SHA256, Previous: o.SHA256})
				l.Entries[i] = e
			} else {
				e.Approvals = []Approval{{By: by, At: at, SHA256: e.SHA256}}
				idx[d.key()] = len(l.Entries)
				l.Entries = append(l.Entries, e)
			}
			approved = append(approved, e)
		}
	}
	return l, approved, nil
}

// Removed returns the entries of lock that no definition in defs has.
func Removed(lock *Lock, defs []Def) []Entry {
	live := map[key]bool{}
	for _, d := range defs {
		live[d.key()] = true
	}
	var out []Entry
	for _, e := range lock.Entries {
		if !live[e.key()] {
			out = append(out, e)
		}
	}
	return out
}

// ID names the definition e is about (kind, upstream, name): the field
// of e in the approvals the replicas share.
func (e Entry) ID() string {
	b, _ := json.Marshal([]string{string(e.Kind), e.Upstream, e.Name}) // strings always marshal
	return string(b)
}

// Overlay returns file (nil: no lockfile) with each of shared in place
// of file's entry for the same definition, or added: the lock a replica
// applies under state.store redis, where pin --approve records in the
// shared store, not in the file.
func Overlay(file *Lock, shared []Entry) *Lock {
	l := &Lock{Version: LockVersion}
	idx := map[key]int{}
	if file != nil {
		for _, e := range file.Entries {
			idx[e.key()] = len(l.Entries)
			l.Entries = append(l.Entries, e)
		}
	}
	for _, e := range shared {
		if i, ok := idx[e.key()]; ok {
			l.Entries[i] = e
			continue
		}
		idx[e.key()] = len(l.Entries)
		l.Entries = append(l.Entries, e)
	}
	return l
}
