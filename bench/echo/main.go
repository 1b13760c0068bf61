// Command echo is a fast MCP server for load tests: it answers over
// Streamable HTTP or stdio with as little work per message as it can, so
// that a load test measures the client or the gateway in front of it, not
// the server.
//
//	echo -listen 127.0.0.1:9100          # Streamable HTTP at http://127.0.0.1:9100/mcp
//	echo -stdio                          # newline-delimited JSON-RPC on stdin/stdout
//
// Tools:
//
//   - echo {text}: returns text as its text content (the argument's raw
//     JSON string is spliced into the result, never decoded).
//   - blob {size}: returns a text content of size bytes ('x' repeated),
//     built once per size and cached.
//
// It answers initialize (legacy era, a session id over HTTP), server/discover
// (modern era, unless -era legacy), ping, tools/list and tools/call; any
// other request gets {}. Notifications and responses are accepted and
// ignored. Over HTTP, GET gets 405 (no server-initiated stream) and DELETE
// 204. Sessions are not tracked: any Mcp-Session-Id is accepted.
//
// -start-delay holds the server back before it serves its first message,
// to stand for a server that is slow to start; -call-delay makes each
// tools/call take that long (calls then run concurrently, so a client that
// pipelines its calls sees its throughput grow with concurrency).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// server holds the settings and the result cache shared by every
// connection.
type server struct {
	era       string // dual, legacy or modern
	callDelay time.Duration
	sse       bool // answer HTTP requests with an SSE stream

	mu    sync.Mutex // guards blobs
	blobs map[int]json.RawMessage

	sessions atomic.Uint64
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("echo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:9100", "HTTP listen address; the endpoint is /mcp (any path is served)")
	stdio := fs.Bool("stdio", false, "serve on stdin/stdout instead of HTTP")
	era := fs.String("era", "dual", "protocol era: dual (answers server/discover and initialize), legacy (server/discover is an unknown method) or modern")
	startDelay := fs.Duration("start-delay", 0, "wait this long before serving (a slow server start)")
	callDelay := fs.Duration("call-delay", 0, "time each tools/call takes; calls then run concurrently")
	sse := fs.Bool("sse", false, "answer HTTP requests with an SSE stream instead of a JSON body")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch *era {
	case "dual", "legacy", "modern":
	default:
		fmt.Fprintf(stderr, "echo: -era must be dual, legacy or modern, not %q\n", *era)
		return 2
	}
	s := &server{era: *era, callDelay: *callDelay, sse: *sse, blobs: map[int]json.RawMessage{}}
	time.Sleep(*startDelay)
	if *stdio {
		if err := s.serveStdio(stdin, stdout); err != nil {
			fmt.Fprintf(stderr, "echo: %v\n", err)
			return 1
		}
		return 0
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "echo: %v\n", err)
		return 1
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	fmt.Fprintf(stderr, "echo: serving http://%s/mcp\n", ln.Addr())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "echo: %v\n", err)
		return 1
	}
	return 0
}

// answer returns the result or the error of a request.
func (s *server) answer(m *jsonrpc.Message) (json.RawMessage, *jsonrpc.Error) {
	switch m.Method {
	case "initialize":
		if s.era == "modern" {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeUnsupportedProtocolVersion, Message: "Unsupported protocol version",
				Data: json.RawMessage(`{"supported":["2026-07-28"]}`)}
		}
		v, _ := jsonrpc.StringField(m.Params, "protocolVersion")
		switch v {
		case "2025-11-25", "2025-06-18", "2025-03-26":
		default:
			v = "2025-11-25"
		}
		return json.RawMessage(`{"protocolVersion":"` + v + `","capabilities":{"tools":{}},"serverInfo":{"name":"echo","version":"1.0.0"}}`), nil
	case "server/discover":
		if s.era == "legacy" {
			return nil, jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "Method not found: %s", m.Method)
		}
		return json.RawMessage(`{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"echo","version":"1.0.0"}}}`), nil
	case "tools/list":
		return json.RawMessage(`{"tools":[` +
			`{"name":"echo","description":"Returns its text argument.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}},` +
			`{"name":"blob","description":"Returns size bytes of text.","inputSchema":{"type":"object","properties":{"size":{"type":"integer"}},"required":["size"]}}` +
			`]}`), nil
	case "tools/call":
		if s.callDelay > 0 {
			time.Sleep(s.callDelay)
		}
		name, _ := jsonrpc.StringField(m.Params, "name")
		a, _ := jsonrpc.Field(m.Params, "arguments")
		switch name {
		case "echo":
			text, ok := jsonrpc.Field(a, "text")
			if !ok || len(text) == 0 || text[0] != '"' {
				text = json.RawMessage(`""`)
			}
			out := make([]byte, 0, len(text)+64)
			out = append(out, `{"content":[{"type":"text","text":`...)
			out = append(out, text...)
			return append(out, `}]}`...), nil
		case "blob":
			raw, _ := jsonrpc.Field(a, "size")
			size, err := strconv.Atoi(string(raw))
			if err != nil || size < 0 || size > 64<<20 {
				return nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "blob needs a size from 0 to 64 MiB")
			}
			return s.blob(size), nil
		}
		return nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "Unknown tool: %s", name)
	}
	return json.RawMessage(`{}`), nil
}

