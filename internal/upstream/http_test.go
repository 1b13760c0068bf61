package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// headerLog keeps the headers of the requests a server received.
type headerLog struct {
	mu   sync.Mutex
	reqs []http.Header
	dels int
}

func (l *headerLog) inspect(r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.Method == http.MethodDelete {
		l.dels++
	}
	if r.Method == http.MethodPost {
		l.reqs = append(l.reqs, r.Header.Clone())
	}
}

func (l *headerLog) posts() []http.Header {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]http.Header(nil), l.reqs...)
}

func (l *headerLog) deletes() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dels
}

func httpOptions(url string) *upstream.Options {
	return &upstream.Options{Name: "remote", URL: url, ClientInfo: gateway, Headers: map[string]string{"Authorization": "Bearer secret"}}
}

func TestHTTPEraDetection(t *testing.T) {
	tests := []struct {
		name    string
		opts    mcptest.HTTPOptions
		era     upstream.Era
		version string
	}{
		{"dual sse", mcptest.HTTPOptions{Stateless: true}, upstream.EraModern, "2026-07-28"},
		{"dual json", mcptest.HTTPOptions{Stateless: true, JSONResponse: true}, upstream.EraModern, "2026-07-28"},
		{"modern only", mcptest.HTTPOptions{Stateless: true, Server: mcptest.ServerOptions{Versions: mcptest.ModernVersions()}}, upstream.EraModern, "2026-07-28"},
		{"legacy only sse", mcptest.HTTPOptions{Server: mcptest.ServerOptions{Versions: mcptest.LegacyVersions()}}, upstream.EraLegacy, "2025-11-25"},
		{"legacy only json", mcptest.HTTPOptions{JSONResponse: true, Server: mcptest.ServerOptions{Versions: mcptest.LegacyVersions()}}, upstream.EraLegacy, "2025-11-25"},
		// A dual-era SDK server with sessions serves modern requests only
		// statelessly: its DiscoverResult lists legacy versions only.
		{"stateful dual", mcptest.HTTPOptions{}, upstream.EraLegacy, "2025-11-25"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			var log headerLog
			o := tt.opts
			o.Server.PageSize = 3
			o.Inspect = log.inspect
			srv := mcptest.NewStreamableServer(t, &o)
			c := start(t, httpOptions(srv.URL))
			if c.Era() != tt.era || c.ProtocolVersion() != tt.version {
				t.Fatalf("era %v %q, want %v %q", c.Era(), c.ProtocolVersion(), tt.era, tt.version)
			}
			if got := callTool(t, ctx, c, "echo", `{"text":"héllo"}`); got != "héllo" {
				t.Errorf("echo = %q", got)
			}
			testLists(t, ctx, c)
			testPipelining(t, c)

			posts := log.posts()
			if got := posts[0].Get("Mcp-Method"); got != "server/discover" {
				t.Errorf("first POST has Mcp-Method %q, want the discover probe", got)
			}
			for i, h := range posts[1:] {
				if h.Get("Authorization") != "Bearer secret" {
					t.Errorf("POST %d lacks the configured header", i+1)
				}
				if h.Get("Accept") != "application/json, text/event-stream" {
					t.Errorf("POST %d Accept = %q", i+1, h.Get("Accept"))
				}
			}
			last := posts[len(posts)-1]
			if got := last.Get("MCP-Protocol-Version"); got != tt.version {
				t.Errorf("MCP-Protocol-Version = %q, want %q", got, tt.version)
			}
			if tt.era == upstream.EraModern {
				if last.Get("Mcp-Method") != "tools/call" || last.Get("Mcp-Name") != "barrier" || last.Get("Mcp-Session-Id") != "" {
					t.Errorf("modern headers: %v", last)
				}
			} else if last.Get("Mcp-Session-Id") == "" {
				t.Errorf("legacy request without Mcp-Session-Id: %v", last)
			}
			c.Close()
			if wantDel := tt.era == upstream.EraLegacy; (log.deletes() > 0) != wantDel {
				t.Errorf("DELETE sent: %d, want one: %v", log.deletes(), wantDel)
			}
		})
	}
}

