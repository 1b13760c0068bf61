package mcptest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// EnvFake is the environment variable that tells a re-executed test binary
// which stdio fake to serve. StdioCommand sets it.
const EnvFake = "MCPTEST_FAKE"

// stdioFakes maps the names StdioCommand accepts to the functions that
// serve them on stdin and stdout. Each returns the process exit status.
func stdioFakes() map[string]func() int {
	return map[string]func() int{
		"echo":         func() int { return serveSDK(nil, nil) },
		"echo-legacy":  func() int { return serveSDK(&ServerOptions{Name: "echo-legacy", Versions: LegacyVersions()}, nil) },
		"echo-modern":  func() int { return serveSDK(&ServerOptions{Name: "echo-modern", Versions: ModernVersions()}, nil) },
		"echo-paged":   func() int { return serveSDK(&ServerOptions{Name: "echo-paged", PageSize: 2}, nil) },
		"echo-noprobe": func() int { return serveFiltered(dropDiscover) },
		"late-probe":   func() int { return serveFiltered(delayDiscover()) },
		"noisy":        func() int { return serveSDK(&ServerOptions{Name: "noisy"}, noisyWriter) },
		"announce":     serveAnnounce,
		"stubborn":     serveStubborn,
		"silent":       serveSilent,
		"garbage":      serveGarbage,
		"crash":        func() int { return 3 },
		"blob":         serveBlob,
		"listen-ends":  serveListenEnds,
		"worker":       serveWorker,
		"sleeper":      serveSleeper,
	}
}

// MaybeServeStdio serves a stdio fake and exits the process when the
// environment names one (see EnvFake); otherwise it returns at once. Call
// it first thing in TestMain of every package that uses StdioCommand.
func MaybeServeStdio() {
	name, ok := os.LookupEnv(EnvFake)
	if !ok {
		return
	}
	serve := stdioFakes()[name]
	if serve == nil {
		fmt.Fprintf(os.Stderr, "mcptest: unknown stdio fake %q\n", name)
		os.Exit(2)
	}
	os.Exit(serve())
}

// StdioCommand returns how to launch the stdio fake called name: a command,
// its arguments and the environment variables to add (the child must see
// them; pass env to the upstream's environment, as gateway configs do).
// The package that launches it must call MaybeServeStdio from TestMain.
//
// Fakes:
//
//   - "echo": the NewServer tools, prompts and resources, dual-era; it
//     writes one line to stderr when it starts.
//   - "echo-legacy": legacy versions only: server/discover is answered
//     with an UnsupportedProtocolVersion error listing legacy versions.
//   - "echo-modern": modern versions only.
//   - "echo-paged": "echo" with a list page size of 2.
//   - "echo-noprobe": a legacy server that never answers server/discover.
//   - "late-probe": a legacy server that answers server/discover (with a
//     DiscoverResult) only after initialize has arrived.
//   - "noisy": "echo" that writes a non-JSON line before every message.
//   - "announce": "echo-legacy" with ServerOptions.NotifyOnInitialized: it
//     sends notifications/tools/list_changed right after the client's
//     notifications/initialized.
//   - "stubborn": "echo" that ignores SIGTERM and keeps running after its
//     stdin closes.
//   - "silent": reads stdin until it closes and never answers.
//   - "garbage": answers every line with a line that is not JSON.
//   - "crash": exits at once with status 3.
//   - "listen-ends": a raw modern server for subscriptions/listen. It
//     acknowledges every listen request with the filter asked for; the
//     first one it then ends at once with notifications/cancelled; on the
//     others it sends notifications/tools/list_changed, tagged with the
//     subscription id and with the _meta key "n" set to the listen
//     request's ordinal (2, 3, ...). It answers server/discover as a
//     modern server and every other request with {}.
//   - "worker": "echo" with two more tools, for supervision tests: spawn
//     (starts a "sleeper" in the server's process group and returns its
//     process id), and slow {count, ms, text}
//     (sends count notifications/progress ms milliseconds apart when the
//     call carries a progress token, then returns text). With the
//     environment from WorkerStarts it counts its starts in a file and
//     exits at once, with status 3, on the starts it is told to crash on.
//   - "sleeper": does nothing until it is killed (stdin and stdout
//     unused).
//   - "blob": a minimal raw server for benchmarks: it answers tools/call
//     {size} with a text result of size bytes, server/discover as a
//     modern server, initialize, and every other request with {}.
//
// The SDK-based fakes also have the tools getenv {name} (the variable's
// value, or "<unset>"), meta (the _meta of the call's params as JSON,
// "null" without one; traceparent and the like), note {text} (adds text
// to the process's notes, unless empty, and returns them all, one per
// line: state that lives as long as the process), pid (the process id)
// and exit {code} (ends the process).
func StdioCommand(name string) (command string, args []string, env map[string]string) {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	// -test.run=^$ keeps a binary that forgot MaybeServeStdio from running
	// its tests recursively.
	// A binary built with -race sleeps for a second at exit unless told
	// not to.
	return exe, []string{"-test.run=^$"}, map[string]string{EnvFake: name, "GORACE": "atexit_sleep_ms=0"}
}

