package router

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
)

// changeLog records the changes a router announces.
type changeLog struct {
	mu  sync.Mutex
	got []Change
}

func (l *changeLog) add(c Change) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, c)
}

// take returns and forgets the tools/list_changed recorded so far.
func (l *changeLog) take() []Change {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Change
	for _, c := range l.got {
		if c.Method == "notifications/tools/list_changed" {
			out = append(out, c)
		}
	}
	l.got = nil
	return out
}

// exposeRouter is searchRouter with search.expose_found on: the default
// view and data (which hides files__write_file and admin__*) expose what
// their callers find.
func exposeRouter(t *testing.T, fakes map[string]*fakeUpstream, opts Options) (*Router, *changeLog) {
	t.Helper()
	log := &changeLog{}
	opts.OnChange = log.add
	opts.Rules = policy.Rules{Mode: config.ModeSearch, ExposeFound: true, Teams: []policy.Team{
		{Name: "data", Allow: []string{"search__*", "files__read_*"}},
		{Name: "full", Mode: config.ModeFull},
	}}
	r := startRouter(t, opts, fakes, "search", "files", "admin")
	log.take() // the first starts'
	return r, log
}

func listedBy(t *testing.T, r *Router, c *Caller) []string {
	t.Helper()
	return listNames(t, r.Dispatch(context.Background(), c, request("tools/list", `{}`)), "tools")
}

func find(t *testing.T, r *Router, c *Caller, query string, limit int) []string {
	t.Helper()
	return found(t, r.Dispatch(context.Background(), c, callReq(toolFind, fmt.Sprintf(`{"query":%q,"limit":%d}`, query, limit), "")))
}

var gatewayTools = []string{toolFind, toolCall, toolDescribe}

