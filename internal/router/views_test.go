package router

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
)

// teamsRouter has three upstreams and two teams: data sees search and
// the read tools of files; ops sees everything but search, and at most
// three tools.
func teamsRouter(t *testing.T, fakes map[string]*fakeUpstream) *Router {
	t.Helper()
	return startRouter(t, Options{Rules: policy.Rules{Teams: []policy.Team{
		{Name: "data", Allow: []string{"search__*", "files__read_*", "files__test://*"}},
		{Name: "ops", Deny: []string{"search__*"}, MaxTools: 3},
	}}}, fakes, "search", "files", "admin")
}

func teamFakes() map[string]*fakeUpstream {
	return map[string]*fakeUpstream{
		"search": {lists: map[string][]string{"tools/list": tools("web", "news")}},
		"files": {lists: map[string][]string{
			"tools/list":     tools("read_file", "write_file"),
			"resources/list": {`{"uri":"test://notes","name":"notes"}`},
			"prompts/list":   {`{"name":"summarize"}`},
		}},
		"admin": {lists: map[string][]string{"tools/list": tools("reboot", "wipe")}},
	}
}

func TestTeamViews(t *testing.T) {
	fakes := teamFakes()
	r := teamsRouter(t, fakes)
	for _, era := range []string{"2025-11-25", ModernVersion} {
		caller := func(team string) *Caller { return &Caller{ProtocolVersion: era, View: team} }
		t.Run(era, func(t *testing.T) {
			tests := []struct {
				team string
				want []string
			}{
				{"", []string{"search__web", "search__news", "files__read_file", "files__write_file", "admin__reboot", "admin__wipe"}},
				{"data", []string{"search__web", "search__news", "files__read_file"}},
				{"ops", []string{"files__read_file", "files__write_file", "admin__reboot"}},
			}
			for _, tt := range tests {
				reply := r.Dispatch(context.Background(), caller(tt.team), request("tools/list", `{}`))
				if diff := cmp.Diff(tt.want, listNames(t, reply, "tools")); diff != "" {
					t.Errorf("team %q tools (-want +got):\n%s", tt.team, diff)
				}
				if era == ModernVersion {
					scope, _ := jsonrpc.StringField(reply.Result, "cacheScope")
					if want := map[bool]string{true: "private", false: "public"}[tt.team != ""]; scope != want {
						t.Errorf("team %q cacheScope %q, want %q", tt.team, scope, want)
					}
				}
			}
			// Hidden tools are unknown: by exposed name, by original
			// name, by a guessed prefix; the upstream never sees them.
			for _, name := range []string{"files__write_file", "write_file", "admin__reboot", "admin__", "search"} {
				reply := r.Dispatch(context.Background(), caller("data"), request("tools/call", `{"name":"`+name+`"}`))
				if reply.Error == nil || reply.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(reply.Error.Message, "Unknown tool: "+name) {
					t.Errorf("data calling %q: %+v, want the unknown-tool error", name, reply.Error)
				}
			}
			// ops's limit cut admin__wipe: it cannot be called either.
			if reply := r.Dispatch(context.Background(), caller("ops"), request("tools/call", `{"name":"admin__wipe"}`)); reply.Error == nil {
				t.Error("ops called a tool its limit cut")
			}
			if reply := r.Dispatch(context.Background(), caller("data"), request("tools/call", `{"name":"search__web"}`)); reply.Error != nil {
				t.Errorf("data calling its own tool: %v", reply.Error)
			}
			// Prompts and resources follow the same patterns.
			if got := listNames(t, r.Dispatch(context.Background(), caller("data"), request("prompts/list", `{}`)), "prompts"); len(got) != 0 {
				t.Errorf("data sees prompts %v", got)
			}
			if got := listNames(t, r.Dispatch(context.Background(), caller("data"), request("resources/list", `{}`)), "resources"); len(got) != 1 {
				t.Errorf("data sees resources %v, want test://notes", got)
			}
			if reply := r.Dispatch(context.Background(), caller("ops"), request("prompts/get", `{"name":"files__summarize"}`)); reply.Error != nil {
				t.Errorf("ops getting a prompt: %v", reply.Error)
			}
			if reply := r.Dispatch(context.Background(), caller("data"), request("prompts/get", `{"name":"files__summarize"}`)); reply.Error == nil {
				t.Error("data got a prompt it cannot see")
			}
			if reply := r.Dispatch(context.Background(), caller("nobody"), request("tools/list", `{}`)); reply.Error == nil {
				t.Error("a view that does not exist listed tools")
			}
		})
	}
	for name, f := range fakes {
		for _, c := range f.recorded() {
			if strings.Contains(c.Params, "write_file") || strings.Contains(c.Params, "reboot") || strings.Contains(c.Params, "wipe") {
				t.Errorf("upstream %s received a hidden call: %v", name, c)
			}
		}
	}
	views := r.Views()
	if len(views) != 3 || len(views[2].Cut) != 1 || views[2].Cut[0] != (policy.Cut{Name: "admin__wipe", Limit: "max_tools"}) {
		t.Errorf("views %+v, want ops's cut reported", views)
	}
}

