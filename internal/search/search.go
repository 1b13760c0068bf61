// Package search ranks the tools of a view for a query in natural
// language: the index behind search mode (a view whose tools/list holds
// the gateway's finder and caller instead of its catalog).
//
// The ranking is BM25F: each tool is a document with fields (its name
// split into words, its upstream's name, its title and description, its
// arguments' names and descriptions), each with a weight, over terms that
// are lower-cased, split at case and punctuation changes, rid of stop
// words and numbers, joined where two words make one (compounds: "on
// call") and stemmed (Porter). In a query, a literal value (a URL, a
// path, a phone number, a quoted phrase) stands for its kind and a day
// for "date" (queryTerms); a query also looks for the words related to
// its own (relatedGroups: a user says "folder" where a tool says
// "directory"), and for the tool words that tasks with its words were
// answered by (learnedTable, learned from labelled tasks: "overdue"
// invoices); a tool's score grows with the share of the query it
// meets, when the query names its upstream ("in Notion"), when it reads
// and the query is a question, and when its name does what a command's
// first word says; when nothing matches well, the tools that search the
// web are offered as a weak match.
// docs/context.md measures it on real catalogs. An index is built once
// per view and catalog, and is read-only: any number of searches may
// run on it at once.
package search

import (
	"math"
	"math/bits"
	"slices"
	"strings"
)

// Doc is one tool, as the index reads it.
type Doc struct {
	// Name is the tool's exposed name.
	Name string
	// Upstream is the name of its upstream.
	Upstream string
	// Title and Description are the tool's.
	Title, Description string
	// Params are its arguments (inputSchema properties).
	Params []Param
}

// Param is one argument of a tool.
type Param struct {
	Name, Description string
}

// Hit is one result: the index of the Doc given to New, and its score.
type Hit struct {
	Doc   int
	Score float64
}

// field numbers the fields of a document.
type field int

const (
	fieldName field = iota
	fieldUpstream
	fieldTitle
	fieldDescription
	fieldParamName
	fieldParamDescription
	numFields
)

// weights are the fields' weights: a term in the name counts most.
var weights = [numFields]float64{
	fieldName:             3.0,
	fieldUpstream:         1.0,
	fieldTitle:            2.0,
	fieldDescription:      1.0,
	fieldParamName:        0.5,
	fieldParamDescription: 1.0,
}

// BM25 parameters: k1 the term frequency saturation, b the length
// normalisation (per field, as BM25F does).
const (
	k1 = 2.0
	b  = 0.75
)

// maxQueryTerms is how many of a query's terms count (after stop words):
// a task takes a few dozen words at most, and the rest is ignored so that
// a huge query costs no more than a long one. It is also the width of a
// doc's bit set of the query terms it meets.
const maxQueryTerms = 64

// Index is the searchable form of a set of docs.
type Index struct {
	docs     []Doc
	upstream []string // each doc's upstream
	// postings maps a term to the docs that hold it, with the term's
	// weighted, length-normalised frequency there (BM25F's pseudo
	// frequency), in doc order.
	postings map[string][]posting
	n        int
	// upstreams are the distinct upstreams' names as terms, and
	// upstreamOf each doc's index in it.
	upstreams  [][]string
	upstreamOf []int
	// reads marks the docs whose names say they only read (get, list,
	// search), which a question asks for.
	reads []bool
	// named maps a term to the docs whose names hold it, in doc order.
	named map[string][]int
	// web marks the docs that search the web: "search" in the name, and
	// "web" in the name or description.
	web []bool
	// learned is the table of learned related terms (learned(), or in
	// tests one learned from part of the queries).
	learned map[string][]learnedTerm
}

type posting struct {
	doc int
	tf  float64
}

