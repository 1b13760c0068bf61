package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
)

// sseStream reads JSON-RPC messages from an SSE response body.
type sseStream struct {
	t    *testing.T
	resp *http.Response
	sc   *bufio.Scanner
}

// getStream opens a session's GET stream with headers (Mcp-Session-Id
// and any others) added to Accept: text/event-stream.
func getStream(t *testing.T, ts *httptest.Server, headers map[string]string) *sseStream {
	t.Helper()
	get, err := http.NewRequest("GET", ts.URL+"/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	get.Header.Set("Accept", "text/event-stream")
	for k, v := range headers {
		get.Header.Set(k, v)
	}
	return openStream(t, get)
}

func openStream(t *testing.T, req *http.Request) *sseStream {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q, want an SSE stream", resp.StatusCode, ct)
	}
	return &sseStream{t: t, resp: resp, sc: bufio.NewScanner(resp.Body)}
}

// next returns the next message, skipping comments, blank lines and
// events without data (the priming event of a GET stream).
func (s *sseStream) next() *jsonrpc.Message {
	s.t.Helper()
	for s.sc.Scan() {
		line := s.sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || strings.TrimSpace(data) == "" {
			continue
		}
		m, err := jsonrpc.Decode([]byte(data))
		if err != nil {
			s.t.Fatalf("SSE data %q: %v", data, err)
		}
		return m
	}
	s.t.Fatalf("stream ended: %v", s.sc.Err())
	return nil
}

