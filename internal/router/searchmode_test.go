package router

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/namespace"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
)

// searchFakes are teamFakes with descriptions worth searching.
func searchFakes() map[string]*fakeUpstream {
	return map[string]*fakeUpstream{
		"search": {lists: map[string][]string{"tools/list": {
			`{"name":"web","title":"Web search","description":"Search the web for pages","inputSchema":{"type":"object","properties":{"q":{"type":"string","description":"the query"}}},"annotations":{"readOnlyHint":true}}`,
			`{"name":"news","description":"Latest news headlines","inputSchema":{"type":"object"}}`,
		}}},
		"files": {lists: map[string][]string{
			"tools/list": {
				`{"name":"read_file","description":"Read a file from disk","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}}}`,
				`{"name":"write_file","description":"Write a file to disk","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}}}`,
			},
			"prompts/list": {`{"name":"summarize"}`},
		}},
		"admin": {lists: map[string][]string{"tools/list": {
			`{"name":"reboot","description":"Reboot the machine","inputSchema":{"type":"object"}}`,
		}}},
	}
}

// searchRouter: the default view is in search mode; data (search mode,
// inherited) sees search and the read tools of files; full is a team in
// full mode that sees everything.
func searchRouter(t *testing.T, fakes map[string]*fakeUpstream, opts Options) *Router {
	t.Helper()
	opts.Rules = policy.Rules{Mode: config.ModeSearch, Teams: []policy.Team{
		{Name: "data", Allow: []string{"search__*", "files__read_*"}},
		{Name: "full", Mode: config.ModeFull},
	}}
	return startRouter(t, opts, fakes, "search", "files", "admin")
}

var eras = []string{"2025-11-25", ModernVersion}

// callReq is a tools/call request of name with arguments (raw JSON)
// and, if not "", params._meta.
func callReq(name, arguments, meta string) *jsonrpc.Request {
	params := `{"name":"` + name + `","arguments":` + arguments
	if meta != "" {
		params += `,"_meta":` + meta
	}
	return request("tools/call", params+"}")
}

// found is the names find_tools returned; it fails the test on anything
// but a well-formed result whose text and structuredContent agree.
func found(t *testing.T, reply *Reply) []string {
	t.Helper()
	if reply.Error != nil || reply.ToolError {
		t.Fatalf("find_tools: %s %v", reply.Result, reply.Error)
	}
	var res struct {
		Content []struct {
			Type, Text string
		}
		StructuredContent json.RawMessage
	}
	if err := json.Unmarshal(reply.Result, &res); err != nil || len(res.Content) != 1 {
		t.Fatalf("find_tools result %s: %v", reply.Result, err)
	}
	var text, structured struct {
		Tools []foundTool
	}
	if err := json.Unmarshal([]byte(res.Content[0].Text), &text); err != nil {
		t.Fatalf("find_tools text %q: %v", res.Content[0].Text, err)
	}
	if err := json.Unmarshal(res.StructuredContent, &structured); err != nil {
		t.Fatalf("find_tools structuredContent %s: %v", res.StructuredContent, err)
	}
	if diff := cmp.Diff(text, structured); diff != "" {
		t.Errorf("text and structuredContent differ (-text +structured):\n%s", diff)
	}
	names := []string{}
	for _, f := range text.Tools {
		if f.Upstream == "" || len(f.InputSchema) == 0 || len(f.Description) == 0 {
			t.Errorf("found %+v without its upstream, description or inputSchema", f)
		}
		names = append(names, f.Name)
	}
	return names
}