// Environment variables of the "worker" fake.
const (
	envStartsFile = "MCPTEST_STARTS_FILE"
	envCrashOn    = "MCPTEST_CRASH_ON"
)

// WorkerStarts returns the environment that makes the "worker" fake
// count its starts in file (one byte per start) and crash at once on the
// starts numbered in crashOn (the first start is 1). Add it to the env
// StdioCommand returns; read the count with Starts.
func WorkerStarts(file string, crashOn ...int) map[string]string {
	nums := make([]string, len(crashOn))
	for i, n := range crashOn {
		nums[i] = strconv.Itoa(n)
	}
	return map[string]string{envStartsFile: file, envCrashOn: strings.Join(nums, ",")}
}

// Starts returns how many times a "worker" fake with WorkerStarts(file)
// has started.
func Starts(file string) int {
	fi, err := os.Stat(file)
	if err != nil {
		return 0
	}
	return int(fi.Size())
}

func serveWorker() int {
	if file := os.Getenv(envStartsFile); file != "" {
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			fmt.Fprintf(os.Stderr, "mcptest fake worker: %v\n", err)
			return 2
		}
		_, _ = f.Write([]byte{'.'})
		f.Close()
		n := Starts(file)
		if slices.Contains(strings.Split(os.Getenv(envCrashOn), ","), strconv.Itoa(n)) {
			fmt.Fprintf(os.Stderr, "mcptest fake worker: crashing on start %d\n", n)
			return 3
		}
	}
	s, g := newServer(&ServerOptions{Name: "worker"})
	addProcessTools(s)
	addWorkerTools(s)
	fmt.Fprintln(os.Stderr, "mcptest fake worker: ready")
	t := &mcp.IOTransport{Reader: tap(os.Stdin, g.note), Writer: nopWriteCloser{os.Stdout}}
	if err := s.Run(context.Background(), t); err != nil && err != io.EOF {
		fmt.Fprintf(os.Stderr, "mcptest fake worker: %v\n", err)
	}
	return 0
}

