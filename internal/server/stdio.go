package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

// StdioOptions configure a Stdio front.
type StdioOptions struct {
	// View is the view the host is served ("" = the default view): a
	// local host launched the gateway itself, so its operator chooses
	// its identity.
	View string
	// MaxMessageBytes bounds one line read from the host; 0 means
	// config.DefaultMaxStdioMessage (64 MiB). A longer line is answered
	// with a -32600 error (id null) and skipped; the lines after it are
	// served.
	MaxMessageBytes int
	// QueueLimit bounds the messages waiting for the host to read them;
	// 0 means config.DefaultStdioQueue (1024). When it is full,
	// notifications are dropped (and logged); answers and the gateway's
	// requests wait for room, each in its own goroutine.
	QueueLimit int
	// WriteTimeout bounds the end of Serve once stdin has ended: the
	// requests still running get this long to finish (then they are
	// cancelled), and the host as long again to read what is left; 0
	// means config.DefaultWriteTimeout (30s). A host that closed stdin
	// and reads no more cannot keep the gateway from exiting.
	WriteTimeout time.Duration
	// Logger receives the front's logs; nil discards them.
	Logger *slog.Logger
}

// Stdio serves one host over the stdio transport: newline-delimited
// JSON-RPC messages on stdin and stdout. The host may open a legacy
// session with initialize, or send modern requests that carry their
// version in _meta (2026-07-28 basic/transports/stdio). Create it with
// NewStdio, pass its Deliver to the router as the change callback, then
// call Serve once.
type Stdio struct {
	d            Dispatcher
	log          *slog.Logger
	view         string
	maxMessage   int
	writeTimeout time.Duration

	// queue holds the messages for the host, which one writer goroutine
	// (writeLoop) writes to out: whoever sends one, often the goroutine
	// reading an upstream, never waits on a host that is slow to read.
	queue chan []byte
	out   *bufio.Writer // written by writeLoop only
	// dropped counts the notifications dropped on a full queue;
	// dropping is set from the first drop until the queue empties, so
	// that a flood is logged once.
	dropped  atomic.Uint64
	dropping atomic.Bool

	// link tracks the requests running both ways.
	link hostLink

	mu sync.Mutex // guards the fields below
	// version is the legacy session's version once initialize succeeded.
	version string
	// capabilities and level are the host's, from initialize and
	// logging/setLevel.
	capabilities json.RawMessage
	level        string
	// listeners are the host's modern subscriptions/listen requests, by
	// raw request id.
	listeners map[string]*listener
}

// stdioSession is the subscriber key of the stdio host's legacy session.
const stdioSession = "stdio"

// NewStdio returns a stdio front that writes to out; opts may be nil.
func NewStdio(d Dispatcher, out io.Writer, opts *StdioOptions) *Stdio {
	if opts == nil {
		opts = &StdioOptions{}
	}
	st := &Stdio{d: d, out: bufio.NewWriter(out), view: opts.View, log: telemetry.Discard(opts.Logger), listeners: map[string]*listener{},
		maxMessage: opts.MaxMessageBytes, writeTimeout: opts.WriteTimeout}
	if st.maxMessage <= 0 {
		st.maxMessage = config.DefaultMaxStdioMessage
	}
	if st.writeTimeout <= 0 {
		st.writeTimeout = config.DefaultWriteTimeout
	}
	limit := opts.QueueLimit
	if limit <= 0 {
		limit = config.DefaultStdioQueue
	}
	st.queue = make(chan []byte, limit)
	return st
}

