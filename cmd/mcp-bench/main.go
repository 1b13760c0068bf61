// Command mcp-bench measures MCP servers and the gateway in front of
// them: call latency and throughput under load, start-up time, and memory
// per session.
//
//	mcp-bench load -url http://127.0.0.1:8080/mcp -n 20000 -c 8 [-era legacy|modern] [-tool echo -args '{"text":"hi"}'] [-pid PID] [-format table|json]
//	mcp-bench load -n 20000 -c 8 -- ./echo -stdio      # a stdio server, launched and shared by the clients
//	mcp-bench startup -ready http://127.0.0.1:8080/readyz -runs 5 -- ./mcp-gateway --config gateway.yaml
//	mcp-bench startup -runs 5 -- ./echo -stdio -start-delay 300ms
//	mcp-bench sessions -url http://127.0.0.1:8080/mcp -n 1000 -pid PID
//	mcp-bench report results.jsonl ...                 # medians and ratios of -format json lines
//
// load runs -n calls of a tool with -c concurrent clients, each its own
// legacy session (or modern stateless requests), after -warmup calls that
// are not counted, and reports throughput, latency percentiles, errors,
// its own CPU use, and the RSS and CPU time of the -pid processes. Over
// HTTP each client has one keep-alive connection written and read by hand
// (plain http:// only), so that the tool costs far less per call than the
// servers it measures. Over stdio the clients pipeline their calls on the
// one connection, as a host's concurrent calls do.
//
// bench/compare.sh runs the whole comparison; docs/performance.md has its
// results.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const usage = `usage:
  mcp-bench load [flags] (-url URL | -- command args...)
  mcp-bench startup [flags] -- command args...
  mcp-bench sessions [flags] -url URL -pid PID
  mcp-bench report [file.jsonl ...]
Run "mcp-bench <command> -h" for the flags of a command.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "load":
		return cmdLoad(ctx, args[1:], stdout, stderr)
	case "startup":
		return cmdStartup(ctx, args[1:], stdout, stderr)
	case "sessions":
		return cmdSessions(ctx, args[1:], stdout, stderr)
	case "report":
		return cmdReport(args[1:], stdin, stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "mcp-bench: unknown command %q\n%s", args[0], usage)
	return exitUsage
}

// splitCommand splits the arguments at "--": flags before, a command
// after.
func splitCommand(args []string) (flags, command []string) {
	for i, a := range args {
		if a == "--" {
			return args[:i], args[i+1:]
		}
	}
	return args, nil
}