// New indexes docs.
func New(docs []Doc) *Index {
	ix := &Index{docs: docs, postings: map[string][]posting{}, n: len(docs), named: map[string][]int{}, learned: learned()}
	// Each doc's terms per field, and each field's average length.
	fields := make([][numFields][]string, len(docs))
	cache := map[string]string{}
	var total [numFields]float64
	for i, d := range docs {
		f := &fields[i]
		f[fieldName] = appendTerms(nil, d.Name, cache)
		f[fieldUpstream] = appendTerms(nil, d.Upstream, cache)
		f[fieldTitle] = appendTerms(nil, d.Title, cache)
		f[fieldDescription] = appendTerms(nil, d.Description, cache)
		for _, p := range d.Params {
			f[fieldParamName] = appendTerms(f[fieldParamName], p.Name, cache)
			f[fieldParamDescription] = appendTerms(f[fieldParamDescription], p.Description, cache)
		}
		for k := range numFields {
			total[k] += float64(len(f[k]))
		}
		ix.upstream = append(ix.upstream, d.Upstream)
		u := slices.IndexFunc(ix.upstreams, func(ts []string) bool { return slices.Equal(ts, f[fieldUpstream]) })
		if u < 0 {
			u = len(ix.upstreams)
			ix.upstreams = append(ix.upstreams, f[fieldUpstream])
		}
		ix.upstreamOf = append(ix.upstreamOf, u)
		ix.reads = append(ix.reads, readsOnly(f[fieldName]))
		ix.web = append(ix.web, slices.Contains(f[fieldName], "search") && (slices.Contains(f[fieldName], "web") || slices.Contains(f[fieldDescription], "web")))
		for j, t := range f[fieldName] {
			if !slices.Contains(f[fieldName][:j], t) {
				ix.named[t] = append(ix.named[t], i)
			}
		}
	}
	var avg [numFields]float64
	for k := range numFields {
		avg[k] = 1
		if len(docs) > 0 && total[k] > 0 {
			avg[k] = total[k] / float64(len(docs))
		}
	}
	tf := map[string]float64{}
	for i := range docs {
		clear(tf)
		for k := range numFields {
			terms := fields[i][k]
			norm := 1 - b + b*float64(len(terms))/avg[k]
			for _, t := range terms {
				tf[t] += weights[k] / norm
			}
		}
		for t, v := range tf {
			ix.postings[t] = append(ix.postings[t], posting{doc: i, tf: v})
		}
	}
	return ix
}

// Len returns the number of docs.
func (ix *Index) Len() int { return ix.n }

