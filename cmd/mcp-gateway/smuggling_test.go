package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

// smuggleTarget is one upstream's allowed and hidden names. A smuggling
// attempt names an allowed one first and a hidden one second (or in
// another spelling), which a first-member lookup and the upstream's
// parser would read differently.
type smuggleTarget struct {
	upstream                 string
	tool, hiddenTool         string
	resource, hiddenResource string
	// prompt and completion are allowed prompts; hiddenPrompt a hidden
	// one ("" when the upstream has only one prompt).
	prompt, completion, hiddenPrompt string
}

func (tg smuggleTarget) allowed() []string {
	var out []string
	for _, name := range []string{tg.tool, tg.prompt, tg.resource, tg.completion} {
		if name != "" {
			out = append(out, tg.upstream+"__"+name)
		}
	}
	return out
}

// TestSmugglingEndToEnd: a team's allow-list holds against every way of
// making the gateway and an upstream read one request differently (a
// repeated member, an escaped spelling, a case variant, a repeated
// progress token or method), in both host eras, against the official Go
// SDK server over stdio and Streamable HTTP and against server-everything
// over stdio and Streamable HTTP. Each attempt gets HTTP 400 with -32600
// naming the member; nothing hidden runs (the HTTP Go SDK server sees no
// request for a hidden name, and the audit log names nothing hidden);
// the allowed names still work.
func TestSmugglingEndToEnd(t *testing.T) {
	sdk := smuggleTarget{tool: "echo", hiddenTool: "headers", resource: "test://static/hello", hiddenResource: "test://static/world", prompt: "greet"}
	t.Run("go-sdk", func(t *testing.T) {
		var mu sync.Mutex
		var seen []string // Mcp-Method and Mcp-Name of each request the HTTP server got
		server := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Stateless: true, Inspect: func(r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, r.Header.Get("Mcp-Method")+" "+r.Header.Get("Mcp-Name"))
		}})
		stdio, remote := sdk, sdk
		stdio.upstream, remote.upstream = "sdk", "sdkhttp"
		smuggle(t, []config.Upstream{stdioUpstream("sdk", "echo", nil), httpUpstream("sdkhttp", server.URL)}, []smuggleTarget{stdio, remote})
		mu.Lock()
		defer mu.Unlock()
		for _, s := range seen {
			if strings.HasSuffix(s, " headers") || strings.HasSuffix(s, "static/world") {
				t.Errorf("the Go SDK HTTP server was sent %q", s)
			}
		}
		if !strings.Contains(strings.Join(seen, "\n"), "tools/call echo") {
			t.Errorf("the Go SDK HTTP server never saw the allowed call: %q", seen)
		}
	})
	t.Run("server-everything", func(t *testing.T) {
		dir := interopDir(t)
		everything := smuggleTarget{tool: "echo", hiddenTool: "get-env",
			resource: "demo://resource/static/document/architecture.md", hiddenResource: "demo://resource/static/document/features.md",
			prompt: "simple-prompt", completion: "completable-prompt", hiddenPrompt: "args-prompt"}
		var ups []config.Upstream
		var targets []smuggleTarget
		for _, transport := range []string{"stdio", "streamable-http"} {
			u := everythingUpstream(t, dir, transport)
			u.Name = "everything_" + strings.ReplaceAll(transport, "-", "_")
			everything.upstream = u.Name
			ups, targets = append(ups, u), append(targets, everything)
		}
		smuggle(t, ups, targets)
	})
}

