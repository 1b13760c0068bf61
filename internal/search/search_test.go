package search

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestTerms(t *testing.T) {
	for in, want := range map[string][]string{
		"read_file":                {"read", "file"},
		"listDirectoryEntries":     {"list", "directori", "entri"},
		"HTTPServer fetches URLs":  {"http", "server", "fetch", "url"},
		"Create the issues":        {"creat", "issu"},
		"get-weather2day":          {"get", "weather", "dai"},
		"s3 bucket, ec2, k8s, 2FA": {"s3", "bucket", "ec2", "k8s", "2fa"},
		"context7 sha256 v1":       {"context", "sha", "v1"},
		"who is on call":           {"oncal"},
		"my to-do list, on-call":   {"todo", "list", "oncal"},
		"log in, then sign up":     {"login", "signup"},
		"stopping, listed":         {"stop", "list"},
		"a folder called invoices": {"folder", "invoic"},
	} {
		if got := Terms(in); !slices.Equal(got, want) {
			t.Errorf("Terms(%q) = %q, want %q", in, got, want)
		}
	}
}

// A query's literal values stand for their kind, not for their words.
func TestQueryTerms(t *testing.T) {
	for in, want := range map[string][]string{
		"get the page at https://go.dev/blog":      {"get", "page", "url"},
		"go to www.example.org/about":              {"go", "url"},
		"point blog.example.com at the server":     {"point", "domain", "server"},
		"open google.com":                          {"open", "domain"},
		"mail bob@example.com":                     {"mail", "email", "address"},
		"show /etc/app.yaml":                       {"show", "file", "path", "yaml"},
		"list ~/src":                               {"list", "folder", "path"},
		"summarize contract.pdf, please":           {"summar", "contract", "pdf", "file"},
		"make a folder called invoices":            {"make", "folder"},
		"a channel named general for the team":     {"channel", "team"},
		"say 'good morning everyone' in French":    {"sai", "text", "french"},
		`translate "thank you", then read it`:      {"translat", "text", "read"},
		"say 'hi' to Ana":                          {"sai", "text", "ana"},
		"don't stop at 48.85, 2.29 or version 1.2": {"stop", "coordin", "version"},
		"a pin at 53.4808, -2.2426; 12.5 hours":    {"pin", "coordin", "hour"},
		"text 07700 900461 that I'm late":          {"text", "phone", "number", "late"},
		"call +1 415 555 0134, or 0800 123 4567":   {"call", "phone", "number", "phone", "number"},
		"in 2024 and 2025, 12 400 000 of them":     {},
		"rock from the '90s, not the '80s":         {"rock", "90s", "not", "80s"},
		"say 'hi there', then 'bye":                {"sai", "text", "bye"},
		"remind me on Friday":                      {"remind", "fridai", "date"},
		"last week's sales, yesterday's calls":     {"last", "week", "sale", "yesterdai", "date", "call"},
		"May I book July 1 to July 14 in May":      {"mai", "book", "juli", "date", "juli", "date", "mai", "date"},
		"at 10:30 on 2026-12-01, not 1-2":          {"date", "date", "not"},
		"move my 3pm to 10:30am on the 22nd":       {"move", "3pm", "date", "30am", "date", "22nd", "date"},
		"PTO Dec 23 through Jan 2, not 25xx":       {"pto", "dec", "date", "through", "jan", "date", "not", "25xx"},
		"text 312-555-0147 or +14155550142":        {"text", "phone", "number", "phone", "number"},
		"call 555-0134 or 415.555.0134":            {"call", "phone", "number", "phone", "number"},
		"ping 10.0.3.17 and 192.168.100.200":       {"ping", "ip", "address", "ip", "address"},
		"the a1-b2 box":                            {"id", "box"},
		"download s3://logs/2024/q3/churn.csv":     {"download", "s3", "url", "csv"},
		"what is https://cdn.example.org/fig3.png": {"url", "png"},
		"watch rivalco.com/pricing, notion.so/a":   {"watch", "url", "url"},
		"catch me up on #data-requests, #482":      {"catch", "up", "channel"},
		"approve acme/api#482 and acme/web-app":    {"approv", "repositori", "repositori"},
		"read/write access to acme/web":            {"read", "write", "access", "acm", "web"},
		"ack Q3X9ZKL, I'm on it":                   {"ack", "id"},
		"what are people on X saying":              {"peopl", "twitter", "sai"},
		"X marks the spot, x-ray":                  {"mark", "spot", "rai"},
		"move PROD-482 to In Review, not Prod-482": {"move", "issu", "review", "not", "prod"},
	} {
		if got := queryTerms(in); !slices.Equal(got, want) {
			t.Errorf("queryTerms(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSearchRanksByNameAndDescription(t *testing.T) {
	docs := []Doc{
		{Name: "files__read_file", Upstream: "files", Description: "Read the complete contents of a file from the file system.", Params: []Param{{Name: "path"}}},
		{Name: "files__write_file", Upstream: "files", Description: "Create a new file or overwrite an existing file with new content."},
		{Name: "web__fetch", Upstream: "web", Description: "Fetches a URL from the internet and extracts its contents as markdown.", Params: []Param{{Name: "url", Description: "URL to fetch"}}},
		{Name: "memory__create_entities", Upstream: "memory", Description: "Create multiple new entities in the knowledge graph"},
	}
	ix := New(docs)
	if got := ix.Search("download a web page", 3, ""); len(got) == 0 || got[0].Doc != 2 {
		t.Errorf("web page: %v, want fetch first", got)
	}
	if got := ix.Search("read a file", 1, ""); len(got) != 1 || got[0].Doc != 0 {
		t.Errorf("read a file: %v, want read_file", got)
	}
	if got := ix.Search("create", 5, "memory"); len(got) != 1 || got[0].Doc != 3 {
		t.Errorf("upstream filter: %v, want only memory's tool", got)
	}
	if got := ix.Search("zebra", 5, ""); len(got) != 0 {
		t.Errorf("no shared term: %v, want none", got)
	}
	if got := ix.Search("file", 0, ""); got != nil {
		t.Errorf("limit 0: %v", got)
	}
}

// A user's task rarely uses the tool's words: related words bridge them.
func TestSearchRelatedWords(t *testing.T) {
	docs := []Doc{
		{Name: "twilio__make_call", Upstream: "twilio", Description: "Place an outbound phone call that speaks a message.", Params: []Param{{Name: "to", Description: "Phone number"}}},
		{Name: "filesystem__create_directory", Upstream: "filesystem", Description: "Create a new directory or ensure a directory exists.", Params: []Param{{Name: "path"}}},
		{Name: "aws-ec2__stop_instance", Upstream: "aws-ec2", Description: "Stop a running EC2 instance.", Params: []Param{{Name: "instance_id", Description: "Instance"}}},
		{Name: "docker__pull_image", Upstream: "docker", Description: "Pull a Docker image from a registry."},
		{Name: "notes__create_note", Upstream: "notes", Description: "Create a note with a title."},
		{Name: "docker__stop_container", Upstream: "docker", Description: "Stop a running Docker container."},
		{Name: "stripe__get_customer", Upstream: "stripe", Description: "Get a Stripe customer with its payment methods.", Params: []Param{{Name: "customer_id", Description: "Customer ID"}}},
		{Name: "stripe__create_refund", Upstream: "stripe", Description: "Refund a Stripe charge, fully or partly."},
	}
	firstHits(t, docs, map[string]int{
		"make a folder called invoices": 1,
		"shut down the test VM":         2,
		"I want my money back":          7,
	})
}

// A tool of an upstream the query names outranks an equal match
// elsewhere; an upstream of two words is named only by both.
func TestSearchNamedUpstream(t *testing.T) {
	docs := []Doc{
		{Name: "docsite__search_pages", Upstream: "docsite", Description: "Search the pages of the sales handbook."},
		{Name: "notion__search", Upstream: "notion", Description: "Search the pages of the workspace."},
		{Name: "google-maps__search", Upstream: "google-maps", Description: "Search the pages of the workspace."},
	}
	firstHits(t, docs, map[string]int{
		// Without its name, the tool that meets more words wins.
		"search the sales handbook pages":           0,
		"search the sales handbook pages in notion": 1,
		// An upstream of two words is named by both.
		"search the sales handbook pages with google maps": 2,
		"search the sales handbook pages, google it":       0,
	})
}

// A compound written as two words in a doc and as one in a query (or
// the other way) is one term: "on call" is not "call".
func TestSearchCompounds(t *testing.T) {
	docs := []Doc{
		{Name: "pagerduty__get_oncall", Upstream: "pagerduty", Description: "Who is on call for a schedule."},
		{Name: "twilio__make_call", Upstream: "twilio", Description: "Place a phone call."},
		{Name: "todo__add", Upstream: "todo", Description: "Add an item to a to-do list."},
	}
	firstHits(t, docs, map[string]int{
		"who's oncall tonight":        0,
		"who is on-call for payments": 0,
		"call Ana":                    1,
		"put milk on my to do list":   2,
		"add milk to the todo":        2,
	})
}

// A question asks for a tool that reads; a command for one that acts.
func TestSearchQuestionsRead(t *testing.T) {
	docs := []Doc{
		{Name: "cal__create_event", Upstream: "cal", Description: "Create an event on the calendar."},
		{Name: "cal__list_events", Upstream: "cal", Description: "List the events on the calendar."},
	}
	firstHits(t, docs, map[string]int{
		"what's on the calendar on friday?": 1,
		"anything on the calendar tomorrow": 1,
		"put lunch on the calendar":         0,
	})
	if isQuestion("can you add it") || !isQuestion("did Ana reply") || !isQuestion("Who's on call") || !isQuestion("add it?") {
		t.Error("isQuestion: can you (a request), did, who's, a question mark")
	}
	if !readsOnly(Terms("slack_get_channel_history")) || readsOnly(Terms("create_or_update_file")) || readsOnly(Terms("echo")) {
		t.Error("readsOnly: get is a read, create_or_update is not, echo says neither")
	}
}

// A command's first word says what to do: a tool whose name does it (or
// a related verb) scores higher than for the same words in another
// order, and a question's first word boosts nothing.
func TestSearchCommandVerb(t *testing.T) {
	docs := []Doc{
		{Name: "shop__list_orders", Upstream: "shop", Description: "List the orders of the shop."},
		{Name: "tasks__create_task", Upstream: "tasks", Description: "Create a task."},
		{Name: "mail__send_email", Upstream: "mail", Description: "Send an email."},
	}
	ix := New(docs)
	ix.learned = nil // the boost alone: the learned table weighs verbs too
	score := func(query string, doc int) float64 {
		for _, h := range ix.Search(query, len(docs), "") {
			if h.Doc == doc {
				return h.Score
			}
		}
		return 0
	}
	const orders, tasks = 0, 1
	remind, order := "remind me to order more gas", "order more gas, remind me"
	if r := score(remind, tasks) / score(order, tasks); math.Abs(r-(1+verbBoost)) > 1e-9 {
		t.Errorf("create_task for %q: %v times its score for %q, want %v", remind, r, order, 1+verbBoost)
	}
	if r := score(order, orders) / score(remind, orders); math.Abs(r-(1+verbBoost)) > 1e-9 {
		t.Errorf("list_orders for %q: %v times its score for %q, want %v", order, r, remind, 1+verbBoost)
	}
	if verbBoost <= 0 {
		t.Errorf("verbBoost %v", verbBoost)
	}
}

// When nothing matches well, the tools that search the web are
// returned as a weak match; when something does, they are not added.
func TestSearchWebFallback(t *testing.T) {
	docs := []Doc{
		{Name: "files__read_file", Upstream: "files", Description: "Read a file from disk."},
		{Name: "brave__brave_web_search", Upstream: "brave", Description: "Search the web."},
		{Name: "drive__search_files", Upstream: "drive", Description: "Search the files of the drive."},
	}
	ix := New(docs)
	ix.learned = nil // the rule alone: a learned term may find a web search on its own
	if got := ix.Search("who was Ada Lovelace", 3, ""); len(got) != 1 || got[0].Doc != 1 || got[0].Score != webFallback*weakMatch {
		t.Errorf("a question about the world: %v, want only the web search at %v", got, webFallback*weakMatch)
	}
	if got := ix.Search("who was Ada Lovelace", 3, "files"); len(got) != 0 {
		t.Errorf("with an upstream filter: %v, want nothing", got)
	}
	got := ix.Search("read the file from the disk", 3, "")
	if len(got) == 0 || got[0].Doc != 0 || got[0].Score < weakMatch || slices.ContainsFunc(got, func(h Hit) bool { return h.Doc == 1 }) {
		t.Errorf("a good match: %v, want read_file first and no web search", got)
	}
}

// firstHits checks that each query's best hit is the doc it maps to,
// without the learned table: the tests that use it check the ranking's
// written rules, on catalogs of a few tools where a learned term
// outweighs them (a calendar's tasks mostly create events).
func firstHits(t *testing.T, docs []Doc, want map[string]int) {
	t.Helper()
	ix := New(docs)
	ix.learned = nil
	for query, w := range want {
		if got := ix.Search(query, 1, ""); len(got) != 1 || got[0].Doc != w {
			t.Errorf("%q: %v, want %s", query, got, docs[w].Name)
		}
	}
}

// The learned table leads a term, a pair of terms and a query's form to
// tool terms at their weights; a question takes no verb that writes.
func TestSearchLearned(t *testing.T) {
	docs := []Doc{
		{Name: "pay__list_invoices", Upstream: "pay", Description: "List the invoices of the account."},
		{Name: "pay__create_invoice", Upstream: "pay", Description: "Create an invoice for a customer."},
		{Name: "crm__list_deals", Upstream: "crm", Description: "List the deals of the pipeline."},
		{Name: "tasks__create_task", Upstream: "tasks", Description: "Create a task with a due date."},
	}
	ix := New(docs)
	ix.learned = parseLearned(`
overdu invoic:1.00 creat:0.90 list:0.20
chase_up task:0.80
^chase creat:0.40
`)
	first := func(query string) int {
		t.Helper()
		hits := ix.Search(query, 1, "")
		if len(hits) == 0 {
			t.Fatalf("%q: no hit", query)
		}
		return hits[0].Doc
	}
	// Without the table, nothing holds "overdue" or "chase".
	plain := New(docs)
	plain.learned = nil
	if got := plain.Search("overdue", 3, ""); len(got) != 0 {
		t.Errorf("without the table: %v, want nothing", got)
	}
	if got := first("overdue"); got != 0 && got != 1 {
		t.Errorf("overdue: %s, want an invoice tool", docs[got].Name)
	}
	// A question drops the learned creat: list_invoices, not create.
	if got := first("what is overdue?"); got != 0 {
		t.Errorf("what is overdue?: %s, want list_invoices", docs[got].Name)
	}
	// A pair leads where neither word does; the form adds to it.
	if got := first("chase up Bob"); got != 3 {
		t.Errorf("chase up Bob: %s, want create_task", docs[got].Name)
	}
	if got := ix.Search("Bob chase", 3, ""); len(got) != 0 {
		t.Errorf("Bob chase: %v, want nothing (the pair is chase up, and a form finds nothing by itself)", got)
	}
	for _, bad := range []string{"w t", "w t:0", "w t:1.5", "w t:x"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("parseLearned(%q) did not panic", bad)
				}
			}()
			parseLearned(bad)
		}()
	}
}