func TestHTTPFallbackToSSE(t *testing.T) {
	tests := []struct {
		transport string
		wantErr   bool
	}{
		{transport: ""},
		{transport: "sse"},
		{transport: "streamable-http", wantErr: true},
	}
	for _, tt := range tests {
		t.Run("transport="+tt.transport, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			srv := mcptest.NewSSEServer(t, &mcptest.ServerOptions{PageSize: 5})
			opts := httpOptions(srv.URL)
			opts.Transport = tt.transport
			c := newClient(t, opts)
			err := c.Start(ctx)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "HTTP 400") {
					t.Fatalf("Start = %v, want the HTTP 400 of initialize", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Era() != upstream.EraLegacy {
				t.Errorf("era = %v", c.Era())
			}
			if got := callTool(t, ctx, c, "echo", `{"text":"over sse"}`); got != "over sse" {
				t.Errorf("echo = %q", got)
			}
			testLists(t, ctx, c)
			testPipelining(t, c)
		})
	}
}

func TestHTTPSSEStreamEnds(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := mcptest.NewSSEServer(t, nil)
	opts := httpOptions(srv.URL)
	opts.Transport = "sse"
	c := start(t, opts)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"block","arguments":{"key":"s"}}`))
		errc <- err
	}()
	callTool(t, ctx, c, "waiting", `{"key":"s","n":1}`)
	srv.CloseClientConnections()
	if err := <-errc; !errors.Is(err, upstream.ErrClosed) {
		t.Errorf("call in flight when the stream broke = %v, want ErrClosed", err)
	}
	if st := c.State(); st.Phase != upstream.Failed {
		t.Errorf("state = %v, want failed", st.Phase)
	}
}

func TestHTTPParamHeadersWithSDKServer(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	var log headerLog
	srv := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{
		Stateless: true,
		Server:    mcptest.ServerOptions{Versions: mcptest.ModernVersions()},
		Inspect:   log.inspect,
	})
	c := start(t, httpOptions(srv.URL))
	params := json.RawMessage(`{"name":"headers","arguments":{"region":"us-west1","count":42,"opts":{"dry":true},"query":"q"}}`)

	// Before tools/list the client does not know the annotations, and the
	// SDK server insists on the headers.
	res, err := c.Call(ctx, "tools/call", params)
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || res.Error.Code != jsonrpc.CodeHeaderMismatch {
		t.Fatalf("call without Mcp-Param headers = %s %v, want a HeaderMismatch error", res.Result, res.Error)
	}

	if _, err := c.List(ctx, "tools/list", "tools"); err != nil {
		t.Fatal(err)
	}
	res, err = c.Call(ctx, "tools/call", params)
	if err != nil || res.Error != nil {
		t.Fatalf("call = %v %v", err, res.Error)
	}
	h := log.posts()[len(log.posts())-1]
	got := map[string]string{}
	for k := range h {
		if strings.HasPrefix(k, "Mcp-") {
			got[k] = h.Get(k)
		}
	}
	want := map[string]string{
		"Mcp-Protocol-Version": "2026-07-28",
		"Mcp-Method":           "tools/call",
		"Mcp-Name":             "headers",
		"Mcp-Param-Region":     "us-west1",
		"Mcp-Param-Count":      "42",
		"Mcp-Param-Dry":        "true",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
}

func TestHTTPNotificationsOnResponseStream(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Stateless: true})
	got := make(chan string, 10)
	opts := httpOptions(srv.URL)
	opts.OnNotification = func(n *jsonrpc.Message) { got <- n.Method }
	c := start(t, opts)
	res, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"progress","arguments":{"text":"x"},"_meta":{"progressToken":"p"}}`))
	if err != nil || res.Error != nil {
		t.Fatalf("call = %v %v", err, res)
	}
	select {
	case m := <-got:
		if m != "notifications/progress" {
			t.Errorf("notification %q", m)
		}
	default:
		t.Error("the progress notification was not delivered before the response")
	}
}