// TestExposeFoundIsolation: what a legacy session finds joins its own
// tools/list and no other session's, even one of the same identity; what
// a modern identity finds joins that identity's list (on every request)
// and no other identity's, nor a legacy session's; each addition is
// announced to its owner only.
func TestExposeFoundIsolation(t *testing.T) {
	r, log := exposeRouter(t, searchFakes(), Options{})
	a := &Caller{ProtocolVersion: "2025-11-25", Session: "sess-a", Principal: "key:x"}
	b := &Caller{ProtocolVersion: "2025-11-25", Session: "sess-b", Principal: "key:x"}
	x := &Caller{ProtocolVersion: ModernVersion, Principal: "key:x"}
	y := &Caller{ProtocolVersion: ModernVersion, Principal: "key:y"}

	if got := find(t, r, a, "read a file from disk", 1); !cmp.Equal(got, []string{"files__read_file"}) {
		t.Fatalf("find: %v", got)
	}
	withRead := append(slices.Clone(gatewayTools), "files__read_file")
	if diff := cmp.Diff(withRead, listedBy(t, r, a)); diff != "" {
		t.Errorf("session a's list (-want +got):\n%s", diff)
	}
	for name, c := range map[string]*Caller{"session b": b, "identity x": x, "identity y": y} {
		if diff := cmp.Diff(gatewayTools, listedBy(t, r, c)); diff != "" {
			t.Errorf("%s sees session a's find (-want +got):\n%s", name, diff)
		}
	}
	if diff := cmp.Diff([]Change{{Method: "notifications/tools/list_changed", Session: "sess-a"}}, log.take()); diff != "" {
		t.Errorf("changes after a's find (-want +got):\n%s", diff)
	}
	// Finding it again changes nothing.
	find(t, r, a, "read a file from disk", 1)
	if got := log.take(); len(got) != 0 {
		t.Errorf("finding a listed tool again announced %+v", got)
	}

	if got := find(t, r, x, "search the web", 1); !cmp.Equal(got, []string{"search__web"}) {
		t.Fatalf("find: %v", got)
	}
	withWeb := append(slices.Clone(gatewayTools), "search__web")
	if diff := cmp.Diff(withWeb, listedBy(t, r, x)); diff != "" {
		t.Errorf("identity x's list (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(withWeb, listedBy(t, r, &Caller{ProtocolVersion: ModernVersion, Principal: "key:x", LogLevel: "debug"})); diff != "" {
		t.Errorf("identity x's next request (-want +got):\n%s", diff)
	}
	for name, c := range map[string]*Caller{"identity y": y, "session b": b, "x in view data": {ProtocolVersion: ModernVersion, Principal: "key:x", View: "data"}} {
		if diff := cmp.Diff(gatewayTools, listedBy(t, r, c)); diff != "" {
			t.Errorf("%s sees identity x's find (-want +got):\n%s", name, diff)
		}
	}
	if diff := cmp.Diff(withRead, listedBy(t, r, a)); diff != "" {
		t.Errorf("session a's list after x's find (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Change{{Method: "notifications/tools/list_changed", ForPrincipal: true, Principal: "key:x"}}, log.take()); diff != "" {
		t.Errorf("changes after x's find (-want +got):\n%s", diff)
	}

	// A modern identity's list is per identity: private to caches.
	reply := r.Dispatch(context.Background(), x, request("tools/list", `{}`))
	if scope, _ := jsonrpc.StringField(reply.Result, "cacheScope"); scope != "private" {
		t.Errorf("the default view's exposing tools/list has cacheScope %q, want private", scope)
	}

	// An exposed tool is called like any tool of the view.
	if reply := r.Dispatch(context.Background(), x, callReq("search__web", `{"q":"go"}`, "")); reply.Error != nil || reply.Upstream != "search" || reply.Original != "web" {
		t.Errorf("a direct call of the exposed tool: %s %+v, routed to %s/%s", reply.Result, reply.Error, reply.Upstream, reply.Original)
	}

	// Without authentication every modern host of a view is the one
	// anonymous identity: they share a list.
	anon1, anon2 := &Caller{ProtocolVersion: ModernVersion}, &Caller{ProtocolVersion: ModernVersion, LogLevel: "info"}
	find(t, r, anon1, "latest news headlines", 1)
	if diff := cmp.Diff(append(slices.Clone(gatewayTools), "search__news"), listedBy(t, r, anon2)); diff != "" {
		t.Errorf("another anonymous modern host (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Change{{Method: "notifications/tools/list_changed", ForPrincipal: true}}, log.take()); diff != "" {
		t.Errorf("changes after the anonymous find (-want +got):\n%s", diff)
	}

	// The session's end forgets its list.
	r.HostGone("sess-a")
	if diff := cmp.Diff(gatewayTools, listedBy(t, r, a)); diff != "" {
		t.Errorf("an ended session's id lists (-want +got):\n%s", diff)
	}
}

// TestExposeFoundHidden: a tool the caller's view hides is never
// exposed, even when something asks to expose it; and a tool that leaves
// the view leaves the exposed list, with a notice to its owner, and comes
// back with it.
func TestExposeFoundHidden(t *testing.T) {
	fakes := searchFakes()
	// One tool per owner: a hidden name taking the place would push the
	// visible one out.
	r, log := exposeRouter(t, fakes, Options{MaxExposed: 1})
	c := &Caller{ProtocolVersion: ModernVersion, Principal: "key:d", View: "data"}
	if got := find(t, r, c, "reboot the machine", 20); slices.Contains(got, "admin__reboot") || slices.Contains(got, "files__write_file") {
		t.Fatalf("the data view found hidden tools: %v", got)
	}
	v := r.catalog().view("data")
	r.expose(c, v, []string{"admin__reboot", "files__write_file", "search__news"})
	if diff := cmp.Diff(append(slices.Clone(gatewayTools), "search__news"), listedBy(t, r, c)); diff != "" {
		t.Errorf("exposing hidden tools (-want +got):\n%s", diff)
	}
	log.take()

	// The upstream drops news: it leaves the list, and the owner hears.
	fakes["search"].mu.Lock()
	keep := fakes["search"].lists["tools/list"]
	fakes["search"].lists["tools/list"] = keep[:1]
	fakes["search"].mu.Unlock()
	r.refresh(context.Background(), r.upstreams()[0])
	if diff := cmp.Diff(gatewayTools, listedBy(t, r, c)); diff != "" {
		t.Errorf("after news left the catalog (-want +got):\n%s", diff)
	}
	// (The full view's hosts hear of the catalog change too.)
	want := []Change{{Method: "notifications/tools/list_changed", View: "data", ForPrincipal: true, Principal: "key:d"}, {Method: "notifications/tools/list_changed", View: "full"}}
	if diff := cmp.Diff(want, log.take()); diff != "" {
		t.Errorf("changes when an exposed tool left (-want +got):\n%s", diff)
	}
	// Gone from the view, it is forgotten: its return does not list it.
	fakes["search"].mu.Lock()
	fakes["search"].lists["tools/list"] = keep
	fakes["search"].mu.Unlock()
	r.refresh(context.Background(), r.upstreams()[0])
	if diff := cmp.Diff(gatewayTools, listedBy(t, r, c)); diff != "" {
		t.Errorf("after news came back (-want +got):\n%s", diff)
	}
}

// TestExposeFoundReloadHides: a reload whose view no longer allows an
// exposed tool takes it out of the list, with a notice.
func TestExposeFoundReloadHides(t *testing.T) {
	log := &changeLog{}
	up := &fakeUpstream{lists: map[string][]string{"tools/list": {
		`{"name":"read_file","description":"Read a file from disk","inputSchema":{"type":"object"}}`,
		`{"name":"drop_table","description":"Drop a database table","inputSchema":{"type":"object"}}`,
	}}}
	opts := Options{ListWait: -1, OnChange: log.add, Rules: policy.Rules{Mode: config.ModeSearch, ExposeFound: true}}
	opts.Upstreams = []UpstreamConfig{{Name: "up", Connect: up.connect, Fingerprint: "up1"}}
	r := startRouter(t, opts, nil)
	c := &Caller{ProtocolVersion: "2025-11-25", Session: "s"}
	if got := find(t, r, c, "drop a database table", 1); !cmp.Equal(got, []string{"up__drop_table"}) {
		t.Fatalf("find: %v", got)
	}
	log.take()
	opts.Rules.Upstreams = map[string]policy.UpstreamRules{"up": {Deny: []string{"drop_*"}}}
	if err := r.Reconfigure(&opts); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(gatewayTools, listedBy(t, r, c)); diff != "" {
		t.Errorf("after the reload denied it (-want +got):\n%s", diff)
	}
	if reply := r.Dispatch(context.Background(), c, callReq("up__drop_table", `{}`, "")); reply.Error == nil || reply.Error.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("a direct call of the denied tool: %s %+v, want unknown", reply.Result, reply.Error)
	}
	if diff := cmp.Diff([]Change{{Method: "notifications/tools/list_changed", Session: "s"}}, log.take()); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}

	// A reload that turns expose_found off empties the lists, with a
	// notice, and forgets them.
	if got := find(t, r, c, "read a file from disk", 1); !cmp.Equal(got, []string{"up__read_file"}) {
		t.Fatalf("find: %v", got)
	}
	log.take()
	opts.Rules.ExposeFound = false
	if err := r.Reconfigure(&opts); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(gatewayTools, listedBy(t, r, c)); diff != "" {
		t.Errorf("after the reload turned expose_found off (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Change{{Method: "notifications/tools/list_changed", Session: "s"}}, log.take()); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	r.exposed.mu.Lock()
	left := r.exposed.owners.Len()
	r.exposed.mu.Unlock()
	if left != 0 {
		t.Errorf("%d lists kept after expose_found was turned off", left)
	}
}

// TestExposeFoundBounds: a flood of finds from many sessions and
// identities keeps at most MaxExposed tools per owner (the least
// recently found dropped first) and at most MaxExposedCallers owners
// (the least recently active forgotten first); an owner unused for
// ExposedIdle is forgotten.
func TestExposeFoundBounds(t *testing.T) {
	// Each tool's description has a word of its own (numbers are not
	// search terms).
	topics := strings.Fields("alpha bravo charlie delta echo foxtrot golf hotel india juliet")
	var toolDefs []string
	for i, topic := range topics {
		toolDefs = append(toolDefs, fmt.Sprintf(`{"name":"t%d","description":"%s thing","inputSchema":{"type":"object"}}`, i, topic))
	}
	up := &fakeUpstream{lists: map[string][]string{"tools/list": toolDefs}}
	r := startRouter(t, Options{MaxExposed: 3, MaxExposedCallers: 4, ExposedIdle: time.Hour, Rules: policy.Rules{Mode: config.ModeSearch, ExposeFound: true}},
		map[string]*fakeUpstream{"up": up}, "up")
	var mu sync.Mutex
	now := time.Unix(1e9, 0)
	r.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }

	c := &Caller{ProtocolVersion: ModernVersion, Principal: "key:one"}
	for _, topic := range topics {
		find(t, r, c, topic, 1)
	}
	if diff := cmp.Diff(append(slices.Clone(gatewayTools), "up__t7", "up__t8", "up__t9"), listedBy(t, r, c)); diff != "" {
		t.Errorf("after ten finds (-want +got):\n%s", diff)
	}
	find(t, r, c, topics[7], 1) // the oldest is now t8
	find(t, r, c, topics[0], 1)
	if diff := cmp.Diff(append(slices.Clone(gatewayTools), "up__t0", "up__t7", "up__t9"), listedBy(t, r, c)); diff != "" {
		t.Errorf("after finding t7 again, then t0 (-want +got):\n%s", diff)
	}

	for i := range 200 {
		caller := &Caller{ProtocolVersion: ModernVersion, Principal: fmt.Sprint("key:flood", i)}
		if i%2 == 0 {
			caller = &Caller{ProtocolVersion: "2025-11-25", Session: fmt.Sprint("flood", i)}
		}
		find(t, r, caller, strings.Join(topics[1:6], " "), 5)
	}
	r.exposed.mu.Lock()
	owners := r.exposed.owners.Len()
	longest := 0
	for _, e := range r.exposed.owners.Values() {
		longest = max(longest, len(e.names))
	}
	r.exposed.mu.Unlock()
	if owners > 4 || longest > 3 {
		t.Errorf("after a flood: %d owners, the longest list %d names; want at most 4 and 3", owners, longest)
	}
	if diff := cmp.Diff(gatewayTools, listedBy(t, r, c)); diff != "" {
		t.Errorf("the flood's first victim still lists (-want +got):\n%s", diff)
	}

	last := &Caller{ProtocolVersion: "2025-11-25", Session: "flood198"}
	if got := listedBy(t, r, last); len(got) != 6 {
		t.Fatalf("the latest session lists %v, want the gateway's tools and 3 found", got)
	}
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	if diff := cmp.Diff(gatewayTools, listedBy(t, r, last)); diff != "" {
		t.Errorf("after an idle hour (-want +got):\n%s", diff)
	}
}

// TestExposeFoundOff: without expose_found (or in a team that turns it
// off) find_tools adds nothing to any list and announces nothing.
func TestExposeFoundOff(t *testing.T) {
	log := &changeLog{}
	no := false
	r := startRouter(t, Options{OnChange: log.add, Rules: policy.Rules{Mode: config.ModeSearch, Teams: []policy.Team{{Name: "quiet", ExposeFound: &no}}}},
		searchFakes(), "search", "files", "admin")
	log.take()
	for _, c := range []*Caller{{ProtocolVersion: "2025-11-25", Session: "s"}, {ProtocolVersion: ModernVersion}, {ProtocolVersion: ModernVersion, View: "quiet"}} {
		find(t, r, c, "read a file", 5)
		if diff := cmp.Diff(gatewayTools, listedBy(t, r, c)); diff != "" {
			t.Errorf("%+v lists (-want +got):\n%s", c, diff)
		}
	}
	if got := log.take(); len(got) != 0 {
		t.Errorf("announced %+v", got)
	}
}

// TestExposeFoundDefinitionChange: an exposed tool whose definition
// changes upstream is listed as it is now, and its owner hears of it;
// an owner whose tools did not change hears nothing.
func TestExposeFoundDefinitionChange(t *testing.T) {
	fakes := searchFakes()
	r, log := exposeRouter(t, fakes, Options{})
	web := &Caller{ProtocolVersion: ModernVersion, Principal: "key:web"}
	files := &Caller{ProtocolVersion: ModernVersion, Principal: "key:files"}
	find(t, r, web, "search the web for pages", 1)
	find(t, r, files, "read a file from disk", 1)
	log.take()
	fakes["search"].mu.Lock()
	fakes["search"].lists["tools/list"][0] = `{"name":"web","description":"Search the whole web","inputSchema":{"type":"object"}}`
	fakes["search"].mu.Unlock()
	r.refresh(context.Background(), r.upstreams()[0])
	reply := r.Dispatch(context.Background(), web, request("tools/list", `{}`))
	if !strings.Contains(string(reply.Result), "Search the whole web") {
		t.Errorf("the exposed tool is listed as it was: %s", reply.Result)
	}
	want := []Change{{Method: "notifications/tools/list_changed", ForPrincipal: true, Principal: "key:web"}, {Method: "notifications/tools/list_changed", View: "full"}}
	if diff := cmp.Diff(want, log.take()); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
}

// TestExposeFoundPerView: a reload that hides a tool from one view takes
// it out of that view's lists only, and tells their owners only.
func TestExposeFoundPerView(t *testing.T) {
	log := &changeLog{}
	up := &fakeUpstream{lists: map[string][]string{"tools/list": {
		`{"name":"read_file","description":"Read a file from disk","inputSchema":{"type":"object"}}`,
	}}}
	opts := Options{ListWait: -1, OnChange: log.add, Rules: policy.Rules{Mode: config.ModeSearch, ExposeFound: true, Teams: []policy.Team{{Name: "data"}}}}
	opts.Upstreams = []UpstreamConfig{{Name: "up", Connect: up.connect, Fingerprint: "up1"}}
	r := startRouter(t, opts, nil)
	inDefault := &Caller{ProtocolVersion: ModernVersion, Principal: "key:p"}
	inData := &Caller{ProtocolVersion: ModernVersion, Principal: "key:d", View: "data"}
	for _, c := range []*Caller{inDefault, inData} {
		if got := find(t, r, c, "read a file from disk", 1); !cmp.Equal(got, []string{"up__read_file"}) {
			t.Fatalf("find in view %q: %v", c.View, got)
		}
	}
	log.take()
	opts.Rules.Teams = []policy.Team{{Name: "data", Deny: []string{"up__read_file"}}}
	if err := r.Reconfigure(&opts); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(append(slices.Clone(gatewayTools), "up__read_file"), listedBy(t, r, inDefault)); diff != "" {
		t.Errorf("the default view's owner (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(gatewayTools, listedBy(t, r, inData)); diff != "" {
		t.Errorf("data's owner (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Change{{Method: "notifications/tools/list_changed", View: "data", ForPrincipal: true, Principal: "key:d"}}, log.take()); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
}

// BenchmarkExposedRebuild: what a catalog change costs the exposed lists
// at their bounds (10000 owners of 32 tools each, out of 200). Run:
//
//	go test -run '^$' -bench ExposedRebuild -benchmem ./internal/router
func BenchmarkExposedRebuild(b *testing.B) {
	var defs []string
	for i := range 200 {
		defs = append(defs, fmt.Sprintf(`{"name":"t%d","description":"tool number %d","inputSchema":{"type":"object"}}`, i, i))
	}
	up := &fakeUpstream{lists: map[string][]string{"tools/list": defs}}
	opts := Options{ListWait: -1, Rules: policy.Rules{Mode: config.ModeSearch, ExposeFound: true}}
	opts.Upstreams = []UpstreamConfig{{Name: "up", Connect: up.connect}}
	r, err := New(&opts)
	if err != nil {
		b.Fatal(err)
	}
	r.Start(context.Background())
	b.Cleanup(func() { _ = r.Close() })
	if err := r.WaitStarted(context.Background()); err != nil {
		b.Fatal(err)
	}
	v := r.catalog().view("")
	perOwner, owners, _ := r.exposedLimits()
	for i := range owners {
		names := make([]string, perOwner)
		for j := range names {
			names[j] = fmt.Sprintf("up__t%d", (i+j)%200)
		}
		r.expose(&Caller{ProtocolVersion: ModernVersion, Principal: fmt.Sprint("key:", i)}, v, names)
	}
	old, cat := r.catalog(), r.buildCatalog()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		r.rebuildExposed(old, cat)
	}
}

// TestExposeFoundAsTasks: a legacy host that takes tasks sees an exposed
// tool of an upstream with tasks.after as full mode lists it to it
// (execution.taskSupport optional); a host that does not, as it is.
func TestExposeFoundAsTasks(t *testing.T) {
	up := &fakeUpstream{lists: map[string][]string{"tools/list": {`{"name":"build","description":"Build the project","inputSchema":{"type":"object"}}`}}}
	opts := Options{ListWait: -1, Rules: policy.Rules{Mode: config.ModeSearch, ExposeFound: true}}
	opts.Upstreams = []UpstreamConfig{{Name: "up", Connect: up.connect, Timeout: time.Hour, TaskAfter: time.Second}}
	r := startRouter(t, opts, nil)
	for _, tt := range []struct {
		caller *Caller
		want   bool
	}{
		{&Caller{ProtocolVersion: "2025-11-25", Session: "s-tasks", Capabilities: json.RawMessage(`{"tasks":{}}`)}, true},
		{&Caller{ProtocolVersion: "2025-11-25", Session: "s-plain", Capabilities: json.RawMessage(`{}`)}, false},
	} {
		if got := find(t, r, tt.caller, "build the project", 1); !cmp.Equal(got, []string{"up__build"}) {
			t.Fatalf("find: %v", got)
		}
		reply := r.Dispatch(context.Background(), tt.caller, request("tools/list", `{}`))
		if got := strings.Contains(string(reply.Result), `"taskSupport":"optional"`); got != tt.want {
			t.Errorf("session %s: taskSupport optional listed %v, want %v: %s", tt.caller.Session, got, tt.want, reply.Result)
		}
	}
}

// TestExposeFoundConcurrent: finds, lists, session ends and catalog
// rebuilds at once (run with -race) leave every list within its bounds
// and made of the view's tools.
func TestExposeFoundConcurrent(t *testing.T) {
	fakes := searchFakes()
	r, _ := exposeRouter(t, fakes, Options{MaxExposed: 2, MaxExposedCallers: 8})
	queries := []string{"read a file", "search the web", "latest news", "write a file", "reboot"}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				// The goroutines share owners: one finds while another lists.
				c := &Caller{ProtocolVersion: eras[i%2], Session: fmt.Sprint("s", i%5, g%2), Principal: fmt.Sprint("key:", i%3), View: []string{"", "data"}[g%2]}
				// (t.Fatal belongs to the test's goroutine: no find or
				// listedBy here.)
				if reply := r.Dispatch(context.Background(), c, callReq(toolFind, fmt.Sprintf(`{"query":%q,"limit":3}`, queries[(g+i)%len(queries)]), "")); reply.Error != nil || reply.ToolError {
					t.Errorf("find_tools: %s %v", reply.Result, reply.Error)
					return
				}
				reply := r.Dispatch(context.Background(), c, request("tools/list", `{}`))
				if reply.Error != nil {
					t.Errorf("tools/list: %v", reply.Error)
					return
				}
				for _, hidden := range []string{"admin__reboot", "files__write_file"} {
					if c.View == "data" && strings.Contains(string(reply.Result), `"name":"`+hidden+`"`) {
						t.Errorf("data lists the hidden %s", hidden)
					}
				}
				if i%7 == 0 {
					r.HostGone(c.Session)
				}
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			r.refresh(context.Background(), r.upstreams()[1])
		}
	})
	wg.Wait()
	r.exposed.mu.Lock()
	defer r.exposed.mu.Unlock()
	if n := r.exposed.owners.Len(); n > 8 {
		t.Errorf("%d owners, want at most 8", n)
	}
	for _, e := range r.exposed.owners.Values() {
		if len(e.names) > 2 {
			t.Errorf("an owner holds %v, want at most 2", e.names)
		}
	}
}

// TestExposeFoundHintSaysWhatHappened: find_tools says the tools found
// joined the caller's list only when they did; a legacy caller without
// a session, whose list cannot hold them, is told to use call_tool.
func TestExposeFoundHintSaysWhatHappened(t *testing.T) {
	r, _ := exposeRouter(t, searchFakes(), Options{})
	hint := func(c *Caller) string {
		t.Helper()
		reply := r.Dispatch(context.Background(), c, callReq(toolFind, `{"query":"read a file from disk","limit":1}`, ""))
		var out struct {
			StructuredContent struct {
				Tools []json.RawMessage `json:"tools"`
				Hint  string            `json:"hint"`
			} `json:"structuredContent"`
		}
		if err := json.Unmarshal(reply.Result, &out); err != nil || len(out.StructuredContent.Tools) == 0 {
			t.Fatalf("find_tools: %s %v", reply.Result, err)
		}
		return out.StructuredContent.Hint
	}
	if got := hint(&Caller{ProtocolVersion: "2025-11-25", Session: "s"}); !strings.Contains(got, "now in your tool list") {
		t.Errorf("hint for a session whose list holds them: %q", got)
	}
	if got := hint(&Caller{ProtocolVersion: "2025-11-25"}); strings.Contains(got, "now in your tool list") || !strings.Contains(got, "call_tool") {
		t.Errorf("hint for a caller without a session, whose list holds nothing: %q, want the call_tool hint", got)
	}
}
