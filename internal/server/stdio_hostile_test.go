package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
)

// stdioHost runs a Stdio front over pipes for one test.
type stdioHost struct {
	t     *testing.T
	st    *Stdio
	inW   *io.PipeWriter
	outR  *io.PipeReader
	lines *bufio.Scanner
	done  chan error
}

func newStdioHost(t *testing.T, d Dispatcher, opts *StdioOptions) *stdioHost {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	h := &stdioHost{t: t, st: NewStdio(d, outW, opts), inW: inW, outR: outR, lines: bufio.NewScanner(outR), done: make(chan error, 1)}
	h.lines.Buffer(make([]byte, 64<<10), 1<<20)
	go func() {
		// Its stdout ends with Serve, as a process's does when it exits.
		h.done <- h.st.Serve(context.Background(), inR)
		outW.Close()
	}()
	return h
}

// send writes lines to the front's stdin from a goroutine of its own,
// as a host does, so that a test can read the front's output meanwhile.
func (h *stdioHost) send(lines ...string) <-chan error {
	sent := make(chan error, 1)
	go func() {
		for _, l := range lines {
			if _, err := io.WriteString(h.inW, l+"\n"); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	return sent
}

func (h *stdioHost) next() *jsonrpc.Message {
	h.t.Helper()
	if !h.lines.Scan() {
		h.t.Fatalf("no line from the front: %v", h.lines.Err())
	}
	m, err := jsonrpc.Decode(h.lines.Bytes())
	if err != nil {
		h.t.Fatalf("line %.200q: %v", h.lines.Text(), err)
	}
	return m
}

// close ends stdin, reads what is left of stdout and waits for Serve.
func (h *stdioHost) close() {
	h.t.Helper()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		_, _ = io.Copy(io.Discard, h.outR)
	}()
	h.inW.Close()
	if err := <-h.done; err != nil {
		h.t.Errorf("Serve: %v", err)
	}
	<-drained
}

// TestStdioOversizeLine: a line longer than the front's limit is
// answered with -32600 (id null) naming the limit, the rest of it is
// skipped, and the lines after it are served: the front does not exit.
func TestStdioOversizeLine(t *testing.T) {
	d := &fakeDispatcher{replies: map[string]*router.Reply{"tools/list": {Result: json.RawMessage(`{"tools":[]}`)}}}
	const limit = 100 << 10
	h := newStdioHost(t, d, &StdioOptions{MaxMessageBytes: limit})
	request := func(id int, padding int) string {
		return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/list","params":{"pad":"` + strings.Repeat("p", padding) + `"}}`
	}
	fits := request(3, 0)
	fits = request(3, limit-len(fits)) // exactly the limit
	sent := h.send(initBody, request(2, 3*limit), fits, request(4, 0))
	if m := h.next(); string(m.ID) != "1" || m.Error != nil {
		t.Fatalf("initialize: %+v", m)
	}
	if m := h.next(); m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidRequest || string(m.ID) != "null" ||
		!strings.Contains(m.Error.Message, strconv.Itoa(limit)+" bytes") {
		t.Errorf("oversize line answered %+v, want -32600 with id null naming the limit", m)
	}
	got := map[string]bool{}
	for len(got) < 2 {
		m := h.next()
		if m.Error != nil || m.Result == nil {
			t.Fatalf("after the oversize line: %+v %v, want the answers to 3 and 4 (the rest of the long line skipped)", m, m.Error)
		}
		got[string(m.ID)] = true
	}
	if !got["3"] || !got["4"] {
		t.Errorf("answered %v, want 3 (a line at the limit) and 4", got)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	h.close()
}

// TestStdioSlowHostDoesNotBlockRelays: a host that stops reading stdout
// does not hold up whoever relays to it (the goroutine reading an
// upstream delivers changes and a call's progress): notifications that
// do not fit in the queue are dropped and logged, and the host's own
// request is still answered once it reads again.
func TestStdioSlowHostDoesNotBlockRelays(t *testing.T) {
	var logs mcptest.LogBuffer
	d := &fakeDispatcher{replies: map[string]*router.Reply{"tools/list": {Result: json.RawMessage(`{"tools":[]}`)}}}
	progressed := make(chan struct{})
	d.interactive = func(_ context.Context, c *router.Caller, _ *jsonrpc.Request) *router.Reply {
		for i := range 1000 {
			c.Host.Notify("notifications/progress", json.RawMessage(`{"progressToken":1,"progress":`+strconv.Itoa(i)+`}`))
		}
		close(progressed)
		return &router.Reply{Result: json.RawMessage(`{"content":[]}`)}
	}
	h := newStdioHost(t, d, &StdioOptions{QueueLimit: 8, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	h.send(initBody)
	if m := h.next(); string(m.ID) != "1" {
		t.Fatalf("initialize: %+v", m)
	}

	// The host stops reading. An upstream reader relays a flood.
	relayed := make(chan struct{})
	go func() {
		defer close(relayed)
		for i := range 1000 {
			h.st.Deliver(router.Change{Method: "notifications/resources/updated", Subscribers: []string{stdioSession},
				Params: json.RawMessage(`{"uri":"file://x","n":` + strconv.Itoa(i) + `}`)})
		}
	}()
	select {
	case <-relayed:
	case <-time.After(eventWait):
		t.Fatal("relaying a change blocked on a host that does not read stdout")
	}
	sent := h.send(`{"jsonrpc":"2.0","id":"call","method":"tools/call","params":{"name":"x"}}`, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	select {
	case <-progressed:
	case <-time.After(eventWait):
		t.Fatal("a call's progress blocked on a host that does not read stdout")
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}

	// The host reads again: its answers are there, whatever was dropped.
	answered := map[string]bool{}
	for !answered[`"call"`] || !answered["2"] {
		if m := h.next(); m.Result != nil {
			answered[string(m.ID)] = true
		}
	}
	if !strings.Contains(logs.String(), "notifications dropped") {
		t.Errorf("no log of the dropped notifications; logs:\n%s", logs.String())
	}
	h.close()
}

// TestStdioExitsWhenTheHostStopsReading: a host that closes stdin but
// no longer reads stdout, with the queue full and answers waiting for
// room, does not keep the front alive: after stdin ends the requests get
// the write timeout to finish, are then cancelled, and Serve returns
// after its bounded wait for the writer.
func TestStdioExitsWhenTheHostStopsReading(t *testing.T) {
	var logs mcptest.LogBuffer
	d := &fakeDispatcher{replies: map[string]*router.Reply{"tools/list": {Result: json.RawMessage(`{"tools":[]}`)}}}
	h := newStdioHost(t, d, &StdioOptions{QueueLimit: 1, WriteTimeout: 10 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	// Nobody reads stdout: the writer blocks on its first flush, the
	// queue holds one answer, and the other requests wait to send theirs.
	lines := []string{initBody}
	for i := range 16 {
		lines = append(lines, `{"jsonrpc":"2.0","id":`+strconv.Itoa(i+2)+`,"method":"tools/list"}`)
	}
	if err := <-h.send(lines...); err != nil {
		t.Fatal(err)
	}
	h.inW.Close()
	select {
	case err := <-h.done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(eventWait):
		t.Fatal("Serve did not return after stdin ended, with the host not reading stdout")
	}
	h.outR.Close() // ends the writer's blocked write
	if !strings.Contains(logs.String(), "requests cancelled") {
		t.Errorf("no log of the cancelled requests; logs:\n%s", logs.String())
	}
}
