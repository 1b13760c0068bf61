package namespace

import (
	"flag"
	"fmt"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestSanitize(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		want      string
		wantValid bool
	}{
		{"empty", "", "", true},
		{"valid", "get_User-v2", "get_User-v2", true},
		{"dots", "admin.tools.list", "admin_tools_list", false},
		{"slash and space", "fs/read file", "fs_read_file", false},
		{"colon comma", "a:b,c", "a_b_c", false},
		{"one underscore per rune", "café", "caf_", false},
		{"cjk", "検索", "__", false},
		{"emoji", "run🚀", "run_", false},
		{"invalid utf8 bytes", "a\xff\xfeb", "a__b", false},
		{"control", "a\tb\x00c", "a_b_c", false},
		{"separator kept", "a__b", "a__b", true},
		{"invalid first", ".x", "_x", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, valid := sanitize(tt.in)
			if got != tt.want || valid != tt.wantValid {
				t.Errorf("sanitize(%q) = %q, %v; want %q, %v", tt.in, got, valid, tt.want, tt.wantValid)
			}
		})
	}
}

// TestHash pins the hash suffix. The values were checked against coreutils:
//
//	printf 'up\0name' | sha256sum | cut -c1-10 | xxd -r -p | base32 | tr A-Z a-z
func TestHash(t *testing.T) {
	tests := []struct {
		e    Entry
		n    int
		want string
	}{
		{Entry{"up", "name"}, 0, "dz4e44dq"},
		{Entry{"up", "name"}, 2, "vkzdiceb"},
	}
	for _, tt := range tests {
		if got := hash(tt.e, tt.n); got != tt.want {
			t.Errorf("hash(%v, %d) = %q, want %q", tt.e, tt.n, got, tt.want)
		}
	}
}

// goldenCase is one input whose exposed names are pinned in
// testdata/<name>.golden. Those names are a compatibility promise: a diff in
// them renames tools for users, so update them only on purpose.
type goldenCase struct {
	name    string
	comment string
	opts    *Options
	entries []Entry
}