func post(t *testing.T, ts *httptest.Server, headers map[string]string, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest("POST", ts.URL+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return req
}

func initSession(t *testing.T, ts *httptest.Server, caps string) string {
	t.Helper()
	r := do(t, ts, "POST", nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"clientInfo":{"name":"t","version":"1"}}}`)
	return r.header.Get("Mcp-Session-Id")
}

// TestLegacyCallStream: a call that reports progress and asks the host
// for sampling turns its response into an SSE stream; the host answers
// the request with a POST, and the final result closes the stream.
func TestLegacyCallStream(t *testing.T) {
	ts, d, _ := newTestServerWith(t, nil)
	d.interactive = func(ctx context.Context, c *router.Caller, req *jsonrpc.Request) *router.Reply {
		if string(c.Capabilities) != `{"sampling":{}}` {
			return &router.Reply{Error: jsonrpc.NewError(-1, "capabilities %s", c.Capabilities)}
		}
		c.Host.Notify("notifications/progress", json.RawMessage(`{"progressToken":1,"progress":1}`))
		resp, err := c.Host.Request(ctx, "sampling/createMessage", json.RawMessage(`{"messages":[]}`))
		if err != nil {
			return &router.Reply{Error: jsonrpc.NewError(-1, "%v", err)}
		}
		text, _ := jsonrpc.StringField(resp.Result, "text")
		return &router.Reply{Result: json.RawMessage(`{"content":[{"type":"text","text":"` + text + `"}]}`)}
	}
	sid := initSession(t, ts, `{"sampling":{}}`)
	h := map[string]string{"Mcp-Session-Id": sid}
	stream := openStream(t, post(t, ts, h, `{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"x","_meta":{"progressToken":1}}}`))

	if m := stream.next(); m.Method != "notifications/progress" {
		t.Fatalf("first event %+v, want progress", m)
	}
	ask := stream.next()
	if ask.Method != "sampling/createMessage" || !ask.IsRequest() {
		t.Fatalf("second event %+v, want the sampling request", ask)
	}
	answer := `{"jsonrpc":"2.0","id":` + string(ask.ID) + `,"result":{"text":"from the host"}}`
	if r := do(t, ts, "POST", h, answer); r.status != 202 {
		t.Fatalf("posting the answer: %d %s", r.status, r.body)
	}
	final := stream.next()
	if string(final.ID) != `"call-1"` || !strings.Contains(string(final.Result), "from the host") {
		t.Errorf("final message %+v", final)
	}
}

func TestGetStreamDeliversQueuedChanges(t *testing.T) {
	ts, _, s := newTestServerWith(t, nil)
	sid := initSession(t, ts, `{}`)
	// A change before the host opens its stream waits for it; a
	// duplicate is coalesced.
	s.Deliver(router.Change{Method: "notifications/tools/list_changed"})
	s.Deliver(router.Change{Method: "notifications/tools/list_changed"})
	req, _ := http.NewRequest("GET", ts.URL+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	stream := openStream(t, req)
	if m := stream.next(); m.Method != "notifications/tools/list_changed" {
		t.Fatalf("first event %+v", m)
	}
	s.Deliver(router.Change{Method: "notifications/resources/updated", Params: json.RawMessage(`{"uri":"a://b"}`), Subscribers: []string{sid}})
	s.Deliver(router.Change{Method: "notifications/resources/updated", Params: json.RawMessage(`{"uri":"other"}`), Subscribers: []string{"someone-else"}})
	s.Deliver(router.Change{Method: "notifications/prompts/list_changed"})
	if m := stream.next(); m.Method != "notifications/resources/updated" || string(m.Params) != `{"uri":"a://b"}` {
		t.Fatalf("second event %+v, want its own resource update (not the duplicate list change)", m)
	}
	if m := stream.next(); m.Method != "notifications/prompts/list_changed" {
		t.Fatalf("third event %+v, want prompts list_changed (and no foreign update)", m)
	}
}

func TestModernListen(t *testing.T) {
	ts, d, s := newTestServerWith(t, nil)
	body := `{"jsonrpc":"2.0","id":42,"method":"subscriptions/listen","params":{` + modernMeta + `,"notifications":{"toolsListChanged":true,"resourceSubscriptions":["a://b","nope://x"]}}}`
	stream := openStream(t, post(t, ts, modernHeaders("subscriptions/listen", ""), body))
	ack := stream.next()
	if ack.Method != "notifications/subscriptions/acknowledged" ||
		string(ack.Params) != `{"_meta":{"io.modelcontextprotocol/subscriptionId":42},"notifications":{"resourceSubscriptions":["a://b"],"toolsListChanged":true}}` {
		t.Fatalf("ack = %s %s", ack.Method, ack.Params)
	}
	d.mu.Lock()
	key := strings.Fields(d.subscribed[0])[0]
	d.mu.Unlock()
	s.Deliver(router.Change{Method: "notifications/prompts/list_changed"}) // not asked for
	s.Deliver(router.Change{Method: "notifications/tools/list_changed"})
	s.Deliver(router.Change{Method: "notifications/resources/updated", Params: json.RawMessage(`{"uri":"a://b"}`), Subscribers: []string{key}})
	if m := stream.next(); m.Method != "notifications/tools/list_changed" || string(m.Params) != `{"_meta":{"io.modelcontextprotocol/subscriptionId":42}}` {
		t.Errorf("got %s %s, want tools list_changed tagged with the subscription id", m.Method, m.Params)
	}
	if m := stream.next(); m.Method != "notifications/resources/updated" || !strings.Contains(string(m.Params), `"io.modelcontextprotocol/subscriptionId":42`) {
		t.Errorf("got %s %s, want the tagged resource update", m.Method, m.Params)
	}
	// Closing the stream drops the subscriber.
	stream.resp.Body.Close()
	select {
	case got := <-d.droppedCh:
		if got != key {
			t.Errorf("dropped %q, want %q", got, key)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("closing the listen stream did not drop its subscriptions")
	}
}

// TestListenForTasks: task notifications are acknowledged as none (the
// gateway sends none: hosts poll), and refused with -32021 to a host
// that did not declare the tasks extension.
func TestListenForTasks(t *testing.T) {
	ts, _, _ := newTestServerWith(t, nil)
	withExt := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	body := `{"jsonrpc":"2.0","id":43,"method":"subscriptions/listen","params":{` + withExt + `,"notifications":{"taskIds":["gw-task-a"]}}}`
	stream := openStream(t, post(t, ts, modernHeaders("subscriptions/listen", ""), body))
	if ack := stream.next(); !strings.Contains(string(ack.Params), `"notifications":{"taskIds":[]}`) {
		t.Errorf("ack = %s, want no task ids agreed to", ack.Params)
	}
	stream.resp.Body.Close()
	body = `{"jsonrpc":"2.0","id":44,"method":"subscriptions/listen","params":{` + modernMeta + `,"notifications":{"taskIds":["gw-task-a"]}}}`
	wantError(t, do(t, ts, "POST", modernHeaders("subscriptions/listen", ""), body), 400, jsonrpc.CodeMissingRequiredClientCapability, "io.modelcontextprotocol/tasks")
}

func TestCancellationReachesTheDispatcher(t *testing.T) {
	ts, d, _ := newTestServerWith(t, nil)
	started := make(chan struct{}, 2)
	cancelled := make(chan string, 2)
	d.interactive = func(ctx context.Context, _ *router.Caller, req *jsonrpc.Request) *router.Reply {
		started <- struct{}{}
		<-ctx.Done()
		cancelled <- string(req.ID)
		return &router.Reply{Error: jsonrpc.NewError(-1, "cancelled")}
	}
	sid := initSession(t, ts, `{}`)
	h := map[string]string{"Mcp-Session-Id": sid}
	answered := make(chan response, 1)
	go func() {
		answered <- do(t, ts, "POST", h, `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x"}}`)
	}()
	<-started
	do(t, ts, "POST", h, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}`)
	if got := <-cancelled; got != `"a"` {
		t.Errorf("cancelled %s", got)
	}
	// A cancelled request gets no JSON-RPC response.
	if r := <-answered; r.status != http.StatusNoContent || r.body != "" {
		t.Errorf("the cancelled request was answered: %d %q", r.status, r.body)
	}
	go func() { do(t, ts, "POST", h, `{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"x"}}`) }()
	<-started
	do(t, ts, "DELETE", h, "")
	if got := <-cancelled; got != `"b"` {
		t.Errorf("cancelled %s", got)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.dropped) != 1 || d.dropped[0] != sid {
		t.Errorf("dropped subscribers %v, want the deleted session", d.dropped)
	}
}

// TestSlowHostDoesNotBlockSenders: a host that sends a request and never
// reads its stream must not hold up whoever sends it events (in the
// gateway, the goroutine reading a shared upstream), nor other hosts.
func TestSlowHostDoesNotBlockSenders(t *testing.T) {
	ts, d, _ := newTestServerWith(t, nil)
	notified := make(chan struct{})
	release := make(chan struct{})
	d.interactive = func(ctx context.Context, c *router.Caller, req *jsonrpc.Request) *router.Reply {
		if name, _ := jsonrpc.StringField(req.Params, "name"); name == "flood" {
			big := json.RawMessage(`{"progressToken":1,"message":"` + strings.Repeat("x", 64<<10) + `"}`)
			for range 2000 { // 128 MB: far more than any socket buffer
				c.Host.Notify("notifications/progress", big)
			}
			close(notified)
			<-release
		}
		return &router.Reply{Result: json.RawMessage(`{"content":[]}`)}
	}
	sid := initSession(t, ts, `{}`)
	h := map[string]string{"Mcp-Session-Id": sid}

	// The slow host: a raw connection that sends the request and never
	// reads a byte of the answer.
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"jsonrpc":"2.0","id":"flood","method":"tools/call","params":{"name":"flood"}}`
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nContent-Length: %d\r\n\r\n%s",
		strings.TrimPrefix(ts.URL, "http://"), sid, len(body), body)

	select {
	case <-notified:
	case <-time.After(30 * time.Second):
		t.Fatal("sending events to a host that does not read blocked the sender")
	}
	// Another host is served meanwhile.
	if r := do(t, ts, "POST", h, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"other"}}`); r.status != 200 {
		t.Errorf("another request while a host is stuck: %d", r.status)
	}
	close(release)
}

// TestDrainLetsRequestsFinish is the graceful shutdown of the serve
// command: http.Server.Shutdown with Drain registered ends the session's
// GET stream at once (so that Shutdown is not held up by it) and refuses
// new sessions, while a call in progress runs to its answer.
func TestDrainLetsRequestsFinish(t *testing.T) {
	ts, d, s := newTestServerWith(t, nil)
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	d.interactive = func(ctx context.Context, _ *router.Caller, req *jsonrpc.Request) *router.Reply {
		started <- struct{}{}
		select {
		case <-release:
			return &router.Reply{Result: json.RawMessage(`{"content":[],"finished":true}`), LacksResultType: true}
		case <-ctx.Done():
			return &router.Reply{Error: jsonrpc.NewError(-1, "cancelled")}
		}
	}
	sid := initSession(t, ts, `{}`)
	h := map[string]string{"Mcp-Session-Id": sid}
	stream := getStream(t, ts, map[string]string{"Mcp-Session-Id": sid})
	answered := make(chan response, 1)
	go func() {
		answered <- do(t, ts, "POST", h, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}`)
	}()
	<-started

	ts.Config.RegisterOnShutdown(s.Drain)
	shutdown := make(chan error, 1)
	go func() { shutdown <- ts.Config.Shutdown(context.Background()) }()
	// The GET stream ends without any message.
	if stream.sc.Scan() {
		for stream.sc.Scan() {
		}
	}
	if err := stream.sc.Err(); err != nil {
		t.Errorf("GET stream: %v", err)
	}
	// New sessions are refused while draining (the listener is closed
	// too, so ask the handler directly).
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, post(t, ts, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("initialize while draining: %d %s", rec.Code, rec.Body)
	}
	close(release)
	r := <-answered
	if r.msg == nil || !strings.Contains(string(r.msg.Result), `"finished":true`) {
		t.Errorf("the call in progress did not finish: %d %s", r.status, r.body)
	}
	if err := <-shutdown; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}
