package server

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcpheader"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeDispatcher answers from a table and records the callers it saw.
type fakeDispatcher struct {
	mu      sync.Mutex
	callers []router.Caller
	methods []string
	replies map[string]*router.Reply
	// subscribed records SubscribeResource calls as "key uri".
	subscribed []string
	// dropped records HostGone keys, and droppedCh signals them.
	dropped   []string
	droppedCh chan string
	// traces are the trace contexts the requests arrived with.
	traces []trace.SpanContext
	// interactive, if set, answers tools/call instead of replies.
	interactive func(ctx context.Context, c *router.Caller, req *jsonrpc.Request) *router.Reply
}

func (d *fakeDispatcher) Dispatch(ctx context.Context, c *router.Caller, req *jsonrpc.Request) *router.Reply {
	d.mu.Lock()
	d.callers = append(d.callers, *c)
	d.methods = append(d.methods, req.Method)
	d.traces = append(d.traces, trace.SpanContextFromContext(ctx))
	interactive := d.interactive
	d.mu.Unlock()
	if interactive != nil && req.Method == "tools/call" {
		return interactive(ctx, c, req)
	}
	d.mu.Lock()
	r, ok := d.replies[req.Method]
	d.mu.Unlock()
	if ok {
		return r
	}
	return &router.Reply{Error: jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "Method not found: %s", req.Method)}
}

func (d *fakeDispatcher) InitializeResult(v string) json.RawMessage {
	return json.RawMessage(`{"protocolVersion":"` + v + `","capabilities":{},"serverInfo":{"name":"gw","version":"0"}}`)
}
func (d *fakeDispatcher) ParamBindings(_, tool string) []mcpheader.Binding {
	if tool == "sql" {
		return []mcpheader.Binding{{Header: "Region", Path: []string{"region"}}, {Header: "Limit", Path: []string{"opts", "limit"}}}
	}
	return nil
}
func (d *fakeDispatcher) Status() []router.UpstreamStatus { return nil }
func (d *fakeDispatcher) Views() []router.ViewStatus      { return nil }
func (d *fakeDispatcher) SubscribeResource(_ context.Context, _ *router.Caller, key, uri string) *jsonrpc.Error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if uri == "nope://x" {
		return jsonrpc.NewError(jsonrpc.CodeInvalidParams, "Resource not found")
	}
	d.subscribed = append(d.subscribed, key+" "+uri)
	return nil
}
func (d *fakeDispatcher) HostGone(key string) {
	d.mu.Lock()
	d.dropped = append(d.dropped, key)
	d.mu.Unlock()
	select {
	case d.droppedCh <- key:
	default:
	}
}
func (d *fakeDispatcher) Ready() bool { return true }

func (d *fakeDispatcher) lastCaller() router.Caller {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.callers[len(d.callers)-1]
}

func newTestServer(t *testing.T, opts *Options) (*httptest.Server, *fakeDispatcher) {
	t.Helper()
	ts, d, _ := newTestServerWith(t, opts)
	return ts, d
}

func newTestServerWith(t *testing.T, opts *Options) (*httptest.Server, *fakeDispatcher, *Server) {
	t.Helper()
	d := &fakeDispatcher{droppedCh: make(chan string, 16), replies: map[string]*router.Reply{
		"tools/list":      {Result: json.RawMessage(`{"tools":[]}`)},
		"tools/call":      {Result: json.RawMessage(`{"content":[{"type":"text","text":"hi"}]}`), LacksResultType: true},
		"prompts/get":     {Result: json.RawMessage(`{ }`), LacksResultType: true},
		"server/discover": {Result: json.RawMessage(`{"resultType":"complete","supportedVersions":["2026-07-28"]}`)},
		"needs/caps":      {Error: jsonrpc.NewError(jsonrpc.CodeMissingRequiredClientCapability, "Missing required client capability: sampling")},
	}}
	if opts == nil {
		opts = &Options{}
	}
	s := New(d, opts)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.Close()
		ts.Close()
	})
	return ts, d, s
}