func TestSearchModeLists(t *testing.T) {
	r := searchRouter(t, searchFakes(), Options{})
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			for _, tt := range []struct {
				view string
				want []string
			}{
				{"", []string{toolFind, toolCall, toolDescribe}},
				{"data", []string{toolFind, toolCall, toolDescribe}},
				{"full", []string{"search__web", "search__news", "files__read_file", "files__write_file", "admin__reboot"}},
			} {
				c := &Caller{ProtocolVersion: era, View: tt.view}
				reply := r.Dispatch(context.Background(), c, request("tools/list", `{}`))
				if diff := cmp.Diff(tt.want, listNames(t, reply, "tools")); diff != "" {
					t.Errorf("view %q tools (-want +got):\n%s", tt.view, diff)
				}
				if era == ModernVersion {
					scope, _ := jsonrpc.StringField(reply.Result, "cacheScope")
					_, ttl := jsonrpc.Field(reply.Result, "ttlMs")
					if want := map[bool]string{true: "private", false: "public"}[tt.view != ""]; scope != want || !ttl {
						t.Errorf("view %q: cacheScope %q and ttlMs %v, want %q and a ttl", tt.view, scope, ttl, want)
					}
				}
				// Prompts stay as they are.
				if got := listNames(t, r.Dispatch(context.Background(), c, request("prompts/list", `{}`)), "prompts"); tt.view != "data" && !cmp.Equal(got, []string{"files__summarize"}) {
					t.Errorf("view %q prompts %v", tt.view, got)
				}
			}
		})
	}
	// The list is valid JSON whose tools have valid names.
	var list []struct{ Name string }
	if err := json.Unmarshal([]byte(searchToolsJSON), &list); err != nil {
		t.Fatal(err)
	}
	for _, tl := range list {
		if len(tl.Name) > 64 || strings.Trim(tl.Name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") != "" {
			t.Errorf("tool name %q breaks the tool name rule", tl.Name)
		}
	}
}

func TestFindTools(t *testing.T) {
	r := searchRouter(t, searchFakes(), Options{})
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			find := func(view, args string) *Reply {
				return r.Dispatch(context.Background(), &Caller{ProtocolVersion: era, View: view}, callReq(toolFind, args, ""))
			}
			if got := found(t, find("", `{"query":"search the web"}`)); len(got) == 0 || got[0] != "search__web" {
				t.Errorf("default view, web: %v, want search__web first", got)
			}
			if got := found(t, find("", `{"query":"write a file"}`)); len(got) == 0 || got[0] != "files__write_file" {
				t.Errorf("default view, write: %v, want files__write_file first", got)
			}
			// A tool the view hides is not found, not even by its exact
			// name, nor by words only it has.
			for _, q := range []string{"files__write_file", "write_file", "write a file to disk", "admin__reboot", "reboot the machine"} {
				for _, name := range found(t, find("data", `{"query":"`+q+`"}`)) {
					if name != "search__web" && name != "search__news" && name != "files__read_file" {
						t.Errorf("data, query %q, found the hidden %s", q, name)
					}
				}
			}
			if got := found(t, find("data", `{"query":"file","upstream":"files"}`)); !cmp.Equal(got, []string{"files__read_file"}) {
				t.Errorf("data, file in files: %v", got)
			}
			if got := found(t, find("", `{"query":"file disk web news","limit":1}`)); len(got) != 1 {
				t.Errorf("limit 1: %v", got)
			}
			// Nothing of the search upstream matches "file": at most its web
			// search, offered when nothing matches well.
			if got := found(t, find("", `{"query":"file","upstream":"search"}`)); len(got) > 1 || len(got) == 1 && got[0] != "search__web" {
				t.Errorf("file in search: %v, want none, or the web search alone", got)
			}
			// Bad arguments are tool errors that say what is wrong.
			for args, want := range map[string]string{
				`{}`:                             `needs the argument \"query\"`,
				`{"query":" "}`:                  "must not be empty",
				`{"query":1}`:                    "must be a string",
				`{"query":"x","limit":0}`:        "from 1 to 20",
				`{"query":"x","limit":21}`:       "from 1 to 20",
				`{"query":"x","limit":2.5}`:      "from 1 to 20",
				`{"query":"x","limit":"3"}`:      "from 1 to 20",
				`{"query":"x","upstream":false}`: `\"upstream\" must be a string`,
				`{"query":"x","Query":"y"}`:      `no argument \"Query\"`,
				`[]`:                             "arguments that are an object",
			} {
				reply := find("", args)
				if !reply.ToolError || !strings.Contains(string(reply.Result), want) {
					t.Errorf("find_tools %s: %s, want an isError result saying %s", args, reply.Result, want)
				}
			}
		})
	}
}