func TestHTTPLargeResult(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	for _, o := range []mcptest.HTTPOptions{{Stateless: true}, {Stateless: true, JSONResponse: true}} {
		srv := mcptest.NewStreamableServer(t, &o)
		c := start(t, httpOptions(srv.URL))
		const size = 10 << 20
		if got := callTool(t, ctx, c, "big", `{"size":10485760}`); len(got) != size {
			t.Errorf("json=%v: big result has %d bytes, want %d", o.JSONResponse, len(got), size)
		}
	}
}

// The scripted tests below cover what correct servers do not do.

const discoverResult = `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"scripted","version":"1"}},"instructions":"be nice"}`

func scriptModern(s *mcptest.Scripted) {
	s.On(mcptest.Route{Method: "POST", RPC: "server/discover", Times: 1, Reply: mcptest.ReplyResult(discoverResult)})
}

// scriptLegacy scripts a legacy server whose initialize opens session.
func scriptLegacy(s *mcptest.Scripted, session string) {
	s.On(mcptest.Route{Method: "POST", RPC: "server/discover", Times: 1, Reply: mcptest.ReplyStatus(400, "Bad Request: no session")})
	scriptInit(s, session)
	s.On(mcptest.Route{Method: "GET", Optional: true, Reply: mcptest.ReplyStatus(405, "")})
	s.On(mcptest.Route{Method: "DELETE", Optional: true, Reply: mcptest.ReplyStatus(204, "")})
}

func scriptInit(s *mcptest.Scripted, session string) {
	s.On(mcptest.Route{Method: "POST", RPC: "initialize", Session: mcptest.NoSession, Times: 1,
		Reply: mcptest.ReplyResult(`{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"legacy","version":"1"}}`, "Mcp-Session-Id", session)})
	s.On(mcptest.Route{Method: "POST", RPC: "notifications/initialized", Session: session, Times: 1, Reply: mcptest.ReplyStatus(202, "")})
}

