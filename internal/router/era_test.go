package router

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// modernOnly are the top-level result members that 2026-07-28 added and
// 2025-11-25 does not define (2026-07-28 changelog, major changes 7 and
// 8, minor change 5).
var modernOnly = []string{"resultType", "ttlMs", "cacheScope", "inputRequests", "requestState"}

// cacheable are the methods whose 2026-07-28 results must carry ttlMs
// and cacheScope (CacheableResult).
var cacheable = map[string]bool{
	"tools/list": true, "prompts/list": true, "resources/list": true,
	"resources/templates/list": true, "resources/read": true,
}

// TestResultsAreFaithfulToTheHostsEra walks every method the gateway
// forwards, with a modern and a legacy upstream behind it, from a legacy
// and a modern host: a legacy host gets no member only 2026-07-28
// defines, a modern host gets every member 2026-07-28 requires, an
// upstream's unknown members and content arrive byte for byte, and the
// serverInfo in _meta is the gateway's.
func TestResultsAreFaithfulToTheHostsEra(t *testing.T) {
	// The spacing is unusual on purpose: a re-marshalled result loses it.
	const vendor = `"x-vendor": {"a" : 1}`
	const content = `"content":[ {"type":"text","text":"hi"} ],"structuredContent":{"z":1, "a":2}`
	const upstreamInfo = `"io.modelcontextprotocol/serverInfo":{"name":"upstream-itself","version":"9"}`
	answers := map[string]string{
		// A modern upstream sends its era's members, even stray MRTR
		// ones in a complete result.
		ModernVersion: `{` + vendor + `,` + content + `,"resultType":"complete","ttlMs":5000,"cacheScope":"public","requestState":"up-state","inputRequests":{},"_meta":{` + upstreamInfo + `,"k":"v"}}`,
		"2025-11-25":  `{` + vendor + `,` + content + `,"_meta":{` + upstreamInfo + `,"k":"v"}}`,
	}
	methods := []struct{ method, params string }{
		{"tools/call", `{"name":"up__t","arguments":{}}`},
		{"prompts/get", `{"name":"up__p"}`},
		{"resources/read", `{"uri":"docs://readme"}`},
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"up__p"},"argument":{"name":"n","value":"a"}}`},
		{"tools/list", `{}`},
		{"prompts/list", `{}`},
		{"resources/list", `{}`},
		{"resources/templates/list", `{}`},
	}
	gateway := Implementation{Name: "the-gateway", Version: "1.2.3"}
	wantInfo, _ := json.Marshal(gateway)
	for _, upVersion := range []string{ModernVersion, "2025-11-25"} {
		up := &fakeUpstream{
			version: upVersion,
			lists: map[string][]string{
				"tools/list":               tools("t"),
				"prompts/list":             {`{"name":"p"}`},
				"resources/list":           {`{"uri":"docs://readme","name":"readme"}`},
				"resources/templates/list": {`{"uriTemplate":"docs://page/{id}","name":"page"}`},
			},
			answer: func(string, json.RawMessage) (*jsonrpc.Message, error) {
				return &jsonrpc.Message{ID: json.RawMessage("1"), Result: json.RawMessage(answers[upVersion])}, nil
			},
		}
		r := startRouter(t, Options{ServerInfo: gateway, ListTTL: time.Minute}, map[string]*fakeUpstream{"up": up}, "up")
		// A host of every revision whose schema is in the spec folder.
		hosts := []*Caller{{ProtocolVersion: "2025-06-18", Session: "s0"}, legacyCaller, modernCaller}
		for _, host := range hosts {
			for _, m := range methods {
				t.Run(upVersion+"-upstream/"+host.ProtocolVersion+"-host/"+m.method, func(t *testing.T) {
					reply := r.Dispatch(context.Background(), host, request(m.method, m.params))
					if reply.Error != nil {
						t.Fatalf("error: %v", reply.Error)
					}
					result := reply.Result
					var members map[string]json.RawMessage
					if err := json.Unmarshal(result, &members); err != nil {
						t.Fatalf("result %s: %v", result, err)
					}
					if !host.Modern() {
						for _, k := range modernOnly {
							if _, ok := members[k]; ok {
								t.Errorf("a legacy host got %q: %s", k, result)
							}
						}
					} else {
						if _, ok := members["resultType"]; !ok && !reply.LacksResultType {
							t.Errorf("a modern host gets no resultType: %s", result)
						}
						if cacheable[m.method] {
							for _, k := range []string{"ttlMs", "cacheScope"} {
								if _, ok := members[k]; !ok {
									t.Errorf("a modern host's %s lacks %q: %s", m.method, k, result)
								}
							}
						}
					}
					if strings.HasSuffix(m.method, "/list") {
						return // the gateway's own result
					}
					for _, raw := range []string{vendor, content, `"k":"v"`} {
						if !strings.Contains(string(result), raw) {
							t.Errorf("result %s lost %s byte for byte", result, raw)
						}
					}
					var meta map[string]json.RawMessage
					if err := json.Unmarshal(members["_meta"], &meta); err != nil {
						t.Fatalf("_meta of %s: %v", result, err)
					}
					if got := string(meta["io.modelcontextprotocol/serverInfo"]); got != string(wantInfo) {
						t.Errorf("_meta serverInfo = %s, want the gateway's %s", got, wantInfo)
					}
				})
			}
		}
	}
}

// TestRelayedInputRequiredKeepsItsOwnResultType: a modern upstream's
// input_required, relayed to a modern host with the gateway's sealed
// state, is not given a second resultType as it goes out, and names the
// gateway in its _meta.
func TestRelayedInputRequiredKeepsItsOwnResultType(t *testing.T) {
	up := &fakeUpstream{
		version: ModernVersion,
		lists:   map[string][]string{"tools/list": tools("t")},
		answer: func(string, json.RawMessage) (*jsonrpc.Message, error) {
			return &jsonrpc.Message{ID: json.RawMessage("1"), Result: json.RawMessage(`{"resultType":"input_required","inputRequests":{"k":{"method":"elicitation/create","params":{}}},"requestState":"s","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"upstream-itself"}}}`)}, nil
		},
	}
	gateway := Implementation{Name: "the-gateway", Version: "1.2.3"}
	r := startRouter(t, Options{ServerInfo: gateway}, map[string]*fakeUpstream{"up": up}, "up")
	host := &Caller{ProtocolVersion: ModernVersion, Capabilities: json.RawMessage(`{"elicitation":{}}`)}
	reply := r.Dispatch(context.Background(), host, request("tools/call", `{"name":"up__t","arguments":{}}`))
	if reply.Error != nil {
		t.Fatalf("error: %v", reply.Error)
	}
	if reply.LacksResultType {
		t.Errorf("an input_required %s is marked as lacking its resultType: it would go out with two", reply.Result)
	}
	if !strings.Contains(string(reply.Result), `"io.modelcontextprotocol/serverInfo":{"name":"the-gateway","version":"1.2.3"}`) {
		t.Errorf("input_required %s does not name the gateway in _meta", reply.Result)
	}
}
