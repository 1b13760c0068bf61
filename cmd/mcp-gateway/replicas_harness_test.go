package main

// The harness of the replica tests (replicas_test.go): a redis-server, three
// gateway processes sharing one config (state in that Redis), an haproxy
// balancing them round robin with no stickiness, one legacy upstream in
// this process shared by all three, Go SDK hosts of both eras through the
// balancer, and a paced load whose every call is recorded.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
)

// replicaUpstreamName is the upstream's name in the gateways' config, the
// prefix of its exposed tools.
const replicaUpstreamName = "up"

// exposed returns the name hosts call an upstream tool by.
func exposed(tool string) string { return replicaUpstreamName + "__" + tool }

// startupWait bounds every wait for a process to come up or go away: a
// generous bound on an event, not a measure of its speed.
const startupWait = 30 * time.Second

// replicaPeer finds a program the replica tests need: on PATH, else in
// /usr/sbin or /usr/bin (where Debian puts redis-server and haproxy, and
// /usr/sbin is not always on PATH). Without it the test skips, or fails
// under MCP_GATEWAY_TEST_PEERS=require (./test.sh).
func replicaPeer(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/bin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	if os.Getenv("MCP_GATEWAY_TEST_PEERS") == "require" {
		t.Fatalf("%s is not installed: .ci/run installs redis-server and haproxy before ./test.sh", name)
	}
	t.Skipf("%s is not installed: run ./test.sh through .ci/run, which installs redis-server and haproxy (or apt-get install redis-server haproxy)", name)
	return ""
}

// lineWriter writes each line it is given to the test log, prefixed.
type lineWriter struct {
	t      *testing.T
	prefix string

	mu  sync.Mutex // guards buf
	buf []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.t.Logf("%s: %s", w.prefix, w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

// proc is a child process whose exit is awaited by one goroutine.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd.Wait returned
	err    error         // cmd.Wait's error, set before exited closes
}

// startProc starts cmd with its output to the test log, and kills and
// reaps it when the test ends (if it is still running then).
func startProc(t *testing.T, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	out := &lineWriter{t: t, prefix: name}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(p.kill)
	return p
}

// kill sends SIGKILL and waits until the process is reaped.
func (p *proc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// alive reports whether the process is still running.
func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// errExited says a process that poll waits on is gone: waiting longer
// cannot help.
var errExited = errors.New("exited")

// poll calls ok until it returns nil, or fails the test with its last
// error after wait, or at once for an errExited. It is for real sockets
// and processes, which no fake clock drives.
func poll(t *testing.T, wait time.Duration, what string, ok func() error) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		err := ok()
		if err == nil {
			return
		}
		if errors.Is(err, errExited) || time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startRedis runs redis-server on a free loopback port, without
// persistence, in its own directory, and returns its address once it
// answers PING.
func startRedis(t *testing.T) string {
	t.Helper()
	bin := replicaPeer(t, "redis-server")
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "--save", "", "--appendonly", "no", "--port", port, "--bind", "127.0.0.1", "--dir", dir, "--loglevel", "warning")
	cmd.Dir = dir
	p := startProc(t, "redis", cmd)
	poll(t, startupWait, "redis-server never answered PING", func() error {
		if !p.alive() {
			return fmt.Errorf("redis-server %w: %v", errExited, p.err)
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		if _, err := io.WriteString(c, "PING\r\n"); err != nil {
			return err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return err
		}
		if strings.TrimSpace(line) != "+PONG" {
			return fmt.Errorf("PING answered %q", line)
		}
		return nil
	})
	return addr
}

// replicaUpstream is the one upstream every replica connects to: a legacy
// (2025-11-25) Streamable HTTP server made with the Go SDK, with sessions,
// so that each replica holds its own upstream session and GET stream.
type replicaUpstream struct {
	server *mcp.Server
	url    string
}

// slowFor is how long the slow tool takes: long enough that calls are in
// flight whenever a replica is killed, far shorter than the drain.
const slowFor = 300 * time.Millisecond

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func textSchema(member string) map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{member: map[string]any{"type": "string"}}}
}

