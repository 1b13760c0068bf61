package upstream

import (
	"bytes"
	"errors"
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
	// pieceMax is the largest piece a long line is read into.
	pieceMax = 1 << 20
)

// lineReader splits a stream into lines without copying them: each line
// returned is a sub-slice of a read buffer that is never written again, so
// callers may keep it (and jsonrpc.Decode may alias it). Lines are read
// into the free end of the current buffer. A line that outgrows it moves,
// alone, into one buffer sized for the last large line of the stream when
// that is larger; otherwise its part so far is kept as a piece and it
// goes on in a new buffer, until it reaches half of max and moves into
// one buffer of max; pieces left at its end are joined once (see fill).
// Once a large line has been returned, the next read goes into a fresh
// small buffer: a stream that carried one large message does not pin its
// buffer for as long as the stream lives.
//
// The price is that a small line kept for long pins the chunk it was read
// into: copy small values that are kept.
type lineReader struct {
	r   io.Reader
	buf []byte
	// buf[start:end] is read but not yet returned; the first scanned bytes
	// of it hold no line end.
	start, end, scanned int
	// pieces are the first parts of the line being read, read into
	// earlier buffers (buf[start:end] is its last part so far); piecesLen
	// is their length. pieces is nil when the line started in buf.
	pieces    [][]byte
	piecesLen int
	max       int
	// cr makes a lone '\r' a line end too (SSE); otherwise lines end at
	// '\n' and one '\r' before it is dropped (stdio).
	cr bool
	// early reports a line longer than max as soon as it passes max (the
	// caller then stops reading: a response stream, closed at once);
	// otherwise it is reported once skipped to its end, with its last
	// bytes (a shared stream, which goes on).
	early bool
	// skipLF: the last line ended with '\r' at the end of the data read so
	// far; a '\n' right after it belongs to that line end.
	skipLF bool
	// discarding: inside a line longer than max, dropped up to its end;
	// head holds its first bytes and tail its last bytes so far.
	discarding bool
	head, tail []byte
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

const (
	// headSize and tailSize are how much of an oversize line is kept to
	// find the id of the request it answers.
	headSize = 4 << 10
	tailSize = 256
)

// tooLongError reports a line longer than the limit. The rest of the line
// is skipped; the next call returns the line after it.
type tooLongError struct {
	max  int
	head []byte // a copy of the line's first bytes
	tail []byte // a copy of its last bytes; nil when reported early
}

func (e *tooLongError) Error() string {
	return fmt.Sprintf("message larger than the %d byte limit", e.max)
}

// id returns the id of the request the oversize message answers, when its
// first or last bytes show it.
func (e *tooLongError) id() (int64, bool) {
	if id, ok := idFromHead(e.head); ok {
		return id, true
	}
	return idFromTail(e.tail)
}

// keepTail appends the end of b to l.tail, keeping tailSize bytes.
func (l *lineReader) keepTail(b []byte) {
	if len(b) > tailSize {
		b = b[len(b)-tailSize:]
	}
	l.tail = append(l.tail, b...)
	if n := len(l.tail); n > tailSize {
		l.tail = l.tail[:copy(l.tail, l.tail[n-tailSize:])]
	}
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
				} else if !l.cr {
					if len(line) > 0 {
						if line[len(line)-1] == '\r' {
							line = line[:len(line)-1]
						}
					} else if k := len(l.pieces); k > 0 {
						// The '\r' ended the last piece.
						if p := l.pieces[k-1]; p[len(p)-1] == '\r' {
							l.pieces[k-1] = p[:len(p)-1]
							l.piecesLen--
						}
					}
				}
				if l.discarding {
					l.discarding = false
					if l.early {
						continue // reported when it passed max
					}
					l.keepTail(line)
					err := &tooLongError{max: l.max, head: l.head, tail: l.tail}
					l.head, l.tail = nil, nil
					return nil, err
				}
				parts := [][]byte{line}
				if l.pieces != nil {
					parts = append(l.pieces, line)
				}
				n := l.piecesLen + len(line)
				l.pieces, l.piecesLen = nil, 0
				if n > l.max {
					// Read whole before its end was looked for.
					return nil, &tooLongError{max: l.max, head: headOf(parts, headSize), tail: tailOf(parts, tailSize)}
				}
				if len(parts) > 1 {
					line = bytes.Join(parts, nil) // of exactly n bytes
				}
				if len(line) > chunkSize {
					l.hint = len(line)
				}
				return line, nil
			}
			l.scanned = l.end - l.start
		}
		if l.discarding {
			l.keepTail(l.buf[l.start:l.end])
			l.start, l.scanned = l.end, 0
		} else if l.piecesLen+l.scanned > l.max {
			parts := append(l.pieces, l.buf[l.start:l.end])
			l.head = headOf(parts, headSize)
			l.tail = make([]byte, 0, 2*tailSize)
			l.keepTail(tailOf(parts, tailSize))
			l.pieces, l.piecesLen = nil, 0
			l.discarding = true
			l.start, l.scanned = l.end, 0
			if l.early {
				return nil, &tooLongError{max: l.max, head: l.head}
			}
		}
		if l.err != nil {
			if (l.start < l.end || l.pieces != nil) && !l.discarding {
				line := l.buf[l.start:l.end:l.end]
				l.start, l.scanned = l.end, 0
				if l.pieces != nil {
					line = bytes.Join(append(l.pieces, line), nil)
					l.pieces, l.piecesLen = nil, 0
				}
				return line, nil
			}
			return nil, l.err
		}
		l.fill()
	}
}

