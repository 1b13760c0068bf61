package jsonrpc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Strict decoding of what hosts send (DecodeRequest).
//
// The gateway checks a request (which tool, which resource, which
// progress token) and an upstream's JSON parser then reads the same
// bytes again. Wherever two parsers could read them differently, the
// gateway's check says nothing about what the upstream runs:
// encoding/json, JSON.parse and Python's json keep the last of two
// members with one name where a first-match lookup keeps the first;
// encoding/json also matches a struct field case-insensitively (folding
// "ſ" to "s" and the Kelvin sign to "k"); invalid UTF-8 and lone UTF-16
// surrogates become U+FFFD in one parser and stay as they are in
// another. So a host's message must be I-JSON (RFC 7493): valid UTF-8,
// no lone surrogates, no object with two members of one name compared
// after unescaping; and where the gateway reads a member, no other member
// of that object may differ from its name only in case. Anything else is
// refused with ErrInvalidRequest, naming the member, never forwarded.

// level says which object of a host's message the strict scanner is in:
// the members the gateway reads there are recorded, and other keys are
// checked against their names.
type level uint8

const (
	levelNone   level = iota // an object the gateway does not read into
	levelTop                 // the message itself
	levelParams              // params
	levelMeta                // params._meta
	levelRef                 // params.ref (completion/complete)
)

// readNames are the members the gateway reads at each level, as bytes for
// allocation-free case-folded comparisons.
var readNames = [...][][]byte{
	levelTop: byteNames("jsonrpc", "id", "method", "params", "result", "error"),
	levelParams: byteNames("name", "uri", "arguments", "_meta", "ref", "cursor", "level",
		"requestState", "inputResponses", "requestId", "protocolVersion", "capabilities",
		"taskId", "task"),
	levelMeta: byteNames("progressToken", MetaProtocolVersion, MetaClientCapabilities, MetaClientInfo,
		MetaLogLevel, "traceparent", "tracestate", "baggage"),
	levelRef: byteNames("type", "name", "uri"),
}

func byteNames(names ...string) [][]byte {
	out := make([][]byte, len(names))
	for i, n := range names {
		out[i] = []byte(n)
	}
	return out
}

// child is the level of the object value of member key at level l.
func (l level) child(key []byte) level {
	switch {
	case l == levelTop && string(key) == "params":
		return levelParams
	case l == levelParams && string(key) == "_meta":
		return levelMeta
	case l == levelParams && string(key) == "ref":
		return levelRef
	}
	return levelNone
}

// smallObject is the number of members up to which an object's keys are
// checked for duplicates by comparing each with the others; a larger
// object uses a map, so that a hostile object of many members costs
// linear time.
const smallObject = 16

// strictScan walks one host message, validating it as the scanner in
// scan.go does plus the I-JSON rules above, and records the members of
// the objects the gateway reads.
type strictScan struct {
	data []byte
	// keys holds the unescaped keys of the objects being walked, the
	// innermost object's last; each object checks its keys against its
	// own part only.
	keys [][]byte
	// objects are where the members of each read level below the top
	// are recorded; the top level's go to env and msg.
	objects [levelRef + 1]*Object
	env     envelope
	msg     *Message
	// used is the most keys held at once, for release.
	used int
}

// scanners keeps strictScans, whose key stacks would otherwise be
// allocated for every message.
var scanners = sync.Pool{New: func() any { return &strictScan{keys: make([][]byte, 0, 32)} }}

// maxPooledKeys bounds the key stack a pooled strictScan keeps: one
// message with a huge object must not pin its stack for every message
// after it.
const maxPooledKeys = 1024

// release returns s to the pool without references into the message.
func (s *strictScan) release() {
	keys := s.keys[:0]
	if cap(keys) > maxPooledKeys {
		keys = make([][]byte, 0, 32)
	} else {
		clear(s.keys[:s.used])
	}
	*s = strictScan{keys: keys}
	scanners.Put(s)
}

// errStrict is the error of a message that is valid JSON but breaks the
// strict rules. what says what is wrong, with placeMark where the place
// goes; path is the place, which each enclosing object and array
// prepends its part to as the error travels out (so a message that is
// accepted pays nothing for it).
type errStrict struct {
	what string
	path string
}