func startReplicaUpstream(t *testing.T) *replicaUpstream {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "replicas-upstream", Version: "1"}, &mcp.ServerOptions{
		SupportedProtocolVersions: mcptest.LegacyVersions(),
		Logger:                    slog.New(slog.NewTextHandler(&lineWriter{t: t, prefix: "upstream"}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	u := &replicaUpstream{server: s}
	// ending ends the asks still waiting when the test ends: a killed
	// replica never answers its elicitations, and closing a session waits
	// for its handlers.
	ending, end := context.WithCancel(context.Background())
	stringArg := func(req *mcp.CallToolRequest, member string) (string, error) {
		var a map[string]string
		if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
			return "", err
		}
		return a[member], nil
	}
	s.AddTool(&mcp.Tool{Name: "echo", Description: "returns text", InputSchema: textSchema("text")},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			text, err := stringArg(req, "text")
			if err != nil {
				return nil, err
			}
			return textResult(text), nil
		})
	s.AddTool(&mcp.Tool{Name: "slow", Description: "returns text after a while", InputSchema: textSchema("text")},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			text, err := stringArg(req, "text")
			if err != nil {
				return nil, err
			}
			select {
			case <-time.After(slowFor):
				return textResult(text), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	s.AddTool(&mcp.Tool{Name: "ask", Description: "asks the client for a name and returns it", InputSchema: textSchema("message")},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			message, err := stringArg(req, "message")
			if err != nil {
				return nil, err
			}
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(ending, cancel)()
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: message, RequestedSchema: textSchema("name")})
			if err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "elicitation: " + err.Error()}}}, nil
			}
			name, _ := res.Content["name"].(string)
			return textResult(res.Action + " " + name), nil
		})
	// A prompt and a resource, so that hosts have all three lists.
	s.AddPrompt(&mcp.Prompt{Name: "greet", Description: "greets"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello"}}}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "test://hello", Name: "hello", MIMEType: "text/plain"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://hello", MIMEType: "text/plain", Text: "hello"}}}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		end()
		for ss := range s.Sessions() {
			_ = ss.Close()
		}
		srv.CloseClientConnections()
		srv.Close()
	})
	u.url = srv.URL
	return u
}

// addTool adds a tool upstream, so that the SDK sends
// notifications/tools/list_changed to every replica's upstream session.
func (u *replicaUpstream) addTool(name string) {
	u.server.AddTool(&mcp.Tool{Name: name, Description: "added while hosts listen", InputSchema: textSchema("text")},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return textResult("ok"), nil })
}

// replica is one gateway process on a fixed port, which restart keeps.
type replica struct {
	name string
	addr string
	proc *proc
}

func (r *replica) url() string { return "http://" + r.addr + "/mcp" }

// replicaSet runs the gateway replicas, all with the same config file.
type replicaSet struct {
	t        *testing.T
	config   string
	replicas []*replica
}

