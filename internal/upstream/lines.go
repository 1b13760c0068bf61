package upstream

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"time"
)

const (
	// chunkSize is the size of a fresh read buffer.
	chunkSize = 64 << 10
	// minRead is the least room a read is given.
	minRead = 4 << 10
)

// lineReader splits a stream into lines without copying them: each line
// returned is a sub-slice of a read buffer that is never written again, so
// callers may keep it (and jsonrpc.Decode may alias it). Lines are read
// into the free end of the current buffer; a line that outgrows it moves,
// alone, into a buffer twice its size, so a large message is held in one
// buffer of about its size with no copy after it is read.
//
// The price is that a small line kept for long pins the chunk it was read
// into: copy small values that are kept.
type lineReader struct {
	r   io.Reader
	buf []byte
	// buf[start:end] is read but not yet returned; the first scanned bytes
	// of it hold no line end.
	start, end, scanned int
	max                 int
	// cr makes a lone '\r' a line end too (SSE); otherwise lines end at
	// '\n' and one '\r' before it is dropped (stdio).
	cr bool
	// skipLF: the last line ended with '\r' at the end of the data read so
	// far; a '\n' right after it belongs to that line end.
	skipLF bool
	// discarding: inside a line longer than max, dropped up to its end.
	discarding bool
	// hint is the length of the last line longer than a chunk: a stream
	// that carries one large message often carries more of about its size.
	hint int
	// first is the size of the first buffer; 0 means chunkSize. A
	// response stream, which carries one message or a few, starts small.
	first int
	err   error // sticky read error
}

func newLineReader(r io.Reader, max int, cr bool) *lineReader {
	return &lineReader{r: r, max: max, cr: cr}
}

// tooLongError reports a line longer than the limit. The rest of the line
// is skipped; the next call returns the line after it.
type tooLongError struct {
	max  int
	head []byte // a copy of the line's first bytes
}

func (e *tooLongError) Error() string {
	return fmt.Sprintf("message larger than the %d MiB limit", e.max>>20)
}

// next returns the next line without its terminator. At the end of the
// stream a last line without terminator is returned, then the read error
// (io.EOF for a clean end).
func (l *lineReader) next() ([]byte, error) {
	for {
		if l.skipLF && l.start < l.end {
			if l.buf[l.start] == '\n' {
				l.start++
			}
			l.skipLF = false
		}
		if from := l.start + l.scanned; from < l.end {
			seg := l.buf[from:l.end]
			i := bytes.IndexByte(seg, '\n')
			if l.cr {
				limit := seg
				if i >= 0 {
					limit = seg[:i]
				}
				if j := bytes.IndexByte(limit, '\r'); j >= 0 {
					i = j
				}
			}
			if i >= 0 {
				pos := from + i
				line := l.buf[l.start:pos:pos]
				l.start, l.scanned = pos+1, 0
				if l.buf[pos] == '\r' {
					if l.start < l.end {
						if l.buf[l.start] == '\n' {
							l.start++
						}
					} else {
						l.skipLF = true
					}
				} else if !l.cr && len(line) > 0 && line[len(line)-1] == '\r' {
					line = line[:len(line)-1]
				}
				if l.discarding {
					l.discarding = false
					continue
				}
				if len(line) > chunkSize {
					l.hint = len(line)
				}
				return line, nil
			}
			l.scanned = l.end - l.start
		}
		if l.discarding {
			l.start, l.scanned = l.end, 0
		} else if l.scanned > l.max {
			head := append([]byte(nil), l.buf[l.start:l.start+min(l.scanned, 4<<10)]...)
			l.discarding = true
			l.start, l.scanned = l.end, 0
			return nil, &tooLongError{max: l.max, head: head}
		}
		if l.err != nil {
			if l.start < l.end && !l.discarding {
				line := l.buf[l.start:l.end:l.end]
				l.start, l.scanned = l.end, 0
				return line, nil
			}
			return nil, l.err
		}
		l.fill()
	}
}

// fill reads more. Returned lines alias buf[:start], so room is never made
// by moving data within buf: a partial line that does not leave minRead
// bytes free moves to a new buffer. A small partial line moves to a fresh
// chunk; a large one to a buffer that will hold a line of the size of the
// last large line, or else twice its present size.
func (l *lineReader) fill() {
	if len(l.buf)-l.end < minRead {
		n := l.end - l.start
		size := chunkSize
		if l.buf == nil && l.first > 0 {
			size = l.first
		}
		if n >= min(chunkSize, len(l.buf))/2 && n > 0 {
			size = max(2*n, l.hint+2*minRead)
		}
		nb := make([]byte, size)
		copy(nb, l.buf[l.start:l.end])
		l.buf, l.start, l.end = nb, 0, n
	}
	n, err := l.r.Read(l.buf[l.end:])
	l.end += n
	if err != nil {
		l.err = err
	}
}

// sseEvent is one Server-Sent Event.
type sseEvent struct {
	name string // the event type; "" means "message"
	data []byte
}

// sseReader parses a text/event-stream (WHATWG HTML, "Server-sent events",
// event stream interpretation): lines end with CRLF, LF or CR; lines
// starting with ':' are comments; "data" lines are joined with '\n'; an
// empty line dispatches the event; an event without data is not
// dispatched.
type sseReader struct {
	lr *lineReader
	// lastID and retry are the last "id" and "retry" fields seen.
	lastID string
	retry  time.Duration
	first  bool
}

func newSSEReader(r io.Reader, max int) *sseReader {
	return &sseReader{lr: newLineReader(r, max, true), first: true}
}

// newResponseSSEReader reads the SSE stream that answers one POST: it
// starts with a small buffer, and a line that outgrows it moves to one
// sized for hint, the size of the last large message of the upstream.
func newResponseSSEReader(r io.Reader, max, hint int) *sseReader {
	lr := newLineReader(r, max, true)
	lr.first, lr.hint = responseFirstBuffer, hint
	return &sseReader{lr: lr, first: true}
}

// responseFirstBuffer is the first buffer of a response stream.
const responseFirstBuffer = 8 << 10

// next returns the next event. Data of an event with a single data line
// aliases the read buffer (no copy, however large).
func (s *sseReader) next() (sseEvent, error) {
	var (
		name    string
		data    []byte
		hasData bool
		joined  bool
	)
	for {
		line, err := s.lr.next()
		if err != nil {
			// An event not ended by an empty line is discarded.
			return sseEvent{}, err
		}
		if s.first {
			s.first = false
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		}
		if len(line) == 0 {
			if hasData {
				return sseEvent{name: name, data: data}, nil
			}
			name = ""
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			name = string(value)
		case "data":
			switch {
			case !hasData:
				data, hasData = value, true
			case !joined:
				data = append(append(append(make([]byte, 0, len(data)+len(value)+64), data...), '\n'), value...)
				joined = true
			default:
				data = append(append(data, '\n'), value...)
			}
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				s.lastID = string(value)
			}
		case "retry":
			if ms, err := strconv.Atoi(string(value)); err == nil && ms >= 0 {
				s.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
}

// readBody reads a whole body of at most max bytes. With a known length it
// reads into one buffer of exactly that size.
func readBody(r io.Reader, length int64, max int) ([]byte, error) {
	if length > int64(max) {
		return nil, fmt.Errorf("%w: body of %d bytes is larger than the %d MiB limit", ErrMalformed, length, max>>20)
	}
	if length >= 0 {
		b := make([]byte, length)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	b := make([]byte, 0, 512)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if len(b) > max {
			return nil, fmt.Errorf("%w: body larger than the %d MiB limit", ErrMalformed, max>>20)
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