// output writes v as one JSON line or with print.
func output[T any](w io.Writer, format string, v T, print func(io.Writer, T)) {
	if format == "json" {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	print(w, v)
}

func checkFormat(stderr io.Writer, format string) bool {
	if format != "table" && format != "json" {
		fmt.Fprintf(stderr, "mcp-bench: -format must be table or json, not %q\n", format)
		return false
	}
	return true
}

func checkEra(stderr io.Writer, e string) (modern, ok bool) {
	switch e {
	case "legacy":
		return false, true
	case "modern":
		return true, true
	}
	fmt.Fprintf(stderr, "mcp-bench: -era must be legacy or modern, not %q\n", e)
	return false, false
}

func cmdLoad(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flagArgs, command := splitCommand(args)
	fs := flag.NewFlagSet("mcp-bench load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	u := fs.String("url", "", "Streamable HTTP endpoint (http:// only); or give a stdio server's command after --")
	e := fs.String("era", "legacy", "protocol era: legacy (each client opens a session) or modern (stateless requests)")
	tool := fs.String("tool", "echo", "tool to call")
	toolArgs := fs.String("args", `{"text":"hello"}`, "the tool's arguments, a JSON object")
	n := fs.Int("n", 10000, "calls to measure, over all clients")
	c := fs.Int("c", 1, "concurrent clients")
	warmup := fs.Int("warmup", 500, "calls before the measurement, not counted")
	timeout := fs.Duration("timeout", 30*time.Second, "timeout of each call")
	pids := fs.String("pid", "", "comma-separated process ids whose RSS and CPU time to report (the stdio server by default)")
	label := fs.String("label", "", "a label for the report (group/name; group/direct is the baseline of the group)")
	runN := fs.Int("run", 0, "the repetition this run belongs to, for report's ratios")
	format := fs.String("format", "table", "output: table or json (one line)")
	if err := fs.Parse(flagArgs); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mcp-bench load: unexpected argument %q (a stdio command goes after --)\n", fs.Arg(0))
		return exitUsage
	}
	modern, ok := checkEra(stderr, *e)
	if !ok || !checkFormat(stderr, *format) {
		return exitUsage
	}
	if !json.Valid([]byte(*toolArgs)) || !strings.HasPrefix(strings.TrimSpace(*toolArgs), "{") {
		fmt.Fprintln(stderr, "mcp-bench load: -args must be a JSON object")
		return exitUsage
	}
	if (*u == "") == (len(command) == 0) {
		fmt.Fprintln(stderr, "mcp-bench load: give either -url or a stdio command after --")
		return exitUsage
	}
	ps, err := parsePIDs(*pids)
	if err != nil {
		fmt.Fprintf(stderr, "mcp-bench load: -pid: %v\n", err)
		return exitUsage
	}
	res, err := runLoad(ctx, loadOptions{url: *u, argv: command, modern: modern, tool: *tool, args: json.RawMessage(*toolArgs),
		calls: *n, clients: *c, warmup: *warmup, timeout: *timeout, pids: ps, label: *label, run: *runN})
	if err != nil {
		fmt.Fprintf(stderr, "mcp-bench load: %v\n", err)
		return exitError
	}
	output(stdout, *format, res, printLoad)
	if res.Errors > 0 {
		return exitError
	}
	return exitOK
}

func parsePIDs(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a process id", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func cmdStartup(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flagArgs, command := splitCommand(args)
	fs := flag.NewFlagSet("mcp-bench startup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ready := fs.String("ready", "", "a gateway's /readyz URL: ready once it answers 200 and every upstream is ready; without it the command is a stdio server, ready once it answered initialize and tools/list")
	e := fs.String("era", "legacy", "protocol era of a stdio server: legacy or modern")
	runs := fs.Int("runs", 5, "times to start the command")
	timeout := fs.Duration("timeout", time.Minute, "give up on a start after this long")
	poll := fs.Duration("poll", 2*time.Millisecond, "interval of /readyz polls")
	label := fs.String("label", "", "a label for the report")
	verbose := fs.Bool("v", false, "show the gateway's output")
	format := fs.String("format", "table", "output: table or json (one line)")
	if err := fs.Parse(flagArgs); err != nil {
		return exitUsage
	}
	modern, ok := checkEra(stderr, *e)
	if !ok || !checkFormat(stderr, *format) {
		return exitUsage
	}
	if len(command) == 0 {
		fmt.Fprintln(stderr, "mcp-bench startup: give the command after --")
		return exitUsage
	}
	res, err := runStartup(ctx, startupOptions{argv: command, ready: *ready, modern: modern, runs: *runs, timeout: *timeout, poll: *poll, label: *label, verbose: *verbose})
	if err != nil {
		fmt.Fprintf(stderr, "mcp-bench startup: %v\n", err)
		return exitError
	}
	output(stdout, *format, res, printStartup)
	return exitOK
}

func cmdSessions(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcp-bench sessions", flag.ContinueOnError)
	fs.SetOutput(stderr)
	u := fs.String("url", "", "the gateway's Streamable HTTP endpoint")
	n := fs.Int("n", 1000, "legacy sessions to open")
	pid := fs.Int("pid", 0, "the gateway's process id")
	conns := fs.Int("conns", 4, "connections to open the sessions over")
	settle := fs.Duration("settle", 2*time.Second, "wait before each RSS reading")
	keep := fs.Bool("keep", false, "leave the sessions open (default: DELETE them at the end)")
	label := fs.String("label", "", "a label for the report")
	format := fs.String("format", "table", "output: table or json (one line)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if !checkFormat(stderr, *format) {
		return exitUsage
	}
	if *u == "" {
		fmt.Fprintln(stderr, "mcp-bench sessions: -url is required")
		return exitUsage
	}
	res, err := runSessions(ctx, sessionsOptions{url: *u, sessions: *n, pid: *pid, conns: *conns, settle: *settle, label: *label, keep: *keep})
	if err != nil {
		fmt.Fprintf(stderr, "mcp-bench sessions: %v\n", err)
		return exitError
	}
	output(stdout, *format, res, printSessions)
	return exitOK
}

func cmdReport(files []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var readers []io.Reader
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			fmt.Fprintf(stderr, "mcp-bench report: %v\n", err)
			return exitError
		}
		defer fh.Close()
		readers = append(readers, fh)
	}
	if len(readers) == 0 {
		readers = append(readers, stdin)
	}
	if err := report(io.MultiReader(readers...), stdout); err != nil {
		fmt.Fprintf(stderr, "mcp-bench report: %v\n", err)
		return exitError
	}
	return exitOK
}
