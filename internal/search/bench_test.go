package search

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// The benchmark catalog: the real tools of testdata/catalogs plus the
// synthetic tools of testdata/synthetic.txt, 500 in all, and the queries
// of testdata/queries.json, each labelled with every tool that answers
// it. See docs/context.md.

// benchTool is one tool of the benchmark catalog.
type benchTool struct {
	doc    Doc
	intent string // the generator's label, for synthetic tools
	def    json.RawMessage
}

// catalogFile is the form capture.mjs writes.
type catalogFile struct {
	Server string            `json:"server"`
	Tools  []json.RawMessage `json:"tools"`
}

type toolDef struct {
	Name        string `json:"name"`
	Title       string `json:"title"`
	Description string `json:"description"`
	InputSchema struct {
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
	} `json:"inputSchema"`
}

// loadRealTools reads every catalog under testdata/catalogs, in file name
// order, naming each tool <server>__<name> as the gateway exposes it.
func loadRealTools(t testing.TB) []benchTool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "catalogs", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no catalogs: %v", err)
	}
	sort.Strings(files)
	var out []benchTool
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cf catalogFile
		if err := json.Unmarshal(data, &cf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, raw := range cf.Tools {
			var td toolDef
			if err := json.Unmarshal(raw, &td); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			d := Doc{Name: cf.Server + "__" + td.Name, Upstream: cf.Server, Title: td.Title, Description: td.Description}
			names := make([]string, 0, len(td.InputSchema.Properties))
			for n := range td.InputSchema.Properties {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				d.Params = append(d.Params, Param{Name: n, Description: td.InputSchema.Properties[n].Description})
			}
			out = append(out, benchTool{doc: d, def: exposedDef(t, raw, d.Name)})
		}
	}
	return out
}

