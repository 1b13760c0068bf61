package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

// TestTaskOptions: the tasks keys reach the router, each upstream with
// its effective tasks.after, and an upstream that inherits the top-level
// after changes fingerprint with it (a reload restarts it), while one
// with its own after does not.
func TestTaskOptions(t *testing.T) {
	parse := func(src string) *config.Config {
		t.Helper()
		cfg, err := config.Parse([]byte(src), "yaml", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	const ups = `
upstreams:
  - {name: inherits, url: "http://127.0.0.1:9/mcp"}
  - {name: own, url: "http://127.0.0.1:9/mcp", tasks: {after: 5s}}
  - {name: off, url: "http://127.0.0.1:9/mcp", tasks: {after: 0s}}
`
	before := routerOptions(parse("tasks: {after: 30s, ttl: 2h, max_per_identity: 7}"+ups), recorders{}, nil)
	if before.TaskTTL != 2*time.Hour || before.MaxTasks != 7 {
		t.Errorf("router TaskTTL, MaxTasks = %v, %d; want 2h, 7", before.TaskTTL, before.MaxTasks)
	}
	got := map[string]time.Duration{}
	for _, u := range before.Upstreams {
		got[u.Name] = u.TaskAfter
	}
	if diff := cmp.Diff(map[string]time.Duration{"inherits": 30 * time.Second, "own": 5 * time.Second, "off": 0}, got); diff != "" {
		t.Errorf("TaskAfter per upstream (-want +got):\n%s", diff)
	}

	// The defaults, spelt out: the router's zero values would mean the
	// same, but the config is where defaults live.
	def := routerOptions(parse(ups), recorders{}, nil)
	if def.TaskTTL != config.DefaultTaskTTL || def.MaxTasks != config.DefaultMaxTasks || def.Upstreams[0].TaskAfter != 0 {
		t.Errorf("defaults: TaskTTL %v, MaxTasks %d, TaskAfter %v", def.TaskTTL, def.MaxTasks, def.Upstreams[0].TaskAfter)
	}

	after := routerOptions(parse("tasks: {after: 1m, ttl: 2h, max_per_identity: 7}"+ups), recorders{}, nil)
	for i, u := range after.Upstreams {
		changed := u.Fingerprint != before.Upstreams[i].Fingerprint
		if want := u.Name == "inherits"; changed != want {
			t.Errorf("%s: fingerprint changed = %v with the top-level tasks.after, want %v", u.Name, changed, want)
		}
	}

	// What counts is the effective value: writing the inherited one out
	// changes nothing, and restarts nothing.
	spelt := routerOptions(parse("tasks: {after: 30s}"+strings.Replace(ups, `9/mcp"}`, `9/mcp", tasks: {after: 30s}}`, 1)), recorders{}, nil)
	if spelt.Upstreams[0].Fingerprint != before.Upstreams[0].Fingerprint {
		t.Errorf("inherits: fingerprint changed when its inherited tasks.after was written out")
	}
}

// TestReloadTasks: a reload applies tasks.after (the upstreams it
// changes restart, the others keep running) and keeps the running
// tasks.ttl and tasks.max_per_identity, saying so, as it does for limits.
func TestReloadTasks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.json")
	write := func(tasks map[string]any) {
		var ups []map[string]any
		for _, name := range []string{"inherits", "own"} {
			command, args, env := mcptest.StdioCommand("echo")
			u := map[string]any{"name": name, "command": command, "args": args, "env": env}
			if name == "own" {
				u["tasks"] = map[string]any{"after": "5s"}
			}
			ups = append(ups, u)
		}
		raw, _ := json.Marshal(map[string]any{"upstreams": ups, "tasks": tasks})
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(map[string]any{"after": "30s"})
	var logs mcptest.LogBuffer
	current, err := loadConfig(path, &logs)
	if err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	log := telemetry.NewLogger(&logs, nil)
	_, g, _ := startGatewayWith(t, current, recorders{log: log})

	const warning = "tasks.ttl and tasks.max_per_identity changes take effect at the next start"
	write(map[string]any{"after": "1m", "ttl": "2h", "max_per_identity": 5})
	next := g.reload(path, current, log)
	if want := (config.Tasks{After: time.Minute, TTL: config.DefaultTaskTTL, MaxPerIdentity: config.DefaultMaxTasks}); next.Tasks != want {
		t.Errorf("tasks after reload = %+v, want %+v (the new after, the running ttl and max)", next.Tasks, want)
	}
	if !strings.Contains(logs.String(), warning) {
		t.Errorf("no warning %q:\n%s", warning, logs.String())
	}
	if started := lastReloadStarted(t, logs.String()); started != 1 {
		t.Errorf("reload started %d upstreams, want 1 (the one that inherits tasks.after)", started)
	}

	// Only the ttl and max in the file differ from those running: no
	// upstream restarts, and the warning comes again.
	write(map[string]any{"after": "1m", "ttl": "3h"})
	n := strings.Count(logs.String(), warning)
	next = g.reload(path, next, log)
	if next.Tasks.TTL != config.DefaultTaskTTL {
		t.Errorf("tasks.ttl after reload = %v, want the running %v", next.Tasks.TTL, config.DefaultTaskTTL)
	}
	if strings.Count(logs.String(), warning) != n+1 {
		t.Errorf("no second warning %q:\n%s", warning, logs.String())
	}
	if started := lastReloadStarted(t, logs.String()); started != 0 {
		t.Errorf("reload started %d upstreams, want 0", started)
	}
}

// lastReloadStarted returns the "started" count of the router's last
// "configuration reloaded" log line.
func lastReloadStarted(t *testing.T, logs string) int {
	t.Helper()
	started := -1
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var line struct {
			Msg     string `json:"msg"`
			Started int    `json:"started"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "configuration reloaded" {
			started = line.Started
		}
	}
	if started < 0 {
		t.Fatalf("no reload logged:\n%s", logs)
	}
	return started
}

// TestValidateTasks: mcp-gateway validate reports each bad tasks value on
// its own line, with its key path.
func TestValidateTasks(t *testing.T) {
	bad := writeConfig(t, map[string]any{"tasks": map[string]any{"after": "10ms", "ttl": "25h", "max_per_identity": 0}}, "echo")
	raw, err := os.ReadFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	file["upstreams"].([]any)[0].(map[string]any)["tasks"] = map[string]any{"after": "2h"}
	raw, _ = json.Marshal(file)
	if err := os.WriteFile(bad, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "validate", "--config", bad)
	if code != exitError {
		t.Errorf("validate: exit %d, want %d", code, exitError)
	}
	for _, want := range []string{
		"tasks.after: must be at least 100ms",
		"tasks.ttl: must be at most 24h",
		"tasks.max_per_identity: must be at least 1",
		"upstreams[0].tasks.after: must be at most 1h",
	} {
		if !strings.Contains(errOut, bad+": "+want) {
			t.Errorf("no line %q in:\n%s", want, errOut)
		}
	}
}