// writeReplicaConfig writes the config every replica runs: the upstream,
// state in Redis sealed with a key from a file, and a shutdown that keeps
// serving for a second after SIGTERM (with /readyz at 503) so the
// balancer takes the replica out of rotation before it stops.
func writeReplicaConfig(t *testing.T, upstreamURL, redisAddr string) string {
	t.Helper()
	dir := t.TempDir()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, "state.key")
	if err := os.WriteFile(keyPath, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{
		"upstreams": []any{map[string]any{
			"name":      replicaUpstreamName,
			"url":       upstreamURL,
			"transport": "streamable-http",
			"required":  true,
		}},
		"state": map[string]any{
			"store": "redis",
			"redis": map[string]any{"url": "redis://" + redisAddr + "/0"},
			"key":   map[string]any{"file": keyPath},
		},
		"shutdown":  map[string]any{"delay": "1s", "timeout": "10s"},
		"telemetry": map[string]any{"log_level": "warn"},
	}
	raw, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startReplicas starts n gateway replicas on free ports and waits until
// each one's /readyz answers 200.
func startReplicas(t *testing.T, config string, n int) *replicaSet {
	t.Helper()
	rs := &replicaSet{t: t, config: config}
	for i := range n {
		r := &replica{name: fmt.Sprintf("r%d", i), addr: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
		rs.replicas = append(rs.replicas, r)
		rs.start(r)
	}
	for _, r := range rs.replicas {
		rs.awaitReady(r)
	}
	return rs
}

// start runs the replica's gateway process (again, after a stop).
func (rs *replicaSet) start(r *replica) {
	rs.t.Helper()
	r.proc = startProc(rs.t, r.name, gatewayCommand(rs.t, "serve", "--config", rs.config, "--listen", r.addr))
}

// readyz returns the status of the replica's /readyz, asked directly.
func (r *replica) readyz() (int, error) {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + r.addr + "/readyz")
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// running returns the replicas whose process runs.
func (rs *replicaSet) running() []*replica {
	var up []*replica
	for _, r := range rs.replicas {
		if r.proc != nil && r.proc.alive() {
			up = append(up, r)
		}
	}
	return up
}

// awaitListed waits until every running replica lists tool in a modern
// tools/list sent to it directly.
func (rs *replicaSet) awaitListed(ctx context.Context, tool string) error {
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	lists := func(r *replica) bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url(), strings.NewReader(body))
		if err != nil {
			return false
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/list")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && bytes.Contains(b, []byte(`"name":"`+tool+`"`))
	}
	for {
		behind := ""
		for _, r := range rs.running() {
			if !lists(r) {
				behind = r.name
				break
			}
		}
		if behind == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replica %s never listed %s", behind, tool)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// awaitReady polls the replica's /readyz until it answers 200.
func (rs *replicaSet) awaitReady(r *replica) {
	rs.t.Helper()
	poll(rs.t, startupWait, r.name+" never became ready", func() error {
		if !r.proc.alive() {
			return fmt.Errorf("%w: %v", errExited, r.proc.err)
		}
		code, err := r.readyz()
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("/readyz answered %d", code)
		}
		return nil
	})
}

// kill ends the replica with SIGKILL, as a crash or an OOM kill would,
// and returns once it is reaped.
func (rs *replicaSet) kill(r *replica) { r.proc.kill() }

// terminate sends SIGTERM and returns once /readyz answered 503 (the
// replica is in its shutdown.delay); it fails the test if the process
// exits first or /readyz answers anything else.
func (rs *replicaSet) terminate(r *replica) {
	rs.t.Helper()
	if err := r.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		rs.t.Fatalf("%s: SIGTERM: %v", r.name, err)
	}
	deadline := time.After(startupWait)
	for {
		select {
		case <-r.proc.exited:
			rs.t.Fatalf("%s exited after SIGTERM (%v) before /readyz answered 503", r.name, r.proc.err)
		case <-deadline:
			rs.t.Fatalf("%s: /readyz never answered 503 after SIGTERM", r.name)
		default:
		}
		code, err := r.readyz()
		if err == nil && code == http.StatusServiceUnavailable {
			return
		}
		if err == nil && code != http.StatusOK {
			rs.t.Fatalf("%s: /readyz answered %d after SIGTERM, want 503", r.name, code)
		}
		// 200: the signal is not handled yet. An error: the process is
		// exiting, which the next round sees.
		time.Sleep(10 * time.Millisecond) // a polling interval on a real socket
	}
}

// awaitExit waits for a terminated replica to exit, and fails the test
// unless it exits cleanly within startupWait.
func (rs *replicaSet) awaitExit(r *replica) {
	rs.t.Helper()
	select {
	case <-r.proc.exited:
		if r.proc.err != nil {
			rs.t.Errorf("%s: exit after SIGTERM: %v", r.name, r.proc.err)
		}
	case <-time.After(startupWait):
		rs.t.Fatalf("%s did not exit after SIGTERM", r.name)
	}
}

// balancer is an haproxy in front of the replicas.
type balancer struct {
	t     *testing.T
	addr  string
	stats string // the stats socket's path
	proc  *proc
}

func (b *balancer) url() string { return "http://" + b.addr + "/mcp" }

// haproxyConfig balances round robin with no stickiness, checks
// /readyz every 200 ms (one failure takes a server out, two successes put
// it back; a failure is a refused connection or a status other than 200,
// not a slow answer: without timeout check, an answer later than inter
// fails the check, and on a loaded machine every replica then leaves the
// rotation at once, and haproxy answers 503 with none), and re-sends a request that could not have been served (no
// connection, or no answer at all) to another server. Server connections
// close after each response, so that a request never waits behind an SSE
// stream; client connections are kept alive. Each response names the
// replica that served it in X-Replica, for the test to see where streams
// are.
const haproxyConfig = `global
    maxconn 4096
    stats socket %[1]s mode 600 level admin
    log stderr format raw daemon notice

defaults
    mode http
    log global
    timeout connect 1s
    timeout client 60s
    timeout server 60s
    timeout tunnel 1h
    retries 3
    option redispatch 1
    retry-on conn-failure
    option http-server-close

frontend mcp
    bind %[2]s
    default_backend gateways

backend gateways
    balance roundrobin
    option httpchk
    http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host 127.0.0.1
    http-check expect status 200
    timeout check 10s
    default-server inter 200ms fall 1 rise 2
    http-response set-header X-Replica %%[srv_name]
%[3]s`

// startBalancer runs haproxy in the foreground in front of rs and waits
// until it reports every replica UP.
func startBalancer(t *testing.T, rs *replicaSet) *balancer {
	t.Helper()
	bin := replicaPeer(t, "haproxy")
	// A unix socket's path is limited to 108 bytes: t.TempDir() names
	// may be long, so the socket lives in a short directory of its own.
	sockDir, err := os.MkdirTemp("", "haproxy")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	b := &balancer{t: t, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), stats: filepath.Join(sockDir, "s")}
	var servers strings.Builder
	for _, r := range rs.replicas {
		fmt.Fprintf(&servers, "    server %s %s check\n", r.name, r.addr)
	}
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, fmt.Appendf(nil, haproxyConfig, b.stats, b.addr, servers.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	b.proc = startProc(t, "haproxy", exec.Command(bin, "-db", "-f", path))
	for _, r := range rs.replicas {
		b.awaitUp(r)
	}
	return b
}

// serverStates asks haproxy's stats socket for the status (UP, DOWN,
// "UP 1/2", ...) of each server of the gateways backend.
func (b *balancer) serverStates() (map[string]string, error) {
	c, err := net.DialTimeout("unix", b.stats, time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, "show stat\n"); err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(c)
	if err != nil {
		return nil, err
	}
	rows, err := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(raw, []byte("# ")))).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("show stat: %w (%q)", err, raw)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("show stat: nothing (%q)", raw)
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	states := map[string]string{}
	for _, row := range rows[1:] {
		if len(row) > col["status"] && row[col["pxname"]] == "gateways" {
			states[row[col["svname"]]] = row[col["status"]]
		}
	}
	return states, nil
}