func TestCallToolIsADirectCall(t *testing.T) {
	fakes := searchFakes()
	fakes["search"].answer = func(method string, params json.RawMessage) (*jsonrpc.Message, error) {
		return &jsonrpc.Message{ID: json.RawMessage("1"), Result: json.RawMessage(`{"content":[{"type":"text","text":"no"}],"isError":true,"x":` + string(params) + `}`)}, nil
	}
	r := searchRouter(t, fakes, Options{})
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			c := &Caller{ProtocolVersion: era, View: "data"}
			reply := r.Dispatch(context.Background(), c, callReq(toolCall, `{"name":"search__web","arguments":{"q":"go"}}`, `{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`))
			direct := r.Dispatch(context.Background(), c, callReq("search__web", `{"q":"go"}`, `{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`))
			if reply.Error != nil || !reply.ToolError || reply.Upstream != "search" || reply.Original != "web" {
				t.Fatalf("call_tool: %+v", reply)
			}
			if !cmp.Equal(reply.Result, direct.Result) {
				t.Errorf("call_tool result %s, direct %s", reply.Result, direct.Result)
			}
			calls := fakes["search"].recorded()
			if got, want := calls[len(calls)-2].Params, calls[len(calls)-1].Params; got != want {
				t.Errorf("the upstream got %s through call_tool, %s directly", got, want)
			}
			// A tool the view hides, or that does not exist: the same
			// answer as a direct call.
			for _, name := range []string{"files__write_file", "admin__reboot", "nope"} {
				via := r.Dispatch(context.Background(), c, callReq(toolCall, `{"name":"`+name+`","arguments":{}}`, ""))
				direct := r.Dispatch(context.Background(), c, callReq(name, `{}`, ""))
				if via.Error == nil || !cmp.Equal(via.Error, direct.Error) || via.Upstream != "" {
					t.Errorf("call_tool %s: %+v, direct: %+v", name, via.Error, direct.Error)
				}
			}
			// No recursion.
			for _, name := range []string{toolFind, toolCall, toolDescribe} {
				via := r.Dispatch(context.Background(), c, callReq(toolCall, `{"name":"`+name+`","arguments":{"name":"x"}}`, ""))
				if !via.ToolError || !strings.Contains(string(via.Result), "the gateway's own tool") {
					t.Errorf("call_tool %s: %s", name, via.Result)
				}
			}
			for args, want := range map[string]string{
				`{"arguments":{}}`:            `needs the argument \"name\"`,
				`{"name":"x","arguments":[]}`: "must be an object",
				`{"name":"x","args":{}}`:      `no argument \"args\"`,
			} {
				if via := r.Dispatch(context.Background(), c, callReq(toolCall, args, "")); !via.ToolError || !strings.Contains(string(via.Result), want) {
					t.Errorf("call_tool %s: %s, want %s", args, via.Result, want)
				}
			}
			// A direct call still works in search mode, by the same policy.
			if reply := r.Dispatch(context.Background(), c, callReq("files__read_file", `{}`, "")); reply.Error != nil {
				t.Errorf("a direct call: %v", reply.Error)
			}
		})
	}
	for _, f := range fakes["files"].recorded() {
		if strings.Contains(f.Params, "write_file") {
			t.Errorf("a hidden tool was called: %s", f.Params)
		}
	}
	if got := fakes["admin"].recorded(); len(got) != 0 {
		t.Errorf("a hidden upstream was called: %v", got)
	}
}

