package router

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
)

// profilesRouter is searchRouter's upstreams with teams data (search and
// the read tools of files) and ops (all but search), and two profiles:
// reader (search__web and the read tools, full) and admin (admin's tools,
// in search mode).
func profilesRouter(t *testing.T, fakes map[string]*fakeUpstream, opts Options) *Router {
	t.Helper()
	opts.Rules = policy.Rules{
		Teams: []policy.Team{
			{Name: "data", Allow: []string{"search__*", "files__read_*"}},
			{Name: "ops", Deny: []string{"search__*"}},
		},
		Profiles: []policy.Team{
			{Name: "reader", Allow: []string{"search__web", "files__read_*"}},
			{Name: "admin", Allow: []string{"admin__*"}, Mode: config.ModeSearch},
		},
	}
	return startRouter(t, opts, fakes, "search", "files", "admin")
}

func wantUnknownTool(t *testing.T, what string, reply *Reply, name string) {
	t.Helper()
	if reply.Error == nil || reply.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(reply.Error.Message, "Unknown tool: "+name) {
		t.Errorf("%s: %+v %s, want the unknown-tool error for %s", what, reply.Error, reply.Result, name)
	}
}

// TestProfileViews: a caller on a profile's path sees what both its
// team and the profile allow, in the profile's mode, in both eras; a
// tool outside the profile is unknown there by every route (tools/call,
// find_tools, call_tool, describe_tool), as are its prompts and
// resources, while the caller's own view without the profile keeps them.
func TestProfileViews(t *testing.T) {
	r := profilesRouter(t, searchFakes(), Options{})
	ctx := context.Background()
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			caller := func(team, profile string) *Caller {
				return &Caller{ProtocolVersion: era, View: policy.ViewKey(team, profile)}
			}
			for _, tc := range []struct {
				team, profile string
				want          []string
			}{
				{"", "reader", []string{"search__web", "files__read_file"}},
				{"data", "reader", []string{"search__web", "files__read_file"}},
				{"ops", "reader", []string{"files__read_file"}},
				{"ops", "", []string{"files__read_file", "files__write_file", "admin__reboot"}},
				{"", "admin", []string{toolFind, toolCall, toolDescribe}},
			} {
				reply := r.Dispatch(ctx, caller(tc.team, tc.profile), request("tools/list", `{}`))
				if scope, _ := jsonrpc.StringField(reply.Result, "cacheScope"); era == ModernVersion && scope != "private" {
					t.Errorf("team %q on profile %q: cacheScope %q, want private", tc.team, tc.profile, scope)
				}
				got := listNames(t, reply, "tools")
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("team %q on profile %q (-want +got):\n%s", tc.team, tc.profile, diff)
				}
			}

			for _, name := range []string{"files__write_file", "admin__reboot", "search__news", "write_file"} {
				wantUnknownTool(t, "reader calling "+name, r.Dispatch(ctx, caller("", "reader"), request("tools/call", `{"name":"`+name+`"}`)), name)
			}
			if reply := r.Dispatch(ctx, caller("", "reader"), request("tools/call", `{"name":"files__read_file"}`)); reply.Error != nil {
				t.Errorf("reader calling its own tool: %v", reply.Error)
			}
			// data on admin: data allows no admin tool, the profile
			// allows nothing else, so nothing: the profile never widens.
			for _, name := range found(t, r.Dispatch(ctx, caller("data", "admin"), callReq(toolFind, `{"query":"reboot the machine"}`, ""))) {
				t.Errorf("data on admin found %s", name)
			}
			for _, name := range found(t, r.Dispatch(ctx, caller("", "admin"), callReq(toolFind, `{"query":"read a file from disk"}`, ""))) {
				if name != "admin__reboot" {
					t.Errorf("admin profile found %s, outside the profile", name)
				}
			}
			for _, name := range []string{"files__read_file", "search__web"} {
				wantUnknownTool(t, "call_tool on admin", r.Dispatch(ctx, caller("", "admin"), callReq(toolCall, `{"name":"`+name+`","arguments":{}}`, "")), name)
				reply := r.Dispatch(ctx, caller("", "admin"), callReq(toolDescribe, `{"name":"`+name+`"}`, ""))
				if !reply.ToolError || strings.Contains(string(reply.Result), "Read a file") || strings.Contains(string(reply.Result), "Search the web") {
					t.Errorf("describe_tool %s on admin: %v %s, want it unknown", name, reply.Error, reply.Result)
				}
			}
			if reply := r.Dispatch(ctx, caller("", "admin"), callReq(toolCall, `{"name":"admin__reboot","arguments":{}}`, "")); reply.Error != nil || reply.ToolError {
				t.Errorf("call_tool of the profile's own tool: %v %s", reply.Error, reply.Result)
			}

			// Prompts follow the same patterns: files__summarize is
			// outside reader, inside the main endpoint's view.
			if got := listNames(t, r.Dispatch(ctx, caller("", "reader"), request("prompts/list", `{}`)), "prompts"); len(got) != 0 {
				t.Errorf("reader sees prompts %v", got)
			}
			if reply := r.Dispatch(ctx, caller("", "reader"), request("prompts/get", `{"name":"files__summarize"}`)); reply.Error == nil {
				t.Error("reader got a prompt outside the profile")
			}
			if reply := r.Dispatch(ctx, caller("", ""), request("prompts/get", `{"name":"files__summarize"}`)); reply.Error != nil {
				t.Errorf("the main endpoint's prompt: %v", reply.Error)
			}
			complete := request("completion/complete", `{"ref":{"type":"ref/prompt","name":"files__summarize"},"argument":{"name":"a","value":"b"}}`)
			if reply := r.Dispatch(ctx, caller("", "reader"), complete); reply.Error == nil || !strings.Contains(reply.Error.Message, "Unknown prompt: files__summarize") {
				t.Errorf("reader completing a prompt outside the profile: %v %s", reply.Error, reply.Result)
			}
			if reply := r.Dispatch(ctx, caller("", ""), complete); reply.Error != nil && strings.Contains(reply.Error.Message, "Unknown prompt") {
				t.Errorf("the main endpoint completing its prompt: %v", reply.Error)
			}
			if reply := r.Dispatch(ctx, caller("", "nope"), request("tools/list", `{}`)); reply.Error == nil {
				t.Error("a profile that does not exist listed tools")
			}
		})
	}
	// Every (team, profile) has its view, built with the catalog.
	var names []string
	for _, v := range r.Views() {
		names = append(names, v.Name)
	}
	if want := []string{"", "data", "ops", "/reader", "data/reader", "ops/reader", "/admin", "data/admin", "ops/admin"}; !cmp.Equal(names, want) {
		t.Errorf("views %q, want %q", names, want)
	}
}

