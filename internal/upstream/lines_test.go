package upstream

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// readLines reads every line, through a reader that returns one byte at a
// time when oneByte is set (to split line ends across reads).
func readLines(t *testing.T, input string, cr, oneByte bool, max int) ([]string, []error) {
	t.Helper()
	var r io.Reader = strings.NewReader(input)
	if oneByte {
		r = iotest.OneByteReader(r)
	}
	lr := newLineReader(r, max, cr)
	var lines []string
	var errs []error
	for range 1000 {
		line, err := lr.next()
		if errors.Is(err, io.EOF) {
			return lines, errs
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		lines = append(lines, string(line))
	}
	t.Fatal("no end")
	return nil, nil
}

func TestLineReader(t *testing.T) {
	long := strings.Repeat("x", 3*chunkSize+123)
	tests := []struct {
		name  string
		input string
		cr    bool
		want  []string
	}{
		{"lf", "a\nbb\n\nccc\n", false, []string{"a", "bb", "", "ccc"}},
		{"crlf stdio", "a\r\nb\r\n", false, []string{"a", "b"}},
		{"last line unterminated", "a\nb", false, []string{"a", "b"}},
		{"lone cr is data on stdio", "a\rb\n", false, []string{"a\rb"}},
		{"sse line ends", "a\r\nb\rc\nd\r\re", true, []string{"a", "b", "c", "d", "", "e"}},
		{"long lines", long + "\n" + long + "\nend\n", false, []string{long, long, "end"}},
	}
	for _, tt := range tests {
		for _, oneByte := range []bool{false, true} {
			t.Run(tt.name, func(t *testing.T) {
				got, errs := readLines(t, tt.input, tt.cr, oneByte, 1<<20)
				if len(errs) > 0 {
					t.Fatal(errs)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("oneByte=%v (-want +got):\n%s", oneByte, diff)
				}
			})
		}
	}
}

func TestLineReaderKeepsLines(t *testing.T) {
	// Lines returned earlier must not change while later ones are read.
	var input strings.Builder
	var want []string
	for i := range 5000 {
		line := strings.Repeat(string(rune('a'+i%26)), i%300)
		want = append(want, line)
		input.WriteString(line + "\n")
	}
	lr := newLineReader(strings.NewReader(input.String()), 1<<20, false)
	var kept [][]byte
	for {
		line, err := lr.next()
		if err != nil {
			break
		}
		kept = append(kept, line)
	}
	var got []string
	for _, l := range kept {
		got = append(got, string(l))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestLineReaderTooLong(t *testing.T) {
	const max = 200
	big := `{"jsonrpc":"2.0","id":42,"result":"` + strings.Repeat("x", 2*chunkSize) + `"}`
	input := "ok\n" + big + "\nafter\n"
	for _, oneByte := range []bool{false, true} {
		got, errs := readLines(t, input, false, oneByte, max)
		if diff := cmp.Diff([]string{"ok", "after"}, got); diff != "" {
			t.Errorf("lines (-want +got):\n%s", diff)
		}
		var tl *tooLongError
		if len(errs) != 1 || !errors.As(errs[0], &tl) {
			t.Fatalf("errors %v, want one tooLongError", errs)
		}
		if id, ok := idFromHead(tl.head); !ok || id != 42 {
			t.Errorf("idFromHead = %d, %v; want 42", id, ok)
		}
	}
}

func TestIDFromHead(t *testing.T) {
	tests := []struct {
		head   string
		id     int64
		wantOK bool
	}{
		{`{"jsonrpc":"2.0","id":7,"result":{"content":[{"text":"xxx`, 7, true},
		{`{"jsonrpc":"2.0","result":{"content":"xxxxxx`, 0, false},
		{`{"id":"str","result":1}`, 0, false},
		{`not json`, 0, false},
		{`{"a":{"id":3},"id":9,"result":"x`, 9, true},
	}
	for _, tt := range tests {
		id, ok := idFromHead([]byte(tt.head))
		if id != tt.id || ok != tt.wantOK {
			t.Errorf("idFromHead(%s) = %d, %v; want %d, %v", tt.head, id, ok, tt.id, tt.wantOK)
		}
	}
}

func TestSSEReader(t *testing.T) {
	type ev struct{ Name, Data string }
	tests := []struct {
		name   string
		input  string
		want   []ev
		lastID string
		retry  time.Duration
	}{
		{"basic", "data: hello\n\n", []ev{{"", "hello"}}, "", 0},
		{"no space after colon", "data:hello\n\n", []ev{{"", "hello"}}, "", 0},
		{"two spaces keep one", "data:  hello\n\n", []ev{{"", " hello"}}, "", 0},
		{"multi-line data", "data: a\ndata: b\ndata:\n\n", []ev{{"", "a\nb\n"}}, "", 0},
		{"event name and comments", ": hi\nevent: endpoint\n: more\ndata: /post?x=1\n\n", []ev{{"endpoint", "/post?x=1"}}, "", 0},
		{"crlf and cr", "event: message\r\ndata: 1\r\n\r\ndata: 2\r\r", []ev{{"message", "1"}, {"", "2"}}, "", 0},
		{"no data, no event", "event: x\n\ndata: y\n\n", []ev{{"", "y"}}, "", 0},
		{"unterminated event dropped", "data: a\n\ndata: b", []ev{{"", "a"}}, "", 0},
		{"id and retry", "id: 5\nretry: 1500\ndata: a\n\nid: bad\x00\nretry: x\n\n", []ev{{"", "a"}}, "5", 1500 * time.Millisecond},
		{"bom", "\xef\xbb\xbfdata: a\n\n", []ev{{"", "a"}}, "", 0},
		{"field without colon", "data\n\n", []ev{{"", ""}}, "", 0},
	}
	for _, tt := range tests {
		for _, oneByte := range []bool{false, true} {
			t.Run(tt.name, func(t *testing.T) {
				var r io.Reader = strings.NewReader(tt.input)
				if oneByte {
					r = iotest.OneByteReader(r)
				}
				sr := newSSEReader(r, 1<<20)
				var got []ev
				for {
					e, err := sr.next()
					if err != nil {
						if !errors.Is(err, io.EOF) {
							t.Fatal(err)
						}
						break
					}
					got = append(got, ev{e.name, string(e.data)})
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
				if sr.lastID != tt.lastID || sr.retry != tt.retry {
					t.Errorf("lastID, retry = %q, %v; want %q, %v", sr.lastID, sr.retry, tt.lastID, tt.retry)
				}
			})
		}
	}
}

func TestReadBody(t *testing.T) {
	body := strings.Repeat("y", 100<<10)
	for _, length := range []int64{-1, int64(len(body))} {
		got, err := readBody(strings.NewReader(body), length, 1<<20)
		if err != nil || string(got) != body {
			t.Errorf("length %d: %d bytes, %v", length, len(got), err)
		}
		if _, err := readBody(strings.NewReader(body), length, 1000); !errors.Is(err, ErrMalformed) {
			t.Errorf("length %d over the limit: %v, want ErrMalformed", length, err)
		}
	}
	if _, err := readBody(strings.NewReader("short"), 10, 100); err == nil {
		t.Error("a body shorter than its Content-Length was accepted")
	}
}