// TestCallToolProgressAndCancel: progress of a call made through
// call_tool reaches its host under its own token, and cancelling the
// host's request ends the upstream call.
func TestCallToolProgressAndCancel(t *testing.T) {
	up, arrived, release := blockingUpstream()
	r := startRouter(t, Options{Rules: policy.Rules{Mode: config.ModeSearch}}, map[string]*fakeUpstream{"up": up}, "up")
	h := &recordingHost{}
	var wg sync.WaitGroup
	wg.Go(func() {
		c := &Caller{ProtocolVersion: "2025-11-25", Host: h}
		r.Dispatch(context.Background(), c, callReq(toolCall, `{"name":"up__work","arguments":{}}`, `{"progressToken":"p-1"}`))
	})
	params := <-arrived
	meta, _ := jsonrpc.Field(params, "_meta")
	tok, _ := jsonrpc.StringField(meta, "progressToken")
	if name, _ := jsonrpc.StringField(params, "name"); name != "work" || !strings.HasPrefix(tok, "gw-") {
		t.Fatalf("the upstream got %s, want work with a gateway progress token", params)
	}
	up.handlers.Notify(&jsonrpc.Message{Method: "notifications/progress", Params: json.RawMessage(`{"progressToken":"` + tok + `","progress":1}`)})
	close(release)
	wg.Wait()
	if notes, _ := h.got(); len(notes) != 1 || !strings.HasPrefix(notes[0], `notifications/progress {"progressToken":"p-1",`) {
		t.Errorf("host got %v, want its progress under its token", notes)
	}

	ended := make(chan struct{})
	up.answerCtx = func(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error) {
		arrived <- params
		<-ctx.Done()
		close(ended)
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	wg.Go(func() {
		reply := r.Dispatch(ctx, modernCaller, callReq(toolCall, `{"name":"up__work"}`, ""))
		if reply.Error == nil || !strings.Contains(reply.Error.Message, "cancelled") {
			t.Errorf("a cancelled call_tool: %s %+v, want the direct call's error", reply.Result, reply.Error)
		}
	})
	<-arrived
	cancel()
	<-ended
	wg.Wait()
}

// TestCallToolLimits: a tool's rate limit counts calls through call_tool
// and direct ones alike.
func TestCallToolLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &fakeUpstream{lists: map[string][]string{"tools/list": tools("work")}}
		limits := NewLimits(LimitsOptions{Tools: map[string]map[string]Rate{"up": {"work": {Per: 1, Burst: 2}}}})
		r := startRouter(t, Options{Limits: limits, Rules: policy.Rules{Mode: config.ModeSearch}}, map[string]*fakeUpstream{"up": up}, "up")
		via := func() *Reply {
			return r.Dispatch(context.Background(), keyCaller("key:a"), callReq(toolCall, `{"name":"up__work"}`, ""))
		}
		if reply := via(); reply.ToolError {
			t.Fatalf("within the burst: %s", reply.Result)
		}
		if reply := r.Dispatch(context.Background(), keyCaller("key:a"), callReq("up__work", `{}`, "")); reply.ToolError {
			t.Fatalf("a direct call within the burst: %s", reply.Result)
		}
		if reply := via(); !reply.ToolError || !strings.Contains(string(reply.Result), "rate limit") {
			t.Errorf("over the rate through call_tool: %s, want an isError result about the rate limit", reply.Result)
		}
	})
}

