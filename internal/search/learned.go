package search

import (
	"strconv"
	"strings"
	"sync"
)

// learnedTerm is a tool term that a query term leads to, and its weight
// (1 is the weight of the query's own terms).
type learnedTerm struct {
	term   string
	weight float64
}

// learned reads learnedTable (learned_table.go): the tool terms that
// tasks with a term, a pair of terms or a form (queryForm) were answered
// by, far more often than tasks without it. The table relates the words users say to
// the words tools use, as relatedGroups does, but counted from tasks
// labelled with the tools that answer them rather than written by hand:
// "overdue" leads to invoice, "pipeline" to deal, "chase" to task, and
// a command that starts with "remind" to create and task.
// TestLearnedTable learns it from the benchmark's queries (never the
// held-out half) and checks that the committed table is what they give;
// docs/context.md measures it on writers it did not learn from.
var learned = sync.OnceValue(func() map[string][]learnedTerm {
	return parseLearned(learnedTable)
})

// parseLearned reads the form of learnedTable: a line per query term,
// "term tool-term:weight ...". A line that does not parse is a bug of
// the generator; it panics at the first index, in every test.
func parseLearned(table string) map[string][]learnedTerm {
	m := map[string][]learnedTerm{}
	for line := range strings.Lines(table) {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		ts := make([]learnedTerm, 0, len(fields)-1)
		for _, f := range fields[1:] {
			t, w, ok := strings.Cut(f, ":")
			weight, err := strconv.ParseFloat(w, 64)
			if !ok || err != nil || weight <= 0 || weight > 1 {
				panic("search: learned table: bad entry " + strconv.Quote(f) + " of " + strconv.Quote(fields[0]))
			}
			ts = append(ts, learnedTerm{t, weight})
		}
		m[fields[0]] = ts
	}
	return m
}