// TestProfileResources: a resource outside the profile is neither listed
// nor read on its path.
func TestProfileResources(t *testing.T) {
	fakes := teamFakes()
	r := startRouter(t, Options{Rules: policy.Rules{Profiles: []policy.Team{{Name: "tools-only", Allow: []string{"files__read_*"}}}}}, fakes, "search", "files", "admin")
	ctx := context.Background()
	for _, era := range eras {
		on := &Caller{ProtocolVersion: era, View: "/tools-only"}
		if got := listNames(t, r.Dispatch(ctx, on, request("resources/list", `{}`)), "resources"); len(got) != 0 {
			t.Errorf("%s: the profile lists resources %v", era, got)
		}
		if reply := r.Dispatch(ctx, on, request("resources/read", `{"uri":"test://notes"}`)); reply.Error == nil {
			t.Errorf("%s: the profile read a resource outside it: %s", era, reply.Result)
		}
		if got := listNames(t, r.Dispatch(ctx, &Caller{ProtocolVersion: era}, request("resources/list", `{}`)), "resources"); len(got) != 1 {
			t.Errorf("%s: the main endpoint lists resources %v, want test://notes", era, got)
		}
	}
	for _, c := range fakes["files"].recorded() {
		if c.Method == "resources/read" {
			t.Errorf("the upstream was asked %v from the profile", c)
		}
	}
}