func TestDescribeTool(t *testing.T) {
	r := searchRouter(t, searchFakes(), Options{})
	full, _ := r.Tools("full")
	def := map[string]json.RawMessage{}
	for _, tl := range full.Tools {
		def[tl.Name] = tl.Definition
	}
	for _, era := range eras {
		c := &Caller{ProtocolVersion: era, View: "data"}
		reply := r.Dispatch(context.Background(), c, callReq(toolDescribe, `{"name":"search__web"}`, ""))
		var res struct{ Content []struct{ Text string } }
		if err := json.Unmarshal(reply.Result, &res); err != nil || reply.ToolError || len(res.Content) != 1 {
			t.Fatalf("describe_tool: %s %v", reply.Result, err)
		}
		if got := res.Content[0].Text; got != string(def["search__web"]) {
			t.Errorf("describe_tool search__web = %s, want %s", got, def["search__web"])
		}
		for _, name := range []string{"files__write_file", "admin__reboot", "nope"} {
			reply := r.Dispatch(context.Background(), c, callReq(toolDescribe, `{"name":"`+name+`"}`, ""))
			if !reply.ToolError || !strings.Contains(string(reply.Result), "Unknown tool: "+name) || strings.Contains(string(reply.Result), "disk") {
				t.Errorf("describe_tool %s: %s, want unknown", name, reply.Result)
			}
		}
	}
}

// TestSearchModeListChanged: a catalog change tells the hosts of a view
// in full mode, not those of a view in search mode, whose list stays the
// same; find_tools sees the new catalog at once.
func TestSearchModeListChanged(t *testing.T) {
	changes := make(chan Change, 16)
	fakes := searchFakes()
	r := searchRouter(t, fakes, Options{OnChange: func(c Change) { changes <- c }})
	for len(changes) > 0 { // the first starts'
		<-changes
	}
	fakes["admin"].mu.Lock()
	fakes["admin"].lists["tools/list"] = append(fakes["admin"].lists["tools/list"], `{"name":"shutdown","description":"Power off the machine","inputSchema":{"type":"object"}}`)
	fakes["admin"].mu.Unlock()
	if got := found(t, r.Dispatch(context.Background(), modernCaller, callReq(toolFind, `{"query":"power off"}`, ""))); slices.Contains(got, "admin__shutdown") {
		t.Fatalf("found %v before the change", got)
	}
	r.refresh(context.Background(), r.upstreams()[2])
	var views []string
	for len(changes) > 0 {
		if c := <-changes; c.Method == "notifications/tools/list_changed" {
			views = append(views, c.View)
		}
	}
	if !cmp.Equal(views, []string{"full"}) {
		t.Errorf("tools/list_changed for views %q, want only full", views)
	}
	if got := found(t, r.Dispatch(context.Background(), modernCaller, callReq(toolFind, `{"query":"power off"}`, ""))); len(got) == 0 || got[0] != "admin__shutdown" {
		t.Errorf("after the change: %v, want admin__shutdown first", got)
	}
}

// TestSearchToolNameCollision: with prefix on_conflict an upstream tool
// may be exposed as find_tools; in search mode a direct call of that
// name is the gateway's tool, and call_tool reaches the upstream's.
func TestSearchToolNameCollision(t *testing.T) {
	up := &fakeUpstream{lists: map[string][]string{"tools/list": {
		`{"name":"find_tools","description":"finds tools of its own","inputSchema":{"type":"object"}}`,
	}}}
	r := startRouter(t, Options{Namespace: namespace.Options{Mode: namespace.ModeOnConflict}, Rules: policy.Rules{Mode: config.ModeSearch}},
		map[string]*fakeUpstream{"up": up}, "up")
	for _, era := range eras {
		c := &Caller{ProtocolVersion: era}
		if got := found(t, r.Dispatch(context.Background(), c, callReq(toolFind, `{"query":"tools of its own"}`, ""))); !cmp.Equal(got, []string{"find_tools"}) {
			t.Errorf("the gateway's find_tools found %v, want the upstream's find_tools", got)
		}
		if n := len(up.recorded()); n != 0 {
			t.Fatalf("a direct call of find_tools reached the upstream (%d calls)", n)
		}
		reply := r.Dispatch(context.Background(), c, callReq(toolCall, `{"name":"find_tools","arguments":{"x":1}}`, ""))
		calls := up.recorded()
		if reply.Error != nil || reply.ToolError || len(calls) != 1 || calls[0].Params != `{"name":"find_tools","arguments":{"x":1}}` {
			t.Errorf("call_tool find_tools: %s %v, upstream got %v", reply.Result, reply.Error, calls)
		}
		up.mu.Lock()
		up.calls = nil
		up.mu.Unlock()
	}
}