func goldenCases() []goldenCase {
	long70 := strings.Repeat("x", 70)
	// The cut name of u/long70 with the default options, used as another
	// tool's literal name.
	cutLiteral := strings.Repeat("x", 52) + "_" + hash(Entry{"u", long70}, 0)
	return []goldenCase{
		{
			name:    "always_basic",
			comment: "every name is prefixed; catalog order is input order",
			entries: []Entry{
				{"everything", "echo"}, {"everything", "add"}, {"search", "search_web"}, {"search", "echo"},
			},
		},
		{
			name:    "always_sanitize",
			comment: "characters outside [A-Za-z0-9_-] become '_'; an empty original is still named",
			entries: []Entry{
				{"fs", "admin.tools.list"}, {"fs", "read file"}, {"fs", "a/b:c"}, {"fs", "café"},
				{"fs", "検索"}, {"fs", "bad\xffutf8"}, {"fs", ""}, {"fs", "getUser-v2"},
			},
		},
		{
			name:    "always_length",
			comment: "names longer than 64 are cut and end in _ and a hash of upstream and original",
			entries: []Entry{
				{"u", strings.Repeat("a", 61)}, // exactly 64 with u__
				{"u", strings.Repeat("a", 62)}, // 65: cut
				{"u", strings.Repeat("a", 62) + "b"},
				{"u", long70},
				{strings.Repeat("U", 32), strings.Repeat("n", 40)},
				{"u", strings.Repeat("é", 70)},
			},
		},
		{
			name:    "always_sanitize_collision",
			comment: "a_b needed no change and keeps its name; a.b and a/b get hashed names",
			entries: []Entry{{"u", "a.b"}, {"u", "a/b"}, {"u", "a_b"}, {"v", "a.b"}},
		},
		{
			name:    "always_separator_ambiguity",
			comment: "a+b__c and a__b+c both want a__b__c: the smaller (upstream, name) keeps it",
			entries: []Entry{{"a__b", "c"}, {"a", "b__c"}},
		},
		{
			name:    "always_cut_name_taken",
			comment: "a cut name equal to another tool's literal name: the literal one keeps it",
			entries: []Entry{{"u", long70}, {"u", cutLiteral}},
		},
		{
			name:    "always_hashed_name_taken",
			comment: "a.b loses a_b to the exact entry; its first hashed name is another tool's literal name, so it takes the second",
			entries: []Entry{{"u", "a.b"}, {"u", "a_b"}, {"u", "a_b_" + hash(Entry{"u", "a.b"}, 1)}},
		},
		{
			name:    "always_duplicates",
			comment: "a repeated (upstream, name) pair is kept once, at its first position",
			entries: []Entry{{"a", "x"}, {"b", "x"}, {"a", "x"}, {"a", "y"}},
		},
		{
			name:    "always_custom_separator_maxlen",
			comment: "separator - and a 32 byte limit",
			opts:    &Options{Separator: "-", MaxLen: 32},
			entries: []Entry{
				{"git", "status"}, {"git", "a-very-long-tool-name-that-needs-cutting"}, {"git-hub", "x"}, {"git", "hub-x"},
			},
		},
		{
			name:    "on_conflict_basic",
			comment: "only names that two upstreams share are prefixed",
			opts:    &Options{Mode: ModeOnConflict},
			entries: []Entry{{"a", "echo"}, {"a", "add"}, {"b", "echo"}, {"b", "search"}, {"c", "echo"}},
		},
		{
			name:    "on_conflict_sanitized_share",
			comment: "a.b and a_b of different upstreams both expose a_b, so both are prefixed",
			opts:    &Options{Mode: ModeOnConflict},
			entries: []Entry{{"a", "a.b"}, {"b", "a_b"}},
		},
		{
			name:    "on_conflict_bare_equals_prefixed",
			comment: "c's bare a__x equals a's prefixed name, so c is prefixed; that cascades to d",
			opts:    &Options{Mode: ModeOnConflict},
			entries: []Entry{{"a", "x"}, {"b", "x"}, {"c", "a__x"}, {"d", "c__a__x"}, {"d", "other"}},
		},
		{
			name:    "on_conflict_same_upstream",
			comment: "two originals of one upstream that sanitise alike stay bare; the exact one keeps the name",
			opts:    &Options{Mode: ModeOnConflict},
			entries: []Entry{{"u", "a.b"}, {"u", "a_b"}},
		},
		{
			name:    "on_conflict_empty_and_long",
			comment: "an empty original is prefixed; a long shared name is prefixed, then cut",
			opts:    &Options{Mode: ModeOnConflict},
			entries: []Entry{{"a", ""}, {"a", long70}, {"b", long70}, {"c", strings.Repeat("y", 70)}},
		},
	}
}

