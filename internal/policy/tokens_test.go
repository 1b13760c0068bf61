package policy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pkoukk/tiktoken-go"
)

// Real definitions, as server-everything and server-filesystem
// (2026.8.31) list them.
const (
	echoDef = `{"name":"echo","title":"Echo Tool","description":"Echoes back the input string","inputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"message":{"type":"string","description":"Message to echo"}},"required":["message"]},"annotations":{"readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false},"execution":{"taskSupport":"forbidden"}}`

	// editFileDef is 1,073 bytes: a typical definition.
	editFileDef = `{"name":"edit_file","title":"Edit File","description":"Make line-based edits to a text file. Each edit replaces exact line sequences with new content. Returns a git-style diff showing the changes made. Only works within allowed directories.","inputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"path":{"type":"string"},"edits":{"type":"array","items":{"type":"object","properties":{"oldText":{"type":"string","description":"Text to search for - must match exactly"},"newText":{"type":"string","description":"Text to replace with"}},"required":["oldText","newText"]}},"dryRun":{"default":false,"description":"Preview changes using git-style diff format","type":"boolean"}},"required":["path","edits"]},"annotations":{"readOnlyHint":false,"idempotentHint":false,"destructiveHint":true,"openWorldHint":false},"execution":{"taskSupport":"forbidden"},"outputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"content":{"type":"string"}},"required":["content"],"additionalProperties":false}}`
)