// A query's terms past the first maxQueryTerms count for nothing, so that
// a huge query costs no more than a long one (expansion is quadratic in
// the number of terms).
func TestSearchLongQuery(t *testing.T) {
	docs := []Doc{
		{Name: "mail__send_email", Upstream: "mail", Description: "Send an email message."},
		{Name: "files__read_file", Upstream: "files", Description: "Read a file."},
	}
	ix := New(docs)
	var words []string
	for i := range maxQueryTerms {
		words = append(words, "read"+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	words[0] = "file"
	head := strings.Join(words, " ")
	long := head + strings.Repeat(" send email", 5000)
	if got, want := ix.Search(long, 2, ""), ix.Search(head, 2, ""); !slices.Equal(got, want) {
		t.Errorf("long query: %v, want %v (its first %d terms)", got, want, maxQueryTerms)
	}
}

// queryTerms reads at most maxQueryWords words of a query: the rest of a
// huge one is never looked at, so that no query makes the quote and
// literal rules scan far (an unclosed quote looks ahead for its end).
func TestQueryTermsReadsABoundedPrefix(t *testing.T) {
	if got := queryTerms(strings.Repeat("'a ", 10_000) + "file"); slices.Contains(got, "file") {
		t.Errorf("the 10001st word of a query counted: %v", got)
	}
	if got := queryTerms(strings.Repeat("'a ", 200) + "file"); !slices.Contains(got, "file") {
		t.Errorf("the 201st word of a query did not count: %v", got)
	}
}

// FuzzSearch: any query, valid UTF-8 or not, gives terms that are not
// empty and hits that are sorted and within the limit, without a panic.
func FuzzSearch(f *testing.F) {
	for _, s := range []string{"", "read_file", "HTTPServer fetches URLs", "shut down the VM", "año Ñandú", "\xff\xfe", "a b c", "ÉCOLE", "x2y3", "İstanbul"} {
		f.Add(s)
	}
	ix := New([]Doc{
		{Name: "files__read_file", Upstream: "files", Description: "Read a file.", Params: []Param{{Name: "path"}}},
		{Name: "aws-ec2__stop_instance", Upstream: "aws-ec2", Description: "Stop a running EC2 instance."},
	})
	f.Fuzz(func(t *testing.T, q string) {
		for _, term := range Terms(q) {
			if term == "" {
				t.Fatalf("Terms(%q) has an empty term", q)
			}
		}
		hits := ix.Search(q, 1, "")
		if len(hits) > 1 {
			t.Fatalf("Search(%q, 1) = %v", q, hits)
		}
	})
}