// TestProfileTasksAndStateAreThePaths: a task created on one profile's
// path, and a sealed requestState issued there, belong to that path:
// the same identity on the main endpoint or another profile finds no
// such task and has its requestState refused.
func TestProfileTasksAndStateAreThePaths(t *testing.T) {
	up := legacyTaskUpstream()
	r := startRouter(t, Options{Rules: policy.Rules{Profiles: []policy.Team{{Name: "a"}, {Name: "b"}}}}, map[string]*fakeUpstream{"up": up}, "up")
	ctx := context.Background()
	on := func(c *Caller, view string) *Caller {
		cc := *c
		cc.View = view
		return &cc
	}
	created := r.Dispatch(ctx, on(aliceLegacy, "/a"), request("tools/call", `{"name":"up__job","arguments":{},"task":{}}`))
	id := taskOf(t, created, false)
	for _, view := range []string{"", "/b"} {
		for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
			if reply := r.Dispatch(ctx, on(aliceLegacy, view), taskReq(method, id)); reply.Error == nil || !strings.Contains(reply.Error.Message, "Task not found") {
				t.Errorf("%s from view %q: %+v %s, want Task not found", method, view, reply.Error, reply.Result)
			}
		}
		if reply := r.Dispatch(ctx, on(aliceLegacy, view), request("tasks/list", `{}`)); strings.Contains(string(reply.Result), id) {
			t.Errorf("tasks/list from view %q lists the task: %s", view, reply.Result)
		}
	}
	if reply := r.Dispatch(ctx, on(aliceLegacy, "/a"), taskReq("tasks/get", id)); reply.Error != nil {
		t.Errorf("tasks/get on its own path: %v", reply.Error)
	}

	// A sealed requestState, for a modern host's call that needs input.
	ask := &fakeUpstream{version: ModernVersion, lists: map[string][]string{"tools/list": tools("ask")}}
	ask.answer = func(string, json.RawMessage) (*jsonrpc.Message, error) {
		return &jsonrpc.Message{Result: json.RawMessage(`{"resultType":"input_required","inputRequests":{"name":{"method":"elicitation/create","params":{"message":"?"}}},"requestState":"upstream-secret"}`)}, nil
	}
	r2 := startRouter(t, Options{Rules: policy.Rules{Profiles: []policy.Team{{Name: "a"}, {Name: "b"}}}}, map[string]*fakeUpstream{"up": ask}, "up")
	alice := func(view string) *Caller {
		c := mrtrCaller("key:alice")
		c.View = view
		return c
	}
	state, _ := inputRequired(t, r2.Dispatch(ctx, alice("/a"), request("tools/call", `{"name":"up__ask",`+modernParams+`}`)))
	before := len(ask.recorded())
	for _, view := range []string{"", "/b"} {
		wantBadState(t, "the state of /a on view "+view, r2.Dispatch(ctx, alice(view), retryOf(state, `{"name":{"action":"accept","content":{}}}`)))
	}
	if after := len(ask.recorded()); after != before {
		t.Errorf("the upstream was asked %d times by the refused retries", after-before)
	}
}

// TestProfileListChanged: a change to a tool outside a profile is not
// announced on its path (its hosts would list again and see nothing
// new), and one inside is, to that profile's views only.
func TestProfileListChanged(t *testing.T) {
	changes := make(chan Change, 64)
	fakes := searchFakes()
	r := profilesRouter(t, fakes, Options{OnChange: func(c Change) { changes <- c }})
	for len(changes) > 0 {
		<-changes
	}
	drain := func() []string {
		var views []string
		for len(changes) > 0 {
			if c := <-changes; c.Method == "notifications/tools/list_changed" {
				views = append(views, c.View)
			}
		}
		slices.Sort(views)
		return views
	}
	fakes["files"].mu.Lock()
	fakes["files"].lists["tools/list"] = append(fakes["files"].lists["tools/list"], `{"name":"delete_file","description":"Delete a file","inputSchema":{"type":"object"}}`)
	fakes["files"].mu.Unlock()
	r.refresh(context.Background(), r.upstreams()[1])
	// files__delete_file: in the default view and ops's, outside every
	// profile (the admin profile's search-mode list does not change).
	if got, want := drain(), []string{"", "ops"}; !cmp.Equal(got, want) {
		t.Errorf("list_changed for views %q, want %q", got, want)
	}
	fakes["files"].mu.Lock()
	fakes["files"].lists["tools/list"] = append(fakes["files"].lists["tools/list"], `{"name":"read_dir","description":"List a directory","inputSchema":{"type":"object"}}`)
	fakes["files"].mu.Unlock()
	r.refresh(context.Background(), r.upstreams()[1])
	if got, want := drain(), []string{"", "/reader", "data", "data/reader", "ops", "ops/reader"}; !cmp.Equal(got, want) {
		t.Errorf("list_changed for views %q, want %q", got, want)
	}
}