// TestReloadIntoSearchMode: a reload that switches a view to search mode
// (or back) tells its hosts that its tools changed.
func TestReloadIntoSearchMode(t *testing.T) {
	changes := make(chan Change, 64)
	up := &fakeUpstream{lists: map[string][]string{"tools/list": tools("work")}}
	opts := Options{ListWait: -1, OnChange: func(c Change) { changes <- c }}
	opts.Upstreams = []UpstreamConfig{{Name: "up", Connect: up.connect, Fingerprint: "up1"}}
	r := startRouter(t, opts, nil)
	for _, mode := range []config.ViewMode{config.ModeSearch, config.ModeFull} {
		for len(changes) > 0 {
			<-changes
		}
		opts.Rules.Mode = mode
		if err := r.Reconfigure(&opts); err != nil {
			t.Fatal(err)
		}
		want := map[config.ViewMode][]string{config.ModeSearch: {toolFind, toolCall, toolDescribe}, config.ModeFull: {"up__work"}}[mode]
		if got := listNames(t, r.Dispatch(context.Background(), legacyCaller, request("tools/list", `{}`)), "tools"); !cmp.Equal(got, want) {
			t.Fatalf("mode %s lists %v", mode, got)
		}
		heard := false
		for len(changes) > 0 {
			heard = heard || (<-changes).Method == "notifications/tools/list_changed"
		}
		if !heard {
			t.Errorf("switching to %s sent no tools/list_changed", mode)
		}
	}
}

// TestAutoModeSwitches: a view in mode auto lists its catalog while it
// fits max_tokens; past it the view is in search mode, with every tool
// findable (none cut), and back when the catalog fits again, each switch
// told to its hosts with tools/list_changed.
func TestAutoModeSwitches(t *testing.T) {
	changes := make(chan Change, 16)
	up := &fakeUpstream{lists: map[string][]string{"tools/list": {
		`{"name":"read_file","description":"Read a file","inputSchema":{"type":"object"}}`,
		`{"name":"write_file","description":"Write a file","inputSchema":{"type":"object"}}`,
	}}}
	bytesAsTokens := func(b []byte) int { return len(b) }
	r := startRouter(t, Options{Tokens: bytesAsTokens, OnChange: func(c Change) { changes <- c }, Rules: policy.Rules{Mode: config.ModeAuto, MaxTokens: 400}},
		map[string]*fakeUpstream{"up": up}, "up")
	drain := func() (toolChanges int) {
		for len(changes) > 0 {
			if c := <-changes; c.Method == "notifications/tools/list_changed" {
				toolChanges++
			}
		}
		return toolChanges
	}
	drain()
	c := &Caller{ProtocolVersion: ModernVersion}
	listed := func() []string {
		t.Helper()
		return listNames(t, r.Dispatch(context.Background(), c, request("tools/list", `{}`)), "tools")
	}
	if got := listed(); !cmp.Equal(got, []string{"up__read_file", "up__write_file"}) {
		t.Fatalf("within the budget: %v, want the catalog", got)
	}
	setTools := func(extra ...string) {
		up.mu.Lock()
		up.lists["tools/list"] = append(up.lists["tools/list"][:2:2], extra...)
		up.mu.Unlock()
		r.refresh(context.Background(), r.upstreams()[0])
	}
	long := `{"name":"archive","description":"` + strings.Repeat("Pack many files into one archive. ", 12) + `","inputSchema":{"type":"object"}}`
	setTools(long)
	if got := listed(); !cmp.Equal(got, []string{toolFind, toolCall, toolDescribe}) {
		t.Fatalf("past the budget: %v, want the search tools", got)
	}
	if n := drain(); n != 1 {
		t.Errorf("%d tools/list_changed on the switch to search, want 1", n)
	}
	if got := found(t, r.Dispatch(context.Background(), c, callReq(toolFind, `{"query":"pack files into an archive"}`, ""))); len(got) == 0 || got[0] != "up__archive" {
		t.Errorf("find in the switched view: %v, want the tool past the budget first (none cut)", got)
	}
	setTools()
	if got := listed(); !cmp.Equal(got, []string{"up__read_file", "up__write_file"}) {
		t.Errorf("back within the budget: %v, want the catalog", got)
	}
	if n := drain(); n != 1 {
		t.Errorf("%d tools/list_changed on the switch back, want 1", n)
	}
}

