package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
)

func TestMain(m *testing.M) {
	mcptest.MaybeServeStdio()
	os.Exit(m.Run())
}

// runJSON runs mcp-bench with args and decodes its one line of JSON.
func runJSON[T any](t *testing.T, args ...string) T {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr); code != exitOK {
		t.Fatalf("mcp-bench %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	}
	var v T
	if err := json.Unmarshal(stdout.Bytes(), &v); err != nil {
		t.Fatalf("mcp-bench %s: output is not JSON: %v\n%s", strings.Join(args, " "), err, stdout.String())
	}
	return v
}

func checkLoad(t *testing.T, r loadResult, calls, clients int, era string) {
	t.Helper()
	if r.Kind != "load" || r.Calls != calls || r.Errors != 0 || r.ToolErrors != 0 || r.Concurrency != clients || r.Era != era {
		t.Errorf("result %+v: want %d calls without errors from %d %s clients", r, calls, clients, era)
	}
	if r.LatencyUS.P50 <= 0 || r.LatencyUS.P50 > r.LatencyUS.P99 || r.Throughput <= 0 || r.ResultBytes <= 0 {
		t.Errorf("implausible figures: %+v", r)
	}
}

func TestLoadHTTP(t *testing.T) {
	tests := []struct {
		name string
		opts mcptest.HTTPOptions
		era  string
	}{
		{"legacy sessions, SSE answers", mcptest.HTTPOptions{Server: mcptest.ServerOptions{Versions: mcptest.LegacyVersions()}}, "legacy"},
		{"legacy sessions, JSON answers", mcptest.HTTPOptions{Server: mcptest.ServerOptions{Versions: mcptest.LegacyVersions()}, JSONResponse: true}, "legacy"},
		{"modern", mcptest.HTTPOptions{Server: mcptest.ServerOptions{Versions: mcptest.ModernVersions()}, Stateless: true, JSONResponse: true}, "modern"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := mcptest.NewStreamableServer(t, &tt.opts)
			r := runJSON[loadResult](t, "load", "-url", srv.URL, "-era", tt.era, "-n", "20", "-c", "3", "-warmup", "3",
				"-pid", strconv.Itoa(os.Getpid()), "-label", "smoke/direct", "-format", "json")
			checkLoad(t, r, 20, 3, tt.era)
			if r.Server == nil || r.Server.RSSKiB <= 0 {
				t.Errorf("no RSS for -pid: %+v", r.Server)
			}
		})
	}
}

func TestLoadStdio(t *testing.T) {
	command, args, env := mcptest.StdioCommand("echo")
	for k, v := range env {
		t.Setenv(k, v) // the child inherits the environment
	}
	argv := append([]string{"load", "-n", "30", "-c", "4", "-warmup", "2", "-format", "json", "--", command}, args...)
	r := runJSON[loadResult](t, argv...)
	checkLoad(t, r, 30, 4, "legacy")
	if r.Server == nil || len(r.Server.PIDs) != 1 {
		t.Errorf("the stdio server's process is not reported: %+v", r.Server)
	}

	s := runJSON[startupResult](t, append([]string{"startup", "-runs", "2", "-format", "json", "--", command}, args...)...)
	if s.Kind != "startup" || len(s.RunsMS) != 2 || s.MedianMS <= 0 {
		t.Errorf("startup result %+v", s)
	}
}

func TestSessions(t *testing.T) {
	srv := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: mcptest.ServerOptions{Versions: mcptest.LegacyVersions()}})
	r := runJSON[sessionsResult](t, "sessions", "-url", srv.URL, "-n", "5", "-conns", "2", "-settle", "0s",
		"-pid", strconv.Itoa(os.Getpid()), "-format", "json")
	if r.Kind != "sessions" || r.Sessions != 5 || r.Errors != 0 || r.IdleKiB <= 0 {
		t.Errorf("sessions result %+v", r)
	}
}

func TestReport(t *testing.T) {
	lines := []string{
		`{"kind":"load","label":"http/direct","run":1,"concurrency":1,"calls":10,"throughput_rps":1000,"latency_us":{"p50":100,"p99":200}}`,
		`{"kind":"load","label":"http/gateway","run":1,"concurrency":1,"calls":10,"throughput_rps":800,"latency_us":{"p50":150,"p99":300}}`,
		`{"kind":"load","label":"http/direct","run":2,"concurrency":1,"calls":10,"throughput_rps":1000,"latency_us":{"p50":100,"p99":200}}`,
		`{"kind":"load","label":"http/gateway","run":2,"concurrency":1,"calls":10,"throughput_rps":900,"latency_us":{"p50":130,"p99":300}}`,
		`{"kind":"startup","label":"start/direct","runs_ms":[100,110,90]}`,
		`{"kind":"startup","label":"start/gateway","runs_ms":[120]}`,
		`{"kind":"sessions","label":"mem","target":"u","sessions":1000,"idle_rss_kib":20480,"rss_kib":22528,"per_session_kib":2.048}`,
	}
	var out bytes.Buffer
	if err := report(strings.NewReader(strings.Join(lines, "\n")), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1.40x (1.30..1.50)", "0.85x (0.80..0.90)", "1.20x", "2.0 KiB per session"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"nope"},
		{"load"},
		{"load", "-url", "http://x", "--", "cmd"},
		{"load", "-url", "http://x", "-era", "old"},
		{"load", "-url", "http://x", "-args", "[1]"},
		{"startup"},
		{"sessions"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr); code != exitUsage {
			t.Errorf("mcp-bench %q: exit %d, want %d", args, code, exitUsage)
		}
	}
}