func TestModernMetaAndHeaders(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := mcptest.NewScripted(t)
	scriptModern(s)
	tools := `{"tools":[
		{"name":"weather","inputSchema":{"type":"object","properties":{"city":{"type":"string","x-mcp-header":"City"},"days":{"type":"integer","x-mcp-header":"Days"},"where":{"type":"object","properties":{"exact":{"type":"boolean","x-mcp-header":"Exact"}}}}}},
		{"name":"in-items","inputSchema":{"type":"object","properties":{"list":{"type":"array","items":{"type":"string","x-mcp-header":"Item"}}}}},
		{"name":"duplicate","inputSchema":{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"X"},"b":{"type":"string","x-mcp-header":"x"}}}},
		{"name":"number","inputSchema":{"type":"object","properties":{"a":{"type":"number","x-mcp-header":"A"}}}},
		{"name":"bad-token","inputSchema":{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A B"}}}},
		{"name":"plain","inputSchema":{"type":"object"}}
	]}`
	s.On(mcptest.Route{Method: "POST", RPC: "tools/list", Reply: mcptest.ReplyResult(tools)})
	s.On(mcptest.Route{Method: "POST", RPC: "tools/call", Reply: mcptest.ReplyResult(`{"content":[]}`)})
	s.On(mcptest.Route{Method: "POST", RPC: "resources/read", Reply: mcptest.ReplyResult(`{"contents":[]}`)})
	s.On(mcptest.Route{Method: "POST", RPC: "prompts/get", Reply: mcptest.ReplyResult(`{"messages":[]}`)})

	rec := newRecorder()
	opts := httpOptions(s.URL)
	opts.Logger = slog.New(rec)
	c := start(t, opts)
	if c.Instructions() != "be nice" || string(c.Capabilities()) != `{"tools":{}}` || string(c.ServerInfo()) != `{"name":"scripted","version":"1"}` {
		t.Errorf("discover result: %q %s %s", c.Instructions(), c.Capabilities(), c.ServerInfo())
	}
	items, err := c.List(ctx, "tools/list", "tools")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range items {
		n, _ := jsonrpc.StringField(it, "name")
		names = append(names, n)
	}
	if diff := cmp.Diff([]string{"weather", "plain"}, names); diff != "" {
		t.Errorf("tools kept (-want +got):\n%s", diff)
	}
	if _, err := rec.wait(ctx, msgIs("invalid x-mcp-header")); err != nil {
		t.Error("no warning for the tools left out")
	}

	tests := []struct {
		name       string
		method     string
		params     string
		wantHeader map[string]string
	}{{
		name:   "tool with annotated arguments",
		method: "tools/call",
		params: `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-06-18","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"progressToken":7},"name":"weather","arguments":{"city":"Zürich","days":3.0,"where":{"exact":false},"extra":[1, 2]}}`,
		wantHeader: map[string]string{
			"Mcp-Protocol-Version": "2026-07-28",
			"Mcp-Method":           "tools/call",
			"Mcp-Name":             "weather",
			"Mcp-Param-City":       "=?base64?WsO8cmljaA==?=",
			"Mcp-Param-Days":       "3",
			"Mcp-Param-Exact":      "false",
		},
	}, {
		name:   "null and missing arguments have no header",
		method: "tools/call",
		params: `{"name":"weather","arguments":{"city":null}}`,
		wantHeader: map[string]string{
			"Mcp-Protocol-Version": "2026-07-28",
			"Mcp-Method":           "tools/call",
			"Mcp-Name":             "weather",
		},
	}, {
		name:   "uri needing base64",
		method: "resources/read",
		params: `{"uri":"file:///tmp/a b/ü.txt"}`,
		wantHeader: map[string]string{
			"Mcp-Protocol-Version": "2026-07-28",
			"Mcp-Method":           "resources/read",
			"Mcp-Name":             "=?base64?ZmlsZTovLy90bXAvYSBiL8O8LnR4dA==?=",
		},
	}, {
		name:   "prompt",
		method: "prompts/get",
		params: `{"name":"=?base64?trick?="}`,
		wantHeader: map[string]string{
			"Mcp-Protocol-Version": "2026-07-28",
			"Mcp-Method":           "prompts/get",
			"Mcp-Name":             "=?base64?PT9iYXNlNjQ/dHJpY2s/PQ==?=",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := c.Call(ctx, tt.method, json.RawMessage(tt.params))
			if err != nil || res.Error != nil {
				t.Fatalf("Call = %v %v", err, res)
			}
			reqs := s.Requests()
			last := reqs[len(reqs)-1]
			got := map[string]string{}
			for k := range last.Header {
				if strings.HasPrefix(k, "Mcp-") {
					got[k] = last.Header.Get(k)
				}
			}
			if diff := cmp.Diff(tt.wantHeader, got); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
			if last.Header.Get("Authorization") != "Bearer secret" {
				t.Error("configured header missing")
			}
			sent := last.Msg.Params
			// Everything but _meta is sent byte for byte.
			if got, want := string(jsonrpc.DeleteField(sent, "_meta")), string(jsonrpc.DeleteField(json.RawMessage(tt.params), "_meta")); got != want {
				t.Errorf("params without _meta:\n got %s\nwant %s", got, want)
			}
			meta, _ := jsonrpc.Field(sent, "_meta")
			var m map[string]json.RawMessage
			if err := json.Unmarshal(meta, &m); err != nil {
				t.Fatal(err)
			}
			if string(m["io.modelcontextprotocol/protocolVersion"]) != `"2026-07-28"` {
				t.Errorf("protocolVersion = %s", m["io.modelcontextprotocol/protocolVersion"])
			}
			if string(m["io.modelcontextprotocol/clientInfo"]) != `{"name":"gateway-test","version":"0.0.1"}` {
				t.Errorf("clientInfo = %s", m["io.modelcontextprotocol/clientInfo"])
			}
			wantCaps := `{}`
			if strings.Contains(tt.params, "sampling") {
				wantCaps = `{"sampling":{}}` // the caller's are kept
				if string(m["progressToken"]) != "7" {
					t.Errorf("other _meta keys lost: %s", meta)
				}
			}
			if string(m["io.modelcontextprotocol/clientCapabilities"]) != wantCaps {
				t.Errorf("clientCapabilities = %s, want %s", m["io.modelcontextprotocol/clientCapabilities"], wantCaps)
			}
		})
	}
}

