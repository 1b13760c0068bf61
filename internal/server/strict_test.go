package server

import (
	"bufio"
	"context"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// smuggling are requests that a first-member lookup and an upstream's
// parser (last member wins, or case-insensitive) would read differently.
// {meta} stands for the modern _meta members, or nothing for legacy.
var smuggling = []struct{ name, body, want string }{
	{"repeated name", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{meta}"name":"a","name":"hidden"}}`, `member "name" appears more than once in params`},
	{"escaped name", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{meta}"name":"a","na\u006de":"hidden"}}`, `member "name" appears more than once in params`},
	{"name in capitals", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{meta}"name":"a","NAME":"hidden"}}`, `member "NAME" in params differs only in case from "name"`},
	{"repeated uri", `{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{{meta}"uri":"file:///a","uri":"file:///hidden"}}`, `member "uri" appears more than once in params`},
	{"repeated prompt", `{"jsonrpc":"2.0","id":9,"method":"prompts/get","params":{{meta}"name":"p","name":"hidden"}}`, `member "name" appears more than once`},
	{"repeated completion ref", `{"jsonrpc":"2.0","id":9,"method":"completion/complete","params":{{meta}"ref":{"type":"ref/prompt","name":"p","name":"hidden"},"argument":{"name":"a","value":""}}}`, `member "name" appears more than once in params.ref`},
	{"repeated progress token", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"a","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"t","progressToken":"gw-1"}}}`, `member "progressToken" appears more than once in params._meta`},
	{"repeated method", `{"jsonrpc":"2.0","id":9,"method":"tools/list","method":"tools/call","params":{{meta}"name":"hidden"}}`, `member "method" appears more than once in the message`},
	{"lone surrogate", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{meta}"name":"a\udc00"}}`, `lone UTF-16 surrogate`},
}

// TestAmbiguousMessagesRefused: every smuggling attempt gets -32600
// naming the member, over HTTP in both eras and over stdio, and the
// router never sees it.
func TestAmbiguousMessagesRefused(t *testing.T) {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},`
	t.Run("http", func(t *testing.T) {
		ts, d := newTestServer(t, nil)
		sid := do(t, ts, "POST", nil, initBody).header.Get("Mcp-Session-Id")
		for _, era := range []string{"legacy", "modern"} {
			for _, tt := range smuggling {
				t.Run(era+"/"+tt.name, func(t *testing.T) {
					headers := map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}
					body := strings.ReplaceAll(tt.body, "{meta}", "")
					if era == "modern" {
						headers = modernHeaders("tools/call", "a")
						body = strings.ReplaceAll(tt.body, "{meta}", meta)
					}
					wantError(t, do(t, ts, "POST", headers, body), 400, jsonrpc.CodeInvalidRequest, tt.want)
				})
			}
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if i := slices.IndexFunc(d.methods, func(m string) bool { return m != "initialize" }); i >= 0 {
			t.Errorf("the router was asked %s", d.methods[i])
		}
	})
	t.Run("stdio", func(t *testing.T) {
		d := &fakeDispatcher{}
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan error, 1)
		go func() { done <- NewStdio(d, outW, nil).Serve(context.Background(), inR) }()
		lines := bufio.NewScanner(outR)
		for _, tt := range smuggling {
			for _, body := range []string{strings.ReplaceAll(tt.body, "{meta}", ""), strings.ReplaceAll(tt.body, "{meta}", meta)} {
				if _, err := io.WriteString(inW, body+"\n"); err != nil {
					t.Fatal(err)
				}
				if !lines.Scan() {
					t.Fatal("no answer")
				}
				m, err := jsonrpc.Decode(lines.Bytes())
				if err != nil || m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidRequest || !strings.Contains(m.Error.Message, tt.want) {
					t.Errorf("%s: answer %s, want -32600 saying %q", tt.name, lines.Bytes(), tt.want)
				}
			}
		}
		_ = inW.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		_ = outW.Close()
		if len(d.methods) != 0 {
			t.Errorf("the router was asked %v", d.methods)
		}
	})
}
