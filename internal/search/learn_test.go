package search

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
)

// The learned table (learned.go): which tool terms the tasks with a
// query term were answered by, counted over labelled queries. Each
// query's features are its terms, each pair of adjacent terms (a_b) and
// its form (queryForm: "?" or "^" and its first term); its targets are the terms of the tools that answer it. A
// feature w leads to a target t when enough tasks say so:
//
//   - n(w,t), the tasks with w answered by a tool with t, is at least
//     learnMinCount, and they come from at least learnMinWriters writers
//     (a word of one writer's tasks, such as a colleague's name, says
//     nothing of other people's);
//   - P(t|w) = n(w,t)/n(w) is at least the channel's minimum;
//   - the lift P(t|w)/P(t) is at least the channel's minimum: t is not
//     merely common among all answers (get, list);
//
// and weighs P(t|w) times the channel's scale. The name channel's
// targets are the words of a tool's name and title (without its
// upstream's), the description channel's those and its description's,
// weaker and stricter: a tool's name says what it does, its description
// also says much else.
//
// A form's targets are the verbs of the tools most tasks want (list,
// get, search, create), common among all answers, so a form needs a lift
// of only learnFormMinLift. A feature keeps its learnMaxTerms heaviest
// targets.
const (
	learnMinCount    = 2
	learnMinWriters  = 2
	learnFormMinLift = 1.5
	learnMaxTerms    = 12
)

type learnChannel struct {
	description   bool // the targets include the description's terms
	minP, minLift float64
	scale         float64
}

var learnChannels = []learnChannel{
	{description: false, minP: 0.1, minLift: 3, scale: 1},
	{description: true, minP: 0.3, minLift: 10, scale: 0.25},
}