// fill reads more. Returned lines alias buf[:start], so room is never made
// by moving data within buf. When the partial line does not leave minRead
// bytes free, a small one moves to a fresh chunk. A large one (at least
// half its buffer) that is shorter than the last large line, or that has
// reached half of max, moves with its pieces to one buffer that holds a
// line of that size, or of max; otherwise it stays where it is as a piece
// of the line, which goes on in a new buffer. A line longer than max is
// dropped before its buffers pass max. A large buffer from which a line
// was returned is left for a fresh chunk even when it has room, so that a
// read that waits (for the next message, maybe for long) does not pin it.
//
// A line of L bytes thus allocates L when the hint holds it; otherwise
// about 2 x L while L is under max/2 (its pieces, and their join), and
// 1.5 x max beyond (pieces of max/2, then a buffer of max, at most half of
// which is left unused). A buffer doubled and copied as the line grew
// allocated 3 x L, and the garbage of a few such lines at once raised the
// peak RSS well above the messages' size (issue 12).
func (l *lineReader) fill() {
	n := l.end - l.start
	full := len(l.buf)-l.end < minRead
	switch {
	case full && (l.pieces != nil || n > 0 && n >= min(chunkSize, len(l.buf))/2):
		total, target := l.piecesLen+n, 0
		switch {
		case l.hint > total:
			target = min(l.hint, l.max)
		case total >= l.max/2:
			target = l.max
		}
		if target > 0 {
			l.gather(target + 2*minRead)
			break
		}
		// The pieces grow with the line, so that their number stays
		// small; pieceMax bounds what the last one may leave unused.
		l.pieces = append(l.pieces, l.buf[l.start:l.end:l.end])
		l.piecesLen = total
		size := min(max(total, chunkSize), pieceMax, l.max-total+2*minRead)
		l.buf, l.start, l.end, l.scanned = make([]byte, max(size, 2*minRead)), 0, 0, 0
	case full || (len(l.buf) > chunkSize && l.start > 0 && n <= chunkSize-minRead):
		size := chunkSize
		if l.buf == nil && l.first > 0 {
			size = l.first
		}
		l.gather(max(size, n+minRead))
	}
	n, err := l.r.Read(l.buf[l.end:])
	l.end += n
	if err != nil {
		l.err = err
	}
}

// gather moves the partial line, with its pieces, to a new buffer of size
// bytes.
func (l *lineReader) gather(size int) {
	nb := make([]byte, size)
	k := 0
	for _, p := range l.pieces {
		k += copy(nb[k:], p)
	}
	k += copy(nb[k:], l.buf[l.start:l.end])
	l.buf, l.start, l.end = nb, 0, k
	l.scanned += l.piecesLen // the pieces hold no line end
	l.pieces, l.piecesLen = nil, 0
}

// headOf returns a copy of the first n bytes of the line made of parts.
func headOf(parts [][]byte, n int) []byte {
	var b []byte
	for _, p := range parts {
		if len(b) == n {
			break
		}
		b = append(b, p[:min(len(p), n-len(b))]...)
	}
	return b
}

// tailOf returns a copy of the last n bytes of the line made of parts.
func tailOf(parts [][]byte, n int) []byte {
	i, k := len(parts), 0 // parts[i:] hold the last k bytes, k < n+len(parts[i])
	for i > 0 && k < n {
		i--
		k += len(parts[i])
	}
	var b []byte
	for j, p := range parts[i:] {
		if j == 0 && k > n {
			p = p[k-n:]
		}
		b = append(b, p...)
	}
	return b
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
	max    int // the limit on an event's data
}

func newSSEReader(r io.Reader, max int) *sseReader {
	return &sseReader{lr: newLineReader(r, max+sseFieldRoom, true), max: max, first: true}
}

// sseFieldRoom is what a line may have beyond the limit on its data: the
// field name ("data: "), and a BOM. The limit bounds the message.
const sseFieldRoom = 16

// newResponseSSEReader reads the SSE stream that answers one POST: it
// starts with a small buffer, and a line that outgrows it moves to one
// sized for hint, the size of the last large message of the upstream. An
// oversize event is reported early: the stream is closed, not read on.
func newResponseSSEReader(r io.Reader, max, hint int) *sseReader {
	lr := newLineReader(r, max+sseFieldRoom, true)
	lr.first, lr.hint, lr.early = responseFirstBuffer, hint, true
	return &sseReader{lr: lr, max: max, first: true}
}