// smuggle serves ups to a team allowed only the targets' allowed names,
// and tries every attempt on each target in both eras.
func smuggle(t *testing.T, ups []config.Upstream, targets []smuggleTarget) {
	cfg := config.Default()
	cfg.Upstreams = ups
	var allow []string
	for _, tg := range targets {
		allow = append(allow, tg.allowed()...)
	}
	const key = "smuggler-key-0123456789"
	cfg.Auth.Mode = config.AuthAPIKey
	cfg.Teams = []config.Team{{Name: "t", APIKeys: []string{key}, Allow: allow}}
	var audit mcptest.LogBuffer
	url, _, _ := startGatewayWith(t, cfg, recorders{audit: telemetry.NewAudit(&audit, false)})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	post := func(headers map[string]string, body string) (int, http.Header, *jsonrpc.Message) {
		t.Helper()
		h := map[string]string{"Authorization": "Bearer " + key}
		for k, v := range headers {
			h[k] = v
		}
		return postRaw(ctx, t, url, h, body)
	}
	_, h, init := post(nil, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"smuggler","version":"1"}}}`)
	if init.Error != nil {
		t.Fatalf("initialize: %v", init.Error)
	}
	legacy := map[string]string{"Mcp-Session-Id": h.Get("Mcp-Session-Id"), "MCP-Protocol-Version": "2025-11-25"}
	const modernMeta = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	// request makes a request of params (members without braces) in
	// either era; a modern request's _meta gets the per-request members,
	// in place of {meta} when params has it.
	request := func(era, method, mcpName, params string) (map[string]string, string) {
		headers := legacy
		if era == "modern" {
			headers = map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
			if mcpName != "" {
				headers["Mcp-Name"] = mcpName
			}
			if strings.Contains(params, "{meta}") {
				params = strings.Replace(params, "{meta}", modernMeta, 1)
			} else {
				params = `"_meta":{` + modernMeta + `},` + params
			}
		}
		return headers, `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + params + `}}`
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }

	type attempt struct{ what, method, mcpName, params, want string }
	for _, era := range []string{"legacy", "modern"} {
		for _, tg := range targets {
			tool, hidden := tg.upstream+"__"+tg.tool, tg.upstream+"__"+tg.hiddenTool
			const args = `"arguments":{"message":"hi","text":"hi"}`
			attempts := []attempt{
				{"repeated name", "tools/call", tool, `"name":` + q(tool) + `,"name":` + q(hidden) + `,` + args, `member "name" appears more than once in params`},
				{"escaped repeat", "tools/call", tool, `"name":` + q(tool) + `,"na\u006de":` + q(hidden) + `,` + args, `member "name" appears more than once in params`},
				{"escaped first", "tools/call", tool, `"\u006eame":` + q(tool) + `,"name":` + q(hidden) + `,` + args, `member "name" appears more than once in params`},
				{"case variant", "tools/call", tool, `"name":` + q(tool) + `,"Name":` + q(hidden) + `,` + args, `member "Name" in params differs only in case from "name"`},
				{"repeated progress token", "tools/call", tool, `"_meta":{{meta},"progressToken":"a","progressToken":"gw-1"},"name":` + q(tool) + `,` + args, `member "progressToken" appears more than once in params._meta`},
				{"repeated uri", "resources/read", tg.resource, `"uri":` + q(tg.resource) + `,"uri":` + q(tg.hiddenResource), `member "uri" appears more than once in params`},
			}
			if era == "legacy" {
				attempts[4].params = `"_meta":{"progressToken":"a","progressToken":"gw-1"},"name":` + q(tool) + `,` + args
			}
			if tg.hiddenPrompt != "" {
				prompt, hiddenPrompt := tg.upstream+"__"+tg.prompt, tg.upstream+"__"+tg.hiddenPrompt
				completion := tg.upstream + "__" + tg.completion
				attempts = append(attempts,
					attempt{"repeated prompt", "prompts/get", prompt, `"name":` + q(prompt) + `,"name":` + q(hiddenPrompt), `member "name" appears more than once in params`},
					attempt{"prompt in capitals", "prompts/get", prompt, `"name":` + q(prompt) + `,"NAME":` + q(hiddenPrompt), `member "NAME" in params differs only in case from "name"`},
					attempt{"repeated completion ref", "completion/complete", "",
						`"ref":{"type":"ref/prompt","name":` + q(completion) + `,"name":` + q(hiddenPrompt) + `},"argument":{"name":"a","value":""}`,
						`member "name" appears more than once in params.ref`})
			}
			for _, a := range attempts {
				headers, body := request(era, a.method, a.mcpName, a.params)
				status, _, m := post(headers, body)
				if status != http.StatusBadRequest || m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidRequest || !strings.Contains(m.Error.Message, a.want) {
					t.Errorf("%s %s %s: HTTP %d, answer %+v %s, want 400 -32600 saying %q", era, tg.upstream, a.what, status, m.Error, m.Result, a.want)
				}
			}
			headers, body := request(era, "tools/list", "", `"name":`+q(hidden))
			body = strings.Replace(body, `"method":"tools/list"`, `"method":"tools/list","method":"tools/call"`, 1)
			if status, _, m := post(headers, body); status != http.StatusBadRequest || m.Error == nil || !strings.Contains(m.Error.Message, `member "method" appears more than once in the message`) {
				t.Errorf("%s %s repeated method: HTTP %d %+v", era, tg.upstream, status, m.Error)
			}

			// The allowed names work; the hidden ones are unknown.
			headers, body = request(era, "tools/call", tool, `"name":`+q(tool)+`,`+args)
			if status, _, m := post(headers, body); status != 200 || m.Error != nil || !strings.Contains(string(m.Result), "hi") {
				t.Errorf("%s calling %s: HTTP %d %+v %s", era, tool, status, m.Error, m.Result)
			}
			headers, body = request(era, "resources/read", tg.resource, `"uri":`+q(tg.resource))
			if status, _, m := post(headers, body); status != 200 || m.Error != nil {
				t.Errorf("%s reading %s: HTTP %d %+v", era, tg.resource, status, m.Error)
			}
			// A hidden tool answers as an unknown one, even where its
			// schema binds an argument to a header the request lacks
			// (the Go SDK's "headers" binds region to Mcp-Param-Region).
			headers, body = request(era, "tools/call", hidden, `"name":`+q(hidden)+`,"arguments":{"region":"eu","message":"hi"}`)
			if _, _, m := post(headers, body); m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidParams || m.Error.Message != "Unknown tool: "+hidden {
				t.Errorf("%s calling hidden %s: %+v %s, want -32602 Unknown tool", era, hidden, m.Error, m.Result)
			}
		}
	}
	records := strings.TrimSpace(audit.String())
	if !strings.Contains(records, `"upstream_name":"echo"`) {
		t.Errorf("the audit log lacks the allowed calls:\n%s", records)
	}
	for line := range strings.SplitSeq(records, "\n") {
		var rec struct {
			Upstream string `json:"upstream"`
			Name     string `json:"upstream_name"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		for _, tg := range targets {
			if rec.Upstream == tg.upstream && (rec.Name == tg.hiddenTool || rec.Name == tg.hiddenResource || rec.Name == tg.hiddenPrompt && rec.Name != "") {
				t.Errorf("the audit log names a hidden %s: %s", rec.Name, line)
			}
		}
	}
}

// TestBoundArgumentSpelledTwice: an argument a tool binds to a header
// (the Go SDK server's "headers" binds region to Mcp-Param-Region) given
// twice in different case is refused with -32600 in both host eras,
// before it reaches the upstream: the header would say one value, and an
// upstream that matches names case-insensitively might read the other.
func TestBoundArgumentSpelledTwice(t *testing.T) {
	var mu sync.Mutex
	var regions []string
	server := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Stateless: true, Inspect: func(r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tools/call" {
			mu.Lock()
			defer mu.Unlock()
			regions = append(regions, r.Header.Get("Mcp-Param-Region"))
		}
	}})
	cfg := config.Default()
	cfg.Upstreams = []config.Upstream{httpUpstream("sdk", server.URL)}
	url, _ := startGateway(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, h, _ := postRaw(ctx, t, url, nil, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}`)
	legacy := map[string]string{"Mcp-Session-Id": h.Get("Mcp-Session-Id"), "MCP-Protocol-Version": "2025-11-25"}
	modern := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "sdk__headers", "Mcp-Param-Region": "us-east"}
	const meta = `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	for _, era := range []struct {
		name    string
		headers map[string]string
		meta    string
	}{{"legacy", legacy, ""}, {"modern", modern, meta}} {
		_, _, m := postRaw(ctx, t, url, era.headers, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sdk__headers","arguments":{"region":"us-east","Region":"eu-west"}`+era.meta+`}}`)
		if m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidRequest || !strings.Contains(m.Error.Message, "two spellings") {
			t.Errorf("%s: %v %s, want -32600 saying the argument has two spellings", era.name, m.Error, m.Result)
		}
		_, _, m = postRaw(ctx, t, url, era.headers, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sdk__headers","arguments":{"region":"us-east"}`+era.meta+`}}`)
		if m.Error != nil || !strings.Contains(string(m.Result), "us-east") {
			t.Errorf("%s: the plain call: %v %s", era.name, m.Error, m.Result)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(regions) != 2 || regions[0] != "us-east" || regions[1] != "us-east" {
		t.Errorf("the upstream got calls with Mcp-Param-Region %q, want the two plain calls only", regions)
	}
}
