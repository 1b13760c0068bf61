package router

import (
	"testing"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// TestReplyOfKeepsAResultTypeThatIsThere: a result whose resultType the
// upstream set, to anything, is not given a second one for a modern host.
func TestReplyOfKeepsAResultTypeThatIsThere(t *testing.T) {
	for result, lacks := range map[string]bool{
		`{"content":[]}`:                         true,
		`{"content":[],"resultType":"complete"}`: false,
		`{"content":[],"resultType":null}`:       false,
		`{"content":[],"resultType":""}`:         false,
	} {
		m, err := jsonrpc.Decode([]byte(`{"jsonrpc":"2.0","id":1,"result":` + result + `}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := replyOf(m).LacksResultType; got != lacks {
			t.Errorf("%s: LacksResultType %v, want %v", result, got, lacks)
		}
	}
}