// awaitUp polls haproxy's stats until it reports the replica UP (its
// check passed `rise` times), so that it is in rotation again.
func (b *balancer) awaitUp(r *replica) {
	b.t.Helper()
	poll(b.t, startupWait, "haproxy never saw "+r.name+" up", func() error {
		if !b.proc.alive() {
			return fmt.Errorf("haproxy %w: %v", errExited, b.proc.err)
		}
		states, err := b.serverStates()
		if err != nil {
			return err
		}
		if got := states[r.name]; got != "UP" {
			return fmt.Errorf("status %q (all: %v)", got, states)
		}
		return nil
	})
}

// awaitDown polls haproxy's stats until it has taken the replica out of
// rotation.
func (b *balancer) awaitDown(r *replica) {
	b.t.Helper()
	poll(b.t, startupWait, "haproxy never saw "+r.name+" down", func() error {
		states, err := b.serverStates()
		if err != nil {
			return err
		}
		if got := states[r.name]; !strings.HasPrefix(got, "DOWN") {
			return fmt.Errorf("status %q", got)
		}
		return nil
	})
}

// replicaHost is a Go SDK host through the balancer. It answers every
// elicitation with {"name": <its name>} and reports each
// notifications/tools/list_changed on toolsChanged.
//
// A modern host has no session, but it has a subscriptions/listen stream
// on one replica, which ends when that replica does. The spec lets a
// client reconnect then (basic/patterns/subscriptions.mdx, "Graceful
// Closure"), and a real host must, to hear of changes again; the Go SDK
// client does not, so the host does it itself: when its listen stream's
// body ends, it connects a listener session, which opens a new stream
// (on a surviving replica). Calls stay on the first session.
type replicaHost struct {
	name, era    string
	cs           *mcp.ClientSession
	sessionID    string // the legacy session id at connect ("" for modern)
	toolsChanged chan struct{}

	base    *http.Transport // shared by every session of the host
	options *mcp.ClientOptions

	mu sync.Mutex // guards the fields below
	// listening is set when the gateway acknowledged a listen stream and
	// cleared when that stream ended.
	listening bool
	gen       int                // generation of the current listen stream's session
	listener  *mcp.ClientSession // the session of generation gen, nil for cs
	closed    bool

	// streams are the host's GET and subscriptions/listen streams, in
	// the order they were opened.
	streams []*hostStream
	// changes are the times notifications/<kind>/list_changed arrived,
	// by kind (tools, prompts, resources).
	changes map[string][]time.Time
	// callReplica is the replica that answered the last tools/call POST.
	callReplica string

	// onElicit, if set, runs before the host answers an elicitation.
	onElicit atomic.Pointer[func()]

	lost       chan int      // generations whose listen stream ended
	changed    chan struct{} // poked when listening changes
	changedSig chan struct{} // poked when a list_changed arrives
	done       chan struct{} // closed by close
	wg         sync.WaitGroup
}

