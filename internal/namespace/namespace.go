// Package namespace maps the names the gateway exposes to hosts to the
// upstream that owns each tool or prompt and the name that upstream uses for
// it, and back.
//
// # Exposed names
//
// An exposed name is <upstream><separator><original> ("prefixed") or, in
// [ModeOnConflict], the original alone ("bare") when no other upstream uses
// it. Every exposed name
//
//   - contains only [A-Za-z0-9_-]: any other character of the upstream or
//     original name (dot, slash, space, non-ASCII rune, invalid UTF-8 byte) is
//     replaced by one '_'. The MCP spec also allows '.' in tool names
//     (2025-11-25 server/tools.mdx, "Tool Names"), but several hosts accept
//     only [A-Za-z0-9_-]{1,64} for function names, and the narrower set is
//     also safe in the Mcp-Name header of the 2026-07-28 transport;
//   - is at most [Options.MaxLen] bytes long (default 64). A longer name is
//     cut and ends in '_' plus a hash: the first 8 characters of the lowercase
//     base32 encoding of sha256(upstream + "\x00" + original). The hash makes
//     cut names unique and identical across restarts;
//   - is unique within its [Table].
//
// Names are a compatibility promise: the same input gives the same names in
// every process and every release, so a host's saved tool choices survive
// a gateway restart or upgrade.
//
// # Collisions
//
// Two entries may still want the same name: "a.b" and "a_b" of one upstream
// both sanitise to "a_b"; with the separator "__", upstream "a" with tool
// "b__c" and upstream "a__b" with tool "c" both become "a__b__c"; a cut name
// can equal another tool's literal name. Build resolves these the same way
// every time, independent of input order and of map iteration order:
//
//  1. Among the entries that want one name, the one whose name needed no
//     change (no character replaced, not cut) keeps it; ties go to the
//     smallest (upstream, original) pair in byte order.
//  2. Every other entry gets its wanted name, cut if needed, plus '_' and
//     the same kind of hash over upstream + "\x00" + original + "\x00" + n
//     (n in decimal) for n = 1, 2, ..., taking the first n whose result no
//     other entry holds. These entries are handled in (upstream, original)
//     byte order.
//
// Such names depend on which other entries are present, but only in these
// pathological cases.
//
// # Prefix modes
//
// In [ModeAlways] (the default) every name is prefixed, and an entry's name
// depends only on its own upstream and original name (outside the collisions
// above): an upstream that is down or comes back never renames another
// upstream's tools.
//
// In [ModeOnConflict] names start bare and an entry is prefixed when
//
//   - another upstream has an entry with the same original, compared after
//     sanitising ("a.b" and "a_b" count as the same): all of them are
//     prefixed, so none of them silently wins; or
//   - its bare name equals the prefixed name of a prefixed entry: prefixed
//     names win over bare ones, so the entry is prefixed too, which can
//     cascade; or
//   - its original name is empty, which is not a valid tool name.
//
// Bare entries of one upstream that sanitise to the same name stay bare and
// are resolved as collisions. The cost of this mode: an entry's exposed name
// depends on the other upstreams' catalogs. When an upstream starts, stops or
// adds a tool, names of other upstreams may change from bare to prefixed or
// back, and a host holding the old name gets "unknown tool" until it lists
// tools again.
//
// # Lookups
//
// [Table.Lookup] is a single map lookup without allocations, so it can run
// on every tools/call. Exposed names are never split on the separator to
// find their parts: originals may contain the separator themselves.
package namespace

import (
	"cmp"
	"crypto/sha256"
	"slices"
	"strconv"
	"strings"
)

// Mode says which exposed names carry the upstream prefix.
type Mode string

const (
	// ModeAlways prefixes every name with its upstream. It is the default.
	ModeAlways Mode = "always"
	// ModeOnConflict prefixes only names that collide (see the package
	// documentation).
	ModeOnConflict Mode = "on_conflict"
)

const (
	// DefaultSeparator goes between the upstream and the original name.
	DefaultSeparator = "__"
	// DefaultMaxLen is the default limit on the length of an exposed name.
	DefaultMaxLen = 64
	// MinMaxLen is the smallest limit Build honours: it leaves room for the
	// 9-byte hash suffix and a few characters of the name.
	MinMaxLen = 16
)

// hashLen is the number of base32 characters of the hash suffix; with the
// '_' before it, a suffix is hashLen+1 bytes.
const hashLen = 8

// Options configure how names are exposed. A nil *Options means the defaults.
// The config package validates the user's values; Build still accepts any
// value and normalises it as documented, so it never fails.
type Options struct {
	// Separator goes between the upstream and the original name. Empty
	// means DefaultSeparator ("__"). Characters outside [A-Za-z0-9_-] are
	// replaced by '_'.
	Separator string
	// Mode decides which names are prefixed. Empty, or any value other than
	// ModeOnConflict, means ModeAlways, the mode that never renames one
	// upstream's tools because of another.
	Mode Mode
	// MaxLen is the maximum length of an exposed name in bytes. Zero or
	// negative means DefaultMaxLen (64); values below MinMaxLen mean
	// MinMaxLen.
	MaxLen int
}

