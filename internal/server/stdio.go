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
	"sync"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

// maxStdioMessage bounds one message read from a stdio host.
const maxStdioMessage = 64 << 20

// ServeStdio serves one host over the stdio transport: newline-delimited
// JSON-RPC messages on in and out. The host may open a legacy session with
// initialize, or send modern requests that carry their version in _meta
// (2026-07-28 basic/transports/stdio). Requests run concurrently; a
// notifications/cancelled cancels the request it names. ServeStdio returns
// when in ends (the host closed stdin) or ctx is done, after every
// request it started has finished.
func ServeStdio(ctx context.Context, d Dispatcher, in io.Reader, out io.Writer, logger *slog.Logger) error {
	st := &stdioHost{d: d, out: bufio.NewWriter(out), log: telemetry.Discard(logger), inflight: map[string]context.CancelFunc{}}
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

// stdioHost is the state of the one host on stdio.
type stdioHost struct {
	d   Dispatcher
	log *slog.Logger

	writeMu sync.Mutex // guards out
	out     *bufio.Writer

	mu sync.Mutex // guards the fields below
	// version is the legacy session's version once initialize succeeded.
	version string
	// inflight maps a request id to the cancel of its context.
	inflight map[string]context.CancelFunc
}

func (st *stdioHost) handle(ctx context.Context, wg *sync.WaitGroup, line []byte) {
	msg, err := jsonrpc.Decode(line)
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
		return // no server-to-client requests are sent yet
	case msg.IsNotification():
		if msg.Method == "notifications/cancelled" {
			if id, ok := jsonrpc.Field(msg.Params, "requestId"); ok {
				st.mu.Lock()
				cancel := st.inflight[string(id)]
				st.mu.Unlock()
				if cancel != nil {
					cancel()
				}
			}
		}
		return
	case msg.Method == "initialize":
		requested, _ := jsonrpc.StringField(msg.Params, "protocolVersion")
		version := router.NegotiateLegacy(requested)
		st.mu.Lock()
		st.version = version
		st.mu.Unlock()
		st.write(jsonrpc.AppendResult(nil, msg.ID, st.d.InitializeResult(version)))
		return
	}

	caller, modern, rpcErr := st.caller(msg)
	if rpcErr != nil {
		st.write(jsonrpc.AppendError(nil, msg.ID, rpcErr))
		return
	}
	reqCtx, cancel := context.WithCancel(ctx)
	key := string(msg.ID)
	st.mu.Lock()
	if _, dup := st.inflight[key]; dup {
		st.mu.Unlock()
		cancel()
		st.write(jsonrpc.AppendError(nil, msg.ID, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Request id %s is already in use", key)))
		return
	}
	st.inflight[key] = cancel
	st.mu.Unlock()
	wg.Go(func() {
		defer func() {
			st.mu.Lock()
			delete(st.inflight, key)
			st.mu.Unlock()
			cancel()
		}()
		reply := st.d.Dispatch(reqCtx, caller, msg)
		if reqCtx.Err() != nil && ctx.Err() == nil {
			return // cancelled by the host: no response (2025-11-25 cancellation)
		}
		st.write(appendReply(nil, msg.ID, reply, modern))
	})
}

// caller decides the era of one request: modern when it declares a
// version in _meta, else the legacy session's (which initialize opened).
func (st *stdioHost) caller(msg *jsonrpc.Message) (*router.Caller, bool, *jsonrpc.Error) {
	meta, _ := jsonrpc.Field(msg.Params, "_meta")
	if declared, ok := jsonrpc.StringField(meta, metaProtocolVersion); ok {
		if !isModernSupported(declared) {
			data, _ := json.Marshal(map[string]any{"supported": router.SupportedVersions(), "requested": declared})
			return nil, false, &jsonrpc.Error{Code: jsonrpc.CodeUnsupportedProtocolVersion, Message: "Unsupported protocol version", Data: data}
		}
		return &router.Caller{ProtocolVersion: declared}, true, nil
	}
	st.mu.Lock()
	version := st.version
	st.mu.Unlock()
	if version == "" && msg.Method != "ping" {
		return nil, false, jsonrpc.NewError(jsonrpc.CodeInvalidRequest,
			"Send initialize first, or declare protocol version %s in params._meta[%q]", router.ModernVersion, metaProtocolVersion)
	}
	return &router.Caller{ProtocolVersion: version, Session: "stdio"}, false, nil
}

// write sends one message as one line. Raw values from HTTP upstreams may
// hold newlines, which the stdio framing forbids, so such a message is
// compacted first.
func (st *stdioHost) write(msg []byte) {
	if bytes.IndexByte(msg, '\n') >= 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, msg); err == nil {
			msg = buf.Bytes()
		}
	}
	st.writeMu.Lock()
	defer st.writeMu.Unlock()
	_, _ = st.out.Write(msg)
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