func TestLegacyStripsModernMeta(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := mcptest.NewScripted(t)
	scriptLegacy(s, "sess-1")
	s.On(mcptest.Route{Method: "POST", RPC: "tools/call", Session: "sess-1", Reply: mcptest.ReplyResult(`{"content":[]}`)})
	c := start(t, httpOptions(s.URL))
	if c.Era() != upstream.EraLegacy || c.ProtocolVersion() != "2025-06-18" {
		t.Fatalf("era %v %q", c.Era(), c.ProtocolVersion())
	}
	_, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"h"},"progressToken":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	var last *mcptest.Request
	for _, r := range reqs {
		if r.Msg != nil && r.Msg.Method == "tools/call" {
			last = r
		}
	}
	if got, want := string(last.Msg.Params), `{"name":"x","_meta":{"progressToken":1}}`; got != want {
		t.Errorf("params sent = %s, want %s", got, want)
	}
	if last.Header.Get("Mcp-Session-Id") != "sess-1" || last.Header.Get("MCP-Protocol-Version") != "2025-06-18" || last.Header.Get("Mcp-Method") != "" {
		t.Errorf("legacy headers: %v", last.Header)
	}
	// initialize asked for the newest legacy version, without a session.
	for _, r := range reqs {
		if r.Msg != nil && r.Msg.Method == "initialize" {
			if v, _ := jsonrpc.Field(r.Msg.Params, "protocolVersion"); string(v) != `"2025-11-25"` || r.Header.Get("Mcp-Session-Id") != "" {
				t.Errorf("initialize: %s %v", r.Msg.Params, r.Header)
			}
		}
	}
}

func TestLegacySessionExpiry(t *testing.T) {
	t.Run("renewed once and retried", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := mcptest.NewScripted(t)
		scriptLegacy(s, "old")
		s.On(mcptest.Route{Method: "POST", RPC: "tools/call", Session: "old", Times: 1, Reply: mcptest.ReplyStatus(404, "session not found")})
		scriptInit(s, "new")
		s.On(mcptest.Route{Method: "POST", RPC: "tools/call", Session: "new", Times: 1, Reply: mcptest.ReplyResult(`{"content":[{"type":"text","text":"ran once"}]}`)})
		c := start(t, httpOptions(s.URL))
		if got := callTool(t, ctx, c, "anything", `{}`); got != "ran once" {
			t.Errorf("result %q", got)
		}
		var calls []string
		for _, r := range s.Requests() {
			if r.Msg != nil && r.Msg.Method != "" && r.Msg.Method != "server/discover" {
				calls = append(calls, r.Msg.Method+"@"+r.Header.Get("Mcp-Session-Id"))
			}
		}
		want := []string{"initialize@", "notifications/initialized@old", "tools/call@old", "initialize@", "notifications/initialized@new", "tools/call@new"}
		if diff := cmp.Diff(want, calls); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
	})
	t.Run("a 404 that answers the request is not retried", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := mcptest.NewScripted(t)
		scriptLegacy(s, "old")
		s.On(mcptest.Route{Method: "POST", RPC: "tools/call", Session: "old", Times: 1, Reply: mcptest.ReplyError(404, -32601, "no such tool", "")})
		c := start(t, httpOptions(s.URL))
		res, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"x"}`))
		if err != nil || res.Error == nil || res.Error.Code != -32601 {
			t.Fatalf("Call = %v %v, want the JSON-RPC error", err, res)
		}
	})
	t.Run("expired again: no loop", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := mcptest.NewScripted(t)
		scriptLegacy(s, "old")
		s.On(mcptest.Route{Method: "POST", RPC: "tools/call", Session: "old", Times: 1, Reply: mcptest.ReplyStatus(404, "")})
		scriptInit(s, "new")
		s.On(mcptest.Route{Method: "POST", RPC: "tools/call", Session: "new", Times: 1, Reply: mcptest.ReplyStatus(404, "")})
		c := start(t, httpOptions(s.URL))
		_, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"x"}`))
		if err == nil || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("Call = %v, want a session-expired error", err)
		}
	})
}