// Serve reads the host's messages from in until it ends (the host closed
// stdin) or ctx is done, and returns after every request it started has
// finished: those still running WriteTimeout after stdin ended are
// cancelled (a host that closed stdin may read stdout no more, and an
// answer waiting for room in the queue would wait forever). Requests run
// concurrently; a notifications/cancelled cancels the request it names.
func (st *Stdio) Serve(ctx context.Context, in io.Reader) error {
	defer st.d.HostGone(stdioSession)
	stopWriter, written := make(chan struct{}), make(chan struct{})
	go st.writeLoop(stopWriter, written)
	defer func() {
		// Every answer is queued (the requests have finished): the
		// writer writes what is left, unless the host reads nothing.
		close(stopWriter)
		t := time.NewTimer(st.writeTimeout)
		defer t.Stop()
		select {
		case <-written:
		case <-t.C:
			st.log.Warn("the stdio host did not read the last messages", "queued", len(st.queue))
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer st.finish(&wg, cancel)

	// The reader goroutine ends when in does; a Read in progress cannot
	// be interrupted, so after a cancelled ctx it lingers until then.
	lines := make(chan stdioLine)
	readErr := make(chan error, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		readErr <- readLines(in, st.maxMessage, lines, done)
		close(lines)
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case line, ok := <-lines:
			switch {
			case !ok:
				err := <-readErr
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			case line.tooLong:
				st.log.Warn("stdio message too large: skipped", "limit", st.maxMessage)
				st.send(ctx, jsonrpc.AppendError(nil, nil, jsonrpc.NewError(jsonrpc.CodeInvalidRequest,
					"Message larger than %d bytes: skipped", st.maxMessage)))
			default:
				st.handle(ctx, &wg, line.msg)
			}
		}
	}
}

// finish waits for the requests in flight, at most the write timeout,
// then cancels those left and waits for them to end (each wait of theirs
// selects on their context).
func (st *Stdio) finish(wg *sync.WaitGroup, cancel context.CancelFunc) {
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()
	t := time.NewTimer(st.writeTimeout)
	defer t.Stop()
	select {
	case <-finished:
		return
	case <-t.C:
	}
	st.log.Warn("stdin ended: requests cancelled that had not finished within the write timeout", "timeout", st.writeTimeout)
	cancel()
	<-finished
}

// stdioLine is one line from the host: a message, or the news that a
// line was longer than the limit (and skipped).
type stdioLine struct {
	msg     []byte
	tooLong bool
}

// readLines sends each non-empty line of in to lines. Each line is a new
// buffer, which the decoded message then aliases. A line longer than
// limit is not kept: what is read of it is dropped as it comes, and its
// end is reported as tooLong, so that the host learns of it and the
// lines after it are read as usual.
func readLines(in io.Reader, limit int, lines chan<- stdioLine, done <-chan struct{}) error {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, tooLong, err := readLine(r, limit)
		var l stdioLine
		if tooLong {
			l.tooLong = true
		} else if l.msg = bytes.TrimSpace(line); len(l.msg) == 0 {
			l.msg = nil
		}
		if l.tooLong || l.msg != nil {
			select {
			case lines <- l:
			case <-done:
				return io.EOF
			}
		}
		if err != nil {
			return err
		}
	}
}

// readLine reads one line, up to and including its '\n', into a new
// buffer; a line whose content (without the '\n') is longer than limit
// is read to its end but not kept, and reported as tooLong.
func readLine(r *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	for {
		frag, err := r.ReadSlice('\n')
		if !tooLong {
			size := len(line) + len(frag)
			if err == nil {
				size-- // the '\n'
			}
			if size > limit {
				tooLong, line = true, nil
			} else {
				line = append(line, frag...)
			}
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, tooLong, err
		}
	}
}

// writeLoop is the writer goroutine: it writes the queued messages to
// the host, one line each, flushing whenever the queue is empty, until
// stop is closed and the queue drained; then it closes written. After a
// failed write (the host is gone) it discards what comes, so that
// senders never wait on it.
func (st *Stdio) writeLoop(stop <-chan struct{}, written chan<- struct{}) {
	defer close(written)
	broken := false
	write := func(msg []byte) {
		if broken {
			return
		}
		// Raw values from HTTP upstreams may hold newlines, which the
		// stdio framing forbids: oneLine turns them into spaces, which
		// JSON allows between tokens.
		_, _ = oneLine{st.out}.Write(msg)
		_ = st.out.WriteByte('\n')
		if len(st.queue) > 0 {
			return // flushed with the next ones
		}
		if err := st.out.Flush(); err != nil {
			broken = true
			st.log.Warn("writing to the stdio host failed", telemetry.KeyErr, err)
			return
		}
		if st.dropping.CompareAndSwap(true, false) {
			st.log.Info("the stdio host reads again", "dropped_total", st.dropped.Load())
		}
	}
	for {
		select {
		case msg := <-st.queue:
			write(msg)
		case <-stop:
			for {
				select {
				case msg := <-st.queue:
					write(msg)
				default:
					if !broken {
						_ = st.out.Flush()
					}
					return
				}
			}
		}
	}
}

