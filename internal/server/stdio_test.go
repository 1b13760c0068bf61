package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
)

// blockingDispatcher holds tools/call until its context ends, and reports
// that it saw the cancellation.
type blockingDispatcher struct {
	fakeDispatcher
	started   chan struct{}
	cancelled chan struct{}
}

func (d *blockingDispatcher) Dispatch(ctx context.Context, c *router.Caller, req *jsonrpc.Request) *router.Reply {
	if req.Method == "tools/call" {
		close(d.started)
		<-ctx.Done()
		close(d.cancelled)
		return &router.Reply{Error: jsonrpc.NewError(jsonrpc.CodeInternalError, "cancelled")}
	}
	return d.fakeDispatcher.Dispatch(ctx, c, req)
}

func TestServeStdio(t *testing.T) {
	d := &blockingDispatcher{
		fakeDispatcher: fakeDispatcher{replies: map[string]*router.Reply{
			"tools/list": {Result: json.RawMessage("{\n  \"tools\": []\n}"), LacksResultType: true},
		}},
		started:   make(chan struct{}),
		cancelled: make(chan struct{}),
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- NewStdio(d, outW, nil).Serve(context.Background(), inR) }()
	lines := bufio.NewScanner(outR)
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	next := func() *jsonrpc.Message {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("no line from the server: %v", lines.Err())
		}
		m, err := jsonrpc.Decode(lines.Bytes())
		if err != nil {
			t.Fatalf("line %q: %v", lines.Text(), err)
		}
		return m
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if m := next(); m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidRequest {
		t.Errorf("request before initialize: %+v, want -32600", m.Error)
	}
	send(`not json`)
	if m := next(); m.Error == nil || m.Error.Code != jsonrpc.CodeParseError || string(m.ID) != "null" {
		t.Errorf("garbage line: %+v", m)
	}
	send(initBody)
	if m := next(); m.Error != nil || string(m.ID) != "1" {
		t.Fatalf("initialize: %+v", m)
	}
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if m := next(); string(m.Result) != `{   "tools": [] }` {
		t.Errorf("legacy tools/list result = %q, want the upstream's JSON on one line", m.Result)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{` + modernMeta + `}}`)
	if m := next(); string(m.Result) != `{"resultType":"complete",   "tools": [] }` {
		t.Errorf("modern tools/list result = %s", m.Result)
	}
	if c := d.lastCaller(); c.ProtocolVersion != "2026-07-28" {
		t.Errorf("modern request dispatched as %+v", c)
	}

	// Cancellation: the host cancels a call in flight; the dispatcher's
	// context ends and no response is written for it.
	send(`{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"x"}}`)
	<-d.started
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow"}}`)
	select {
	case <-d.cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("notifications/cancelled did not cancel the request")
	}
	send(`{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	if m := next(); string(m.ID) != "4" {
		t.Errorf("after the cancelled call the next line is %+v, want the ping's answer (no answer for the cancelled call)", m)
	}

	inW.Close()
	if err := <-done; err != nil {
		t.Errorf("Serve returned %v after stdin closed, want nil", err)
	}
	outW.Close()
}