func TestBuildGolden(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			tab := Build(tc.entries, tc.opts)
			checkTable(t, tc.entries, tc.opts, tab)
			got := formatGolden(tc, tab)
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("exposed names changed; this renames users' tools (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGoldenFilesHaveCases(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.golden"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tc := range goldenCases() {
		names[tc.name+".golden"] = true
	}
	for _, f := range files {
		if !names[filepath.Base(f)] {
			t.Errorf("%s has no case in goldenCases", f)
		}
	}
}

// formatGolden renders a table as a header with the options, then one line
// per entry in catalog order: exposed, upstream, name, each Go-quoted and
// separated by tabs.
func formatGolden(tc goldenCase, tab *Table) string {
	var o Options
	if tc.opts != nil {
		o = *tc.opts
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", tc.comment)
	fmt.Fprintf(&b, "# options: separator=%q mode=%q maxlen=%d\n", o.Separator, o.Mode, o.MaxLen)
	for i := range tab.Len() {
		exposed, e := tab.At(i)
		fmt.Fprintf(&b, "%q\t%q\t%q\n", exposed, e.Upstream, e.Name)
	}
	return b.String()
}

// parseGolden reads the options and entries back from a golden file.
func parseGolden(data string) (*Options, []Entry, error) {
	var opts Options
	var entries []Entry
	for line := range strings.Lines(data) {
		line = strings.TrimSuffix(line, "\n")
		if rest, ok := strings.CutPrefix(line, "# options: "); ok {
			var mode string
			if _, err := fmt.Sscanf(rest, "separator=%q mode=%q maxlen=%d", &opts.Separator, &mode, &opts.MaxLen); err != nil {
				return nil, nil, fmt.Errorf("options line %q: %w", line, err)
			}
			opts.Mode = Mode(mode)
			continue
		}
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		fields := strings.Split(line, "\t")
		if len(fields) != 3 {
			return nil, nil, fmt.Errorf("line %q: want 3 fields", line)
		}
		var e Entry
		var err error
		if e.Upstream, err = strconv.Unquote(fields[1]); err != nil {
			return nil, nil, fmt.Errorf("line %q: %w", line, err)
		}
		if e.Name, err = strconv.Unquote(fields[2]); err != nil {
			return nil, nil, fmt.Errorf("line %q: %w", line, err)
		}
		entries = append(entries, e)
	}
	return &opts, entries, nil
}

func TestOptionsDefaults(t *testing.T) {
	entries := []Entry{{"a", "x"}, {"b", "x"}, {"a", strings.Repeat("y", 100)}}
	def := Build(entries, nil)
	tests := []struct {
		name string
		opts *Options
	}{
		{"zero", &Options{}},
		{"explicit", &Options{Separator: "__", Mode: ModeAlways, MaxLen: 64}},
		{"negative maxlen", &Options{MaxLen: -1}},
		{"unknown mode is always", &Options{Mode: "sometimes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(names(def), names(Build(entries, tt.opts))); diff != "" {
				t.Errorf("(-nil options +these options):\n%s", diff)
			}
		})
	}

	t.Run("maxlen below minimum", func(t *testing.T) {
		tab := Build(entries, &Options{MaxLen: 3})
		got, _ := tab.Exposed(Entry{"a", strings.Repeat("y", 100)})
		if len(got) != MinMaxLen {
			t.Errorf("exposed %q has length %d, want MinMaxLen %d", got, len(got), MinMaxLen)
		}
	})
	t.Run("invalid separator sanitised", func(t *testing.T) {
		tab := Build(entries, &Options{Separator: "."})
		if got, _ := tab.Exposed(Entry{"a", "x"}); got != "a_x" {
			t.Errorf("exposed = %q, want %q", got, "a_x")
		}
	})
}

func TestNilAndEmptyTable(t *testing.T) {
	for name, tab := range map[string]*Table{"nil": nil, "empty": Build(nil, nil)} {
		t.Run(name, func(t *testing.T) {
			if n := tab.Len(); n != 0 {
				t.Errorf("Len() = %d, want 0", n)
			}
			if e, ok := tab.Lookup("a__x"); ok {
				t.Errorf("Lookup found %v", e)
			}
			if i, ok := tab.Index("a__x"); ok {
				t.Errorf("Index found %d", i)
			}
			if s, ok := tab.Exposed(Entry{"a", "x"}); ok {
				t.Errorf("Exposed found %q", s)
			}
		})
	}
}

func TestLookupMisses(t *testing.T) {
	tab := Build([]Entry{{"a", "b__c"}, {"a", "x.y"}}, nil)
	for _, name := range []string{"", "a", "a__", "a__b", "b__c", "a__x.y", "A__x_y", "a__x_y "} {
		if e, ok := tab.Lookup(name); ok {
			t.Errorf("Lookup(%q) = %v, want not found", name, e)
		}
	}
	if _, ok := tab.Exposed(Entry{"a", "x_y"}); ok {
		t.Error("Exposed found an entry that was never added")
	}
}

// TestOnConflictFollowsOtherUpstreams documents the cost of ModeOnConflict:
// a's tool is renamed when b comes and goes.
func TestOnConflictFollowsOtherUpstreams(t *testing.T) {
	opts := &Options{Mode: ModeOnConflict}
	a := []Entry{{"a", "echo"}, {"a", "add"}}
	b := []Entry{{"b", "echo"}}

	alone := Build(a, opts)
	both := Build(append(a[:len(a):len(a)], b...), opts)
	want := map[string]string{"alone": "echo", "both": "a__echo"}
	got := map[string]string{}
	got["alone"], _ = alone.Exposed(a[0])
	got["both"], _ = both.Exposed(a[0])
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("a/echo (-want +got):\n%s", diff)
	}
	if s, _ := both.Exposed(a[1]); s != "add" {
		t.Errorf("a/add = %q, want bare %q", s, "add")
	}
}