// Search returns at most limit docs that match query, best first; only
// docs of upstream when it is not "". Docs that share no term with the
// query (or a related word, see relatedGroups) are not returned, but
// for the tools that search the web when nothing matches well
// (weakMatch); only the first maxQueryTerms terms of a query count. Equal
// scores rank in doc order, and the same query always gets the same
// hits.
func (ix *Index) Search(query string, limit int, upstream string) []Hit {
	if limit <= 0 || ix.n == 0 {
		return nil
	}
	// Each doc's score so far, and the bits of the query terms it met.
	acc := make([]struct {
		score   float64
		covered uint64
	}, ix.n)
	matched := 0
	terms := queryTerms(query)
	if len(terms) > maxQueryTerms {
		terms = terms[:maxQueryTerms]
	}
	var all uint64 // a bit for each of the query's terms
	for i := range terms {
		all |= 1 << i
	}
	question := isQuestion(query)
	for _, qt := range expand(terms, ix.learned, queryForm(terms, question)) {
		ps := ix.postings[qt.term]
		if len(ps) == 0 {
			continue
		}
		idf := math.Log(1 + (float64(ix.n)-float64(len(ps))+0.5)/(float64(len(ps))+0.5))
		for _, p := range ps {
			if upstream != "" && ix.upstream[p.doc] != upstream {
				continue
			}
			a := &acc[p.doc]
			if a.score == 0 {
				matched++
			}
			a.score += qt.weight * idf * p.tf / (k1 + p.tf)
			a.covered |= qt.from
		}
	}
	nq := float64(bits.OnesCount64(all))
	named := ix.namedUpstreams(terms)
	var acts []bool // the docs whose names do what a command's first word asks
	if !question && len(terms) > 0 && verbBoost > 0 {
		acts = make([]bool, ix.n)
		for _, t := range append(slices.Clone(related()[terms[0]]), terms[0]) {
			for _, d := range ix.named[t] {
				acts[d] = true
			}
		}
	}
	// Each doc's final score, and the best.
	top := 0.0
	for d := range acc {
		a := &acc[d]
		if a.score == 0 {
			continue
		}
		// Coordination: a doc that meets more of the query's terms (by
		// themselves or a related word) ranks higher, by the square root
		// of the share it meets, so that words that weigh much in one
		// tool ("run" and "javascript" in a sandbox's run_javascript) do
		// not outweigh a tool that meets more of the task ("run some
		// javascript in the page to get its title": a browser's evaluate).
		a.score *= math.Sqrt(float64(bits.OnesCount64(a.covered)) / nq)
		if named != nil && named[ix.upstreamOf[d]] {
			a.score *= 1 + upstreamBoost
		}
		if question && ix.reads[d] {
			a.score *= 1 + questionBoost
		}
		if acts != nil && acts[d] {
			a.score *= 1 + verbBoost
		}
		top = max(top, a.score)
	}
	hits := make([]Hit, 0, min(matched+1, limit+1))
	for d := range acc {
		s := acc[d].score
		// When nothing matches well, the task is likely a question about
		// the world ("who was Ada Lovelace", "do I need a visa for
		// Vietnam"): the tools that search the web rank as a weak match.
		if top < weakMatch && ix.web[d] && (upstream == "" || ix.upstream[d] == upstream) {
			s = max(s, webFallback*weakMatch)
		}
		if s == 0 {
			continue
		}
		// Keep the best limit hits in order, by insertion: limit is a
		// handful, and most docs fall below the last kept.
		if len(hits) == limit && !better(s, d, hits[limit-1]) {
			continue
		}
		i := len(hits)
		if i < limit {
			hits = append(hits, Hit{})
		} else {
			i--
		}
		for i > 0 && better(s, d, hits[i-1]) {
			hits[i] = hits[i-1]
			i--
		}
		hits[i] = Hit{Doc: d, Score: s}
	}
	return hits
}

// queryForm is the learned table's feature for what kind of query it
// is: "?" for a question, which tasks answer with tools that read (what's
// on my calendar: list events), and for a command "^" and its first
// term, its verb (remind me Thursday: a task; email Sam: send).
func queryForm(terms []string, question bool) string {
	switch {
	case question:
		return "?"
	case len(terms) > 0:
		return "^" + terms[0]
	}
	return ""
}

// formWeight scales the learned terms of a query's form.
const formWeight = 1.5

// upstreamBoost raises the score of a tool whose upstream the query
// names ("where's the sales playbook in Notion", "hand zendesk ticket
// 4821 over to Priya"): the user said where to look.
const upstreamBoost = 0.5

// questionBoost raises the score of a tool that reads when the query is
// a question: "what's on my calendar tomorrow" lists events rather than
// answering an invitation.
const questionBoost = 0.15

// weakMatch is the best score under which a search also returns the
// tools that search the web, at webFallback times it.
const weakMatch, webFallback = 1.5, 0.5

// verbBoost raises the score of a tool whose name holds a command's
// first word or a word related to it: the verb of a command says what to
// do ("email Sam that the offer went out", "remind me Thursday to order
// gas", "push the meeting to Friday"), the other words what to do it to.
const verbBoost = 0.15

// readsOnly reports whether a tool's name words say it reads: a reading
// verb (get, list, search) and no writing one (create, send, update).
func readsOnly(name []string) bool {
	reads := false
	for _, t := range name {
		switch {
		case writeVerbs[t]:
			return false
		case readVerbs[t]:
			reads = true
		}
	}
	return reads
}

var readVerbs, writeVerbs = stemmedSet("get list search find read query fetch show describe lookup retriev view check count info status histori"),
	stemmedSet("create updat delet remov send post add set put write edit move cancel book make start stop run execut insert upload push merg close assign approv repli respond transit archiv")