// learnFeatures are the features of a query: its terms, and each pair of
// adjacent terms.
func learnFeatures(query string) []string {
	terms := queryTerms(query)
	if len(terms) > maxQueryTerms {
		terms = terms[:maxQueryTerms]
	}
	out := slices.Clone(terms)
	if f := queryForm(terms, isQuestion(query)); f != "" {
		out = append(out, f)
	}
	for i := 1; i < len(terms); i++ {
		out = append(out, terms[i-1]+"_"+terms[i])
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// learnTargets are the target terms of a tool for a channel.
func learnTargets(d Doc, description bool) []string {
	up := Terms(d.Upstream)
	ts := append(Terms(d.Name), Terms(d.Title)...)
	if description {
		ts = append(ts, Terms(d.Description)...)
	}
	ts = slices.DeleteFunc(ts, func(t string) bool { return slices.Contains(up, t) })
	slices.Sort(ts)
	return slices.Compact(ts)
}

// learnTable learns the table from queries labelled with their answers
// (doc indexes into tools).
func learnTable(tools []benchTool, qs []benchQuery, answers []map[int]bool) map[string][]learnedTerm {
	feats := make([][]string, len(qs))
	for i, q := range qs {
		feats[i] = learnFeatures(q.Query)
	}
	out := map[string][]learnedTerm{}
	for _, ch := range learnChannels {
		nw, nt := map[string]int{}, map[string]int{}
		type pair struct{ w, t string }
		// seen counts the tasks of a pair, and whether they come from
		// two writers at least: learnMinWriters may be 1 or 2.
		type seen struct {
			n       int
			writer  string
			writers int // 1, or 2 for two or more
		}
		nwt := map[pair]*seen{}
		docTargets := map[int][]string{} // each answer's targets, once
		for i, q := range qs {
			var targets []string
			for _, d := range slices.Sorted(maps.Keys(answers[i])) {
				ts, ok := docTargets[d]
				if !ok {
					ts = learnTargets(tools[d].doc, ch.description)
					docTargets[d] = ts
				}
				targets = append(targets, ts...)
			}
			slices.Sort(targets)
			targets = slices.Compact(targets)
			for _, t := range targets {
				nt[t]++
			}
			for _, w := range feats[i] {
				nw[w]++
				for _, t := range targets {
					if w == t {
						continue
					}
					p := pair{w, t}
					c := nwt[p]
					if c == nil {
						c = &seen{writer: q.Writer, writers: 1}
						nwt[p] = c
					} else if q.Writer != c.writer {
						c.writers = 2
					}
					c.n++
				}
			}
		}
		n := float64(len(qs))
		for p, c := range nwt {
			if c.n < learnMinCount || c.writers < learnMinWriters {
				continue
			}
			pt := float64(c.n) / float64(nw[p.w])
			minLift := ch.minLift
			if isForm(p.w) {
				minLift = learnFormMinLift
			}
			if pt < ch.minP || pt/(float64(nt[p.t])/n) < minLift {
				continue
			}
			if slices.ContainsFunc(out[p.w], func(l learnedTerm) bool { return l.term == p.t }) {
				continue // the name channel's, already
			}
			// Two decimals, as the table is written.
			w := float64(int(pt*ch.scale*100+0.5)) / 100
			out[p.w] = append(out[p.w], learnedTerm{p.t, min(w, 1)})
		}
	}
	for w, ls := range out {
		slices.SortFunc(ls, func(a, b learnedTerm) int {
			if a.weight != b.weight {
				return cmpFloat(b.weight, a.weight)
			}
			return strings.Compare(a.term, b.term)
		})
		if len(ls) > learnMaxTerms {
			ls = ls[:learnMaxTerms]
		}
		out[w] = ls
	}
	return out
}

// formatLearned writes a table in learnedTable's form.
func formatLearned(m map[string][]learnedTerm) string {
	var b strings.Builder
	for _, w := range slices.Sorted(maps.Keys(m)) {
		b.WriteString(w)
		for _, l := range m[w] {
			fmt.Fprintf(&b, " %s:%.2f", l.term, l.weight)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// learnSet is the queries the table is learned from: every set but the
// held-out half, each query with its writer (the tuning half's author
// named "tuning"), and their answers.
func learnSet(t testing.TB, tools []benchTool) ([]benchQuery, []map[int]bool) {
	qf := loadQueries(t)
	var qs []benchQuery
	for _, q := range qf.Tuning {
		q.Writer = "tuning"
		qs = append(qs, q)
	}
	qs = slices.Concat(qs, qf.Development, qf.Fresh)
	answers := make([]map[int]bool, len(qs))
	for i, q := range qs {
		answers[i] = answerSet(t, tools, q)
	}
	return qs, answers
}

const learnedTableFile = "learned_table.go"

// TestLearnedTable: the committed table is the one the queries give.
// LEARN=1 writes it anew (after a change of the queries, the terms or
// the learning).
func TestLearnedTable(t *testing.T) {
	tools, _ := benchDocs(t)
	qs, answers := learnSet(t, tools)
	table := formatLearned(learnTable(tools, qs, answers))
	if os.Getenv("LEARN") != "" {
		src := "// Code generated by LEARN=1 go test ./internal/search -run TestLearnedTable; DO NOT EDIT.\n\n" +
			"package search\n\n" +
			"// learnedTable is read by learned (learned.go): a line per query term or\n" +
			"// pair of terms, \"term tool-term:weight ...\", learned from the\n" +
			"// benchmark's queries by learnTable (learn_test.go).\n" +
			"const learnedTable = `\n" + table + "`\n"
		if err := os.WriteFile(learnedTableFile, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: %d query terms", learnedTableFile, strings.Count(table, "\n"))
		return
	}
	if got := strings.TrimPrefix(learnedTable, "\n"); got != table {
		t.Errorf("%s is not the table the queries give: LEARN=1 go test ./internal/search -run TestLearnedTable writes it", learnedTableFile)
	}
}

// TestLearnedCV: a table learned from some writers' tasks finds more
// answers for other writers' tasks than the ranking without it. The
// writers fall in four folds; each fold is scored by a table learned
// from the other three.
func TestLearnedCV(t *testing.T) {
	tools, docs := benchDocs(t)
	qs, answers := learnSet(t, tools)
	var writers []string
	for _, q := range qs {
		if !slices.Contains(writers, q.Writer) {
			writers = append(writers, q.Writer)
		}
	}
	const folds = 4
	without := New(docs)
	without.learned = nil
	var base1, base3, with1, with3 int
	for f := range folds {
		var train, test []benchQuery
		var trainA, testA []map[int]bool
		for i, q := range qs {
			if slices.Index(writers, q.Writer)%folds == f {
				test, testA = append(test, q), append(testA, answers[i])
			} else {
				train, trainA = append(train, q), append(trainA, answers[i])
			}
		}
		ix := New(docs)
		ix.learned = learnTable(tools, train, trainA)
		b1, b3 := found(without, test, testA, 1), found(without, test, testA, 3)
		w1, w3 := found(ix, test, testA, 1), found(ix, test, testA, 3)
		t.Logf("fold %d: %4d queries; found @1 / @3 without the table %d / %d, with one learned from the other folds %d / %d", f, len(test), b1, b3, w1, w3)
		base1, base3, with1, with3 = base1+b1, base3+b3, with1+w1, with3+w3
	}
	n := float64(len(qs))
	t.Logf("all %d queries: recall@1 / @3 without the table %.3f / %.3f, learned from other writers %.3f / %.3f",
		len(qs), float64(base1)/n, float64(base3)/n, float64(with1)/n, float64(with3)/n)
	if with1 <= base1 || with3 <= base3 {
		t.Errorf("a table learned from other writers finds %d / %d answers at @1 / @3, without one %d / %d: learning no longer helps", with1, with3, base1, base3)
	}
}

// isForm reports whether a feature is a query's form (queryForm).
func isForm(w string) bool { return w == "?" || strings.HasPrefix(w, "^") }