// send queues a message the host must get (an answer, a request of the
// gateway's), waiting for room while the host is slow to read, until ctx
// is done; it reports whether the message is queued.
func (st *Stdio) send(ctx context.Context, msg []byte) bool {
	select {
	case st.queue <- msg:
		return true
	case <-ctx.Done():
		return false
	}
}

// notify queues a notification, or drops it when the queue is full: a
// host that does not read must not hold up the upstream reader that
// relays it. Drops are counted and logged once a flood.
func (st *Stdio) notify(method string, msg []byte) {
	select {
	case st.queue <- msg:
	default:
		n := st.dropped.Add(1)
		if st.dropping.CompareAndSwap(false, true) {
			st.log.Warn("stdio host not reading: notifications dropped while its queue is full",
				telemetry.KeyMethod, method, "queue", cap(st.queue), "dropped_total", n)
		}
	}
}

// stdioRequest is the way back to the stdio host for one request (it
// implements router.Host).
type stdioRequest struct {
	st     *Stdio
	modern bool
	// done is closed when Serve returns.
	done <-chan struct{}
}

func (sr stdioRequest) Notify(method string, params json.RawMessage) {
	sr.st.notify(method, jsonrpc.AppendNotification(nil, method, params))
}

// Request asks the host and waits for the answer line. Modern hosts
// cannot be asked: the modern era has no server requests.
func (sr stdioRequest) Request(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error) {
	if sr.modern {
		return nil, router.ErrHostUnreachable
	}
	st := sr.st
	id, answer := st.link.expect()
	defer st.link.forget(id)
	// Queued as an answer is: it waits for room, never dropped.
	select {
	case st.queue <- jsonrpc.AppendRequest(nil, id, method, params):
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-sr.done:
		return nil, router.ErrHostUnreachable
	}
	select {
	case resp := <-answer:
		return resp, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-sr.done:
		return nil, router.ErrHostUnreachable
	}
}