// TestAlwaysIndependentOfOtherUpstreams checks that in ModeAlways an
// upstream's names do not change when other upstreams are missing or arrive
// in a different order. Upstream names here contain no '_', so no exposed
// name of one upstream can equal one of another's (the pathological case).
func TestAlwaysIndependentOfOtherUpstreams(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 300 {
		ups := randomUpstreams(rng, "abc-", 1+rng.IntN(5))
		byUp := map[string][]Entry{}
		var all []Entry
		for _, u := range ups {
			for range rng.IntN(8) {
				e := Entry{u, randomString(rng, "ab_.-/é", rng.IntN(40))}
				byUp[u] = append(byUp[u], e)
				all = append(all, e)
			}
		}
		opts := &Options{MaxLen: []int{0, 16, 24}[rng.IntN(3)]}
		full := Build(all, opts)

		// A random subset of upstreams, in a random order.
		var sub []Entry
		n := rng.IntN(len(ups) + 1)
		for _, p := range rng.Perm(len(ups))[:n] {
			sub = append(sub, byUp[ups[p]]...)
		}
		part := Build(sub, opts)
		for i := range part.Len() {
			gotName, e := part.At(i)
			wantName, _ := full.Exposed(e)
			if gotName != wantName {
				t.Fatalf("iteration %d: %v is %q with all upstreams but %q with %d of them", iter, e, wantName, gotName, n)
			}
		}
	}
}

// TestOrderIndependence checks that names depend on the set of entries, not
// on their order, in both modes and with inputs made to collide.
func TestOrderIndependence(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := range 500 {
		entries, opts := randomInput(rng)
		want := exposedByEntry(Build(entries, opts))
		shuffled := append([]Entry(nil), entries...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if diff := cmp.Diff(want, exposedByEntry(Build(shuffled, opts))); diff != "" {
			t.Fatalf("iteration %d, options %+v: names depend on input order (-original +shuffled):\n%s", iter, *opts, diff)
		}
	}
}

func TestRandomProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 1000 {
		entries, opts := randomInput(rng)
		checkTable(t, entries, opts, Build(entries, opts))
		if t.Failed() {
			t.Fatalf("input %q, options %+v", entries, *opts)
		}
	}
}

// TestRandomInputsCollide makes sure randomInput exercises the collision
// paths that TestRandomProperties and TestOrderIndependence rely on.
func TestRandomInputsCollide(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var hashed, prefixedInOnConflict, bareInOnConflict int
	for range 1000 {
		entries, opts := randomInput(rng)
		tab := Build(entries, opts)
		for i := range tab.Len() {
			exposed, e := tab.At(i)
			if strings.HasSuffix(exposed, "_"+hash(e, 0)) || strings.HasSuffix(exposed, "_"+hash(e, 1)) {
				hashed++
			}
			if opts.Mode == ModeOnConflict {
				if strings.HasPrefix(exposed, e.Upstream+opts.Separator) {
					prefixedInOnConflict++
				} else {
					bareInOnConflict++
				}
			}
		}
	}
	for name, n := range map[string]int{"hashed": hashed, "prefixed in on_conflict": prefixedInOnConflict, "bare in on_conflict": bareInOnConflict} {
		if n < 100 {
			t.Errorf("only %d %s names in 1000 random tables", n, name)
		}
	}
}