func newReplicaHost(t *testing.T, url, era, name string) *replicaHost {
	t.Helper()
	h := &replicaHost{
		name: name, era: era,
		toolsChanged: make(chan struct{}, 256),
		base:         &http.Transport{MaxIdleConnsPerHost: 64},
		lost:         make(chan int, 16),
		changed:      make(chan struct{}, 1),
		changedSig:   make(chan struct{}, 1),
		changes:      map[string][]time.Time{},
		done:         make(chan struct{}),
	}
	h.options = &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if hook := h.onElicit.Load(); hook != nil {
				(*hook)()
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": name}}, nil
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			h.noteChange("tools")
			push(h.toolsChanged, struct{}{})
		},
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { h.noteChange("prompts") },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { h.noteChange("resources") },
	}
	var cs *mcp.ClientSession
	deadline := time.Now().Add(startupWait)
	for {
		var err error
		if cs, err = h.connect(url, 0); err == nil {
			break
		}
		if !errors.Is(err, errOtherEra) || time.Now().After(deadline) {
			t.Fatalf("%s: connecting in era %s: %v", name, era, err)
		}
		time.Sleep(100 * time.Millisecond) // a host's reconnect backoff, not a test wait
	}
	h.cs = cs
	h.sessionID = cs.ID()
	if h.modern() {
		h.wg.Go(func() { h.relisten(url) })
	}
	t.Cleanup(h.close)
	return h
}

func (h *replicaHost) modern() bool { return h.era >= "2026-07-28" }

// errOtherEra is a connect whose session speaks another era than the
// host's.
var errOtherEra = errors.New("the session negotiated another era")

// connect makes a client session whose listen stream, if it opens one,
// is watched as generation gen. A session of another era is closed and
// is errOtherEra: the Go SDK falls back from a modern server/discover to
// a legacy initialize on any error that is not a JSON-RPC one, so a
// balancer's 503 (no replica in rotation for a moment, or one that died
// under the request) makes a modern host a legacy session, which never
// opens a listen stream. A modern host tries again instead.
func (h *replicaHost) connect(url string, gen int) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "replicas-" + h.name, Version: "1"}, h.options)
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "notifications/subscriptions/acknowledged" {
				h.setListening(gen, true)
			}
			return next(ctx, method, req)
		}
	})
	hc := &http.Client{Transport: &streamWatch{h: h, ended: func() { push(h.lost, gen) }}}
	ctx, cancel := context.WithTimeout(context.Background(), startupWait)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: h.era})
	if err != nil {
		return nil, err
	}
	if got := cs.InitializeResult().ProtocolVersion; got != h.era {
		_ = cs.Close()
		return nil, fmt.Errorf("%w: %s, want %s", errOtherEra, got, h.era)
	}
	return cs, nil
}

func (h *replicaHost) setListening(gen int, on bool) {
	h.mu.Lock()
	if gen == h.gen {
		h.listening = on
	}
	h.mu.Unlock()
	push(h.changed, struct{}{})
}

// relisten connects a new listener session each time the current listen
// stream ends, until close.
func (h *replicaHost) relisten(url string) {
	for {
		var gen int
		select {
		case gen = <-h.lost:
		case <-h.done:
			return
		}
		h.mu.Lock()
		if gen != h.gen || h.closed {
			h.mu.Unlock()
			continue // an older stream, or a session being closed
		}
		h.listening = false
		h.gen++
		old := h.listener
		h.listener = nil
		next := h.gen
		h.mu.Unlock()
		push(h.changed, struct{}{})
		if old != nil {
			_ = old.Close()
		}
		for {
			cs, err := h.connect(url, next)
			if err == nil {
				h.mu.Lock()
				if h.closed {
					h.mu.Unlock()
					_ = cs.Close()
					return
				}
				h.listener = cs
				h.mu.Unlock()
				break
			}
			select {
			case <-h.done:
				return
			case <-time.After(100 * time.Millisecond): // a host's reconnect backoff, not a test wait
			}
		}
	}
}