// responseFirstBuffer is the first buffer of a response stream.
const responseFirstBuffer = 8 << 10

// next returns the next event. Data of an event with a single data line
// aliases the read buffer (no copy, however large). An event whose data
// is longer than the limit is skipped whole and reported with a
// *tooLongError: at once on a reader in early mode, otherwise once the
// event has ended.
func (s *sseReader) next() (sseEvent, error) {
	var (
		name    string
		data    []byte
		hasData bool
		joined  bool
		tooLong *tooLongError
	)
	for {
		line, err := s.lr.next()
		if err != nil {
			var tl *tooLongError
			if !errors.As(err, &tl) {
				// An event not ended by an empty line is discarded.
				return sseEvent{}, err
			}
			// The line's head starts with its field name, and its limit
			// has room for it.
			tl.max = s.max
			if h, ok := bytes.CutPrefix(tl.head, []byte("data:")); ok {
				tl.head = bytes.TrimPrefix(h, []byte(" "))
			}
			if s.lr.early {
				return sseEvent{}, tl
			}
			if tooLong == nil {
				tooLong = tl
			}
			continue
		}
		if s.first {
			s.first = false
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		}
		if len(line) == 0 {
			if tooLong != nil {
				return sseEvent{}, tooLong
			}
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
			case tooLong != nil:
			case len(value) > s.max || (hasData && len(data)+1+len(value) > s.max):
				// Data lines that are each short enough may not be
				// together.
				if !hasData {
					data = value
				}
				tooLong = &tooLongError{max: s.max, head: append([]byte(nil), data[:min(len(data), headSize)]...), tail: append([]byte(nil), value[max(0, len(value)-tailSize):]...)}
				data = nil
				if s.lr.early {
					return sseEvent{}, tooLong
				}
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
// reads into one buffer of exactly that size; otherwise into pieces, so
// that no growing buffer leaves garbage of several times the body's size:
// a body that ends before half of max is joined from its pieces at its
// end, and one that reaches it moves into one buffer of max bytes (and
// one, to see a body over max), where it is read to its end. A body thus
// allocates at most about twice its size, or 1.5 x max (as lineReader.fill
// does). A body over max is a *TooLargeError, and is not read further.
func readBody(r io.Reader, length int64, max int) ([]byte, error) {
	if length > int64(max) {
		return nil, &TooLargeError{Limit: max}
	}
	if length >= 0 {
		b := make([]byte, length)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	var (
		pieces [][]byte
		total  int
	)
	piece := make([]byte, 0, min(512, max+1))
	for {
		if len(piece) == cap(piece) {
			pieces = append(pieces, piece)
			if total >= max/2 {
				b := make([]byte, 0, max+1)
				for _, p := range pieces {
					b = append(b, p...)
				}
				return readRest(r, b, max)
			}
			piece = make([]byte, 0, min(2*cap(piece), pieceMax, max+1-total))
		}
		n, err := r.Read(piece[len(piece):cap(piece)])
		piece = piece[:len(piece)+n]
		if total += n; total > max {
			return nil, &TooLargeError{Limit: max}
		}
		if err == io.EOF {
			if len(pieces) == 0 {
				return piece, nil
			}
			return bytes.Join(append(pieces, piece), nil), nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// readRest reads the rest of a body into the free capacity of b, which is
// max+1 bytes: a body that fills it is over max.
func readRest(r io.Reader, b []byte, max int) ([]byte, error) {
	for len(b) < cap(b) {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if len(b) > max {
		return nil, &TooLargeError{Limit: max}
	}
	return b[:len(b):len(b)], nil
}

// idFromTail finds the numeric "id" member that ends a message: the last
// bytes of `..., "id": 42}`. Nothing else is recognised (an id that is
// not the last member, or an inner object's id before its closing brace).
func idFromTail(tail []byte) (int64, bool) {
	b := bytes.TrimRight(tail, " \t\r\n")
	if len(b) == 0 || b[len(b)-1] != '}' {
		return 0, false
	}
	b = bytes.TrimRight(b[:len(b)-1], " \t\r\n")
	i := len(b)
	for i > 0 && b[i-1] >= '0' && b[i-1] <= '9' {
		i--
	}
	digits := b[i:]
	if len(digits) == 0 || len(digits) > 18 {
		return 0, false
	}
	b = bytes.TrimRight(b[:i], " \t\r\n")
	if !bytes.HasSuffix(b, []byte(":")) {
		return 0, false
	}
	b = bytes.TrimRight(b[:len(b)-1], " \t\r\n")
	if !bytes.HasSuffix(b, []byte(`"id"`)) {
		return 0, false
	}
	b = bytes.TrimRight(b[:len(b)-4], " \t\r\n")
	if len(b) == 0 || (b[len(b)-1] != ',' && b[len(b)-1] != '{') {
		return 0, false
	}
	id, err := strconv.ParseInt(string(digits), 10, 64)
	return id, err == nil
}