func (s *server) blob(size int) json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	res, ok := s.blobs[size]
	if !ok {
		res = json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("x", size) + `"}]}`)
		s.blobs[size] = res
	}
	return res
}

// ServeHTTP serves Streamable HTTP.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
		return
	default:
		w.Header().Set("Allow", "POST, DELETE")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, err := readAll(r.Body, r.ContentLength)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var m jsonrpc.Message
	if err := jsonrpc.DecodeInto(&m, body); err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(jsonrpc.AppendError(nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: err.Error()}))
		return
	}
	if !m.IsRequest() {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	res, rpcErr := s.answer(&m)
	h := w.Header()
	if m.Method == "initialize" && rpcErr == nil {
		h.Set("Mcp-Session-Id", "echo-"+strconv.FormatUint(s.sessions.Add(1), 10))
	}
	status := http.StatusOK
	if rpcErr != nil && s.era != "legacy" && rpcErr.Code == jsonrpc.CodeUnsupportedProtocolVersion {
		status = http.StatusBadRequest
	}
	var head []byte
	if rpcErr != nil {
		head, res = jsonrpc.AppendError(nil, m.ID, rpcErr), nil
	} else {
		head = append(append(append([]byte(nil), `{"jsonrpc":"2.0","id":`...), m.ID...), `,"result":`...)
	}
	if s.sse {
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "event: message\ndata: ")
		writeMessage(w, head, res)
		_, _ = io.WriteString(w, "\n\n")
		return
	}
	n := len(head)
	if res != nil {
		n += len(res) + 1
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(n))
	w.WriteHeader(status)
	writeMessage(w, head, res)
}

// writeMessage writes head, then res and the closing brace when res is
// set; the result is written as it is, without a copy.
func writeMessage(w io.Writer, head []byte, res json.RawMessage) {
	if res == nil {
		_, _ = w.Write(head)
		return
	}
	if len(res) < 4096 {
		_, _ = w.Write(append(append(head, res...), '}'))
		return
	}
	_, _ = w.Write(head)
	_, _ = w.Write(res)
	_, _ = w.Write([]byte{'}'})
}

func readAll(r io.Reader, n int64) ([]byte, error) {
	if n >= 0 && n <= 64<<20 {
		b := make([]byte, n)
		_, err := io.ReadFull(r, b)
		return b, err
	}
	return io.ReadAll(io.LimitReader(r, 64<<20))
}

// serveStdio serves newline-delimited messages until stdin ends. Without
// a call delay it answers in order and flushes when no more input is
// waiting, so pipelined requests are answered in batches; with one, each
// request runs on its own goroutine.
func (s *server) serveStdio(stdin io.Reader, stdout io.Writer) error {
	in := bufio.NewReaderSize(stdin, 64<<10)
	out := bufio.NewWriterSize(stdout, 64<<10)
	var mu sync.Mutex // guards out
	var wg sync.WaitGroup
	defer wg.Wait()
	write := func(id json.RawMessage, res json.RawMessage, e *jsonrpc.Error, flush bool) {
		mu.Lock()
		defer mu.Unlock()
		if e != nil {
			_, _ = out.Write(jsonrpc.AppendError(nil, id, e))
		} else {
			_, _ = out.Write(jsonrpc.AppendResult(nil, id, res))
		}
		_ = out.WriteByte('\n')
		if flush {
			_ = out.Flush()
		}
	}
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		m, err := jsonrpc.Decode(line)
		if err != nil || !m.IsRequest() {
			continue
		}
		if s.callDelay > 0 && m.Method == "tools/call" {
			wg.Go(func() {
				res, e := s.answer(m)
				write(m.ID, res, e, true)
			})
			if in.Buffered() == 0 {
				mu.Lock()
				_ = out.Flush()
				mu.Unlock()
			}
			continue
		}
		res, e := s.answer(m)
		write(m.ID, res, e, in.Buffered() == 0)
	}
}