func (st *Stdio) handle(ctx context.Context, wg *sync.WaitGroup, line []byte) {
	msg, err := jsonrpc.DecodeRequest(line)
	if err != nil {
		code := int64(jsonrpc.CodeParseError)
		if errors.Is(err, jsonrpc.ErrInvalidRequest) {
			code = jsonrpc.CodeInvalidRequest
		}
		st.send(ctx, jsonrpc.AppendError(nil, nil, &jsonrpc.Error{Code: code, Message: err.Error()}))
		return
	}
	switch {
	case msg.IsResponse():
		st.link.resolve(&msg.Message)
		return
	case msg.IsNotification():
		if msg.Method == "notifications/cancelled" {
			if id := msg.RequestID; id != nil {
				st.link.cancel(id)
				st.mu.Lock()
				l := st.listeners[string(id)]
				delete(st.listeners, string(id))
				st.mu.Unlock()
				if l != nil {
					st.d.HostGone(l.key)
				}
			}
		}
		return
	case msg.Method == "initialize":
		version := router.NegotiateLegacy(msg.ProtocolVersion)
		st.mu.Lock()
		st.version, st.capabilities = version, msg.Capabilities
		st.mu.Unlock()
		st.send(ctx, jsonrpc.AppendResult(nil, msg.ID, st.d.InitializeResult(version)))
		return
	}

	caller, modern, rpcErr := st.caller(msg)
	if rpcErr != nil {
		st.send(ctx, jsonrpc.AppendError(nil, msg.ID, rpcErr))
		return
	}
	if modern && msg.Method == "subscriptions/listen" {
		st.listen(ctx, caller, &msg.Message)
		return
	}
	reqCtx, cancel := context.WithCancel(ctx)
	if !st.link.track(msg.ID, cancel) {
		cancel()
		st.send(ctx, jsonrpc.AppendError(nil, msg.ID, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Request id %s is already in use", msg.ID)))
		return
	}
	wg.Go(func() {
		defer func() {
			st.link.untrack(msg.ID)
			cancel()
		}()
		caller.Host = stdioRequest{st: st, modern: modern, done: ctx.Done()}
		reply := st.d.Dispatch(reqCtx, caller, msg)
		if reqCtx.Err() != nil && ctx.Err() == nil {
			return // cancelled by the host: no response (2025-11-25 cancellation)
		}
		if msg.Method == "logging/setLevel" && reply.Error == nil {
			st.mu.Lock()
			st.level = msg.Level
			st.mu.Unlock()
		}
		st.send(ctx, appendReply(nil, msg.ID, reply, modern))
	})
}

// caller decides the era of one request: modern when it declares a
// version in _meta, else the legacy session's (which initialize opened).
func (st *Stdio) caller(msg *jsonrpc.Request) (*router.Caller, bool, *jsonrpc.Error) {
	if declared := msg.Meta.ProtocolVersion; msg.Meta.HasProtocolVersion {
		if !isModernSupported(declared) {
			data, _ := json.Marshal(map[string]any{"supported": router.SupportedVersions(), "requested": declared})
			return nil, false, &jsonrpc.Error{Code: jsonrpc.CodeUnsupportedProtocolVersion, Message: "Unsupported protocol version", Data: data}
		}
		return &router.Caller{ProtocolVersion: declared, Capabilities: msg.Meta.ClientCapabilities, LogLevel: msg.Meta.LogLevel, View: st.view}, true, nil
	}
	st.mu.Lock()
	version, caps, level := st.version, st.capabilities, st.level
	st.mu.Unlock()
	if version == "" && msg.Method != "ping" {
		return nil, false, jsonrpc.NewError(jsonrpc.CodeInvalidRequest,
			"Send initialize first, or declare protocol version %s in params._meta[%q]", router.ModernVersion, metaProtocolVersion)
	}
	return &router.Caller{ProtocolVersion: version, Session: stdioSession, Capabilities: caps, LogLevel: level, View: st.view}, false, nil
}

// appendReply renders a reply as one response message.
func appendReply(dst []byte, id json.RawMessage, reply *router.Reply, modern bool) []byte {
	if reply.Error != nil {
		return jsonrpc.AppendError(dst, id, reply.Error)
	}
	head, body := resultParts(id, reply, modern)
	dst = append(dst, head...)
	dst = append(dst, body...)
	return append(dst, '}')
}

// listen opens a modern subscription on stdio (2026-07-28
// basic/patterns/subscriptions): the acknowledgment now, then the
// matching notifications tagged with the request's id, until the host
// cancels the request.
func (st *Stdio) listen(ctx context.Context, caller *router.Caller, msg *jsonrpc.Message) {
	f, err := parseListenFilter(msg.Params)
	if err != nil {
		st.send(ctx, jsonrpc.AppendError(nil, msg.ID, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "Invalid params: %v", err)))
		return
	}
	if e := f.refuse(caller); e != nil {
		st.send(ctx, jsonrpc.AppendError(nil, msg.ID, e))
		return
	}
	l := f.listener(msg.ID, "stdio-listen-"+string(msg.ID))
	st.mu.Lock()
	st.listeners[string(msg.ID)] = l
	st.mu.Unlock()
	ack := f.acknowledge(func(uri string) bool { return st.d.SubscribeResource(ctx, caller, l.key, uri) == nil })
	st.send(ctx, l.tagged("notifications/subscriptions/acknowledged", ack))
}

// Deliver writes a change to the host: list changes to an initialized
// legacy session and to the listen requests that asked, resource updates
// to their subscribers.
func (st *Stdio) Deliver(c router.Change) {
	if c.Subscribers == nil && c.View != st.view {
		return // another view's list changed
	}
	st.mu.Lock()
	legacy := st.version != ""
	var ls []*listener
	for _, l := range st.listeners {
		// The stdio host is the only identity (""): a change of its own
		// list (ForPrincipal) is its listen requests' too, a session's
		// (Session) is not.
		if (c.Subscribers == nil && c.Session == "" && l.wants(c.Method)) || slices.Contains(c.Subscribers, l.key) {
			ls = append(ls, l)
		}
	}
	st.mu.Unlock()
	if legacy && !c.ForPrincipal && (c.Subscribers == nil || slices.Contains(c.Subscribers, stdioSession)) && (c.Session == "" || c.Session == stdioSession) {
		st.notify(c.Method, jsonrpc.AppendNotification(nil, c.Method, c.Params))
	}
	for _, l := range ls {
		st.notify(c.Method, l.tagged(c.Method, c.Params))
	}
}
