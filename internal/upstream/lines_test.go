package upstream

import (
	"errors"
	"io"
	"runtime"
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
		// The first buffer of a line reader is a chunk: these lines' CR
		// ends it, and their LF starts the next one.
		{"crlf across buffers", long[:chunkSize-1] + "\r\nend\n", false, []string{long[:chunkSize-1], "end"}},
		{"cr cr lf across buffers", long[:chunkSize-2] + "\r\r\nend\n", false, []string{long[:chunkSize-2] + "\r", "end"}},
		{"cr, then cr lf", long[:chunkSize-1] + "\r\r\nend\n", false, []string{long[:chunkSize-1] + "\r", "end"}},
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

// A body of unknown length is read in pieces, and from half the limit on
// into one buffer of the limit: a body at the limit allocates 1.5 x the
// limit, not twice (its pieces and their join); one byte more is refused.
func TestReadBodyAllocations(t *testing.T) {
	const limit = 16 << 20
	for _, size := range []int{limit/2 - 1<<20, limit, limit + 1} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b, err := readBody(shortReader{&genReader{n: size}, 32 << 10}, -1, limit)
		runtime.ReadMemStats(&after)
		if size > limit {
			var tl *TooLargeError
			if !errors.As(err, &tl) {
				t.Errorf("%d bytes: %v, want a TooLargeError", size, err)
			}
			continue
		}
		if err != nil || len(b) != size || cap(b) != size {
			t.Fatalf("%d bytes: %d (cap %d), %v", size, len(b), cap(b), err)
		}
		want := uint64(2*size + 2*pieceMax)
		if size > limit/2 {
			want = limit + limit/2 + 2*pieceMax
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > want {
			t.Errorf("reading a body of %.1f MiB allocated %.1f MiB, want at most %.1f MiB", float64(size)/(1<<20), float64(got)/(1<<20), float64(want)/(1<<20))
		}
	}
}

// genReader yields n bytes of 'x', then rest, without holding n bytes.
type genReader struct {
	n    int
	rest string
}

func (g *genReader) Read(p []byte) (int, error) {
	if g.n > 0 {
		k := min(len(p), g.n)
		for i := range p[:k] {
			p[i] = 'x'
		}
		g.n -= k
		return k, nil
	}
	if g.rest == "" {
		return 0, io.EOF
	}
	k := copy(p, g.rest)
	g.rest = g.rest[k:]
	return k, nil
}

// After a large line the reader goes back to a small buffer: a 50 MiB
// message must not pin 50 MiB (or more) for as long as the stream lives.
func TestLineReaderReleasesLargeBuffer(t *testing.T) {
	const size = 50 << 20
	lr := newLineReader(&genReader{n: size, rest: "\nsmall\n"}, 64<<20, false)
	line, err := lr.next()
	if err != nil || len(line) != size {
		t.Fatalf("first line: %d bytes, %v", len(line), err)
	}
	if line, err = lr.next(); err != nil || string(line) != "small" {
		t.Fatalf("second line: %q, %v", line, err)
	}
	// The read that waits for the next message (here: finds the end).
	if _, err = lr.next(); !errors.Is(err, io.EOF) {
		t.Fatalf("third read: %v, want EOF", err)
	}
	if c := cap(lr.buf); c > chunkSize {
		t.Errorf("after the large line the reader holds a buffer of %d bytes, want at most %d", c, chunkSize)
	}
}

// A line of exactly the limit is read into a buffer of about its size,
// never about twice the limit.
func TestLineReaderBufferBoundedByLimit(t *testing.T) {
	const max = 3<<20 + 12345
	lr := newLineReader(&genReader{n: max, rest: "\n"}, max, false)
	if line, err := lr.next(); err != nil || len(line) != max {
		t.Fatalf("line: %d bytes, %v", len(line), err)
	}
	if c := cap(lr.buf); c > max+3*minRead {
		t.Errorf("buffer of %d bytes for a line at the %d byte limit", c, max)
	}
}

// A shared stream's oversize line is reported once it has been skipped,
// with its last bytes, so that the call it answers can fail even when the
// id comes after the result.
func TestLineReaderTooLongTail(t *testing.T) {
	const max = 100 << 10
	big := `{"jsonrpc":"2.0","result":{"text":"` + strings.Repeat("x", 3*max) + `"},"id":42}`
	lr := newLineReader(strings.NewReader(big+"\nnext\n"), max, false)
	_, err := lr.next()
	var tl *tooLongError
	if !errors.As(err, &tl) {
		t.Fatalf("err = %v, want a tooLongError", err)
	}
	if id, ok := tl.id(); !ok || id != 42 {
		t.Errorf("id = %d, %v; want 42", id, ok)
	}
	if line, err := lr.next(); err != nil || string(line) != "next" {
		t.Fatalf("after it: %q, %v", line, err)
	}
	if c := cap(lr.buf); c > chunkSize {
		t.Errorf("skipping held a buffer of %d bytes", c)
	}
}

// A response stream's oversize line is reported as soon as it is known
// to be too long: the caller closes the stream, nothing more is read.
func TestLineReaderTooLongEarly(t *testing.T) {
	const max = 100 << 10
	g := &genReader{n: 10 * max, rest: "\n"}
	lr := newLineReader(g, max, true)
	lr.early = true
	_, err := lr.next()
	var tl *tooLongError
	if !errors.As(err, &tl) {
		t.Fatalf("err = %v, want a tooLongError", err)
	}
	if g.n < 8*max {
		t.Errorf("%d bytes read past the limit before the error", 10*max-g.n)
	}
}

// shortReader returns at most n bytes a read, as a socket does.
type shortReader struct {
	r io.Reader
	n int
}

func (s shortReader) Read(p []byte) (int, error) { return s.r.Read(p[:min(len(p), s.n)]) }

// A line that outgrows its buffer, with no earlier large line to size a
// buffer from, is read into pieces that are joined once at its end, and
// from half the limit on into one buffer of the limit: a line allocates
// about twice its size below half the limit, and 1.5 x the limit above
// it, not the three times of a buffer that doubles and is copied as it
// grows, whose garbage raised the peak RSS of four answers at the limit
// at once. An SSE event's data is the line's, not a copy.
func TestLineReaderLargeLineAllocations(t *testing.T) {
	const limit = 16 << 20
	for _, tt := range []struct {
		name string
		size int
		want int // the most it may allocate
	}{
		{"half the limit", limit/2 - 1<<20, 2*(limit/2-1<<20) + 2*pieceMax},
		{"the limit", limit, limit + limit/2 + 2*pieceMax},
	} {
		for _, sse := range []bool{false, true} {
			var (
				before, after runtime.MemStats
				n             int
				err           error
			)
			runtime.ReadMemStats(&before)
			if sse {
				r := io.MultiReader(strings.NewReader("event: message\ndata: "), &genReader{n: tt.size, rest: "\n\n"})
				var ev sseEvent
				ev, err = newResponseSSEReader(shortReader{r, 32 << 10}, limit, 0).next()
				n = len(ev.data)
			} else {
				var line []byte
				line, err = newLineReader(shortReader{&genReader{n: tt.size, rest: "\n"}, 32 << 10}, limit, false).next()
				n = len(line)
			}
			runtime.ReadMemStats(&after)
			if err != nil || n != tt.size {
				t.Fatalf("%s, sse %v: %d bytes, %v", tt.name, sse, n, err)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > uint64(tt.want) {
				t.Errorf("%s, sse %v: reading a line of %.1f MiB allocated %.1f MiB, want at most %.1f MiB", tt.name, sse, float64(tt.size)/(1<<20), float64(got)/(1<<20), float64(tt.want)/(1<<20))
			}
		}
	}
}

// A line that passes the limit while it is read in pieces (a small limit,
// a first buffer of a response stream) is reported with its first and
// last bytes, which span the pieces, whether its end is found in the read
// that passes the limit or after it.
func TestLineReaderTooLongAcrossPieces(t *testing.T) {
	const max = 20 << 10
	x := strings.Repeat("x", 25<<10)
	for name, line := range map[string]string{
		"id first": `{"jsonrpc":"2.0","id":42,"result":"` + x + `"}`,
		"id last":  `{"jsonrpc":"2.0","result":"` + x + `","id":42}`,
	} {
		for _, oneByte := range []bool{false, true} {
			var r io.Reader = strings.NewReader(line + "\nnext\n")
			if oneByte {
				r = iotest.OneByteReader(r)
			}
			lr := newLineReader(r, max, false)
			lr.first = responseFirstBuffer
			_, err := lr.next()
			var tl *tooLongError
			if !errors.As(err, &tl) {
				t.Fatalf("%s, oneByte %v: err = %v, want a tooLongError", name, oneByte, err)
			}
			if !strings.HasPrefix(line, string(tl.head)) || !strings.HasSuffix(line, string(tl.tail)) {
				t.Errorf("%s, oneByte %v: head %q..., tail ...%q are not the line's", name, oneByte, tl.head[:min(40, len(tl.head))], tl.tail)
			}
			if id, ok := tl.id(); !ok || id != 42 {
				t.Errorf("%s, oneByte %v: id = %d, %v; want 42", name, oneByte, id, ok)
			}
			if got, err := lr.next(); err != nil || string(got) != "next" {
				t.Errorf("%s, oneByte %v: after it: %q, %v", name, oneByte, got, err)
			}
		}
	}
}

func TestIDFromTail(t *testing.T) {
	for tail, want := range map[string]int64{
		`xxxx"},"id":42}`:           42,
		`xxxx"}, "id" : 7 }` + "\r": 7,
		`"id":5}}`:                  -1, // an inner object's id
		`xx","id":"s"}`:             -1,
		`xxid":5}`:                  -1,
		`{"id":9}`:                  9,
		`x","id":-3}`:               -1,
	} {
		id, ok := idFromTail([]byte(tail))
		if (want < 0 && ok) || (want >= 0 && (!ok || id != want)) {
			t.Errorf("idFromTail(%q) = %d, %v; want %d", tail, id, ok, want)
		}
	}
}

// An SSE event whose data lines together pass the limit is skipped as a
// whole: none of its lines becomes an event of its own.
func TestSSEReaderEventTooLarge(t *testing.T) {
	line := "data: " + strings.Repeat("y", 600) + "\n"
	input := strings.Repeat(line, 4) + "\ndata: next\n\n"
	sr := newSSEReader(strings.NewReader(input), 1000)
	_, err := sr.next()
	var tl *tooLongError
	if !errors.As(err, &tl) {
		t.Fatalf("err = %v, want a tooLongError", err)
	}
	ev, err := sr.next()
	if err != nil || string(ev.data) != "next" {
		t.Fatalf("after it: %q, %v", ev.data, err)
	}
}

func TestReadBodyTooLarge(t *testing.T) {
	for _, length := range []int64{-1, 5000} {
		_, err := readBody(&genReader{n: 5000}, length, 1000)
		var tl *TooLargeError
		if !errors.As(err, &tl) || tl.Limit != 1000 {
			t.Errorf("length %d: err = %v, want a TooLargeError with the limit", length, err)
		}
	}
}

// The limit bounds an event's data, not its line: data of exactly the
// limit passes, one byte more does not.
func TestSSEReaderLimitIsOnData(t *testing.T) {
	const max = 100 << 10
	for _, early := range []bool{false, true} {
		for size, ok := range map[int]bool{max: true, max + 1: false} {
			input := "data: " + strings.Repeat("z", size) + "\n\n"
			sr := newSSEReader(strings.NewReader(input), max)
			sr.lr.early = early
			ev, err := sr.next()
			var tl *tooLongError
			switch {
			case ok && (err != nil || len(ev.data) != size):
				t.Errorf("early %v: data of %d bytes: %d, %v", early, size, len(ev.data), err)
			case !ok && (!errors.As(err, &tl) || tl.max != max):
				t.Errorf("early %v: data of %d bytes: %v, want a tooLongError with the limit", early, size, err)
			}
		}
	}
}