// TestProfileCallsAreChargedToTheTeam: a caller's concurrent calls are
// bounded by its team's quota on every path.
func TestProfileCallsAreChargedToTheTeam(t *testing.T) {
	l := NewLimits(LimitsOptions{Identity: map[string]IdentityQuotas{"": {ConcurrentCalls: 5}, "data": {ConcurrentCalls: 1}}})
	c := &Caller{Principal: "alice", View: "data/reader"}
	done, why := l.call(c, "up", "t")
	if why != "" {
		t.Fatalf("first call refused: %s", why)
	}
	defer done()
	for _, view := range []string{"data/reader", "data"} {
		if _, why := l.call(&Caller{Principal: "alice", View: view}, "up", "t"); why == "" {
			t.Errorf("a second call on view %q passed the team's quota of 1", view)
		}
	}
}

// TestProfileKeepsWithinTheTeamsCut: a profile's view is chosen among
// the tools its team's view kept, after that view's limits and its mode
// decision, so neither a profile's priority nor its mode brings back a
// tool the team's limits cut: that tool is unknown on the profile's
// path by every route (tools/list, tools/call, find_tools, call_tool,
// describe_tool).
func TestProfileKeepsWithinTheTeamsCut(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		rules policy.Rules
		// views are the profile views to look at; kept is a tool their
		// team's view keeps, cut one it cuts.
		views     []string
		kept, cut string
	}{
		{
			name: "a profile's priority",
			rules: policy.Rules{
				Teams: []policy.Team{{Name: "data", Allow: []string{"search__*"}, MaxTools: 1}},
				Profiles: []policy.Team{
					{Name: "prio", Priority: []string{"search__news"}},
					{Name: "prio-search", Priority: []string{"search__news"}, Mode: config.ModeSearch},
				},
			},
			views: []string{"data/prio", "data/prio-search"},
			kept:  "search__web", cut: "search__news",
		},
		{
			name: "a profile's mode auto",
			rules: policy.Rules{
				MaxTokens: 15, // every tool is 10 tokens: the default view keeps one
				Profiles: []policy.Team{
					{Name: "x", Mode: config.ModeAuto},
					{Name: "y", Mode: config.ModeSearch},
				},
			},
			views: []string{"/x", "/y"},
			kept:  "search__web", cut: "search__news",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startRouter(t, Options{Rules: tc.rules, Tokens: func([]byte) int { return 10 }}, searchFakes(), "search", "files", "admin")
			team, _ := policy.SplitViewKey(tc.views[0])
			if got := listNames(t, r.Dispatch(ctx, &Caller{View: team}, request("tools/list", `{}`)), "tools"); !slices.Contains(got, tc.kept) || slices.Contains(got, tc.cut) {
				t.Fatalf("team view %q lists %v, want %s and not %s", team, got, tc.kept, tc.cut)
			}
			for _, era := range eras {
				for _, view := range tc.views {
					c := &Caller{ProtocolVersion: era, View: view}
					listed := listNames(t, r.Dispatch(ctx, c, request("tools/list", `{}`)), "tools")
					if slices.Contains(listed, tc.cut) {
						t.Errorf("%s %s: tools/list has %s", era, view, tc.cut)
					}
					wantUnknownTool(t, era+" "+view+" tools/call", r.Dispatch(ctx, c, request("tools/call", `{"name":"`+tc.cut+`"}`)), tc.cut)
					if !slices.Contains(listed, toolFind) {
						if !slices.Contains(listed, tc.kept) {
							t.Errorf("%s %s: tools/list %v lacks %s", era, view, listed, tc.kept)
						}
						continue
					}
					for _, name := range found(t, r.Dispatch(ctx, c, callReq(toolFind, `{"query":"latest news headlines"}`, ""))) {
						if name == tc.cut {
							t.Errorf("%s %s: find_tools found %s", era, view, name)
						}
					}
					wantUnknownTool(t, era+" "+view+" call_tool", r.Dispatch(ctx, c, callReq(toolCall, `{"name":"`+tc.cut+`","arguments":{}}`, "")), tc.cut)
					reply := r.Dispatch(ctx, c, callReq(toolDescribe, `{"name":"`+tc.cut+`"}`, ""))
					if !reply.ToolError || strings.Contains(string(reply.Result), "Latest news") {
						t.Errorf("%s %s: describe_tool %s: %v %s, want it unknown", era, view, tc.cut, reply.Error, reply.Result)
					}
				}
			}
		})
	}
}