// TestCallToolStrictArguments: what call_tool runs is read from its
// arguments one way only. A request whose call_tool arguments repeat a
// member (even spelled with an escape) never reaches the router; an
// argument that differs from name or arguments only in case, arguments
// that are not an object, and a call_tool of a gateway tool are refused
// with an isError result; none reaches an upstream.
func TestCallToolStrictArguments(t *testing.T) {
	fakes := searchFakes()
	r := searchRouter(t, fakes, Options{})
	for _, params := range []string{
		`{"name":"call_tool","arguments":{"name":"search__web","name":"admin__reboot"}}`,
		`{"name":"call_tool","arguments":{"name":"search__web","n\u0061me":"admin__reboot"}}`,
		`{"name":"call_tool","arguments":{"name":"search__web","arguments":{"q":"a"},"arguments":{"q":"b"}}}`,
		`{"name":"call_tool","arguments":{"name":"search__web","arguments":{"q":"a","q":"b"}}}`,
	} {
		body := jsonrpc.AppendRequest(nil, json.RawMessage("1"), "tools/call", json.RawMessage(params))
		if _, err := jsonrpc.DecodeRequest(body); !errors.Is(err, jsonrpc.ErrInvalidRequest) {
			t.Errorf("%s: decoded with %v, want ErrInvalidRequest", params, err)
		}
	}
	for args, want := range map[string]string{
		`{"name":"search__web","arguments":[]}`:                                "must be an object",
		`{"name":"search__web","arguments":"{}"}`:                              "must be an object",
		`{"name":"search__web","arguments":1}`:                                 "must be an object",
		`{"name":"search__web","arguments":true}`:                              "must be an object",
		`{"Name":"search__web","arguments":{}}`:                                `no argument \"Name\"`,
		`{"name":"search__web","Arguments":{"q":"go"}}`:                        `no argument \"Arguments\"`,
		`{"name":["search__web"]}`:                                             `\"name\" must be a string`,
		`{"name":"call_tool","arguments":{"name":"search__web"}}`:              "the gateway's own tool",
		`{"name":"call_tool","arguments":{"name":"call_tool","arguments":{}}}`: "the gateway's own tool",
		`{"name":"find_tools","arguments":{"query":"reboot the machine"}}`:     "the gateway's own tool",
	} {
		for _, era := range eras {
			c := &Caller{ProtocolVersion: era, View: "data"}
			via := r.Dispatch(context.Background(), c, callReq(toolCall, args, ""))
			if via.Error != nil || !via.ToolError || !strings.Contains(string(via.Result), want) {
				t.Errorf("%s call_tool %s: %s %v, want an isError result with %s", era, args, via.Result, via.Error, want)
			}
		}
	}
	// An escaped spelling of a member is that member, for the gateway as
	// for any JSON parser: the call is the same as a direct one.
	reply := r.Dispatch(context.Background(), &Caller{ProtocolVersion: ModernVersion, View: "data"},
		callReq(toolCall, `{"n\u0061me":"search\u005f_web","\u0061rguments":{"q":"go"}}`, ""))
	if reply.Error != nil || reply.ToolError || reply.Original != "web" {
		t.Errorf("call_tool with escaped members: %s %+v", reply.Result, reply.Error)
	}
	calls := fakes["search"].recorded()
	if len(calls) != 1 || calls[0].Params != `{"name":"web","arguments":{"q":"go"}}` {
		t.Errorf("the upstream got %+v, want only the escaped call, as a direct call would send it", calls)
	}
	for _, up := range []string{"files", "admin"} {
		if got := fakes[up].recorded(); len(got) != 0 {
			t.Errorf("%s was called: %v", up, got)
		}
	}
}