func TestListCursorLoop(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := mcptest.NewScripted(t)
	scriptModern(s)
	s.On(mcptest.Route{Method: "POST", RPC: "tools/list", Reply: mcptest.ReplyResult(`{"tools":[{"name":"t"}],"nextCursor":"again"}`)})
	c := start(t, httpOptions(s.URL))
	_, err := c.List(ctx, "tools/list", "tools")
	if !errors.Is(err, upstream.ErrMalformed) || !strings.Contains(err.Error(), "repeats cursor") {
		t.Fatalf("List = %v, want a repeated-cursor error", err)
	}
	if n := len(s.Requests()); n != 3 { // discover and two pages
		t.Errorf("%d requests, want 3", n)
	}
}

func TestListEmptyCursorIsACursor(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := mcptest.NewScripted(t)
	scriptModern(s)
	s.On(mcptest.Route{Method: "POST", RPC: "prompts/list", Times: 1, Reply: mcptest.ReplyResult(`{"prompts":[{"name":"a"}],"nextCursor":""}`)})
	s.On(mcptest.Route{Method: "POST", RPC: "prompts/list", Times: 1, Reply: mcptest.ReplyResult(`{"prompts":[{"name":"b"}]}`)})
	c := start(t, httpOptions(s.URL))
	items, err := c.List(ctx, "prompts/list", "prompts")
	if err != nil || len(items) != 2 {
		t.Fatalf("List = %d items, %v", len(items), err)
	}
	reqs := s.Requests()
	if cur, _ := jsonrpc.Field(reqs[len(reqs)-1].Msg.Params, "cursor"); string(cur) != `""` {
		t.Errorf("second page asked with cursor %s", cur)
	}
}