func TestTokens(t *testing.T) {
	tests := []struct {
		name, in string
		want     int
	}{
		// Counts published for cl100k_base in OpenAI's cookbook ("How to
		// count tokens with tiktoken") and tiktoken's README.
		{"hello world", "hello world", 2},
		{"readme example", "tiktoken is great!", 6},
		{"long word", "antidisestablishmentarianism", 6},
		{"arithmetic", "2 + 2 = 4", 7},
		{"japanese", "お誕生日おめでとう", 9},
		// Computed here and frozen.
		{"empty", "", 0},
		{"special token text is ordinary text", "<|endoftext|>", 7},
		{"echo definition", echoDef, 95},
		{"edit_file definition", editFileDef, 240},
		{"pretty-printed whitespace counts", "{\n  \"type\": \"string\"\n}", 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Tokens([]byte(tt.in)); got != tt.want {
				t.Errorf("Tokens(%.40q) = %d, want %d", tt.in, got, tt.want)
			}
			if got := TokensString(tt.in); got != tt.want {
				t.Errorf("TokensString(%.40q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestTokensDeterministic(t *testing.T) {
	for _, in := range []string{echoDef, editFileDef, "tiktoken is great!"} {
		first := Tokens([]byte(in))
		for range 5 {
			if got := Tokens([]byte(in)); got != first {
				t.Fatalf("Tokens(%.40q) = %d, then %d", in, first, got)
			}
		}
	}
}

// TestTokensConcurrent races the first load and many counts on a fresh
// counter. It shares tiktoken's encoding cache with the process
// tokenizer, loaded first, so that it never calls SetBpeLoader itself.
func TestTokensConcurrent(t *testing.T) {
	inputs := []string{echoDef, editFileDef, "hello world", strings.Repeat("a", 300), ""}
	want := make([]int, len(inputs))
	for i, in := range inputs {
		want[i] = TokensString(in)
	}
	var loads atomic.Int32
	c := &tokenCounter{load: func() (*tiktoken.Tiktoken, error) {
		loads.Add(1)
		return tiktoken.GetEncoding("cl100k_base")
	}}
	const goroutines = 16
	got := make([][]int, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range inputs {
				// Each goroutine starts at a different input.
				j := (i + g) % len(inputs)
				if got[g] == nil {
					got[g] = make([]int, len(inputs))
				}
				got[g][j] = c.count(inputs[j])
			}
		})
	}
	wg.Wait()
	if n := loads.Load(); n != 1 {
		t.Errorf("the tokenizer was loaded %d times, want 1", n)
	}
	for g := range goroutines {
		if diff := cmp.Diff(want, got[g]); diff != "" {
			t.Errorf("goroutine %d (-want +got):\n%s", g, diff)
		}
	}
}

func TestTokenCounterLoadFailure(t *testing.T) {
	var loads int
	c := &tokenCounter{load: func() (*tiktoken.Tiktoken, error) {
		loads++
		return nil, errors.New("vocabulary missing")
	}}
	for _, tt := range []struct {
		in   string
		want int
	}{{"", 0}, {"abc", 1}, {"abcd", 1}, {"abcde", 2}, {"abcdefgh", 2}} {
		if got := c.count(tt.in); got != tt.want {
			t.Errorf("fallback count(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
	if loads != 1 {
		t.Errorf("a failed load was tried %d times, want once", loads)
	}
}

func TestCutLongRun(t *testing.T) {
	tests := []struct {
		name, in   string
		head, tail string
	}{
		{"empty", "", "", ""},
		{"short", "abc def", "abc def", ""},
		{"run of exactly max", "xx aaaa yy", "xx aaaa yy", ""},
		{"letters", "xx aaaaaa yy", "xx aaaa", "aa yy"},
		{"spaces", "a      b", "a    ", "  b"},
		{"symbols", "a!!!!!", "a!!!!", "!"},
		{"letters of several scripts are one class", "éaßäq", "éaßä", "q"},
		{"classes alternate", "a1a1a1a1a1 a b", "a1a1a1a1a1 a b", ""},
		{"digits are never cut: the pattern splits them in threes", "1234567", "1234567", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			head, tail := cutLongRun(tt.in, 4)
			if head != tt.head || tail != tt.tail {
				t.Errorf("cutLongRun(%q, 4) = %q, %q; want %q, %q", tt.in, head, tail, tt.head, tt.tail)
			}
		})
	}
}

// TestTokensLongRuns checks the documented counting in parts: a run
// longer than maxRun is counted as if cut after every maxRun characters.
func TestTokensLongRuns(t *testing.T) {
	for _, c := range []string{"a", " ", "!"} {
		run := strings.Repeat(c, 2*maxRun+44)
		want := 2*TokensString(strings.Repeat(c, maxRun)) + TokensString(strings.Repeat(c, 44))
		if got := TokensString(run); got != want {
			t.Errorf("TokensString(%d × %q) = %d, want %d", len(run), c, got, want)
		}
	}
	// Text without long runs is one piece of work, however long it is.
	long := strings.Repeat(editFileDef, 20)
	if got, want := Tokens([]byte(long)), 20*Tokens([]byte(editFileDef)); got > want || got < want-40 {
		t.Errorf("Tokens(20 definitions) = %d, want about %d", got, want)
	}
}

const loadCostChildEnv = "POLICY_TOKENIZER_LOAD_COST_CHILD"

// TestTokenizerLoadCost proves that the tokenizer is loaded by the first
// count and not before, and logs what loading costs. It measures in a
// fresh process (this test binary, run again), because in this one
// another test may have loaded the tokenizer already.
func TestTokenizerLoadCost(t *testing.T) {
	if os.Getenv(loadCostChildEnv) == "1" {
		measureLoadCost()
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestTokenizerLoadCost$", "-test.count=1")
	cmd.Env = append(os.Environ(), loadCostChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	m := map[string]int64{}
	for line := range strings.Lines(string(out)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				m[k] = n
			}
		}
	}
	if m["loaded_before"] != 0 {
		t.Errorf("the tokenizer was loaded before the first count")
	}
	const mb = 1 << 20
	before, after := m["heap_before"], m["heap_after"]
	if after-before < 10*mb {
		t.Errorf("heap grew by %d bytes over the first count, want the tokenizer's tens of MB (before=%d)", after-before, before)
	}
	if before > 10*mb {
		t.Errorf("heap was already %d bytes before the first count", before)
	}
	t.Logf("first Tokens call: %v; live heap %.1f -> %.1f MB (+%.1f MB); allocated while loading %.1f MB; RSS %.1f -> %.1f MB; tokens=%d",
		time.Duration(m["load_ns"]), float64(before)/mb, float64(after)/mb, float64(after-before)/mb,
		float64(m["alloc_total"])/mb, float64(m["rss_before"])/mb, float64(m["rss_after"])/mb, m["tokens"])
}

// measureLoadCost runs in the child and prints key=value lines.
func measureLoadCost() {
	loaded := 0
	if cl100k.enc != nil {
		loaded = 1
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heapBefore, allocBefore, rssBefore := ms.HeapAlloc, ms.TotalAlloc, rss()
	start := time.Now()
	n := Tokens([]byte(editFileDef))
	elapsed := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	fmt.Printf("loaded_before=%d\nheap_before=%d\nheap_after=%d\nalloc_total=%d\nrss_before=%d\nrss_after=%d\nload_ns=%d\ntokens=%d\n",
		loaded, heapBefore, ms.HeapAlloc, ms.TotalAlloc-allocBefore, rssBefore, rss(), elapsed.Nanoseconds(), n)
}

// rss returns the resident set size in bytes on Linux, 0 elsewhere.
func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func BenchmarkTokens(b *testing.B) {
	def := []byte(editFileDef) // 1,073 bytes
	Tokens(def)                // load outside the timing
	b.SetBytes(int64(len(def)))
	b.ReportAllocs()
	for b.Loop() {
		Tokens(def)
	}
}

// BenchmarkTokensLongRun is the worst case: one 64 KiB word.
func BenchmarkTokensLongRun(b *testing.B) {
	def := []byte(strings.Repeat("a", 64<<10))
	Tokens(def)
	b.SetBytes(int64(len(def)))
	for b.Loop() {
		Tokens(def)
	}
}