// TestLimitsAreDeterministic: a token budget and a tool limit cut the
// same tools however the upstreams finish starting, in priority order.
func TestLimitsAreDeterministic(t *testing.T) {
	var first []string
	for run := range 8 {
		fakes := teamFakes()
		gates := map[string]chan struct{}{}
		for name, f := range fakes {
			gates[name] = make(chan struct{})
			f.startGate = gates[name]
		}
		opts := Options{
			Rules: policy.Rules{MaxTokens: 40, Priority: []string{"admin__*"}},
			// A definition costs its length in bytes / 4 (a stand-in
			// tokenizer keeps the test independent of the real one).
			Tokens: func(def []byte) int { return len(def) / 4 },
		}
		for _, name := range []string{"search", "files", "admin"} {
			opts.Upstreams = append(opts.Upstreams, UpstreamConfig{Name: name, Connect: fakes[name].connect})
		}
		opts.ListWait = -1
		r, err := New(&opts)
		if err != nil {
			t.Fatal(err)
		}
		r.Start(context.Background())
		order := []string{"search", "files", "admin"}
		for i := range order { // a different start order each run
			close(gates[order[(i+run)%3]])
		}
		if err := r.WaitStarted(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := listNames(t, r.Dispatch(context.Background(), legacyCaller, request("tools/list", `{}`)), "tools")
		_ = r.Close()
		if run == 0 {
			first = got
			if len(got) == 0 || got[len(got)-1] != "admin__wipe" && got[len(got)-1] != "admin__reboot" {
				t.Fatalf("kept %v: the priority pattern should keep admin's tools", got)
			}
			continue
		}
		if diff := cmp.Diff(first, got); diff != "" {
			t.Fatalf("run %d kept other tools (-first +this):\n%s", run, diff)
		}
	}
	var total int
	for _, name := range first {
		total += len(json.RawMessage(`{"name":"`+name+`","description":"the `+strings.SplitN(name, "__", 2)[1]+` tool","inputSchema":{"type":"object"}}`)) / 4
	}
	if total > 40 {
		t.Errorf("kept %v of %d tokens, over the budget of 40", first, total)
	}
}

// TestSetLevelStaysInTheView: a team's logging/setLevel reaches only the
// upstreams its view shows something of.
func TestSetLevelStaysInTheView(t *testing.T) {
	logging := func() *fakeUpstream {
		return &fakeUpstream{capabilities: `{"tools":{},"logging":{}}`, lists: map[string][]string{"tools/list": tools("echo")}}
	}
	seen, also, hidden := logging(), logging(), logging()
	r := startRouter(t, Options{Rules: policy.Rules{Teams: []policy.Team{{Name: "t", Allow: []string{"seen__*", "also__*"}}}}},
		map[string]*fakeUpstream{"seen": seen, "also": also, "hidden": hidden}, "seen", "also", "hidden")
	// The visible upstreams are asked at once (the race detector watches
	// the request they share).
	if reply := r.Dispatch(context.Background(), &Caller{ProtocolVersion: "2025-11-25", Session: "s", View: "t"}, request("logging/setLevel", `{"level":"debug"}`)); reply.Error != nil {
		t.Fatal(reply.Error)
	}
	if len(seen.recorded()) != 1 || len(also.recorded()) != 1 || len(hidden.recorded()) != 0 {
		t.Errorf("setLevel reached the visible upstreams %d and %d times and the hidden one %d times, want 1, 1 and 0",
			len(seen.recorded()), len(also.recorded()), len(hidden.recorded()))
	}
}
