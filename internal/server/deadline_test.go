package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
)

// eventWait bounds the wait for an event in these tests: generous, as
// the machines are shared; no test asserts how fast anything is.
const eventWait = 30 * time.Second

// TestSlowBodyIsCutOff: a host that sends its headers, then its body one
// byte at a time, is answered and disconnected at the body deadline,
// whether the gateway would read the body (408) or refuse it unread
// (401): it does not keep its connection and handler for as long as it
// keeps trickling.
func TestSlowBodyIsCutOff(t *testing.T) {
	keys, err := policy.NewAPIKeys(map[string][]string{"red": {"red-key-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		opts   *Options
		status string
	}{
		"read":            {&Options{BodyTimeout: 200 * time.Millisecond}, "HTTP/1.1 408 "},
		"unauthenticated": {&Options{BodyTimeout: 200 * time.Millisecond, Identify: keys.Identify}, "HTTP/1.1 401 "},
	} {
		t.Run(name, func(t *testing.T) {
			ts, _ := newTestServer(t, tc.opts)
			addr := strings.TrimPrefix(ts.URL, "http://")
			// 1000 bytes at one per 50ms would take 50s: the body
			// deadline must end it long before.
			body := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("a", 940) + `"}}`)
			head := fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, len(body))
			c := mcptest.Trickle(t, addr, head, body, 50*time.Millisecond)
			got, err := c.WaitClosed(eventWait)
			if err != nil {
				t.Fatalf("slow body: %v (got %q)", err, got)
			}
			if !strings.HasPrefix(got, tc.status) {
				t.Errorf("answer %q, want %s", got, tc.status)
			}
			if name == "read" && !strings.Contains(got, "Request body not received within 200ms") {
				t.Errorf("answer %q, want it to say the body deadline", got)
			}
			// The server still serves others.
			if r := do(t, ts, "POST", map[string]string{"Authorization": "Bearer red-key-0123456789"}, initBody); r.status != 200 {
				t.Errorf("after a slow body: %d %s", r.status, r.body)
			}
		})
	}
}