// exposedDef is raw with its name replaced by the exposed one.
func exposedDef(t testing.TB, raw json.RawMessage, name string) json.RawMessage {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["name"] = name
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// synthTools reads testdata/synthetic.txt: each tool line yields one tool
// per upstream of its domain, labelled with the intent domain/tool.
func synthTools(t testing.TB) []benchTool {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "synthetic.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type upstream struct{ name, product string }
	var (
		domain string
		ups    []upstream
		out    []benchTool
	)
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if rest, ok := strings.CutPrefix(text, "domain "); ok {
			domain, rest, _ = strings.Cut(rest, " ")
			ups = nil
			for _, u := range strings.Split(rest, ";") {
				n, p, ok := strings.Cut(strings.TrimSpace(u), "=")
				if !ok {
					t.Fatalf("synthetic.txt:%d: upstream %q has no product", line, u)
				}
				ups = append(ups, upstream{n, p})
			}
			continue
		}
		parts := strings.Split(text, "|")
		if len(parts) != 3 || domain == "" {
			t.Fatalf("synthetic.txt:%d: want name | description | args", line)
		}
		name := strings.TrimSpace(parts[0])
		var params []Param
		for _, a := range strings.Split(parts[2], ";") {
			if a = strings.TrimSpace(a); a == "" {
				continue
			}
			n, d, _ := strings.Cut(a, ":")
			params = append(params, Param{Name: strings.TrimSpace(n), Description: strings.TrimSpace(d)})
		}
		for _, u := range ups {
			d := Doc{
				Name:        u.name + "__" + name,
				Upstream:    u.name,
				Description: strings.ReplaceAll(strings.TrimSpace(parts[1]), "{V}", u.product),
				Params:      params,
			}
			out = append(out, benchTool{doc: d, intent: domain + "/" + name, def: synthDef(t, d)})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// synthDef is the tools/list definition of a synthetic tool: every
// argument a string.
func synthDef(t testing.TB, d Doc) json.RawMessage {
	props := map[string]any{}
	for _, p := range d.Params {
		props[p.Name] = map[string]string{"type": "string", "description": p.Description}
	}
	out, err := json.Marshal(map[string]any{
		"name":        d.Name,
		"description": d.Description,
		"inputSchema": map[string]any{"type": "object", "properties": props},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// benchCatalog is the 500-tool catalog: the real tools, then the
// synthetic ones.
func benchCatalog(t testing.TB) []benchTool {
	t.Helper()
	tools := append(loadRealTools(t), synthTools(t)...)
	seen := map[string]bool{}
	for _, bt := range tools {
		if seen[bt.doc.Name] {
			t.Fatalf("tool %s twice", bt.doc.Name)
		}
		seen[bt.doc.Name] = true
	}
	if len(tools) != 500 {
		t.Fatalf("catalog has %d tools, want 500", len(tools))
	}
	return tools
}

// benchQuery is one query of testdata/queries.json.
type benchQuery struct {
	Query string `json:"query"`
	// Answers are the tools that answer it: exposed names of real tools,
	// or "intent:domain/tool" for every synthetic tool so labelled.
	Answers []string `json:"answers"`
	// Writer is who wrote it, in queries_dev.json (see docs/context.md).
	Writer string `json:"writer,omitempty"`
}

type queryFile struct {
	// Tuning may be used to tune the ranking; Heldout never.
	Tuning  []benchQuery `json:"tuning"`
	Heldout []benchQuery `json:"heldout"`
	// Development, from testdata/queries_dev.json, may be used to tune
	// the ranking too: tasks written later by other writers, who saw
	// the catalog but neither the other queries nor the ranking's code.
	Development []benchQuery `json:"-"`
	// Fresh, from testdata/queries_fresh.json: tasks by three more
	// writers, who saw only the catalog, written after the development
	// queries. It was scored once as a second held-out set, then used
	// for tuning too (docs/context.md).
	Fresh []benchQuery `json:"-"`
}

// all is every query, the held-out half included: for tests of the
// ranking's mechanics, which read no recall.
func (qf queryFile) all() []benchQuery {
	return slices.Concat(qf.Tuning, qf.Heldout, qf.Development, qf.Fresh)
}

func loadQueries(t testing.TB) queryFile {
	t.Helper()
	var qf queryFile
	decodeStrict(t, "queries.json", &qf)
	for name, qs := range map[string]*[]benchQuery{"queries_dev.json": &qf.Development, "queries_fresh.json": &qf.Fresh} {
		var f struct {
			Queries []benchQuery `json:"queries"`
		}
		decodeStrict(t, name, &f)
		*qs = f.Queries
	}
	return qf
}

// decodeStrict decodes testdata/name into v, refusing unknown fields (a
// misspelt key would silently drop a query's answers).
func decodeStrict(t testing.TB, name string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// answerSet resolves a query's answers to doc indexes, failing on a label
// that names no tool (a typo would silently lower recall).
func answerSet(t testing.TB, tools []benchTool, q benchQuery) map[int]bool {
	t.Helper()
	set := map[int]bool{}
	for _, a := range q.Answers {
		n := len(set)
		for i, bt := range tools {
			if intent, ok := strings.CutPrefix(a, "intent:"); ok && bt.intent == intent || bt.doc.Name == a {
				set[i] = true
			}
		}
		if len(set) == n {
			t.Errorf("query %q: answer %q names no tool", q.Query, a)
		}
	}
	return set
}

// recall returns the share of queries with an answer in the top k.
func recall(ix *Index, qs []benchQuery, answers []map[int]bool, k int) float64 {
	if len(qs) == 0 {
		return 0
	}
	return float64(found(ix, qs, answers, k)) / float64(len(qs))
}

// found returns the number of queries with an answer in the top k.
func found(ix *Index, qs []benchQuery, answers []map[int]bool, k int) int {
	n := 0
	for i, q := range qs {
		for _, h := range ix.Search(q.Query, k, "") {
			if answers[i][h.Doc] {
				n++
				break
			}
		}
	}
	return n
}

// The floors of TestRecall: what docs/context.md reports, so that a
// change of the ranking that loses recall fails here. Raise them with the
// doc when the ranking improves; never tune against the held-out half.
// The tuning, development and fresh sets are also what the learned table
// is learned from (learn_test.go): their figures are a fit, and
// TestLearnedCV measures the table on writers it did not learn from.
const (
	floorTuning1, floorTuning3   = 0.871, 0.971
	floorDev1, floorDev3         = 0.859, 0.948
	floorHeldout1, floorHeldout3 = 0.771, 0.943
	floorFresh1, floorFresh3     = 0.873, 0.953
)

// TestRecall prints recall@1 and recall@3 of the tuning half of the
// queries over the 500-tool catalog (go test ./internal/search -run
// TestRecall -v), and of the held-out half with RECALL_HELDOUT=1, and
// fails when one falls below its floor.
func TestRecall(t *testing.T) {
	tools, docs := benchDocs(t)
	ix := New(docs)
	qf := loadQueries(t)
	if n := len(qf.Tuning) + len(qf.Heldout); n < 100 {
		t.Errorf("%d queries, want at least 100", n)
	}
	type half struct {
		name           string
		qs             []benchQuery
		floor1, floor3 float64
	}
	halves := []half{
		{"tuning", qf.Tuning, floorTuning1, floorTuning3},
		{"dev", qf.Development, floorDev1, floorDev3},
		{"fresh", qf.Fresh, floorFresh1, floorFresh3},
	}
	// The held-out half is scored only when asked (RECALL_HELDOUT=1), so
	// that nobody tunes the ranking against it by watching it move; it
	// is read once per round of tuning, at its end (docs/context.md).
	if os.Getenv("RECALL_HELDOUT") != "" {
		halves = append(halves, half{"heldout", qf.Heldout, floorHeldout1, floorHeldout3})
	} else {
		t.Logf("held-out half not scored (RECALL_HELDOUT=1 scores it)")
	}
	t.Logf("%-8s %7s %8s %8s", "half", "queries", "recall@1", "recall@3")
	for _, half := range halves {
		answers := make([]map[int]bool, len(half.qs))
		for i, q := range half.qs {
			answers[i] = answerSet(t, tools, q)
		}
		r1, r3 := recall(ix, half.qs, answers, 1), recall(ix, half.qs, answers, 3)
		t.Logf("%-8s %7d %8.3f %8.3f", half.name, len(half.qs), r1, r3)
		if testing.Verbose() {
			logByWriter(t, ix, half.qs, answers)
		}
		if testing.Verbose() && os.Getenv("RECALL_MISSES") != "" && half.name != "heldout" {
			logMisses(t, ix, tools, half.qs, answers)
		}
		// Compared at the doc's three decimals.
		if r1 < half.floor1-0.0005 || r3 < half.floor3-0.0005 {
			t.Errorf("%s: recall@1 %.3f, @3 %.3f below the floors %.3f, %.3f in docs/context.md", half.name, r1, r3, half.floor1, half.floor3)
		}
	}
}

// logByWriter shows recall per writer of a set whose queries name theirs.
func logByWriter(t *testing.T, ix *Index, qs []benchQuery, answers []map[int]bool) {
	byWriter := map[string][]int{}
	var writers []string
	for i, q := range qs {
		if q.Writer == "" {
			return
		}
		if byWriter[q.Writer] == nil {
			writers = append(writers, q.Writer)
		}
		byWriter[q.Writer] = append(byWriter[q.Writer], i)
	}
	for _, w := range writers {
		var wq []benchQuery
		var wa []map[int]bool
		for _, i := range byWriter[w] {
			wq, wa = append(wq, qs[i]), append(wa, answers[i])
		}
		t.Logf("  %-10s %5d %8.3f %8.3f", w, len(wq), recall(ix, wq, wa, 1), recall(ix, wq, wa, 3))
	}
}

// logMisses shows the queries of a half used for tuning whose answers
// are not in the top 3 (RECALL_MISSES=1); it never looks at the held-out
// half.
func logMisses(t *testing.T, ix *Index, tools []benchTool, qs []benchQuery, answers []map[int]bool) {
	for i, q := range qs {
		hits := ix.Search(q.Query, 3, "")
		ok := false
		var got []string
		for _, h := range hits {
			ok = ok || answers[i][h.Doc]
			got = append(got, fmt.Sprintf("%s(%.2f)", tools[h.Doc].doc.Name, h.Score))
		}
		if !ok {
			t.Logf("miss %q: got %v, want %v", q.Query, got, q.Answers)
		}
	}
}

// BenchmarkSearch500 is one search over the 500-tool catalog, cycling
// through the queries.
func BenchmarkSearch500(b *testing.B) {
	_, docs := benchDocs(b)
	ix := New(docs)
	qf := loadQueries(b)
	qs := qf.all()
	b.ReportAllocs()
	// Each search is timed too, for the p50 and p99 that issue 16 asks
	// for (ns/op is the mean); reading the clock adds some 50 ns.
	took := make([]time.Duration, 0, 1024)
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		ix.Search(qs[i%len(qs)].Query, 3, "")
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkNew500 builds the index of the 500-tool catalog.
func BenchmarkNew500(b *testing.B) {
	_, docs := benchDocs(b)
	b.ReportAllocs()
	for b.Loop() {
		New(docs)
	}
}

// TestSearchDeterministic: the same query over the same index gives the
// same hits, scores and order every time (ties between two upstreams'
// copies of a tool included), whatever order its terms are summed in.
func TestSearchDeterministic(t *testing.T) {
	_, docs := benchDocs(t)
	ix := New(docs)
	qf := loadQueries(t)
	for _, q := range qf.all() {
		first := ix.Search(q.Query, 10, "")
		for range 20 {
			if got := ix.Search(q.Query, 10, ""); !slices.Equal(got, first) {
				t.Fatalf("%q: %v, then %v", q.Query, first, got)
			}
		}
	}
}

// TestSearchTopK: a search with a small limit returns the head of the
// full ranking, which is sorted by score, then doc.
func TestSearchTopK(t *testing.T) {
	_, docs := benchDocs(t)
	ix := New(docs)
	qf := loadQueries(t)
	for _, q := range qf.all() {
		all := ix.Search(q.Query, len(docs), "")
		if !slices.IsSortedFunc(all, func(a, b Hit) int {
			if a.Score != b.Score {
				return cmpFloat(b.Score, a.Score)
			}
			return a.Doc - b.Doc
		}) {
			t.Fatalf("%q: not sorted: %v", q.Query, all)
		}
		for _, k := range []int{1, 3, 7} {
			want := all[:min(k, len(all))]
			if got := ix.Search(q.Query, k, ""); !slices.Equal(got, want) {
				t.Errorf("%q limit %d: %v, want %v", q.Query, k, got, want)
			}
		}
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestSearchCoordination: over the 500-tool catalog, a tool that meets
// more of the task's words outranks one that meets fewer, more strongly.
func TestSearchCoordination(t *testing.T) {
	tools, docs := benchDocs(t)
	ix := New(docs)
	for query, want := range map[string][]string{
		"run some javascript in the page to get its title":  {"playwright__browser_evaluate", "puppeteer__puppeteer_evaluate", "playwright__browser_run_code_unsafe"},
		"how big is this file and when was it last changed": {"filesystem__get_file_info", "filesystem__list_directory_with_sizes"},
	} {
		var got []string
		for _, h := range ix.Search(query, 3, "") {
			got = append(got, tools[h.Doc].doc.Name)
		}
		if !slices.ContainsFunc(got, func(n string) bool { return slices.Contains(want, n) }) {
			t.Errorf("%q: top 3 %v, want one of %v", query, got, want)
		}
	}
}

// TestSearchConcurrent: searches share the index and nothing else (run
// with -race).
func TestSearchConcurrent(t *testing.T) {
	_, docs := benchDocs(t)
	ix := New(docs)
	qf := loadQueries(t)
	qs := qf.all()
	want := make([][]Hit, len(qs))
	for i, q := range qs {
		want[i] = ix.Search(q.Query, 3, "")
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range qs {
				j := (i + g*len(qs)/4) % len(qs)
				if got := ix.Search(qs[j].Query, 3, ""); !slices.Equal(got, want[j]) {
					t.Errorf("%q: %v, want %v", qs[j].Query, got, want[j])
				}
			}
		})
	}
	wg.Wait()
}

// benchDocs returns the 500-tool catalog and its docs.
func benchDocs(tb testing.TB) ([]benchTool, []Doc) {
	tb.Helper()
	tools := benchCatalog(tb)
	docs := make([]Doc, len(tools))
	for i, bt := range tools {
		docs[i] = bt.doc
	}
	return tools, docs
}