// TestViewsDuringAReload: a reload stores its rules before it builds
// their catalog; until it has, Views (readyz, the view gauges) reports
// the views of the catalog in force, without the profile it adds (and
// with the one it removes), rather than panicking on a view the catalog
// does not have.
func TestViewsDuringAReload(t *testing.T) {
	r := startRouter(t, Options{Rules: policy.Rules{Profiles: []policy.Team{{Name: "old"}}}}, searchFakes(), "search", "files", "admin")
	viewNames := func() []string {
		var names []string
		for _, v := range r.Views() {
			names = append(names, v.Name)
		}
		return names
	}
	next := policy.Rules{Profiles: []policy.Team{{Name: "new"}}}
	r.mu.Lock()
	r.rules = &next // what Reconfigure does before it rebuilds
	r.mu.Unlock()
	if got, want := viewNames(), []string{"", "/old"}; !cmp.Equal(got, want) {
		t.Errorf("views before the rebuild %q, want %q", got, want)
	}
	r.rebuild()
	if got, want := viewNames(), []string{"", "/new"}; !cmp.Equal(got, want) {
		t.Errorf("views after the rebuild %q, want %q", got, want)
	}
}

// TestRemovedProfileIsUnknown: between a reload that removes a profile
// and the server's SetProfiles, a request on its path finds no view: the
// reply says so (NoView, which the server answers 404 as for a path that
// is not a profile), not an internal error, and nothing is logged as an
// error.
func TestRemovedProfileIsUnknown(t *testing.T) {
	var logs mcptest.LogBuffer
	r := startRouter(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Rules: policy.Rules{Profiles: []policy.Team{{Name: "gone"}}}},
		searchFakes(), "search", "files", "admin")
	next := policy.Rules{}
	r.mu.Lock()
	r.rules = &next
	r.mu.Unlock()
	r.rebuild()
	for _, era := range eras {
		reply := r.Dispatch(context.Background(), &Caller{ProtocolVersion: era, View: "/gone"}, request("tools/list", `{}`))
		if !reply.NoView || reply.Error == nil || reply.Error.Code == jsonrpc.CodeInternalError {
			t.Errorf("%s: %+v, want NoView and an error that is not internal", era, reply)
		}
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("logged an error:\n%s", logs.String())
	}
}

// TestProfileTasksShareTheQuota: tasks.max_per_identity bounds the tasks
// an identity holds in its team on every path together: opening them on
// another profile's path (or the main endpoint) gets no more, while each
// task stays bound to its own path.
func TestProfileTasksShareTheQuota(t *testing.T) {
	up := legacyTaskUpstream()
	r := startRouter(t, Options{MaxTasks: 2, Rules: policy.Rules{Profiles: []policy.Team{{Name: "a"}, {Name: "b"}}}}, map[string]*fakeUpstream{"up": up}, "up")
	ctx := context.Background()
	on := func(c *Caller, view string) *Caller {
		cc := *c
		cc.View = view
		return &cc
	}
	call := request("tools/call", `{"name":"up__job","arguments":{},"task":{}}`)
	taskOf(t, r.Dispatch(ctx, on(aliceLegacy, "/a"), call), false)
	taskOf(t, r.Dispatch(ctx, on(aliceLegacy, "/b"), call), false)
	sent := len(up.recorded())
	for _, view := range []string{"", "/a", "/b"} {
		if reply := r.Dispatch(ctx, on(aliceLegacy, view), call); reply.Error == nil || !strings.Contains(reply.Error.Message, "Too many tasks") {
			t.Errorf("a third task on view %q: %+v %s, want Too many tasks", view, reply.Error, reply.Result)
		}
	}
	if calls := up.recorded(); len(calls) != sent {
		t.Errorf("the upstream was sent %+v for tasks past the bound", calls[sent:])
	}
	taskOf(t, r.Dispatch(ctx, on(bobLegacy, "/a"), call), false)
}