// placeMark stands for the place in errStrict.what: a NUL byte, which
// strconv.Quote (the only way a member name gets into what) never leaves
// unescaped.
const placeMark = "\x00"

func (s *strictScan) fail(format string, args ...any) error {
	return &errStrict{what: fmt.Sprintf(format, args...)}
}

func (e *errStrict) Error() string {
	place := "the message"
	if e.path != "" {
		place = strings.TrimPrefix(e.path, ".")
	}
	return strings.Replace(e.what, placeMark, place, 1)
}

// within prepends part to the path of a strict error; other errors pass.
func within(err error, part string) error {
	if e, ok := err.(*errStrict); ok {
		e.path = part + e.path
	}
	return err
}

// value walks the value at data[i].
func (s *strictScan) value(i, depth int) (int, error) {
	data := s.data
	if i >= len(data) {
		return i, syntaxErr(data, i, "expected a value")
	}
	switch data[i] {
	case '"':
		return s.str(i)
	case '{':
		return s.object(i, depth+1, levelNone)
	case '[':
		return s.array(i, depth+1)
	}
	return skipValueDepth(data, i, depth) // a number or a literal
}

func (s *strictScan) array(i, depth int) (int, error) {
	data := s.data
	if depth > maxDepth {
		return i, fmt.Errorf("%w: nesting deeper than %d", errSyntax, maxDepth)
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return i + 1, nil
	}
	for k := 0; ; k++ {
		var err error
		if i, err = s.value(i, depth); err != nil {
			return i, within(err, "["+strconv.Itoa(k)+"]")
		}
		i = skipSpace(data, i)
		if i >= len(data) {
			return i, syntaxErr(data, i, "in array")
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case ']':
			return i + 1, nil
		default:
			return i, syntaxErr(data, i, "after array element")
		}
	}
}

// object walks the object at data[i], which is at level lv.
func (s *strictScan) object(i, depth int, lv level) (int, error) {
	data := s.data
	if depth > maxDepth {
		return i, fmt.Errorf("%w: nesting deeper than %d", errSyntax, maxDepth)
	}
	start := i
	base := len(s.keys)
	if lv != levelNone {
		if o := s.objects[lv]; o != nil {
			o.data = data
		}
	}
	end, err := s.members(i, depth, lv, base)
	s.keys = s.keys[:base]
	if err == nil && lv != levelNone {
		if o := s.objects[lv]; o != nil {
			o.Raw = data[start:end]
		}
	}
	return end, err
}

func (s *strictScan) members(i, depth int, lv level, base int) (int, error) {
	data := s.data
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return i + 1, nil
	}
	var seen map[string]struct{} // for objects of more than smallObject members
	var out *Object
	if lv != levelNone {
		out = s.objects[lv]
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return i, syntaxErr(data, i, "expected an object key")
		}
		keyStart := i
		keyEnd, err := s.str(i)
		if err != nil {
			return i, err
		}
		rawKey := data[i:keyEnd]
		key := rawKey[1 : len(rawKey)-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			key = []byte(unquote(rawKey))
		}
		if seen == nil {
			for _, k := range s.keys[base:] {
				if bytes.Equal(k, key) {
					return i, s.fail("member %s appears more than once in "+placeMark, strconv.Quote(string(key)))
				}
			}
			s.keys = append(s.keys, key)
			s.used = max(s.used, len(s.keys))
			if len(s.keys)-base > smallObject {
				seen = make(map[string]struct{}, 2*smallObject)
				for _, k := range s.keys[base:] {
					seen[string(k)] = struct{}{}
				}
			}
		} else {
			if _, dup := seen[string(key)]; dup {
				return i, s.fail("member %s appears more than once in "+placeMark, strconv.Quote(string(key)))
			}
			seen[string(key)] = struct{}{}
		}
		if lv != levelNone {
			if name := foldMatch(key, readNames[lv]); name != nil {
				return i, s.fail("member %s in "+placeMark+" differs only in case from %s, which the gateway reads", strconv.Quote(string(key)), strconv.Quote(string(name)))
			}
		}
		i = skipSpace(data, keyEnd)
		if i >= len(data) || data[i] != ':' {
			return i, syntaxErr(data, i, "expected ':' after object key")
		}
		i = skipSpace(data, i+1)
		valueStart := i
		if child := lv.child(key); child != levelNone && i < len(data) && data[i] == '{' {
			i, err = s.object(i, depth+1, child)
		} else {
			i, err = s.value(i, depth)
		}
		if err != nil {
			return i, within(err, "."+string(key))
		}
		switch {
		case out != nil:
			out.add(keyStart, keyEnd, valueStart, i)
		case lv == levelTop:
			s.env.member(s.msg, key, data[valueStart:i])
		}
		i = skipSpace(data, i)
		if i >= len(data) {
			return i, syntaxErr(data, i, "in object")
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return i + 1, nil
		default:
			return i, syntaxErr(data, i, "after object member")
		}
	}
}

