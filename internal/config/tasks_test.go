package config

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestTasksDecode(t *testing.T) {
	t.Parallel()
	src := `
tasks: {after: 30s, ttl: 2h, max_per_identity: 7}
upstreams:
  - {name: inherits, url: "http://127.0.0.1:9000/mcp"}
  - {name: slow, url: "http://127.0.0.1:9001/mcp", tasks: {after: 10s}}
  - {name: off, url: "http://127.0.0.1:9002/mcp", tasks: {after: 0s}}
  - {name: empty, url: "http://127.0.0.1:9003/mcp", tasks: {}}
  - {name: nulltasks, url: "http://127.0.0.1:9004/mcp", tasks: }
`
	c, err := Parse([]byte(src), "yaml", "", mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Tasks{After: 30 * time.Second, TTL: 2 * time.Hour, MaxPerIdentity: 7}, c.Tasks); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}
	// An upstream's own after wins, even 0s (off); without one, the
	// global applies.
	want := map[string]time.Duration{"inherits": 30 * time.Second, "slow": 10 * time.Second, "off": 0, "empty": 30 * time.Second, "nulltasks": 30 * time.Second}
	got := map[string]time.Duration{}
	for _, u := range c.Upstreams {
		got[u.Name] = u.TaskAfter(c.Tasks.After)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("effective tasks.after (-want +got):\n%s", diff)
	}
	if c.Upstreams[0].Tasks.After != nil || c.Upstreams[3].Tasks.After != nil {
		t.Errorf("tasks.after absent decoded as set")
	}
	if a := c.Upstreams[2].Tasks.After; a == nil || *a != 0 {
		t.Errorf("tasks.after: 0s decoded as %v, want a set 0", a)
	}
}

// TestTasksDefaults: without a tasks key, tasks are off, kept an hour and
// bounded at 100 per identity; an upstream's own after still turns them
// on for it alone.
func TestTasksDefaults(t *testing.T) {
	t.Parallel()
	src := `
tasks:
upstreams:
  - {name: plain, url: "http://127.0.0.1:9000/mcp"}
  - {name: slow, url: "http://127.0.0.1:9001/mcp", tasks: {after: 2m}}
`
	c, err := Parse([]byte(src), "yaml", "", mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Tasks{TTL: DefaultTaskTTL, MaxPerIdentity: DefaultMaxTasks}, c.Tasks); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}
	if got := c.Upstreams[0].TaskAfter(c.Tasks.After); got != 0 {
		t.Errorf("plain upstream's tasks.after = %v, want 0 (off)", got)
	}
	if got := c.Upstreams[1].TaskAfter(c.Tasks.After); got != 2*time.Minute {
		t.Errorf("slow upstream's tasks.after = %v, want 2m", got)
	}
}