// awaitListening waits until a modern host's listen stream is
// acknowledged: a change before that has nowhere to go. A legacy host's
// changes wait in its session, so there is nothing to wait for.
func (h *replicaHost) awaitListening(ctx context.Context, t *testing.T) {
	t.Helper()
	if !h.modern() {
		return
	}
	for {
		h.mu.Lock()
		on := h.listening
		h.mu.Unlock()
		if on {
			return
		}
		select {
		case <-h.changed:
		case <-ctx.Done():
			t.Fatalf("%s: no acknowledged subscriptions/listen stream", h.name)
		}
	}
}

// listSession is the session to list tools on: the one whose listen
// stream hears of changes, since the SDK drops only that session's cached
// list when a change arrives.
func (h *replicaHost) listSession() *mcp.ClientSession {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.listener != nil {
		return h.listener
	}
	return h.cs
}

// awaitTool waits for a notifications/tools/list_changed, then for
// every replica to list name (each learns of an upstream's change on its
// own, so the replica that answers the host's tools/list may not have
// yet: see docs/scaling.md), then lists tools (again after each further
// change) until name is listed.
func (h *replicaHost) awaitTool(ctx context.Context, rs *replicaSet, name string) error {
	select {
	case <-h.toolsChanged:
	case <-ctx.Done():
		return fmt.Errorf("%s: no notifications/tools/list_changed", h.name)
	}
	if err := rs.awaitListed(ctx, name); err != nil {
		return fmt.Errorf("%s: %w", h.name, err)
	}
	for {
		res, err := h.listSession().ListTools(ctx, nil)
		if err != nil {
			return fmt.Errorf("%s: tools/list: %w", h.name, err)
		}
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		if slices.Contains(names, name) {
			return nil
		}
		select {
		case <-h.toolsChanged:
		case <-ctx.Done():
			return fmt.Errorf("%s: %s never listed after the change; the last tools/list: %v", h.name, name, names)
		}
	}
}

func (h *replicaHost) close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	h.mu.Unlock()
	close(h.done)
	h.wg.Wait()
	if h.listener != nil {
		_ = h.listener.Close()
	}
	_ = h.cs.Close()
	h.base.CloseIdleConnections()
}

// hostStream is a GET or subscriptions/listen stream a host opened.
type hostStream struct {
	listen      bool // a subscriptions/listen stream, not a GET
	opened      time.Time
	lastEventID string // the Last-Event-ID the request carried
	status      int
	replica     string       // the replica that served it (haproxy's X-Replica)
	ids         atomic.Int64 // SSE events with an id received on it
}

// streamWatch records each stream the host opens, and calls ended when
// the body of a subscriptions/listen response ends, for whatever reason.
type streamWatch struct {
	h     *replicaHost
	ended func()
}

func (w *streamWatch) RoundTrip(r *http.Request) (*http.Response, error) {
	listen := r.Header.Get("Mcp-Method") == "subscriptions/listen"
	if !listen && r.Method != http.MethodGet {
		resp, err := w.h.base.RoundTrip(r)
		if err == nil && r.Header.Get("Mcp-Method") == "tools/call" {
			w.h.mu.Lock()
			w.h.callReplica = resp.Header.Get("X-Replica")
			w.h.mu.Unlock()
		}
		return resp, err
	}
	st := &hostStream{listen: listen, opened: time.Now(), lastEventID: r.Header.Get("Last-Event-ID")}
	resp, err := w.h.base.RoundTrip(r)
	if err != nil {
		if listen {
			w.ended()
		}
		return resp, err
	}
	st.status, st.replica = resp.StatusCode, resp.Header.Get("X-Replica")
	w.h.mu.Lock()
	w.h.streams = append(w.h.streams, st)
	w.h.mu.Unlock()
	ended := func() {}
	if listen {
		ended = w.ended
	}
	resp.Body = &watchedBody{ReadCloser: resp.Body, stream: st, lineStart: true, ended: ended}
	return resp, nil
}

// watchedBody counts the SSE events with an id ("id:" at the start of a
// line) it reads, and calls ended once when the body ends or is closed.
type watchedBody struct {
	io.ReadCloser
	stream    *hostStream
	lineStart bool   // the next byte starts a line
	prefix    []byte // what the current line began with, up to 3 bytes
	once      sync.Once
	ended     func()
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	for _, c := range p[:n] {
		switch {
		case c == '\n' || c == '\r':
			b.lineStart, b.prefix = true, b.prefix[:0]
		case b.lineStart && len(b.prefix) < 3:
			b.prefix = append(b.prefix, c)
			if string(b.prefix) == "id:" {
				b.stream.ids.Add(1)
				b.lineStart = false
			}
		default:
			b.lineStart = false
		}
	}
	if err != nil {
		b.once.Do(b.ended)
	}
	return n, err
}