func TestLookupAllocs(t *testing.T) {
	entries := make([]Entry, 0, 100)
	for i := range 100 {
		entries = append(entries, Entry{"up" + strconv.Itoa(i%5), "tool." + strconv.Itoa(i)})
	}
	tab := Build(entries, nil)
	// Build the keys outside the measured functions.
	exposed, e := tab.At(42)
	missing := exposed + "x"
	var sink int
	checks := map[string]func(){
		"Lookup hit":  func() { got, _ := tab.Lookup(exposed); sink += len(got.Name) },
		"Lookup miss": func() { got, _ := tab.Lookup(missing); sink += len(got.Name) },
		"Index":       func() { i, _ := tab.Index(exposed); sink += i },
		"Exposed":     func() { s, _ := tab.Exposed(e); sink += len(s) },
	}
	for name, f := range checks {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
	if sink == 0 {
		t.Error("lookups found nothing")
	}
}

func TestConcurrentUse(t *testing.T) {
	entries, opts := randomInput(rand.New(rand.NewPCG(7, 8)))
	tab := Build(entries, opts)
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range tab.Len() {
				exposed, e := tab.At(i)
				if got, ok := tab.Lookup(exposed); !ok || got != e {
					t.Errorf("Lookup(%q) = %v, %v", exposed, got, ok)
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
}

// TestNoInternalImports keeps the package at the bottom of the package map
// (DESIGN.md section 5: namespace imports nothing internal).
func TestNoInternalImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/mcp-gateway/mcp-gateway/") {
				t.Errorf("%s imports %s", f, path)
			}
		}
	}
}

func FuzzBuild(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.golden"))
	if err != nil {
		f.Fatal(err)
	}
	if len(files) == 0 {
		f.Fatal("no golden files to seed from")
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		opts, entries, err := parseGolden(string(data))
		if err != nil {
			f.Fatalf("%s: %v", file, err)
		}
		f.Add(encodeEntries(entries), opts.Separator, opts.Mode == ModeOnConflict, opts.MaxLen)
	}
	f.Fuzz(func(t *testing.T, spec, sep string, onConflict bool, maxLen int) {
		opts := &Options{Separator: sep, MaxLen: maxLen}
		if onConflict {
			opts.Mode = ModeOnConflict
		}
		entries := decodeEntries(spec)
		checkTable(t, entries, opts, Build(entries, opts))
	})
}

// encodeEntries and decodeEntries turn entries into one fuzzable string:
// one entry per line, upstream and name separated by a tab.
func encodeEntries(entries []Entry) string {
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(e.Upstream + "\t" + e.Name + "\n")
	}
	return b.String()
}

func decodeEntries(spec string) []Entry {
	var entries []Entry
	for line := range strings.Lines(spec) {
		line = strings.TrimSuffix(line, "\n")
		up, name, ok := strings.Cut(line, "\t")
		if !ok {
			up, name = "u", line
		}
		entries = append(entries, Entry{up, name})
	}
	return entries
}

