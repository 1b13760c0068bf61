package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

// maxStdioMessage bounds one message read from a stdio host.
const maxStdioMessage = 64 << 20

// Stdio serves one host over the stdio transport: newline-delimited
// JSON-RPC messages on stdin and stdout. The host may open a legacy
// session with initialize, or send modern requests that carry their
// version in _meta (2026-07-28 basic/transports/stdio). Create it with
// NewStdio, pass its Deliver to the router as the change callback, then
// call Serve once.
type Stdio struct {
	d    Dispatcher
	log  *slog.Logger
	view string

	writeMu sync.Mutex // guards out
	out     *bufio.Writer

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

// NewStdio returns a stdio front that writes to out and serves the host
// the named view ("" = the default view): a local host launched the
// gateway itself, so its operator chooses its identity.
func NewStdio(d Dispatcher, out io.Writer, view string, logger *slog.Logger) *Stdio {
	return &Stdio{d: d, out: bufio.NewWriter(out), view: view, log: telemetry.Discard(logger), listeners: map[string]*listener{}}
}

// Serve reads the host's messages from in until it ends (the host closed
// stdin) or ctx is done, and returns after every request it started has
// finished. Requests run concurrently; a notifications/cancelled cancels
// the request it names.
func (st *Stdio) Serve(ctx context.Context, in io.Reader) error {
	defer st.d.HostGone(stdioSession)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()

	// The reader goroutine ends when in does; a Read in progress cannot
	// be interrupted, so after a cancelled ctx it lingers until then.
	lines := make(chan []byte)
	readErr := make(chan error, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		readErr <- readLines(in, lines, done)
		close(lines)
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case line, ok := <-lines:
			if !ok {
				err := <-readErr
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			st.handle(ctx, &wg, line)
		}
	}
}

// readLines sends each non-empty line of in to lines. Each line is a new
// buffer, which the decoded message then aliases.
func readLines(in io.Reader, lines chan<- []byte, done <-chan struct{}) error {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > maxStdioMessage {
			return fmt.Errorf("stdio: message larger than %d bytes", maxStdioMessage)
		}
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			select {
			case lines <- trimmed:
			case <-done:
				return io.EOF
			}
		}
		if err != nil {
			return err
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
	sr.st.write(jsonrpc.AppendNotification(nil, method, params))
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
	st.write(jsonrpc.AppendRequest(nil, id, method, params))
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
		st.write(jsonrpc.AppendError(nil, nil, &jsonrpc.Error{Code: code, Message: err.Error()}))
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
		st.write(jsonrpc.AppendResult(nil, msg.ID, st.d.InitializeResult(version)))
		return
	}

	caller, modern, rpcErr := st.caller(msg)
	if rpcErr != nil {
		st.write(jsonrpc.AppendError(nil, msg.ID, rpcErr))
		return
	}
	if modern && msg.Method == "subscriptions/listen" {
		st.listen(ctx, caller, &msg.Message)
		return
	}
	reqCtx, cancel := context.WithCancel(ctx)
	if !st.link.track(msg.ID, cancel) {
		cancel()
		st.write(jsonrpc.AppendError(nil, msg.ID, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Request id %s is already in use", msg.ID)))
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
		st.write(appendReply(nil, msg.ID, reply, modern))
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

// write sends one message as one line. Raw values from HTTP upstreams may
// hold newlines, which the stdio framing forbids: oneLine turns them into
// spaces, which JSON allows between tokens.
func (st *Stdio) write(msg []byte) {
	st.writeMu.Lock()
	defer st.writeMu.Unlock()
	_, _ = oneLine{st.out}.Write(msg)
	_ = st.out.WriteByte('\n')
	if err := st.out.Flush(); err != nil {
		st.log.Warn("writing to the stdio host failed", telemetry.KeyErr, err)
	}
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
		st.write(jsonrpc.AppendError(nil, msg.ID, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "Invalid params: %v", err)))
		return
	}
	l := f.listener(msg.ID, "stdio-listen-"+string(msg.ID))
	st.mu.Lock()
	st.listeners[string(msg.ID)] = l
	st.mu.Unlock()
	ack := f.acknowledge(func(uri string) bool { return st.d.SubscribeResource(ctx, caller, l.key, uri) == nil })
	st.write(l.tagged("notifications/subscriptions/acknowledged", ack))
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
		if (c.Subscribers == nil && l.wants(c.Method)) || slices.Contains(c.Subscribers, l.key) {
			ls = append(ls, l)
		}
	}
	st.mu.Unlock()
	if legacy && (c.Subscribers == nil || slices.Contains(c.Subscribers, stdioSession)) {
		st.write(jsonrpc.AppendNotification(nil, c.Method, c.Params))
	}
	for _, l := range ls {
		st.write(l.tagged(c.Method, c.Params))
	}
}