func TestTasksProblems(t *testing.T) {
	t.Parallel()
	const ups = "upstreams:\n  - {name: a, url: 'http://x/mcp'}\n  - {name: b, url: 'http://y/mcp', tasks: {after: %s}}\n"
	tests := []struct {
		name string
		src  string
		want []Problem // nil: loads
	}{
		{"after 100ms", "tasks: {after: 100ms}", nil},
		{"after 1h", "tasks: {after: 1h}", nil},
		{"after 0s", "tasks: {after: 0s}", nil},
		{"after too small", "tasks: {after: 99ms}",
			[]Problem{{Path: "tasks.after", Line: 1, Message: "must be at least 100ms (a shorter wait would make nearly every call a task), or 0s for off"}}},
		{"after too large", "tasks: {after: 61m}",
			[]Problem{{Path: "tasks.after", Line: 1, Message: "must be at most 1h"}}},
		{"after negative", "tasks: {after: -1s}",
			[]Problem{{Path: "tasks.after", Line: 1, Message: "must be 0s (off) or more"}}},
		{"after bare number", "tasks: {after: 30}",
			[]Problem{{Path: "tasks.after", Line: 1, Message: `must be a duration with a unit, such as "30s", "1m30s" or "500ms": a bare number has no unit`}}},
		{"ttl 24h", "tasks: {ttl: 24h}", nil},
		{"ttl zero", "tasks: {ttl: 0s}",
			[]Problem{{Path: "tasks.ttl", Line: 1, Message: "must be greater than 0"}}},
		{"ttl negative", "tasks: {ttl: -1h}",
			[]Problem{{Path: "tasks.ttl", Line: 1, Message: "must be greater than 0"}}},
		{"ttl too large", "tasks: {ttl: 24h1s}",
			[]Problem{{Path: "tasks.ttl", Line: 1, Message: "must be at most 24h"}}},
		{"max 1", "tasks: {max_per_identity: 1}", nil},
		{"max 100000", "tasks: {max_per_identity: 100000}", nil},
		{"max zero", "tasks: {max_per_identity: 0}",
			[]Problem{{Path: "tasks.max_per_identity", Line: 1, Message: "must be at least 1"}}},
		{"max too large", "tasks: {max_per_identity: 100001}",
			[]Problem{{Path: "tasks.max_per_identity", Line: 1, Message: "must be at most 100000"}}},
		{"unknown key", "tasks: {afer: 1s}",
			[]Problem{{Path: "tasks.afer", Line: 1, Message: `unknown key (did you mean "after"?)`}}},
		{"not a mapping", "tasks: 30s",
			[]Problem{{Path: "tasks", Line: 1, Message: "must be a mapping of keys to values"}}},
		{"upstream after 0s", fmt.Sprintf(ups, "0s"), nil},
		{"upstream after too small", fmt.Sprintf(ups, "10ms"),
			[]Problem{{Path: "upstreams[1].tasks.after", Line: 3, Message: "must be at least 100ms (a shorter wait would make nearly every call a task), or 0s for off"}}},
		{"upstream after too large", fmt.Sprintf(ups, "2h"),
			[]Problem{{Path: "upstreams[1].tasks.after", Line: 3, Message: "must be at most 1h"}}},
		{"upstream after negative", fmt.Sprintf(ups, "-5s"),
			[]Problem{{Path: "upstreams[1].tasks.after", Line: 3, Message: "must be 0s (off) or more"}}},
		{"upstream unknown key", "upstreams: [{name: a, url: 'http://x/mcp', tasks: {ttl: 1h}}]",
			[]Problem{{Path: "upstreams[0].tasks.ttl", Line: 1, Message: "unknown key"}}},
		// mcpServers entries take only the desktop format's keys, as
		// with timeout.
		{"mcpServers entry", "mcpServers:\n  a: {url: 'http://x/mcp', tasks: {after: 1s}}\n",
			[]Problem{{Path: "mcpServers.a.tasks", Line: 2, Message: "unknown key (" + mcpServerOnlyHint + ")"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.src), "yaml", "", mapEnv(nil))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			if diff := cmp.Diff(tt.want, problemsOf(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTasksValidate: a Config built in code is checked the same way.
func TestTasksValidate(t *testing.T) {
	t.Parallel()
	c := validConfig()
	c.Tasks = Tasks{After: time.Millisecond, TTL: 0, MaxPerIdentity: -1}
	on := 50 * time.Millisecond
	c.Upstreams[1].Tasks.After = &on
	want := []Problem{
		{Path: "upstreams[1].tasks.after", Message: "must be at least 100ms (a shorter wait would make nearly every call a task), or 0s for off"},
		{Path: "tasks.after", Message: "must be at least 100ms (a shorter wait would make nearly every call a task), or 0s for off"},
		{Path: "tasks.ttl", Message: "must be greater than 0"},
		{Path: "tasks.max_per_identity", Message: "must be at least 1"},
	}
	if diff := cmp.Diff(want, problemsOf(t, c.Validate())); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}