func (b *watchedBody) Close() error {
	b.once.Do(b.ended)
	return b.ReadCloser.Close()
}

// lastCallReplica returns the replica that answered the host's last
// tools/call POST.
func (h *replicaHost) lastCallReplica() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.callReplica
}

// openStreams returns the host's streams, oldest first.
func (h *replicaHost) openStreams() []*hostStream {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*hostStream(nil), h.streams...)
}

// streamAt returns the last stream of the kind asked for (GET or listen)
// that opened before t with a 200, or nil.
func (h *replicaHost) streamAt(t time.Time, listen bool) *hostStream {
	var at *hostStream
	for _, st := range h.openStreams() {
		if st.listen == listen && st.status == http.StatusOK && st.opened.Before(t) {
			at = st
		}
	}
	return at
}

// awaitResumed polls the host's streams until a GET opened after t0
// carried a Last-Event-ID and was served, with a 200, by a replica other
// than gone.
func (h *replicaHost) awaitResumed(t0 time.Time, gone string) error {
	deadline := time.Now().Add(startupWait)
	for {
		var after []string
		for _, st := range h.openStreams() {
			if st.listen || st.opened.Before(t0) {
				continue
			}
			if st.status == http.StatusOK && st.replica != gone && st.lastEventID != "" {
				return nil
			}
			after = append(after, fmt.Sprintf("%d from %s, Last-Event-ID %q", st.status, st.replica, st.lastEventID))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: its GET stream on %s was not resumed on a survivor with Last-Event-ID; GETs since: %v", h.name, gone, after)
		}
		time.Sleep(20 * time.Millisecond) // polling what real sockets did
	}
}

func (h *replicaHost) noteChange(kind string) {
	h.mu.Lock()
	h.changes[kind] = append(h.changes[kind], time.Now())
	h.mu.Unlock()
	push(h.changedSig, struct{}{})
}

// announcedKinds are the lists whose changes the gateway said it
// announces (listChanged in its capabilities), which a host must hear of
// when a stream resumes on another replica.
func (h *replicaHost) announcedKinds() []string {
	caps := h.cs.InitializeResult().Capabilities
	if caps == nil {
		return nil
	}
	var kinds []string
	if caps.Tools != nil && caps.Tools.ListChanged {
		kinds = append(kinds, "tools")
	}
	if caps.Prompts != nil && caps.Prompts.ListChanged {
		kinds = append(kinds, "prompts")
	}
	if caps.Resources != nil && caps.Resources.ListChanged {
		kinds = append(kinds, "resources")
	}
	return kinds
}

// awaitChangeSince waits until a notifications/<kind>/list_changed that
// arrived at or after t0.
func (h *replicaHost) awaitChangeSince(ctx context.Context, kind string, t0 time.Time) error {
	for {
		h.mu.Lock()
		changes := h.changes[kind]
		last := time.Time{}
		if n := len(changes); n > 0 {
			last = changes[n-1]
		}
		h.mu.Unlock()
		if !last.Before(t0) {
			return nil
		}
		select {
		case <-h.changedSig:
		case <-ctx.Done():
			return fmt.Errorf("%s: no notifications/%s/list_changed since the kill", h.name, kind)
		}
	}
}

// callRecord is one call of the load: when it ran and how it ended.
type callRecord struct {
	host, tool string
	modern     bool
	start, end time.Time
	err        error // a transport or JSON-RPC error, an isError result, or a wrong answer
	isError    bool  // err is an isError result
}