// foldMatch returns the name in names that key equals only when case is
// ignored (as encoding/json matches struct fields: bytes.EqualFold), or
// nil when key is one of names exactly or matches none.
func foldMatch(key []byte, names [][]byte) []byte {
	for _, n := range names {
		if bytes.Equal(key, n) {
			return nil
		}
	}
	for _, n := range names {
		if bytes.EqualFold(key, n) {
			return n
		}
	}
	return nil
}

// str returns the index past the string at data[i], which must be valid
// UTF-8 and free of lone surrogates besides valid JSON. It is skipString
// (scan.go) with those checks, in the same pass: its eight-byte loop
// also stops at every non-ASCII byte, which the plain scanner, run over
// every byte of every result, must not pay for; and skipString followed
// by utf8.Valid over the span walks each string twice (about 10% slower
// on the ASCII that hosts mostly send).
func (s *strictScan) str(i int) (int, error) {
	data := s.data
	i++ // opening quote
	for {
		// Eight bytes at a time while none ends the string, starts an
		// escape, is a control character or is outside ASCII.
		for i+8 <= len(data) {
			v := binary.LittleEndian.Uint64(data[i:])
			if hasStringSpecial(v) || v&0x8080808080808080 != 0 {
				break
			}
			i += 8
		}
		if i >= len(data) {
			return i, syntaxErr(data, i, "in string")
		}
		c := data[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(data) {
				return i, syntaxErr(data, i+1, "in string escape")
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				r, ok := hex4(data, i+2)
				if !ok {
					return i, syntaxErr(data, i+2, "in \\u escape")
				}
				switch {
				case r >= 0xDC00 && r < 0xE000:
					return i, s.fail("a string in "+placeMark+" holds a lone UTF-16 surrogate (\\u%04x)", r)
				case r >= 0xD800 && r < 0xDC00:
					// A high surrogate must be followed by a low one.
					lo, ok := rune(0), false
					if i+12 <= len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
						lo, ok = hex4(data, i+8)
					}
					if !ok || lo < 0xDC00 || lo >= 0xE000 {
						return i, s.fail("a string in "+placeMark+" holds a lone UTF-16 surrogate (\\u%04x)", r)
					}
					i += 12
				default:
					i += 6
				}
			default:
				return i, syntaxErr(data, i+1, "in string escape")
			}
		case c < 0x20:
			return i, syntaxErr(data, i, "control character in string")
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size <= 1 {
				return i, s.fail("a string in " + placeMark + " is not valid UTF-8")
			}
			i += size
		}
	}
}

// hex4 reads the four hexadecimal digits of a \u escape at data[i:].
func hex4(data []byte, i int) (rune, bool) {
	if len(data)-i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

// CheckIJSON returns an error when data is not one JSON value that is
// I-JSON (RFC 7493): valid UTF-8, no lone surrogates, no object with
// two members of one name compared after unescaping, at any depth. It
// is the check DecodeRequest makes of a host's message, for bytes that
// are read again by other parsers (an upstream's definitions, which the
// gateway hashes and hosts read): where parsers could disagree on what
// the bytes say, a check of them says nothing.
func CheckIJSON(data []byte) error {
	s := scanners.Get().(*strictScan)
	defer s.release()
	*s = strictScan{data: data, keys: s.keys[:0]}
	i := skipSpace(data, 0)
	end, err := s.value(i, 0)
	if err == nil && skipSpace(data, end) != len(data) {
		err = syntaxErr(data, skipSpace(data, end), "after the value")
	}
	return err
}