// Entry is a tool or prompt as its upstream names it.
type Entry struct {
	// Upstream is the configured name of the upstream server.
	Upstream string
	// Name is the tool's or prompt's name on that upstream.
	Name string
}

// Table maps exposed names to entries and back. Build it with [Build]; it is
// immutable afterwards and safe for concurrent use. A nil *Table is an empty
// table.
type Table struct {
	exposed []string // catalog order
	entries []Entry  // catalog order, parallel to exposed
	index   map[string]int
	byEntry map[Entry]int
}

// Build assigns an exposed name to every entry. entries are in catalog order
// (upstream order, then each upstream's own order); the table keeps that
// order. When the same (Upstream, Name) pair occurs more than once, the first
// occurrence is kept and later ones are dropped. opts may be nil.
//
// Build runs in O(n log n) time for n entries. It does not keep or modify
// entries.
func Build(entries []Entry, opts *Options) *Table {
	o := normalize(opts)

	items := make([]item, 0, len(entries))
	byEntry := make(map[Entry]int, len(entries))
	for _, e := range entries {
		if _, dup := byEntry[e]; dup {
			continue
		}
		byEntry[e] = len(items)
		items = append(items, newItem(e, o))
	}

	if o.mode == ModeOnConflict {
		resolvePrefixes(items)
	}

	// Each entry wants one name: its long form, cut and hashed when too long.
	wanted := make(map[string][]int, len(items))
	for i := range items {
		it := &items[i]
		long := it.long()
		if len(long) <= o.maxLen {
			it.want = long
			it.exact = it.exactName && (!it.prefixed || it.exactUpstream)
		} else {
			it.want = withSuffix(long, hash(it.Entry, 0), o.maxLen)
		}
		wanted[it.want] = append(wanted[it.want], i)
	}

	// Settle collisions: one winner per wanted name, the rest get hashed
	// names. Losers are collected from map iteration and then sorted, so the
	// result does not depend on map or input order.
	var losers []int
	for name, group := range wanted {
		if len(group) == 1 {
			items[group[0]].exposed = name
			continue
		}
		slices.SortFunc(group, func(a, b int) int { return preferred(&items[a], &items[b]) })
		items[group[0]].exposed = name
		losers = append(losers, group[1:]...)
	}
	slices.SortFunc(losers, func(a, b int) int { return byOriginal(&items[a], &items[b]) })
	for _, i := range losers {
		it := &items[i]
		long := it.long()
		for n := 1; ; n++ {
			name := withSuffix(long, hash(it.Entry, n), o.maxLen)
			if _, taken := wanted[name]; !taken {
				// Record it so later losers avoid it too.
				wanted[name] = nil
				it.exposed = name
				break
			}
		}
	}

	t := &Table{
		exposed: make([]string, len(items)),
		entries: make([]Entry, len(items)),
		index:   make(map[string]int, len(items)),
		byEntry: byEntry,
	}
	for i := range items {
		t.exposed[i] = items[i].exposed
		t.entries[i] = items[i].Entry
		t.index[items[i].exposed] = i
	}
	return t
}

// Len reports the number of entries in the table.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return len(t.entries)
}

// At returns the exposed name and the entry at catalog position i. It panics
// if i is not in [0, Len()), like a slice index.
func (t *Table) At(i int) (exposed string, e Entry) {
	return t.exposed[i], t.entries[i]
}

// Lookup returns the entry behind an exposed name. It does not allocate.
func (t *Table) Lookup(exposed string) (Entry, bool) {
	if t == nil {
		return Entry{}, false
	}
	i, ok := t.index[exposed]
	if !ok {
		return Entry{}, false
	}
	return t.entries[i], true
}

// Index returns the catalog position of an exposed name, for callers that
// keep per-entry data (such as tool definitions) in a slice parallel to the
// table. It does not allocate.
func (t *Table) Index(exposed string) (int, bool) {
	if t == nil {
		return 0, false
	}
	i, ok := t.index[exposed]
	return i, ok
}

// Exposed returns the exposed name of an entry. It does not allocate.
func (t *Table) Exposed(e Entry) (string, bool) {
	if t == nil {
		return "", false
	}
	i, ok := t.byEntry[e]
	if !ok {
		return "", false
	}
	return t.exposed[i], true
}

// options are Options after defaults and normalisation.
type options struct {
	sep    string
	mode   Mode
	maxLen int
}

func normalize(opts *Options) options {
	o := options{sep: DefaultSeparator, mode: ModeAlways, maxLen: DefaultMaxLen}
	if opts == nil {
		return o
	}
	if opts.Separator != "" {
		o.sep, _ = sanitize(opts.Separator)
	}
	if opts.Mode == ModeOnConflict {
		o.mode = ModeOnConflict
	}
	switch {
	case opts.MaxLen <= 0:
	case opts.MaxLen < MinMaxLen:
		o.maxLen = MinMaxLen
	default:
		o.maxLen = opts.MaxLen
	}
	return o
}