func addWorkerTools(s *mcp.Server) {
	s.AddTool(&mcp.Tool{Name: "spawn", Description: "starts a helper process", InputSchema: schema(``)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			cmd, args, env := StdioCommand("sleeper")
			c := exec.Command(cmd, args...)
			c.Env = os.Environ()
			for k, v := range env {
				c.Env = append(c.Env, k+"="+v)
			}
			if err := c.Start(); err != nil {
				return nil, err
			}
			return text(strconv.Itoa(c.Process.Pid)), nil
		})
	s.AddTool(&mcp.Tool{Name: "slow", Description: "reports progress for a while, then returns text", InputSchema: schema(`"count":{"type":"integer"},"ms":{"type":"integer"},"text":{"type":"string"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct {
				Count, Ms int
				Text      string
			}
			if err := args(req, &a); err != nil {
				return nil, err
			}
			tok := req.Params.GetProgressToken()
			for i := range a.Count {
				select {
				case <-time.After(time.Duration(a.Ms) * time.Millisecond):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				if tok != nil {
					if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i + 1), Total: float64(a.Count)}); err != nil {
						return nil, err
					}
				}
			}
			return text(a.Text), nil
		})
}

// serveSleeper sleeps until killed. (A bare select{} would be taken for
// a deadlock by the runtime.)
func serveSleeper() int {
	for {
		time.Sleep(time.Hour)
	}
}

// notes is the state of the note tool.
var notes struct {
	sync.Mutex
	lines []string
}

// addProcessTools adds the tools that only make sense in a child process.
func addProcessTools(s *mcp.Server) {
	s.AddTool(&mcp.Tool{Name: "note", Description: "adds to the process's notes and returns them", InputSchema: schema(`"text":{"type":"string"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Text string }
			if err := args(req, &a); err != nil {
				return nil, err
			}
			notes.Lock()
			defer notes.Unlock()
			if a.Text != "" {
				notes.lines = append(notes.lines, a.Text)
			}
			return text(strings.Join(notes.lines, "\n")), nil
		})
	s.AddTool(&mcp.Tool{Name: "getenv", Description: "reads an environment variable", InputSchema: schema(`"name":{"type":"string"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Name string }
			if err := args(req, &a); err != nil {
				return nil, err
			}
			v, ok := os.LookupEnv(a.Name)
			if !ok {
				v = "<unset>"
			}
			return text(v), nil
		})
	s.AddTool(&mcp.Tool{Name: "pid", Description: "returns the server's process id", InputSchema: schema(``)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(strconv.Itoa(os.Getpid())), nil
		})
	s.AddTool(&mcp.Tool{Name: "meta", Description: "returns the request's _meta", InputSchema: schema(``)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			b, err := json.Marshal(req.Params.Meta)
			if err != nil {
				return nil, err
			}
			return text(string(b)), nil
		})
	s.AddTool(&mcp.Tool{Name: "exit", Description: "ends the server process", InputSchema: schema(`"code":{"type":"integer"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Code int }
			if err := args(req, &a); err != nil {
				return nil, err
			}
			os.Exit(a.Code)
			return nil, nil
		})
}

// serveSDK serves an SDK server on stdin and stdout. wrap, if set, wraps
// stdout.
func serveSDK(opts *ServerOptions, wrap func(io.Writer) io.Writer) int {
	if opts == nil {
		opts = &ServerOptions{Name: "echo"}
	}
	s, g := newServer(opts)
	addProcessTools(s)
	fmt.Fprintf(os.Stderr, "mcptest fake %s: ready\n", opts.Name)
	var out io.Writer = os.Stdout
	if wrap != nil {
		out = wrap(out)
	}
	t := &mcp.IOTransport{Reader: tap(os.Stdin, g.note), Writer: nopWriteCloser{out}}
	if err := s.Run(context.Background(), t); err != nil && err != io.EOF {
		fmt.Fprintf(os.Stderr, "mcptest fake %s: %v\n", opts.Name, err)
	}
	return 0
}

// tap returns a reader of the lines of r that shows each to note first
// (the cancellations tool needs the JSON-RPC ids, which the SDK keeps to
// itself).
func tap(r io.Reader, note func([]byte)) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			note(sc.Bytes())
			if _, err := pw.Write(append(slices.Clip(sc.Bytes()), '\n')); err != nil {
				break
			}
		}
		pw.CloseWithError(sc.Err())
	}()
	return pr
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// noisyWriter writes a line that is not JSON before every write; the SDK
// writes each message with a single Write.
func noisyWriter(w io.Writer) io.Writer { return &noisy{w: w} }

type noisy struct {
	mu sync.Mutex
	w  io.Writer
	n  int
}

func (n *noisy) Write(p []byte) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.n++
	if _, err := fmt.Fprintf(n.w, "this is not JSON (%d)\n", n.n); err != nil {
		return 0, err
	}
	return n.w.Write(p)
}

func serveAnnounce() int {
	return serveSDK(&ServerOptions{Name: "announce", Versions: LegacyVersions(), NotifyOnInitialized: true}, nil)
}

// serveStubborn is "echo" that must be killed.
func serveStubborn() int {
	signal.Ignore(syscall.SIGTERM)
	serveSDK(&ServerOptions{Name: "stubborn"}, nil)
	select {} // stdin is closed: wait for SIGKILL
}