type response struct {
	status int
	header http.Header
	body   string
	msg    *jsonrpc.Message
}

func do(t *testing.T, ts *httptest.Server, method string, headers map[string]string, body string) response {
	t.Helper()
	return doAt(t, ts, "/mcp", method, headers, body)
}

// doAt is do on another path.
func doAt(t *testing.T, ts *httptest.Server, path, method string, headers map[string]string, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := response{status: resp.StatusCode, header: resp.Header, body: string(b)}
	if len(b) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		r.msg, err = jsonrpc.Decode(b)
		if err != nil {
			t.Fatalf("response body %q: %v", b, err)
		}
	}
	return r
}

func wantError(t *testing.T, r response, status int, code int64, contains string) {
	t.Helper()
	if r.status != status {
		t.Errorf("status = %d, want %d (body %s)", r.status, status, r.body)
	}
	if r.msg == nil || r.msg.Error == nil {
		t.Fatalf("body %q is not a JSON-RPC error", r.body)
	}
	if r.msg.Error.Code != code || !strings.Contains(r.msg.Error.Message, contains) {
		t.Errorf("error = %d %q, want %d containing %q", r.msg.Error.Code, r.msg.Error.Message, code, contains)
	}
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func TestLegacySession(t *testing.T) {
	ts, d := newTestServer(t, nil)
	r := do(t, ts, "POST", nil, initBody)
	sid := r.header.Get("Mcp-Session-Id")
	if r.status != 200 || len(sid) != 32 {
		t.Fatalf("initialize: status %d, session id %q", r.status, sid)
	}
	if v, _ := jsonrpc.StringField(r.msg.Result, "protocolVersion"); v != "2025-06-18" {
		t.Errorf("negotiated %q, want the client's supported version", v)
	}
	h := map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}
	if r := do(t, ts, "POST", h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.status != 202 {
		t.Errorf("initialized notification: status %d, want 202", r.status)
	}
	r = do(t, ts, "POST", h, `{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"a"}}`)
	if r.status != 200 || string(r.msg.ID) != `"x"` || string(r.msg.Result) != `{"content":[{"type":"text","text":"hi"}]}` {
		t.Errorf("tools/call: %d %s", r.status, r.body)
	}
	if c := d.lastCaller(); c.ProtocolVersion != "2025-06-18" || c.Session != sid {
		t.Errorf("caller = %+v", c)
	}

	// Another supported legacy version is accepted, as the SDKs do; an
	// unsupported one is a 400.
	if r := do(t, ts, "POST", map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-03-26"}, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); r.status != 200 {
		t.Errorf("supported legacy version header: status %d", r.status)
	}
	wantError(t, do(t, ts, "POST", map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2024-01-01"}, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`),
		400, jsonrpc.CodeInvalidRequest, "unsupported MCP-Protocol-Version")
	wantError(t, do(t, ts, "POST", h, initBody), 400, jsonrpc.CodeInvalidRequest, "already initialized")
	wantError(t, do(t, ts, "POST", map[string]string{"Mcp-Session-Id": "0123"}, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`),
		404, jsonrpc.CodeInvalidRequest, "Session not found")
	wantError(t, do(t, ts, "POST", nil, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`),
		400, jsonrpc.CodeInvalidRequest, "missing Mcp-Session-Id")

	if r := do(t, ts, "DELETE", h, ""); r.status != 204 {
		t.Errorf("DELETE: status %d, want 204", r.status)
	}
	wantError(t, do(t, ts, "POST", h, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`), 404, jsonrpc.CodeInvalidRequest, "Session not found")
	wantError(t, do(t, ts, "DELETE", h, ""), 404, jsonrpc.CodeInvalidRequest, "Session not found")
}

func TestLegacyGetStream(t *testing.T) {
	ts, _ := newTestServer(t, nil)
	sid := do(t, ts, "POST", nil, initBody).header.Get("Mcp-Session-Id")

	req, _ := http.NewRequest("GET", ts.URL+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	wantError(t, do(t, ts, "GET", map[string]string{"Mcp-Session-Id": sid, "Accept": "text/event-stream"}, ""),
		409, jsonrpc.CodeInvalidRequest, "already has a GET stream")

	// Deleting the session ends its stream: the body reaches EOF.
	if r := do(t, ts, "DELETE", map[string]string{"Mcp-Session-Id": sid}, ""); r.status != 204 {
		t.Fatalf("DELETE: %d", r.status)
	}
	if _, err := io.Copy(io.Discard, bufio.NewReader(resp.Body)); err != nil {
		t.Errorf("stream did not end cleanly: %v", err)
	}
	wantError(t, do(t, ts, "GET", nil, ""), 405, jsonrpc.CodeInvalidRequest, "needs an Mcp-Session-Id")
}

func modernHeaders(method, name string) map[string]string {
	h := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
	if name != "" {
		h["Mcp-Name"] = name
	}
	return h
}

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

func TestModernRequests(t *testing.T) {
	ts, d := newTestServer(t, nil)
	call := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"a__b",` + modernMeta + `}}`

	r := do(t, ts, "POST", modernHeaders("tools/call", "a__b"), call)
	if r.status != 200 || string(r.msg.Result) != `{"resultType":"complete","content":[{"type":"text","text":"hi"}]}` {
		t.Errorf("modern tools/call: %d %s", r.status, r.body)
	}
	if r.header.Get("Mcp-Session-Id") != "" {
		t.Error("a modern request was given a session id")
	}
	if c := d.lastCaller(); c.ProtocolVersion != "2026-07-28" || c.Session != "" {
		t.Errorf("caller = %+v", c)
	}
	r = do(t, ts, "POST", modernHeaders("prompts/get", "p"), `{"jsonrpc":"2.0","id":6,"method":"prompts/get","params":{"name":"p",`+modernMeta+`}}`)
	if string(r.msg.Result) != `{"resultType":"complete"}` {
		t.Errorf("empty result with resultType = %s", r.msg.Result)
	}
	encoded := "=?base64?" + base64.StdEncoding.EncodeToString([]byte("wëird name")) + "?="
	if r := do(t, ts, "POST", modernHeaders("tools/call", encoded), `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"wëird name",`+modernMeta+`}}`); r.status != 200 {
		t.Errorf("base64 Mcp-Name: %d %s", r.status, r.body)
	}

	tests := []struct {
		name    string
		headers map[string]string
		body    string
		status  int
		code    int64
		msg     string
	}{
		{"name mismatch", modernHeaders("tools/call", "other"), call, 400, jsonrpc.CodeHeaderMismatch, `"other" does not match body value "a__b"`},
		{"missing name", modernHeaders("tools/call", ""), call, 400, jsonrpc.CodeHeaderMismatch, "Mcp-Name header is required"},
		{"method mismatch", modernHeaders("tools/list", "a__b"), call, 400, jsonrpc.CodeHeaderMismatch, "Mcp-Method"},
		{"missing version header", map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "a__b"}, call, 400, jsonrpc.CodeHeaderMismatch, "MCP-Protocol-Version header is required"},
		{"missing meta", modernHeaders("tools/list", ""), `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, 400, jsonrpc.CodeInvalidParams, "protocolVersion"},
		{"missing capabilities", modernHeaders("tools/list", ""), `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, 400, jsonrpc.CodeInvalidParams, "clientCapabilities"},
		{"unsupported version", map[string]string{"MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/list"},
			`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			400, jsonrpc.CodeUnsupportedProtocolVersion, "Unsupported protocol version"},
		{"unknown method is 404", modernHeaders("nope/nope", ""), `{"jsonrpc":"2.0","id":1,"method":"nope/nope","params":{` + modernMeta + `}}`, 404, jsonrpc.CodeMethodNotFound, "nope/nope"},
		{"modern initialize is 404", modernHeaders("initialize", ""), `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-07-28",` + modernMeta + `}}`, 404, jsonrpc.CodeMethodNotFound, "initialize"},
		{"task id mismatch", modernHeaders("tasks/get", "gw-task-other"), `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"gw-task-1",` + modernMeta + `}}`, 400, jsonrpc.CodeHeaderMismatch, `"gw-task-other" does not match body value "gw-task-1"`},
		{"task id without Mcp-Name", modernHeaders("tasks/cancel", ""), `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"taskId":"gw-task-1",` + modernMeta + `}}`, 400, jsonrpc.CodeHeaderMismatch, "Mcp-Name header is required for tasks/cancel"},
		{"upstream's missing capability is 400", modernHeaders("needs/caps", ""), `{"jsonrpc":"2.0","id":1,"method":"needs/caps","params":{` + modernMeta + `}}`, 400, jsonrpc.CodeMissingRequiredClientCapability, "sampling"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, do(t, ts, "POST", tt.headers, tt.body), tt.status, tt.code, tt.msg)
		})
	}
	r = do(t, ts, "POST", map[string]string{"MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/list"},
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	if !strings.Contains(string(r.msg.Error.Data), `"supported":["2026-07-28","2025-11-25"`) {
		t.Errorf("unsupported version data = %s, want the supported list", r.msg.Error.Data)
	}
}

func TestBadInput(t *testing.T) {
	ts, _ := newTestServer(t, &Options{MaxBodyBytes: 1024, Loopback: true, AllowedOrigins: []string{"https://app.example.com"}})
	tests := []struct {
		name    string
		method  string
		headers map[string]string
		body    string
		status  int
		code    int64
		msg     string
	}{
		{"malformed JSON", "POST", nil, `{"jsonrpc":"2.0","id":1,`, 400, jsonrpc.CodeParseError, "parse error"},
		{"not JSON-RPC", "POST", nil, `{"hello":"world"}`, 400, jsonrpc.CodeInvalidRequest, "jsonrpc"},
		{"batch", "POST", nil, `[` + initBody + `]`, 400, jsonrpc.CodeInvalidRequest, "batches"},
		{"oversize body", "POST", nil, `{"jsonrpc":"2.0","id":1,"method":"x","params":{"pad":"` + strings.Repeat("a", 2000) + `"}}`, 413, jsonrpc.CodeInvalidRequest, "larger than 1024 bytes"},
		{"foreign origin", "POST", map[string]string{"Origin": "https://evil.example"}, initBody, 403, jsonrpc.CodeInvalidRequest, "Origin"},
		{"null origin", "POST", map[string]string{"Origin": "null"}, initBody, 403, jsonrpc.CodeInvalidRequest, "Origin"},
		{"wrong content type", "POST", map[string]string{"Content-Type": "text/plain"}, initBody, 415, jsonrpc.CodeInvalidRequest, "Content-Type"},
		{"not acceptable", "POST", map[string]string{"Accept": "text/html"}, initBody, 406, jsonrpc.CodeInvalidRequest, "Accept"},
		{"wrong verb", "PUT", nil, initBody, 405, jsonrpc.CodeInvalidRequest, "PUT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, do(t, ts, tt.method, tt.headers, tt.body), tt.status, tt.code, tt.msg)
		})
	}
	// Allowed origins: loopback pages and the configured list.
	for _, origin := range []string{"http://localhost:3000", "http://127.0.0.1:8080", "https://app.example.com"} {
		if r := do(t, ts, "POST", map[string]string{"Origin": origin}, initBody); r.status != 200 {
			t.Errorf("origin %s: status %d, want 200", origin, r.status)
		}
	}
	// DNS rebinding: a foreign Host on a loopback listener.
	req, _ := http.NewRequest("POST", ts.URL+"/mcp", strings.NewReader(initBody))
	req.Host = "attacker.example:80"
	req.Header.Set("Content-Type", "application/json")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("foreign Host: status %d, want 403", resp.StatusCode)
	}
	// The server keeps serving after all of that.
	if r := do(t, ts, "POST", nil, initBody); r.status != 200 {
		t.Errorf("after bad input: status %d", r.status)
	}
}

func TestSSEOnlyClientGetsAnEvent(t *testing.T) {
	ts, _ := newTestServer(t, nil)
	r := do(t, ts, "POST", map[string]string{"Accept": "text/event-stream"}, initBody)
	if r.header.Get("Content-Type") != "text/event-stream" || !strings.HasPrefix(r.body, "event: message\ndata: {") || !strings.HasSuffix(r.body, "}\n\n") {
		t.Errorf("SSE answer: %q %q", r.header.Get("Content-Type"), r.body)
	}
}

func TestHealthAndReady(t *testing.T) {
	ts, _ := newTestServer(t, nil)
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := ts.Client().Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
	}
}