func stemmedSet(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[porter(w)] = true
	}
	return m
}

// isQuestion reports whether a query asks rather than tells: it ends
// with a question mark, or starts with a question word ("what's on my
// calendar", "did legal email me back", "any tickets from Acme").
func isQuestion(query string) bool {
	q := strings.TrimSpace(query)
	if strings.HasSuffix(q, "?") {
		return true
	}
	first, _, _ := strings.Cut(q, " ")
	if len(first) > len("anything's,") {
		return false // no question word; and a query may be long
	}
	first = strings.ToLower(strings.TrimRight(first, ",.!:;"))
	if i := strings.IndexAny(first, "'’"); i > 0 {
		first = first[:i]
	}
	return questionWords[first]
}

var questionWords = map[string]bool{"what": true, "whats": true, "which": true, "who": true, "whose": true, "where": true,
	"when": true, "how": true, "is": true, "are": true, "was": true, "were": true, "did": true, "does": true, "do": true,
	"any": true, "anything": true, "has": true, "have": true, "why": true}

// namedUpstreams returns which upstreams the query names (all the terms
// of an upstream's name are among the query's), by index in
// ix.upstreams, or nil for none.
func (ix *Index) namedUpstreams(terms []string) []bool {
	var named []bool
	for u, ts := range ix.upstreams {
		if len(ts) == 0 || !allIn(ts, terms) {
			continue
		}
		if named == nil {
			named = make([]bool, len(ix.upstreams))
		}
		named[u] = true
	}
	return named // nil when the query names none
}

func allIn(ts, in []string) bool {
	for _, t := range ts {
		if !slices.Contains(in, t) {
			return false
		}
	}
	return true
}

// better reports whether doc d with score s ranks before h.
func better(s float64, d int, h Hit) bool {
	return s > h.Score || s == h.Score && d < h.Doc
}

// queryTerm is a term of an expanded query and its weight.
type queryTerm struct {
	term   string
	weight float64
	from   uint64 // bits of the query's terms it stands for
}

// expand weighs the query's terms: each term 1, each related term of
// one (see relatedGroups) relatedWeight, each learned term of one or of
// a pair (see learnedTable) its learned weight and of the query's form
// (queryForm) formWeight times it, a term that comes more
// than once its largest weight; in the query's order, so that a query's
// scores are always summed in one order (a map's order would change
// their last bits, and ties with them).
func expand(terms []string, learned map[string][]learnedTerm, form string) []queryTerm {
	out := make([]queryTerm, 0, 4*len(terms))
	add := func(t string, w float64, from uint64) {
		for i := range out {
			if out[i].term == t {
				out[i].weight = max(out[i].weight, w)
				out[i].from |= from
				return
			}
		}
		out = append(out, queryTerm{t, w, from})
	}
	bit := func(i int) uint64 { return 1 << i } // i < maxQueryTerms
	for i, t := range terms {
		add(t, 1, bit(i))
	}
	rel := related()
	for i, t := range terms {
		for _, r := range rel[t] {
			add(r, relatedWeight, bit(i))
		}
		if i > 0 {
			for _, r := range rel[terms[i-1]+"_"+t] {
				add(r, relatedWeight, bit(i)|bit(i-1))
			}
		}
	}
	// The query's form stands for none of its terms: it adds to the
	// tools the terms find, and finds none by itself.
	for _, l := range learned[form] {
		add(l.term, formWeight*l.weight, 0)
	}
	// A learned term counts for the query's terms it was learned from;
	// a question takes no verb that writes from them ("what's on the
	// calendar": most tasks that name a calendar create an event, but a
	// question lists them).
	addLearned := func(ls []learnedTerm, from uint64) {
		for _, l := range ls {
			if form == "?" && writeVerbs[l.term] {
				continue
			}
			add(l.term, l.weight, from)
		}
	}
	for i, t := range terms {
		addLearned(learned[t], bit(i))
		if i > 0 {
			addLearned(learned[terms[i-1]+"_"+t], bit(i)|bit(i-1))
		}
	}
	return out
}