// item is the working state of one entry during Build.
type item struct {
	Entry
	bare          string // sanitised original name
	full          string // sanitised upstream + separator + bare
	exactName     bool   // sanitising left Name unchanged
	exactUpstream bool   // sanitising left Upstream unchanged
	prefixed      bool

	want    string // the name the entry asks for
	exact   bool   // want is the entry's names, unchanged and uncut
	exposed string // the name it got
}

func newItem(e Entry, o options) item {
	bare, exactName := sanitize(e.Name)
	up, exactUp := sanitize(e.Upstream)
	return item{
		Entry:         e,
		bare:          bare,
		full:          up + o.sep + bare,
		exactName:     exactName,
		exactUpstream: exactUp,
		// An empty tool name is invalid, so an empty original is always
		// prefixed; the separator is never empty, so full is not either.
		prefixed: o.mode == ModeAlways || bare == "",
	}
}

// long is the uncut name the entry wants.
func (it *item) long() string {
	if it.prefixed {
		return it.full
	}
	return it.bare
}

// resolvePrefixes decides which entries are prefixed in ModeOnConflict. The
// result is a reachability closure and so does not depend on the order in
// which entries or map keys are visited:
//   - roots: entries with an empty name, and every bare name shared by
//     entries of two or more upstreams (all of those entries);
//   - when an entry is prefixed, every still-bare entry whose bare name
//     equals the entry's prefixed name is prefixed as well.
func resolvePrefixes(items []item) {
	byBare := make(map[string][]int, len(items))
	for i := range items {
		byBare[items[i].bare] = append(byBare[items[i].bare], i)
	}

	var queue []int
	done := make(map[string]bool)
	prefixAll := func(bare string) {
		if done[bare] {
			return
		}
		done[bare] = true
		for _, i := range byBare[bare] {
			if !items[i].prefixed {
				items[i].prefixed = true
				queue = append(queue, i)
			}
		}
	}

	for i := range items {
		if items[i].prefixed {
			queue = append(queue, i)
		}
	}
	for bare, group := range byBare {
		for _, i := range group[1:] {
			if items[i].Upstream != items[group[0]].Upstream {
				prefixAll(bare)
				break
			}
		}
	}
	for len(queue) > 0 {
		i := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		prefixAll(items[i].full)
	}
}

// preferred orders the entries that want the same name: the first keeps it.
func preferred(a, b *item) int {
	if a.exact != b.exact {
		if a.exact {
			return -1
		}
		return 1
	}
	return byOriginal(a, b)
}

func byOriginal(a, b *item) int {
	return cmp.Or(strings.Compare(a.Upstream, b.Upstream), strings.Compare(a.Name, b.Name))
}

// withSuffix returns long + "_" + h, cutting long so that the result fits in
// maxLen bytes. long is ASCII (sanitised), so cutting at a byte offset is
// safe.
func withSuffix(long, h string, maxLen int) string {
	if keep := maxLen - len(h) - 1; len(long) > keep {
		long = long[:keep]
	}
	return long + "_" + h
}

// hash returns the suffix hash of e: the first hashLen characters of the
// base32 of sha256(upstream NUL name), with NUL and the decimal n appended to
// the input when n > 0. Changing it renames tools: it is part of the
// compatibility promise.
func hash(e Entry, n int) string {
	h := sha256.New()
	h.Write([]byte(e.Upstream))
	h.Write([]byte{0})
	h.Write([]byte(e.Name))
	if n > 0 {
		h.Write([]byte{0})
		h.Write(strconv.AppendInt(nil, int64(n), 10))
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return base32Lower(sum[:5])
}

// base32Lower encodes 5 bytes as 8 characters of base32 (RFC 4648) with a
// lowercase alphabet: exactly hashLen characters, no padding.
func base32Lower(b []byte) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	var v uint64
	for _, c := range b[:5] {
		v = v<<8 | uint64(c)
	}
	var out [hashLen]byte
	for i := hashLen - 1; i >= 0; i-- {
		out[i] = alphabet[v&31]
		v >>= 5
	}
	return string(out[:])
}

// sanitize replaces every rune outside [A-Za-z0-9_-] by '_'; each byte of
// invalid UTF-8 counts as one rune. It reports whether s was already valid,
// and then returns s itself without allocating.
func sanitize(s string) (string, bool) {
	i := 0
	for i < len(s) && validByte(s[i]) {
		i++
	}
	if i == len(s) {
		return s, true
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for _, r := range s[i:] {
		if r < 0x80 && validByte(byte(r)) {
			b.WriteByte(byte(r))
		} else {
			b.WriteByte('_')
		}
	}
	return b.String(), false
}

func validByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}