func TestModernParamHeaders(t *testing.T) {
	ts, _ := newTestServer(t, nil)
	body := func(args string) string {
		return `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"sql","arguments":` + args + `,` + modernMeta + `}}`
	}
	with := func(extra map[string]string) map[string]string {
		h := modernHeaders("tools/call", "sql")
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	ok := []struct {
		name    string
		headers map[string]string
		args    string
	}{
		{"both headers", map[string]string{"Mcp-Param-Region": "us-west1", "Mcp-Param-Limit": "42"}, `{"region":"us-west1","opts":{"limit":42}}`},
		{"number compared numerically", map[string]string{"Mcp-Param-Region": "eu", "Mcp-Param-Limit": "42"}, `{"region":"eu","opts":{"limit":42.0}}`},
		{"null value needs no header", map[string]string{"Mcp-Param-Region": "eu"}, `{"region":"eu","opts":{"limit":null}}`},
		{"base64 value", map[string]string{"Mcp-Param-Region": mcpheader.Encode("Zürich")}, `{"region":"Zürich"}`},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			if r := do(t, ts, "POST", with(tt.headers), body(tt.args)); r.status != 200 {
				t.Errorf("status %d: %s", r.status, r.body)
			}
		})
	}
	bad := []struct {
		name    string
		headers map[string]string
		args    string
		msg     string
	}{
		{"missing header", map[string]string{"Mcp-Param-Limit": "1"}, `{"region":"eu","opts":{"limit":1}}`, "Mcp-Param-Region header is required"},
		{"mismatch", map[string]string{"Mcp-Param-Region": "us", "Mcp-Param-Limit": "1"}, `{"region":"eu","opts":{"limit":1}}`, `value "us" does not match body value "eu"`},
		{"bad base64", map[string]string{"Mcp-Param-Region": "=?base64?!!!?="}, `{"region":"eu"}`, "bad base64"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, do(t, ts, "POST", with(tt.headers), body(tt.args)), 400, jsonrpc.CodeHeaderMismatch, tt.msg)
		})
	}
}