// loadRun calls tools from every host at a steady pace until stop.
type loadRun struct {
	mu    sync.Mutex // guards calls
	calls []callRecord

	seq  atomic.Int64
	done chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

// callTimeout bounds each call of the load, so that a lost answer shows as
// a failure rather than a hung test.
const callTimeout = 20 * time.Second

// startReplicaLoad runs rate calls per second in all, shared evenly by the
// hosts, until stop or the end of the test. Each host's calls cycle through echo (6 in 10), slow (2) and ask
// (2): a modern host's ask is answered input_required and retried, and
// the retry may land on any replica. Legacy hosts call echo and slow
// only: the contract says nothing of where a legacy host's answer to the
// gateway's elicitation request (a POST of its own) may land.
func startReplicaLoad(t *testing.T, hosts []*replicaHost, rate int) *loadRun {
	l := &loadRun{done: make(chan struct{})}
	t.Cleanup(func() { l.stop() }) // also when the test fails half way
	interval := time.Duration(len(hosts)) * time.Second / time.Duration(rate)
	for _, h := range hosts {
		l.wg.Go(func() {
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-l.done:
					return
				case <-tick.C:
				}
				tool := "echo"
				switch i % 10 {
				case 3, 7:
					tool = "slow"
				case 5, 9:
					if h.modern() {
						tool = "ask"
					}
				}
				l.wg.Go(func() { l.call(h, tool) })
			}
		})
	}
	return l
}

func (l *loadRun) call(h *replicaHost, tool string) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	want := fmt.Sprintf("%s-%d", h.name, l.seq.Add(1))
	args := map[string]any{"text": want}
	if tool == "ask" {
		args = map[string]any{"message": want}
		want = "accept " + h.name
	}
	rec := callRecord{host: h.name, tool: tool, modern: h.modern(), start: time.Now()}
	res, err := h.cs.CallTool(ctx, &mcp.CallToolParams{Name: exposed(tool), Arguments: args})
	rec.end = time.Now()
	switch {
	case err != nil:
		rec.err = err
	case res.IsError:
		rec.err, rec.isError = fmt.Errorf("isError: %s", strings.TrimSpace(allText(res))), true
	case strings.TrimSpace(allText(res)) != want:
		rec.err = fmt.Errorf("answered %q, want %q", strings.TrimSpace(allText(res)), want)
	}
	l.mu.Lock()
	l.calls = append(l.calls, rec)
	l.mu.Unlock()
}

// stop ends the load, waits for every call in flight and returns the
// records; it may be called twice.
func (l *loadRun) stop() []callRecord {
	l.once.Do(func() { close(l.done) })
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]callRecord(nil), l.calls...)
}

// phaseStats summarizes the calls that started in [from, to).
type phaseStats struct {
	calls, failures int
	perSecond       float64
}

func statsOf(calls []callRecord, from, to time.Time) phaseStats {
	var s phaseStats
	for _, c := range calls {
		if c.start.Before(from) || !c.start.Before(to) {
			continue
		}
		s.calls++
		if c.err != nil {
			s.failures++
		}
	}
	if d := to.Sub(from).Seconds(); d > 0 {
		s.perSecond = float64(s.calls) / d
	}
	return s
}

func (s phaseStats) String() string {
	return fmt.Sprintf("%d calls (%s/s), %d failed", s.calls, strconv.FormatFloat(s.perSecond, 'f', 0, 64), s.failures)
}

// isSessionMissing reports whether err is the SDK's "the server forgot
// the session" (a 404), which a replica must never answer for a live
// legacy session.
func isSessionMissing(err error) bool {
	return errors.Is(err, mcp.ErrSessionMissing) || (err != nil && strings.Contains(err.Error(), "session not found"))
}

// replicaRig is everything a replica test runs on.
type replicaRig struct {
	upstream *replicaUpstream
	replicas *replicaSet
	lb       *balancer
	legacy   []*replicaHost
	modern   []*replicaHost
}

func (r *replicaRig) hosts() []*replicaHost {
	return append(append([]*replicaHost(nil), r.legacy...), r.modern...)
}

// startReplicaRig starts redis, the upstream, three replicas, the
// balancer and hostsPerEra hosts of each era through it.
func startReplicaRig(t *testing.T, hostsPerEra int) *replicaRig {
	t.Helper()
	replicaPeer(t, "haproxy") // skip before starting anything
	rig := &replicaRig{upstream: startReplicaUpstream(t)}
	config := writeReplicaConfig(t, rig.upstream.url, startRedis(t))
	rig.replicas = startReplicas(t, config, 3)
	rig.lb = startBalancer(t, rig.replicas)
	for i := range hostsPerEra {
		rig.legacy = append(rig.legacy, newReplicaHost(t, rig.lb.url(), eras[0], fmt.Sprintf("legacy%d", i)))
		rig.modern = append(rig.modern, newReplicaHost(t, rig.lb.url(), eras[1], fmt.Sprintf("modern%d", i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), startupWait)
	defer cancel()
	for _, h := range rig.modern {
		h.awaitListening(ctx, t)
	}
	return rig
}
