package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// stdioServer is an MCP server run as a child process, shared by every
// client as a host shares one stdio connection: requests from all
// clients are pipelined on stdin, and a reader routes each response to
// its caller by id.
type stdioServer struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	modern bool
	params []byte // the constant part of a call's params, without "}"

	wmu sync.Mutex // guards w
	w   *bufio.Writer

	mu      sync.Mutex // guards the fields below
	nextID  int64
	pending map[int64]chan stdioAnswer
	err     error // set when the reader stopped

	readerDone chan struct{}
}

type stdioAnswer struct {
	size    int
	isError bool
	err     error
}

// startStdio launches argv and performs the handshake of the era:
// initialize and notifications/initialized (legacy), or nothing (modern:
// every call carries its version).
func startStdio(ctx context.Context, argv []string, modern bool, tool string, args []byte) (*stdioServer, error) {
	if len(argv) == 0 {
		return nil, errors.New("no command: give it after --")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &stdioServer{cmd: cmd, stdin: stdin, modern: modern, w: bufio.NewWriterSize(stdin, 64<<10),
		pending: map[int64]chan stdioAnswer{}, readerDone: make(chan struct{})}
	p := []byte(`{"name":`)
	p = jsonrpc.AppendString(p, tool)
	p = append(p, `,"arguments":`...)
	p = append(p, args...)
	if modern {
		p = append(p, `,"_meta":{"io.modelcontextprotocol/protocolVersion":"`+modernVersion+`","io.modelcontextprotocol/clientCapabilities":{}}`...)
	}
	s.params = p
	go s.read(stdout)
	if !modern {
		init := []byte(`{"protocolVersion":"` + legacyVersion + `","capabilities":{},"clientInfo":{"name":"mcp-bench","version":"1.0.0"}}`)
		if _, _, err := s.request(ctx, "initialize", init); err != nil {
			s.close()
			return nil, fmt.Errorf("initialize: %w", err)
		}
		if err := s.send(jsonrpc.AppendNotification(nil, "notifications/initialized", nil)); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

func (s *stdioServer) pid() int { return s.cmd.Process.Pid }

// read routes responses to their callers until stdout ends.
func (s *stdioServer) read(stdout io.Reader) {
	defer close(s.readerDone)
	br := bufio.NewReaderSize(stdout, 64<<10)
	var m jsonrpc.Message
	var err error
	for {
		var line []byte
		line, err = br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: gather it whole.
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil {
			break
		}
		if jsonrpc.DecodeInto(&m, line) != nil || !m.IsResponse() {
			continue
		}
		id, ok := jsonrpc.Int64ID(m.ID)
		if !ok {
			continue
		}
		s.mu.Lock()
		ch := s.pending[id]
		delete(s.pending, id)
		s.mu.Unlock()
		if ch == nil {
			continue
		}
		var a stdioAnswer
		if m.Error != nil {
			a.err = m.Error
		} else {
			isErr, _ := jsonrpc.Field(m.Result, "isError")
			a.size, a.isError = len(m.Result), string(isErr) == "true"
		}
		ch <- a
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = errors.New("the server closed its stdout")
	}
	s.mu.Lock()
	s.err = err
	for id, ch := range s.pending {
		delete(s.pending, id)
		ch <- stdioAnswer{err: err}
	}
	s.mu.Unlock()
}

// send writes one message; the writer is flushed at once, as a host
// writes each message when it has it.
func (s *stdioServer) send(msg []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, _ = s.w.Write(msg)
	_ = s.w.WriteByte('\n')
	return s.w.Flush()
}

// request sends a request and waits for its answer.
func (s *stdioServer) request(ctx context.Context, method string, params []byte) (int, bool, error) {
	ch := make(chan stdioAnswer, 1)
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return 0, false, s.err
	}
	s.nextID++
	id := s.nextID
	s.pending[id] = ch
	s.mu.Unlock()
	if err := s.send(jsonrpc.AppendRequest(nil, strconv.AppendInt(nil, id, 10), method, params)); err != nil {
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
		return 0, false, err
	}
	select {
	case a := <-ch:
		return a.size, a.isError, a.err
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
		return 0, false, ctx.Err()
	}
}

// stdioClient is one client of the shared server.
type stdioClient struct {
	s      *stdioServer
	params []byte
}

func (s *stdioServer) client() *stdioClient {
	return &stdioClient{s: s, params: append(append([]byte(nil), s.params...), '}')}
}

func (c *stdioClient) call(ctx context.Context) (int, bool, error) {
	return c.s.request(ctx, "tools/call", c.params)
}

// close ends the server as the MCP stdio transport says: close stdin,
// wait, then SIGTERM, then SIGKILL.
func (s *stdioServer) close() {
	_ = s.stdin.Close()
	done := make(chan struct{})
	go func() {
		_ = s.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-time.After(2 * time.Second):
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return
	case <-time.After(2 * time.Second):
	}
	_ = s.cmd.Process.Kill()
	<-done
}