func BenchmarkLookup(b *testing.B) {
	entries := make([]Entry, 0, 1000)
	for i := range 1000 {
		entries = append(entries, Entry{"upstream" + strconv.Itoa(i%10), "some_tool_name_" + strconv.Itoa(i)})
	}
	tab := Build(entries, nil)
	exposed := make([]string, tab.Len())
	for i := range exposed {
		exposed[i], _ = tab.At(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if _, ok := tab.Lookup(exposed[i%len(exposed)]); !ok {
			b.Fatal("not found")
		}
		i++
	}
}

func BenchmarkBuild(b *testing.B) {
	entries := make([]Entry, 0, 1000)
	for i := range 1000 {
		entries = append(entries, Entry{"upstream" + strconv.Itoa(i%10), "some.tool.name." + strconv.Itoa(i%200)})
	}
	b.ReportAllocs()
	for b.Loop() {
		Build(entries, &Options{Mode: ModeOnConflict})
	}
}

// checkTable asserts the properties every table has: one entry per distinct
// input pair in input order, unique valid names within the length limit, and
// lookups in both directions that agree with At.
func checkTable(t *testing.T, entries []Entry, opts *Options, tab *Table) {
	t.Helper()
	var distinct []Entry
	seen := map[Entry]bool{}
	for _, e := range entries {
		if !seen[e] {
			seen[e] = true
			distinct = append(distinct, e)
		}
	}
	if tab.Len() != len(distinct) {
		t.Fatalf("Len() = %d, want %d distinct entries", tab.Len(), len(distinct))
	}
	maxLen := normalize(opts).maxLen
	names := map[string]int{}
	for i := range tab.Len() {
		exposed, e := tab.At(i)
		if e != distinct[i] {
			t.Errorf("At(%d) entry = %v, want %v (input order)", i, e, distinct[i])
		}
		if exposed == "" || len(exposed) > maxLen {
			t.Errorf("At(%d) = %q: length %d not in [1, %d]", i, exposed, len(exposed), maxLen)
		}
		if s, _ := sanitize(exposed); s != exposed {
			t.Errorf("At(%d) = %q has characters outside [A-Za-z0-9_-]", i, exposed)
		}
		if j, dup := names[exposed]; dup {
			_, other := tab.At(j)
			t.Errorf("%q names both %v and %v", exposed, other, e)
		}
		names[exposed] = i
		if got, ok := tab.Lookup(exposed); !ok || got != e {
			t.Errorf("Lookup(%q) = %v, %v; want %v", exposed, got, ok, e)
		}
		if got, ok := tab.Index(exposed); !ok || got != i {
			t.Errorf("Index(%q) = %d, %v; want %d", exposed, got, ok, i)
		}
		if got, ok := tab.Exposed(e); !ok || got != exposed {
			t.Errorf("Exposed(%v) = %q, %v; want %q", e, got, ok, exposed)
		}
	}
}

// randomInput makes small alphabets and short names so that sanitising,
// separator ambiguity, cutting and on_conflict cascades all happen often.
func randomInput(rng *rand.Rand) ([]Entry, *Options) {
	opts := &Options{
		Separator: []string{"", "_", "-", "x", "__"}[rng.IntN(5)],
		Mode:      []Mode{ModeAlways, ModeOnConflict}[rng.IntN(2)],
		MaxLen:    []int{0, 16, 18}[rng.IntN(3)],
	}
	if opts.Separator == "" {
		opts.Separator = DefaultSeparator
	}
	ups := randomUpstreams(rng, "ax_-", 1+rng.IntN(4))
	var entries []Entry
	for range rng.IntN(30) {
		u := ups[rng.IntN(len(ups))]
		var name string
		switch rng.IntN(4) {
		case 0: // another upstream's prefixed form of something
			name = ups[rng.IntN(len(ups))] + opts.Separator + randomString(rng, "ax._", rng.IntN(3))
		case 1: // long enough to cut
			name = randomString(rng, "ax", 14+rng.IntN(4))
		default:
			name = randomString(rng, "ax._é", rng.IntN(4))
		}
		entries = append(entries, Entry{u, name})
	}
	return entries, opts
}

func randomUpstreams(rng *rand.Rand, alphabet string, n int) []string {
	seen := map[string]bool{}
	var ups []string
	for len(ups) < n {
		u := randomString(rng, alphabet, 1+rng.IntN(3))
		if !seen[u] {
			seen[u] = true
			ups = append(ups, u)
		}
	}
	return ups
}

func randomString(rng *rand.Rand, alphabet string, n int) string {
	runes := []rune(alphabet)
	var b strings.Builder
	for range n {
		b.WriteRune(runes[rng.IntN(len(runes))])
	}
	return b.String()
}

func names(tab *Table) []string {
	var out []string
	for i := range tab.Len() {
		s, _ := tab.At(i)
		out = append(out, s)
	}
	return out
}

func exposedByEntry(tab *Table) map[Entry]string {
	m := map[Entry]string{}
	for i := range tab.Len() {
		s, e := tab.At(i)
		m[e] = s
	}
	return m
}