func TestHTTPBadAnswers(t *testing.T) {
	tests := []struct {
		name    string
		reply   func(http.ResponseWriter, *mcptest.Request)
		wantErr error
		wantMsg string
	}{
		{"not json", mcptest.ReplyRaw("application/json", "{not json"), upstream.ErrMalformed, ""},
		{"another id", mcptest.ReplyRaw("application/json", `{"jsonrpc":"2.0","id":999,"result":{}}`), upstream.ErrMalformed, ""},
		{"html", mcptest.ReplyRaw("text/html", "<html>"), upstream.ErrMalformed, "content type"},
		{"accepted", mcptest.ReplyStatus(202, ""), upstream.ErrMalformed, ""},
		{"stream without response", mcptest.ReplySSE(`data: {"jsonrpc":"2.0","method":"notifications/message","params":{}}`), nil, "ended without the response"},
		{"server error", mcptest.ReplyStatus(502, "bad gateway"), nil, "HTTP 502: bad gateway"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			s := mcptest.NewScripted(t)
			scriptModern(s)
			s.On(mcptest.Route{Method: "POST", RPC: "tools/call", Reply: tt.reply})
			c := start(t, httpOptions(s.URL))
			_, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"x"}`))
			if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("Call = %v, want %v containing %q", err, tt.wantErr, tt.wantMsg)
			}
			// The client stays usable.
			if st := c.State(); st.Phase != upstream.Ready {
				t.Errorf("state = %v", st.Phase)
			}
		})
	}
}

func TestHTTPResponseStreamParsing(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := mcptest.NewScripted(t)
	scriptModern(s)
	s.On(mcptest.Route{Method: "POST", RPC: "tools/call", Reply: mcptest.ReplySSE(
		": a comment\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\r\ndata: \"params\":{\"progress\":1}}\r",
		"event: ignored\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/ignored\"}",
		"id: 1\nretry: 10\ndata:{\"jsonrpc\":\"2.0\",\"id\":$ID,\n\ndata: not json\n",
		"data: {\"jsonrpc\":\"2.0\",\"id\":$ID,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"done\"}]}}",
	)})
	var mu sync.Mutex
	var notes []string
	opts := httpOptions(s.URL)
	opts.OnNotification = func(n *jsonrpc.Message) {
		mu.Lock()
		defer mu.Unlock()
		notes = append(notes, n.Method+" "+string(n.Params))
	}
	c := start(t, opts)
	if got := callTool(t, ctx, c, "x", `{}`); got != "done" {
		t.Errorf("result %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{`notifications/progress {"progress":1}`}, notes); diff != "" {
		t.Errorf("notifications (-want +got):\n%s", diff)
	}
}

func TestHTTPTimeout(t *testing.T) {
	tests := []struct {
		name       string
		legacy     bool
		wantCancel bool
	}{
		{"modern: closing the stream cancels", false, false},
		{"legacy: notifications/cancelled", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			s := mcptest.NewScripted(t)
			if tt.legacy {
				scriptLegacy(s, "s")
			} else {
				scriptModern(s)
			}
			s.On(mcptest.Route{Method: "POST", RPC: "tools/call", Reply: mcptest.ReplyNever})
			cancelled := make(chan *jsonrpc.Message, 1)
			s.On(mcptest.Route{Method: "POST", RPC: "notifications/cancelled", Optional: !tt.wantCancel, Reply: func(w http.ResponseWriter, r *mcptest.Request) {
				cancelled <- r.Msg
				w.WriteHeader(202)
			}})
			opts := httpOptions(s.URL)
			opts.Timeout = 300 * time.Millisecond
			c := start(t, opts)
			_, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"x"}`))
			if !errors.Is(err, upstream.ErrTimeout) {
				t.Fatalf("Call = %v, want ErrTimeout", err)
			}
			if tt.wantCancel {
				select {
				case m := <-cancelled:
					if id, _ := jsonrpc.Field(m.Params, "requestId"); len(id) == 0 {
						t.Errorf("cancelled params %s", m.Params)
					}
				case <-ctx.Done():
					t.Fatal("no notifications/cancelled")
				}
			}
			c.Close() // no cancellation may follow (the scripted server checks unexpected requests)
		})
	}
}

func TestHTTPCallerCancels(t *testing.T) {
	t.Parallel()
	s := mcptest.NewScripted(t)
	scriptModern(s)
	arrived := make(chan struct{})
	s.On(mcptest.Route{Method: "POST", RPC: "tools/call", Reply: func(w http.ResponseWriter, r *mcptest.Request) {
		close(arrived)
		mcptest.ReplyNever(w, r)
	}})
	c := start(t, httpOptions(s.URL))
	ctx, cancel := context.WithCancel(testCtx(t))
	go func() {
		<-arrived
		cancel()
	}()
	if _, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"x"}`)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Call = %v, want context.Canceled", err)
	}
}

func TestHTTPDiscoverErrors(t *testing.T) {
	tests := []struct {
		name    string
		reply   func(http.ResponseWriter, *mcptest.Request)
		era     upstream.Era
		wantErr string
	}{
		{"unsupported version listing legacy ones", mcptest.ReplyError(400, -32022, "unsupported", `{"supported":["2025-06-18"],"requested":"2026-07-28"}`), upstream.EraLegacy, ""},
		{"header mismatch", mcptest.ReplyError(400, -32020, "header mismatch", ""), upstream.EraModern, ""},
		{"unsupported versions only", mcptest.ReplyError(400, -32022, "unsupported", `{"supported":["2099-01-01"]}`), upstream.EraUnknown, "no protocol version in common"},
		{"method not found", mcptest.ReplyError(200, -32601, "unknown method", ""), upstream.EraLegacy, ""},
		{"405", mcptest.ReplyStatus(405, ""), upstream.EraLegacy, ""},
		{"modern error without id", func(w http.ResponseWriter, _ *mcptest.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32022,"message":"x","data":{"supported":["2026-07-28"]}}}`))
		}, upstream.EraUnknown, "rejected protocol version 2026-07-28"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mcptest.NewScripted(t)
			s.On(mcptest.Route{Method: "POST", RPC: "server/discover", Reply: tt.reply})
			if tt.era == upstream.EraLegacy {
				scriptInit(s, "s")
				s.On(mcptest.Route{Method: "GET", Optional: true, Reply: mcptest.ReplyStatus(405, "")})
				s.On(mcptest.Route{Method: "DELETE", Optional: true, Reply: mcptest.ReplyStatus(405, "")})
			}
			c := newClient(t, httpOptions(s.URL))
			err := c.Start(testCtx(t))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Start = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Era() != tt.era {
				t.Errorf("era = %v, want %v", c.Era(), tt.era)
			}
		})
	}
}