// TestSearchArgsRepeated: searchArgs refuses a repeated member itself,
// not only because the host's request was decoded strictly: it is the
// only reader of call_tool's arguments.
func TestSearchArgsRepeated(t *testing.T) {
	for _, raw := range []string{
		`{"name":"a","name":"b"}`,
		`{"name":"a","arguments":{},"arguments":{"x":1}}`,
		`{"name":"a","n\u0061me":"b"}`,
	} {
		if _, why := searchArgs(toolCall, json.RawMessage(raw)); !strings.Contains(why, "more than once") {
			t.Errorf("searchArgs(%s): %q, want it refused as repeated", raw, why)
		}
	}
}

// TestSearchModeFigures: /readyz's view entries, the listed-tokens gauge
// and `mcp-gateway tools` say what a search view's tools/list costs (the
// gateway's three tools) and keep its catalog's size; a full view's list
// costs its catalog.
func TestSearchModeFigures(t *testing.T) {
	size := func(def []byte) int { return len(def) } // a tokenizer whose counts the test can make
	r := searchRouter(t, searchFakes(), Options{Tokens: size})
	catalog := func(view string) int {
		info, _ := r.Tools(view)
		n := 0
		for _, tl := range info.Tools {
			n += len(tl.Definition)
		}
		return n
	}
	listed := 0
	for _, def := range searchToolDefs() {
		listed += len(def)
	}
	if listed == 0 || listed == catalog("") || listed == catalog("data") {
		t.Fatalf("search tools %d tokens, catalogs %d and %d: the test needs figures that differ", listed, catalog(""), catalog("data"))
	}
	var got []ViewStatus
	for _, s := range r.Views() {
		s.Cut = nil
		got = append(got, s)
	}
	want := []ViewStatus{
		{Name: "", Mode: config.ModeSearch, Tools: 5, Tokens: catalog(""), ListedTokens: listed},
		{Name: "data", Mode: config.ModeSearch, Tools: 3, Tokens: catalog("data"), ListedTokens: listed},
		{Name: "full", Mode: config.ModeFull, Tools: 5}, // no token limit: readyz does not count
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Views (-want +got):\n%s", diff)
	}
	for view, want := range map[string][2]int{"": {catalog(""), listed}, "data": {catalog("data"), listed}, "full": {catalog("full"), catalog("full")}} {
		if got := [2]int{r.ViewTokens(view), r.ListedTokens(view)}; got != want {
			t.Errorf("view %q: ViewTokens, ListedTokens %v, want %v", view, got, want)
		}
	}
	info, _ := r.Tools("data")
	if info.Mode != config.ModeSearch || len(info.Listed) != 3 || len(info.Tools) != 3 {
		t.Errorf("Tools(data): mode %s, %d listed, %d tools; want search, the 3 gateway tools, its 3 tools", info.Mode, len(info.Listed), len(info.Tools))
	}
	if info, _ := r.Tools("full"); info.Mode != config.ModeFull || info.Listed != nil {
		t.Errorf("Tools(full): mode %s, listed %s; want full, nil", info.Mode, info.Listed)
	}
}