// TestTraceContextAndIdentityReachTheRouter: with tracing on, a host's
// traceparent header becomes the request's trace context, and the
// caller's key id (never the key) reaches the router for the audit log.
func TestTraceContextAndIdentityReachTheRouter(t *testing.T) {
	tel, err := telemetry.New(context.Background(), telemetry.Options{SpanProcessor: tracetest.NewSpanRecorder(), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := policy.NewAPIKeys(map[string][]string{"data": {"secret-key-0001"}})
	if err != nil {
		t.Fatal(err)
	}
	ts, d, _ := newTestServerWith(t, &Options{Telemetry: tel, Identify: keys.Identify})
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	r := do(t, ts, "POST", map[string]string{
		"Authorization":        "Bearer secret-key-0001",
		"traceparent":          "00-" + traceID + "-00f067aa0ba902b7-01",
		"Mcp-Method":           "tools/list",
		"MCP-Protocol-Version": "2026-07-28",
	}, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.traces) != 1 || d.traces[0].TraceID().String() != traceID {
		t.Errorf("trace context reaching the router: %v, want trace %s", d.traces, traceID)
	}
	if got := d.callers[0].Identity; !strings.HasPrefix(got, "sha256:") || strings.Contains(got, "secret") {
		t.Errorf("caller identity %q, want the key's digest id", got)
	}
}
