package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

const (
	// maxStderrLine bounds one logged stderr line; the rest is dropped.
	maxStderrLine = 4 << 10
	// stderrBurst stderr lines are logged at once, then stderrRate a
	// second: a server that floods its stderr must not flood the logs.
	stderrBurst = 100
	stderrRate  = 10
	// maxTailLine bounds the last stderr line quoted when the server
	// exits.
	maxTailLine = 300
)

// stdioWire runs a server as a child process and speaks newline-delimited
// JSON-RPC on its stdin and stdout (spec 2026-07-28, transports/stdio).
type stdioWire struct {
	c   *Client
	cmd *exec.Cmd
	pid int

	stdin          *os.File
	stdout, stderr *os.File
	closeStdout    func()
	closeStderr    func()

	queue      chan []byte   // messages for the writer
	stopWriter chan struct{} // closed by close
	writerDone chan struct{} // closed when the writer has exited
	writeErr   error         // why the writer exited; set before writerDone closes

	exited  chan struct{} // closed once the process has been reaped
	exitErr error         // cmd.Wait's result; set before exited closes

	readerDone chan struct{}
	stderrDone chan struct{}

	tailMu   sync.Mutex // guards lastLine
	lastLine string     // the last line on stderr, cut to maxTailLine

	closeOnce sync.Once
	wg        sync.WaitGroup
}

// childEnv is the child's environment: a minimal set inherited from the
// gateway (the TypeScript SDK's default list plus TMPDIR and LANG), then
// extra. The gateway's environment may hold its own secrets, so the rest of
// it is never passed on.
func childEnv(extra map[string]string) []string {
	var env []string
	for _, k := range []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "TMPDIR", "LANG"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	// os/exec keeps the last value of a repeated key, so extra wins.
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// startStdio launches the server. Its standard streams are pipes the Go
// runtime polls, so that closing one unblocks a goroutine using it.
func startStdio(c *Client) (*stdioWire, error) {
	var files []*os.File
	pipe := func() (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	inR, inW, err1 := pipe()
	outR, outW, err2 := pipe()
	errR, errW, err3 := pipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		closeAll()
		return nil, err
	}
	cmd := exec.Command(c.opts.Command, c.opts.Args...)
	cmd.Dir = c.opts.Dir
	cmd.Env = childEnv(c.opts.Env)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	ownProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, err
	}
	// The child has its copies.
	inR.Close()
	outW.Close()
	errW.Close()

	w := &stdioWire{
		c:          c,
		cmd:        cmd,
		pid:        cmd.Process.Pid,
		stdin:      inW,
		stdout:     outR,
		stderr:     errR,
		queue:      make(chan []byte),
		stopWriter: make(chan struct{}),
		writerDone: make(chan struct{}),
		exited:     make(chan struct{}),
		readerDone: make(chan struct{}),
		stderrDone: make(chan struct{}),
	}
	w.closeStdout = sync.OnceFunc(func() { outR.Close() })
	w.closeStderr = sync.OnceFunc(func() { errR.Close() })
	c.log.Info("upstream process started", "pid", w.pid, "command", c.opts.Command)
	w.wg.Add(4)
	go w.wait()
	go w.write()
	go w.read()
	go w.logStderr()
	return w, nil
}

