package upstream

import (
	"encoding/json"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

func TestModernMeta(t *testing.T) {
	c := &Client{clientInfo: json.RawMessage(`{"name":"gw","version":"1"}`)}
	const added = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"gw","version":"1"}`
	tests := []struct{ in, want string }{
		{``, `{"_meta":{` + added + `}}`},
		{`{"name":"x"}`, `{"name":"x","_meta":{` + added + `}}`},
		{`{"name" : "x", "_meta" : {"io.modelcontextprotocol/protocolVersion":"2025-06-18", "io.modelcontextprotocol/clientInfo":{"name":"host"}, "k":[1, 2]}}`,
			`{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"host"},"k":[1, 2],"io.modelcontextprotocol/clientCapabilities":{}}}`},
		{`{"_meta":null,"a":1}`, `{"_meta":{` + added + `},"a":1}`},
	}
	for _, tt := range tests {
		var in json.RawMessage
		if tt.in != "" {
			in = json.RawMessage(tt.in)
		}
		req := jsonrpc.NewOutgoing("tools/call", in)
		if err := c.modernMeta(req, "2026-07-28"); err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		if got := req.Params(); string(got) != tt.want {
			t.Errorf("modernMeta(%s)\n got %s\nwant %s", tt.in, got, tt.want)
		}
	}
	if err := c.modernMeta(jsonrpc.NewOutgoing("tools/call", json.RawMessage(`[1]`)), "2026-07-28"); err == nil {
		t.Error("array params accepted")
	}
}

func TestStripModernMeta(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"name":"x"}`, `{"name":"x"}`},
		{`{"_meta":{"progressToken":1}}`, `{"_meta":{"progressToken":1}}`},
		{`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{},"io.modelcontextprotocol/logLevel":"info"},"a":1}`,
			`{"_meta":{"io.modelcontextprotocol/logLevel":"info"},"a":1}`},
	}
	for _, tt := range tests {
		req := jsonrpc.NewOutgoing("tools/call", json.RawMessage(tt.in))
		stripModernMeta(req)
		if got := req.Params(); string(got) != tt.want {
			t.Errorf("stripModernMeta(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestClassify(t *testing.T) {
	res := func(s string) *jsonrpc.Message { return &jsonrpc.Message{Result: json.RawMessage(s)} }
	rpcErr := func(code int64, data string) *jsonrpc.Message {
		e := &jsonrpc.Error{Code: code, Message: "m"}
		if data != "" {
			e.Data = json.RawMessage(data)
		}
		return &jsonrpc.Message{Error: e}
	}
	tests := []struct {
		name string
		msg  *jsonrpc.Message
		want decision
	}{
		{"modern", res(`{"supportedVersions":["2025-11-25","2026-07-28"]}`), decision{era: EraModern, version: "2026-07-28"}},
		{"newer modern we do not know", res(`{"supportedVersions":["2027-01-01","2026-07-28"]}`), decision{era: EraModern, version: "2026-07-28"}},
		{"legacy versions only", res(`{"supportedVersions":["2025-06-18"]}`), decision{era: EraLegacy}},
		{"not a discover result", res(`{}`), decision{era: EraLegacy}},
		{"unsupported, retry", rpcErr(-32022, `{"supported":["2026-07-28"]}`), decision{retry: true, version: "2026-07-28"}},
		{"unsupported, legacy listed", rpcErr(-32022, `{"supported":["2025-03-26"]}`), decision{era: EraLegacy}},
		{"unsupported without data", rpcErr(-32022, ""), decision{era: EraLegacy}},
		{"header mismatch", rpcErr(-32020, ""), decision{era: EraModern, version: "2026-07-28"}},
		{"missing capability", rpcErr(-32021, ""), decision{era: EraModern, version: "2026-07-28"}},
		{"method not found", rpcErr(-32601, ""), decision{era: EraLegacy}},
		{"invalid params", rpcErr(-32602, ""), decision{era: EraLegacy}},
	}
	for _, tt := range tests {
		got := classify(tt.msg)
		got.result = nil
		if got.era != tt.want.era || got.version != tt.want.version || got.retry != tt.want.retry || got.err != nil {
			t.Errorf("%s: classify = %+v, want %+v", tt.name, got, tt.want)
		}
	}
	if d := classify(res(`{"supportedVersions":["2099-01-01"]}`)); d.err == nil {
		t.Error("no common version: no error")
	}
}

func TestStripSubscriptionID(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"uri":"a"}`, `{"uri":"a"}`},
		{`{"_meta":{"io.modelcontextprotocol/subscriptionId":7}}`, `{}`},
		{`{"_meta":{"io.modelcontextprotocol/subscriptionId":7},"uri":"a"}`, `{"uri":"a"}`},
		{`{"uri":"a","_meta":{"k":1,"io.modelcontextprotocol/subscriptionId":"s"}}`, `{"uri":"a","_meta":{"k":1}}`},
		// A mention outside _meta is left alone.
		{`{"note":"io.modelcontextprotocol/subscriptionId"}`, `{"note":"io.modelcontextprotocol/subscriptionId"}`},
	}
	for _, tt := range tests {
		m := &jsonrpc.Message{Method: "notifications/resources/updated", Params: json.RawMessage(tt.in)}
		got := stripSubscriptionID(m)
		if string(got.Params) != tt.want || got.Method != m.Method {
			t.Errorf("stripSubscriptionID(%s) = %s %s, want %s", tt.in, got.Method, got.Params, tt.want)
		}
		if string(m.Params) != tt.in {
			t.Errorf("the original was modified: %s", m.Params)
		}
	}
}

func TestSubscriptionID(t *testing.T) {
	tests := []struct {
		params string
		id     int64
		ok     bool
	}{
		{`{"_meta":{"io.modelcontextprotocol/subscriptionId":12}}`, 12, true},
		{`{"_meta":{"io.modelcontextprotocol/subscriptionId":"12"}}`, 0, false}, // the Client's ids are numbers
		{`{"io.modelcontextprotocol/subscriptionId":12}`, 0, false},
		{`{}`, 0, false},
	}
	for _, tt := range tests {
		id, ok := subscriptionID(&jsonrpc.Message{Params: json.RawMessage(tt.params)})
		if id != tt.id || ok != tt.ok {
			t.Errorf("subscriptionID(%s) = %d %v, want %d %v", tt.params, id, ok, tt.id, tt.ok)
		}
	}
}