func TestLegacyGETStream(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := mcptest.NewScripted(t)
	s.On(mcptest.Route{Method: "POST", RPC: "server/discover", Reply: mcptest.ReplyStatus(404, "")})
	scriptInit(s, "g")
	s.On(mcptest.Route{Method: "GET", Session: "g", Times: 1, Reply: mcptest.ReplySSE(
		`id: e1` + "\n" + `data: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)})
	lastEventID := make(chan string, 1)
	s.On(mcptest.Route{Method: "GET", Session: "g", Times: 1, Reply: func(w http.ResponseWriter, r *mcptest.Request) {
		lastEventID <- r.Header.Get("Last-Event-ID")
		mcptest.ReplySSE(`data: {"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`)(w, r)
	}})
	s.On(mcptest.Route{Method: "GET", Session: "g", Optional: true, Reply: mcptest.ReplyStatus(405, "")})
	s.On(mcptest.Route{Method: "DELETE", Session: "g", Times: 1, Reply: mcptest.ReplyStatus(204, "")})
	got := make(chan string, 10)
	opts := httpOptions(s.URL)
	opts.OnNotification = func(n *jsonrpc.Message) { got <- n.Method }
	c := start(t, opts)
	for _, want := range []string{"notifications/tools/list_changed", "notifications/resources/list_changed"} {
		select {
		case m := <-got:
			if m != want {
				t.Errorf("notification %q, want %q", m, want)
			}
		case <-ctx.Done():
			t.Fatalf("no %s", want)
		}
	}
	if id := <-lastEventID; id != "e1" {
		t.Errorf("reconnect Last-Event-ID = %q, want e1", id)
	}
	c.Close()
	var del *mcptest.Request
	for _, r := range s.Requests() {
		if r.Method == http.MethodDelete {
			del = r
		}
	}
	if del == nil || del.Header.Get("Authorization") != "Bearer secret" {
		t.Errorf("DELETE = %v", del)
	}
}

func TestHTTPConnectionDropped(t *testing.T) {
	t.Parallel()
	s := mcptest.NewScripted(t)
	c := newClient(t, httpOptions(s.URL))
	s.On(mcptest.Route{Method: "POST", Reply: func(w http.ResponseWriter, r *mcptest.Request) {
		// Hijack and drop the connection: a transport failure, not an
		// HTTP answer.
		hj, _ := w.(http.Hijacker)
		conn, _, _ := hj.Hijack()
		conn.Close()
	}})
	err := c.Start(testCtx(t))
	if err == nil || c.State().Phase != upstream.Failed {
		t.Fatalf("Start = %v, state %v", err, c.State().Phase)
	}
}

// A POST answered with a redirect is sent again where it points, as
// net/http's client does (307 and 308 keep the method and the body).
func TestHTTPRedirectedPosts(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Stateless: true, JSONResponse: true})
	var redirected sync.Map
	moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		redirected.Store(r.Method, true)
		http.Redirect(w, r, srv.URL, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(moved.Close)
	c := start(t, httpOptions(moved.URL+"/old"))
	if got := callTool(t, ctx, c, "echo", `{"text":"moved"}`); !strings.Contains(got, "moved") {
		t.Errorf("echo through a redirect = %s", got)
	}
	if _, ok := redirected.Load(http.MethodPost); !ok {
		t.Error("the POSTs never went to the old address")
	}
}