// send hands a message to the writer goroutine. Once handed over it is
// written whole, so a caller that gives up never leaves half a line on
// the server's stdin.
func (w *stdioWire) send(ctx context.Context, m *outgoing) error {
	b := append(m.data, '\n')
	select {
	case w.queue <- b:
		return nil
	case <-w.writerDone:
		return fmt.Errorf("%w: writing to the server: %v", ErrClosed, w.writeErr)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *stdioWire) write() {
	defer w.wg.Done()
	defer close(w.writerDone)
	for {
		select {
		case b := <-w.queue:
			if _, err := w.stdin.Write(b); err != nil {
				w.writeErr = err
				return
			}
		case <-w.stopWriter:
			w.writeErr = errors.New("closed")
			return
		}
	}
}

// read delivers the messages on the child's stdout. A line that is not a
// JSON-RPC message breaks the spec ("The server MUST NOT write anything to
// its stdout that is not a valid MCP message") but is common enough (a
// stray print): it is logged and skipped.
func (w *stdioWire) read() {
	defer w.wg.Done()
	defer close(w.readerDone)
	lr := newLineReader(w.stdout, w.c.maxMessage, false)
	bad := badLines{log: w.c.log}
	var err error
	for {
		var line []byte
		if line, err = lr.next(); err != nil {
			var tl *tooLongError
			if errors.As(err, &tl) {
				w.c.tooLong(tl)
				continue
			}
			break
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		m, derr := jsonrpc.Decode(line)
		if derr != nil {
			bad.report(line, derr)
			continue
		}
		w.c.deliver(m)
	}
	// stdout usually closes just before the process is reaped: wait for
	// its exit status, and its last words on stderr, which say why the
	// connection is gone.
	t := time.NewTimer(w.c.stopGrace)
	for _, done := range []chan struct{}{w.exited, w.stderrDone} {
		select {
		case <-done:
		case <-t.C:
		case <-w.c.life.Done():
		}
	}
	t.Stop()
	w.c.connLost(w.lostCause(err))
}

func (w *stdioWire) lostCause(readErr error) error {
	w.tailMu.Lock()
	last := w.lastLine
	w.tailMu.Unlock()
	if last != "" {
		last = fmt.Sprintf(" (its last line on stderr: %q)", last)
	}
	select {
	case <-w.exited:
		if w.exitErr != nil {
			return fmt.Errorf("server process exited: %w%s", w.exitErr, last)
		}
		return fmt.Errorf("server process exited with status 0%s", last)
	default:
	}
	if errors.Is(readErr, io.EOF) {
		return errors.New("server closed its stdout")
	}
	return fmt.Errorf("reading from the server: %w", readErr)
}

// wait reaps the process, so that it never lingers as a zombie, and
// kills the rest of its process group, so that no helper it started
// lingers as an orphan.
func (w *stdioWire) wait() {
	defer w.wg.Done()
	w.exitErr = reap(w.cmd)
	close(w.exited)
	w.c.log.Debug("upstream process exited", "pid", w.pid, "status", w.cmd.ProcessState.String())
	// A process it started may have inherited stdout or stderr and keep
	// them open: stop reading them after a grace period.
	t := time.NewTimer(w.c.stopGrace)
	defer t.Stop()
	for _, done := range []chan struct{}{w.readerDone, w.stderrDone} {
		select {
		case <-done:
		case <-t.C:
			w.closeStdout()
			w.closeStderr()
			<-done
		}
	}
}

// logStderr logs the child's stderr line by line. The spec lets servers
// write anything there and says clients SHOULD NOT take it for errors, so
// lines are logged at Info: a line longer than 4 KiB is cut, and past a
// burst of 100 lines, 10 a second are logged and the rest counted. The
// last line is kept to explain an exit.
func (w *stdioWire) logStderr() {
	defer w.wg.Done()
	defer close(w.stderrDone)
	br := bufio.NewReaderSize(w.stderr, maxStderrLine)
	lim := lineLimiter{burst: stderrBurst, rate: stderrRate}
	dropped := 0
	reportDropped := func() {
		if dropped > 0 {
			w.c.log.Warn("upstream stderr lines not logged: too many", "count", dropped)
			dropped = 0
		}
	}
	defer reportDropped()
	for {
		line, err := br.ReadSlice('\n')
		full := errors.Is(err, bufio.ErrBufferFull)
		if text := bytes.TrimRight(line, "\r\n"); len(text) > 0 {
			w.tailMu.Lock()
			w.lastLine = truncate(text, maxTailLine)
			w.tailMu.Unlock()
			switch {
			case !lim.allow(time.Now()):
				dropped++
			case full:
				reportDropped()
				w.c.log.Info("upstream stderr", "line", string(text), "truncated", true)
			default:
				reportDropped()
				w.c.log.Info("upstream stderr", "line", string(text))
			}
		}
		for full {
			_, err = br.ReadSlice('\n')
			full = errors.Is(err, bufio.ErrBufferFull)
		}
		if err != nil {
			return
		}
	}
}

// lineLimiter is a token bucket: burst lines at once, then rate a second.
type lineLimiter struct {
	burst, rate float64
	tokens      float64
	last        time.Time
}

// allow reports whether a line that came at now may be logged.
func (l *lineLimiter) allow(now time.Time) bool {
	if l.last.IsZero() {
		l.tokens = l.burst
	} else if d := now.Sub(l.last); d > 0 {
		l.tokens = min(l.burst, l.tokens+d.Seconds()*l.rate)
	}
	l.last = now
	if l.tokens < 1 {
		return false
	}
	l.tokens--
	return true
}

// close stops the server as the spec's stdio page ("Shutdown") says:
//
//	The client SHOULD initiate shutdown by:
//	1. Closing the input stream to the child process (the server).
//	2. Waiting for the server to exit.
//	3. If the server does not exit within a reasonable time, forcibly
//	   terminating the process using the mechanism appropriate for the
//	   operating system.
//	On POSIX systems, forced termination typically escalates from SIGTERM
//	to SIGKILL.
//
// On POSIX systems the signals go to the child's process group, so that
// the helpers it started stop too; once the child has exited, whatever is
// left of its group is killed (see wait). close returns once the process
// is reaped and the wire's goroutines have exited.
func (w *stdioWire) close() error {
	w.closeOnce.Do(func() {
		close(w.stopWriter)
		w.stdin.Close()
		if !w.waitExit() {
			w.c.log.Info("upstream process still running after its stdin closed: sending SIGTERM", "pid", w.pid)
			terminate(w.cmd)
			if !w.waitExit() {
				w.c.log.Warn("upstream process still running after SIGTERM: sending SIGKILL", "pid", w.pid)
				kill(w.cmd)
				<-w.exited
			}
		}
		w.wg.Wait()
		w.closeStdout()
		w.closeStderr()
	})
	return nil
}

func (w *stdioWire) waitExit() bool {
	t := time.NewTimer(w.c.stopGrace)
	defer t.Stop()
	select {
	case <-w.exited:
		return true
	case <-t.C:
		return false
	}
}

// tooLong handles a message over the size limit on a shared stream
// (stdio, an SSE GET stream): it was skipped unread, and the call it
// answers, if its first or last bytes carry its id, fails now with a
// *TooLargeError rather than at its timeout.
func (c *Client) tooLong(e *tooLongError) {
	id, ok := e.id()
	c.log.Error("upstream message too large: skipped", "limit_bytes", e.max, "id", id)
	if ok {
		c.fail(id, &TooLargeError{Limit: e.max})
	}
}

// idFromHead finds the numeric "id" member in the beginning of a message.
func idFromHead(head []byte) (int64, bool) {
	id, ok, _ := scanHead(head)
	return id, ok
}

// scanHead reads the top-level members of the beginning of a message: its
// numeric "id", and whether a "method" member comes before the head ends
// (a request or notification, not a response).
func scanHead(head []byte) (id int64, idOK, method bool) {
	dec := json.NewDecoder(bytes.NewReader(head))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0, false, false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return id, idOK, method
		}
		switch t {
		case "id":
			v, err := dec.Token()
			if n, ok := v.(json.Number); err == nil && ok {
				if n, err := n.Int64(); err == nil {
					id, idOK = n, true
				}
			}
			continue
		case "method":
			method = true
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return id, idOK, method
		}
	}
	return id, idOK, method
}

// badLines logs lines that are not JSON-RPC messages, at most five per
// ten seconds.
type badLines struct {
	log     *slog.Logger
	window  time.Time
	n       int
	dropped int
}

func (b *badLines) report(line []byte, err error) {
	if now := time.Now(); now.Sub(b.window) > 10*time.Second {
		if b.dropped > 0 {
			b.log.Warn("upstream sent more lines that are not JSON-RPC messages", "count", b.dropped)
		}
		b.window, b.n, b.dropped = now, 0, 0
	}
	if b.n++; b.n > 5 {
		b.dropped++
		return
	}
	b.log.Warn("upstream sent a line that is not a JSON-RPC message: skipped", "line", truncate(line, 200), "err", err)
}

// truncate returns at most n bytes of b as a string, cut at a rune
// boundary.
func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return string(b[:n]) + "…"
}