func serveSilent() int {
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

func serveGarbage() int {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for i := 0; sc.Scan(); i++ {
		fmt.Printf("garbage line %d {not json\n", i)
	}
	return 0
}

// A stdinFilter sees every line sent to a filtered server. It returns
// whether the server should get the line; it may write to out itself.
type stdinFilter func(line []byte, msg *jsonrpc.Message, out *lockedWriter) bool

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// serveFiltered serves a legacy-only SDK server behind filter.
func serveFiltered(filter stdinFilter) int {
	s := NewServer(&ServerOptions{Name: "filtered", Versions: LegacyVersions()})
	addProcessTools(s)
	out := &lockedWriter{w: os.Stdout}
	pr, pw := io.Pipe()
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			line := sc.Bytes()
			msg, err := jsonrpc.Decode(line)
			if err == nil && !filter(line, msg, out) {
				continue
			}
			if _, err := pw.Write(append(slices.Clip(line), '\n')); err != nil {
				break
			}
		}
		pw.Close()
	}()
	_ = s.Run(context.Background(), &mcp.IOTransport{Reader: pr, Writer: nopWriteCloser{out}})
	return 0
}

func dropDiscover(_ []byte, msg *jsonrpc.Message, _ *lockedWriter) bool {
	return msg.Method != "server/discover"
}

// delayDiscover holds back server/discover until initialize arrives, then
// answers it, late, as a modern server would.
func delayDiscover() stdinFilter {
	var held json.RawMessage
	return func(_ []byte, msg *jsonrpc.Message, out *lockedWriter) bool {
		switch msg.Method {
		case "server/discover":
			held = msg.ID
			return false
		case "initialize":
			if held != nil {
				res := `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}}}`
				_, _ = out.Write(append(jsonrpc.AppendResult(nil, held, json.RawMessage(res)), '\n'))
				held = nil
			}
		}
		return true
	}
}

// serveBlob is a raw server that spends as little as possible per message,
// so that benchmarks measure the client.
func serveBlob() int {
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	results := map[int]json.RawMessage{}
	var m jsonrpc.Message
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return 0
		}
		if jsonrpc.DecodeInto(&m, line) != nil || !m.IsRequest() {
			continue
		}
		out.Write(jsonrpc.AppendResult(nil, m.ID, BlobResult(m.Method, m.Params, results)))
		out.WriteByte('\n')
		if in.Buffered() == 0 {
			out.Flush()
		}
	}
}

func serveListenEnds() int {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	write := func(b []byte) {
		out.Write(b)
		out.WriteByte('\n')
		out.Flush()
	}
	listens := 0
	for in.Scan() {
		m, err := jsonrpc.Decode(in.Bytes())
		if err != nil || !m.IsRequest() {
			continue
		}
		switch m.Method {
		case "server/discover":
			write(jsonrpc.AppendResult(nil, m.ID, BlobResult(m.Method, nil, nil)))
		case "subscriptions/listen":
			listens++
			filter, _ := jsonrpc.Field(m.Params, "notifications")
			meta := `{"io.modelcontextprotocol/subscriptionId":` + string(m.ID) + `}`
			write(jsonrpc.AppendNotification(nil, "notifications/subscriptions/acknowledged",
				json.RawMessage(`{"_meta":`+meta+`,"notifications":`+string(filter)+`}`)))
			if listens == 1 {
				write(jsonrpc.AppendNotification(nil, "notifications/cancelled",
					json.RawMessage(`{"requestId":`+string(m.ID)+`,"reason":"shutting down"}`)))
				continue
			}
			write(jsonrpc.AppendNotification(nil, "notifications/tools/list_changed",
				json.RawMessage(`{"_meta":{"io.modelcontextprotocol/subscriptionId":`+string(m.ID)+`,"n":`+strconv.Itoa(listens)+`}}`)))
		default:
			write(jsonrpc.AppendResult(nil, m.ID, json.RawMessage(`{}`)))
		}
	}
	return 0
}

// BlobResult is the result the "blob" fake gives to a request; cache holds
// tools/call results by size. HTTP benchmarks use it to answer the same
// way.
func BlobResult(method string, params json.RawMessage, cache map[int]json.RawMessage) json.RawMessage {
	switch method {
	case "server/discover":
		return json.RawMessage(`{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"blob","version":"1.0.0"}}}`)
	case "initialize":
		return json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"blob","version":"1.0.0"}}`)
	case "tools/call":
		a, _ := jsonrpc.Field(params, "arguments")
		raw, _ := jsonrpc.Field(a, "size")
		size, _ := strconv.Atoi(string(raw))
		res, ok := cache[size]
		if !ok {
			res = json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("x", size) + `"}],"isError":false}`)
			cache[size] = res
		}
		return res
	}
	return json.RawMessage(`{}`)
}
