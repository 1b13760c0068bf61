package search

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/internal/policy"
)

// referenceServers are the servers the interop tests pin.
var referenceServers = []string{"everything", "filesystem", "memory", "sequential-thinking"}

// listTokens counts the tokens of a tools/list result holding defs,
// compact, as the gateway sends it (policy.Tokens, cl100k_base).
func listTokens(t *testing.T, defs []json.RawMessage) int {
	t.Helper()
	out, err := json.Marshal(map[string]any{"tools": defs})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, out); err != nil {
		t.Fatal(err)
	}
	return policy.Tokens(buf.Bytes())
}

// TestContextTokens prints the tokens of tools/list for three catalogs in
// full and in search mode (testdata/search_tools.json: find_tools,
// call_tool and describe_tool, a fixture of the gateway tools), for
// docs/context.md (go test ./internal/search -run TestContextTokens -v).
// Issue 16: on the reference servers search mode costs at most 10%.
func TestContextTokens(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "search_tools.json"))
	if err != nil {
		t.Fatal(err)
	}
	var gateway []json.RawMessage
	if err := json.Unmarshal(data, &gateway); err != nil {
		t.Fatal(err)
	}
	search := listTokens(t, gateway)
	all := benchCatalog(t)
	var ref, real, synth []json.RawMessage
	for _, bt := range all {
		switch {
		case bt.intent != "":
			synth = append(synth, bt.def)
		case slices.Contains(referenceServers, bt.doc.Upstream):
			ref = append(ref, bt.def)
			real = append(real, bt.def)
		default:
			real = append(real, bt.def)
		}
	}
	t.Logf("%-22s %5s %8s %8s %6s", "catalog", "tools", "full", "search", "ratio")
	for _, c := range []struct {
		name string
		defs []json.RawMessage
	}{
		{"reference servers", ref},
		{"all real servers", real},
		{"500 tools", append(append([]json.RawMessage(nil), real...), synth...)},
	} {
		full := listTokens(t, c.defs)
		ratio := float64(search) / float64(full)
		t.Logf("%-22s %5d %8d %8d %5.1f%%", c.name, len(c.defs), full, search, 100*ratio)
		if c.name == "reference servers" && ratio > 0.10 {
			t.Errorf("search mode costs %.1f%% of the reference servers' tools/list, want at most 10%%", 100*ratio)
		}
	}
	// What search mode pays per search instead: the definitions of the top
	// 3 tools (a find_tools result holds about these), averaged over the
	// queries, on the 500-tool catalog.
	docs := make([]Doc, len(all))
	for i, bt := range all {
		docs[i] = bt.doc
	}
	ix := New(docs)
	qf := loadQueries(t)
	total, n := 0, 0
	for _, q := range qf.all() {
		var defs []json.RawMessage
		for _, h := range ix.Search(q.Query, 3, "") {
			defs = append(defs, all[h.Doc].def)
		}
		total += listTokens(t, defs)
		n++
	}
	t.Logf("top-3 result of a search over 500 tools: %d tokens on average (%d queries)", total/n, n)
}