// TestBodyDeadlineDoesNotCutStreams: the body deadline ends with the body:
// a response stream that outlives it (a call with progress, a GET
// stream) keeps going.
func TestBodyDeadlineDoesNotCutStreams(t *testing.T) {
	ts, d, s := newTestServerWith(t, &Options{BodyTimeout: 50 * time.Millisecond})
	sent := make(chan struct{})
	d.interactive = func(ctx context.Context, c *router.Caller, _ *jsonrpc.Request) *router.Reply {
		c.Host.Notify("notifications/progress", json.RawMessage(`{"progressToken":1,"progress":1}`))
		<-sent
		return &router.Reply{Result: json.RawMessage(`{"content":[]}`)}
	}
	sid := initSession(t, ts, `{}`)
	stream := openStream(t, post(t, ts, map[string]string{"Mcp-Session-Id": sid}, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x"}}`))
	if m := stream.next(); m.Method != "notifications/progress" {
		t.Fatalf("first event %s, want progress", m.Method)
	}
	events := getStream(t, ts, map[string]string{"Mcp-Session-Id": sid})
	// Wait past the body deadline on the server's own clock: a request
	// that waits on a timer longer than it.
	time.Sleep(200 * time.Millisecond) // not an assertion: only outlives the deadline
	close(sent)
	if m := stream.next(); string(m.ID) != "5" || m.Result == nil {
		t.Errorf("the call's answer after the body deadline: %+v", m)
	}
	s.Deliver(router.Change{Method: "notifications/tools/list_changed"})
	if m := events.next(); m.Method != "notifications/tools/list_changed" {
		t.Errorf("GET stream after the body deadline: %s", m.Method)
	}
}

// hugeUpdate is a resource update of about 64 KiB, different for each i
// (an outbox keeps one copy of identical messages).
func hugeUpdate(i int) json.RawMessage {
	return json.RawMessage(`{"uri":"file://x","n":` + strconv.Itoa(i) + `,"pad":"` + strings.Repeat("p", 64<<10) + `"}`)
}

// TestHostThatStopsReadingIsCutOff: a host that opens a stream and stops
// reading it, while the gateway keeps writing to it, is cut off at the
// write deadline, alone: its handler returns, its connection closes, its
// stream's resources are released, and another host's calls and
// notifications go on.
func TestHostThatStopsReadingIsCutOff(t *testing.T) {
	ts, d, s, connClosed := newTestServerConns(t, &Options{WriteTimeout: 100 * time.Millisecond})
	addr := strings.TrimPrefix(ts.URL, "http://")

	// The well-behaved host: a session with a GET stream it reads.
	good := initSession(t, ts, `{}`)
	goodEvents := getStream(t, ts, map[string]string{"Mcp-Session-Id": good})

	// flood writes distinct big updates to key until gone reports the
	// stuck stream ended, or fails at the deadline.
	flood := func(t *testing.T, key string, gone func() bool) {
		t.Helper()
		deadline := time.Now().Add(eventWait)
		for i := 0; !gone(); i++ {
			if time.Now().After(deadline) {
				t.Fatal("the stream of a host that does not read was not cut off")
			}
			s.Deliver(router.Change{Method: "notifications/resources/updated", Subscribers: []string{key}, Params: hugeUpdate(i)})
			time.Sleep(5 * time.Millisecond) // paces the flood; the outbox drops what does not fit
		}
	}
	// cutOff waits for the server to close the stuck host's connection.
	cutOff := func(t *testing.T) {
		t.Helper()
		select {
		case <-connClosed:
		case <-time.After(eventWait):
			t.Fatal("the gateway kept the connection of a host that does not read")
		}
	}
	drainClosed := func() {
		for len(connClosed) > 0 { // the earlier subtests' connections
			<-connClosed
		}
	}
	stillWorks := func(t *testing.T) {
		t.Helper()
		s.Deliver(router.Change{Method: "notifications/tools/list_changed"})
		if m := goodEvents.next(); m.Method != "notifications/tools/list_changed" {
			t.Errorf("the other host's stream got %s", m.Method)
		}
		if r := do(t, ts, "POST", map[string]string{"Mcp-Session-Id": good}, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"x"}}`); r.status != 200 {
			t.Errorf("the other host's call: %d %s", r.status, r.body)
		}
	}

	t.Run("GET stream", func(t *testing.T) {
		drainClosed()
		sid := initSession(t, ts, `{}`)
		c := mcptest.NoRead(t, addr, fmt.Sprintf("GET /mcp HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nMcp-Session-Id: %s\r\n\r\n", addr, sid))
		ss := s.lookup(sid)
		streaming := func() bool { ss.mu.Lock(); defer ss.mu.Unlock(); return ss.streaming }
		for !streaming() { // the GET has reached the handler
			time.Sleep(time.Millisecond)
		}
		flood(t, sid, func() bool { return !streaming() })
		cutOff(t)
		c.Close()
		stillWorks(t)
	})

	t.Run("listen stream", func(t *testing.T) {
		drainClosed()
		body := `{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{` + modernMeta + `,"notifications":{"resourceSubscriptions":["file://x"]}}}`
		c := mcptest.NoRead(t, addr, fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
			"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body))
		var key string
		for key == "" { // the listener has subscribed
			d.mu.Lock()
			for _, sub := range d.subscribed {
				if k, ok := strings.CutSuffix(sub, " file://x"); ok {
					key = k
				}
			}
			d.mu.Unlock()
			time.Sleep(time.Millisecond)
		}
		gone := false
		flood(t, key, func() bool {
			select {
			case k := <-d.droppedCh:
				gone = gone || k == key
			default:
			}
			return gone
		})
		cutOff(t)
		c.Close()
		s.mu.Lock()
		left := len(s.listeners)
		s.mu.Unlock()
		if left != 0 {
			t.Errorf("%d listeners left after the stuck one was cut off", left)
		}
		stillWorks(t)
	})

	// unreadPOST sends a tools/call whose answer the host never reads:
	// the gateway must give up on that host alone.
	unreadPOST := func(t *testing.T, accept string, answer func(context.Context, *router.Caller, *jsonrpc.Request) *router.Reply) {
		t.Helper()
		d.mu.Lock()
		d.interactive = answer
		d.mu.Unlock()
		t.Cleanup(func() { d.mu.Lock(); d.interactive = nil; d.mu.Unlock() })
		sid := initSession(t, ts, `{}`)
		drainClosed()
		body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"big"}}`
		c := mcptest.NoRead(t, addr, fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: %s\r\n"+
			"Mcp-Session-Id: %s\r\nContent-Length: %d\r\n\r\n%s", addr, accept, sid, len(body), body))
		// The host reads nothing until the gateway gave up: then the
		// connection ends before the answer did.
		cutOff(t)
		c.Close()
		d.mu.Lock()
		d.interactive = nil
		d.mu.Unlock()
		stillWorks(t)
	}

	t.Run("POST SSE answer", func(t *testing.T) {
		big := json.RawMessage(`{"progressToken":1,"message":"` + strings.Repeat("m", 64<<10) + `"}`)
		unreadPOST(t, "application/json, text/event-stream", func(_ context.Context, c *router.Caller, _ *jsonrpc.Request) *router.Reply {
			for range 400 { // 25 MiB, more than the sockets hold
				c.Host.Notify("notifications/progress", big)
			}
			return &router.Reply{Result: json.RawMessage(`{"content":[]}`)}
		})
	})

	t.Run("JSON answer", func(t *testing.T) {
		big := `{"content":[{"type":"text","text":"` + strings.Repeat("b", 32<<20) + `"}]}`
		unreadPOST(t, "application/json", func(context.Context, *router.Caller, *jsonrpc.Request) *router.Reply {
			return &router.Reply{Result: json.RawMessage(big)}
		})
	})
}

// newTestServerConns is newTestServerWith with a channel that receives a
// value each time the server closes a connection.
func newTestServerConns(t *testing.T, opts *Options) (*httptest.Server, *fakeDispatcher, *Server, <-chan struct{}) {
	t.Helper()
	d := &fakeDispatcher{droppedCh: make(chan string, 16), replies: map[string]*router.Reply{
		"tools/call": {Result: json.RawMessage(`{"content":[]}`)},
	}}
	s := New(d, opts)
	closed := make(chan struct{}, 64)
	ts := httptest.NewUnstartedServer(s.Handler())
	ts.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateClosed {
			select {
			case closed <- struct{}{}:
			default:
			}
		}
	}
	ts.Start()
	t.Cleanup(func() {
		s.Close()
		ts.Close()
	})
	return ts, d, s, closed
}
