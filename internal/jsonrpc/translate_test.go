package jsonrpc

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestTranslateResult: the era members go and the serverInfo in _meta is
// replaced wherever they stand, with everything else byte for byte, and
// a result with repeated members (walked, not copied from the decoder's
// note) loses every occurrence.
func TestTranslateResult(t *testing.T) {
	const info = `{"name":"gw"}`
	for _, tt := range []struct {
		in, want string
		drop     Members
	}{
		{`{"content":[ 1 ]}`, `{"content":[ 1 ]}`, ModernMembers},
		{`{"resultType":"complete","content":[ 1 ],"ttlMs":5 , "cacheScope":"public"}`, `{"content":[ 1 ]}`, ModernMembers},
		{`{"resultType":"complete"}`, `{}`, ModernMembers},
		{`{ "x-vendor" : {"a" : 1}, "requestState":"s","inputRequests":{}}`, `{ "x-vendor" : {"a" : 1}}`, ModernMembers},
		{`{"resultType":"complete","_meta":{"k":1,"io.modelcontextprotocol/serverInfo":{"name":"up"}},"ttlMs":5,"z":0}`, `{"_meta":{"k":1,"io.modelcontextprotocol/serverInfo":{"name":"gw"}},"z":0}`, ModernMembers},
		{`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"}},"resultType":"complete"}`, `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"gw"}},"resultType":"complete"}`, 0},
		{`{"_meta":{"k":1},"resultType":"complete"}`, `{"_meta":{"k":1},"resultType":"complete"}`, 0},
		// Repeated members: every one goes, and one _meta is left.
		{`{"ttlMs":1,"a":1,"ttlMs":2}`, `{"a":1}`, ModernMembers},
		{`{"_meta":{"io.modelcontextprotocol/serverInfo":1,"io.modelcontextprotocol/serverInfo":2},"a":1}`, `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"gw"}},"a":1}`, 0},
		{`{"_meta":{},"a":1,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"}}}`, `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"gw"}},"a":1}`, 0},
	} {
		m, err := Decode([]byte(`{"jsonrpc":"2.0","id":1,"result":` + tt.in + `}`))
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		got := m.TranslateResult(tt.drop, json.RawMessage(info))
		if string(got) != tt.want {
			t.Errorf("TranslateResult(%s) = %s, want %s", tt.in, got, tt.want)
		}
		if !json.Valid(got) {
			t.Errorf("TranslateResult(%s) = %s is not JSON", tt.in, got)
		}
		// A message built by hand, not decoded, is walked and says the
		// same (its members may stand elsewhere).
		walked := (&Message{Result: json.RawMessage(tt.in), Members: m.Members}).TranslateResult(tt.drop, json.RawMessage(info))
		var w, g any
		if json.Unmarshal(walked, &w) != nil || json.Unmarshal([]byte(tt.want), &g) != nil || !reflect.DeepEqual(w, g) {
			t.Errorf("walking TranslateResult(%s) = %s, want %s", tt.in, walked, tt.want)
		}
	}
}
