package jsonrpc

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The scanner below walks JSON without building values: it returns the
// byte span of each value so that callers can keep sub-slices of the input
// instead of copies. It validates as it goes (the same grammar as
// encoding/json.Valid, which FuzzScanMatchesValid checks), so a span it
// returns is always well-formed JSON.

// scanHook and encodeHook, when set (by tests, export_test.go), are told
// of each walk of a message or object that begins (Decode, DecodeRequest,
// a Field lookup or rewrite, the parse of an Outgoing's own params) and
// of each encoding of an Outgoing's params: a test counts them to show
// that a host's request is walked once and encoded once.
var (
	scanHook   func(data []byte)
	encodeHook func(o *Outgoing)
)

// scanning reports the start of a walk over data to scanHook.
func scanning(data []byte) {
	if scanHook != nil {
		scanHook(data)
	}
}

// errSyntax is wrapped by every scanner error; Decode turns it into ErrParse.
var errSyntax = errors.New("invalid JSON")

func syntaxErr(data []byte, i int, what string) error {
	if i >= len(data) {
		return fmt.Errorf("%w: unexpected end of input, %s", errSyntax, what)
	}
	return fmt.Errorf("%w: unexpected %q at offset %d, %s", errSyntax, data[i], i, what)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(data []byte, i int) int {
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	return i
}

// maxDepth bounds nesting so that hostile input cannot exhaust the stack.
// encoding/json uses 10000; real MCP messages nest a few dozen levels.
const maxDepth = 10000

// skipValue returns the index just past the JSON value starting at data[i]
// (i must point at its first byte, not at whitespace).
func skipValue(data []byte, i int) (int, error) {
	return skipValueDepth(data, i, 0)
}

func skipValueDepth(data []byte, i, depth int) (int, error) {
	if i >= len(data) {
		return i, syntaxErr(data, i, "expected a value")
	}
	switch c := data[i]; {
	case c == '"':
		return skipString(data, i)
	case c == '{':
		return skipObject(data, i, depth+1)
	case c == '[':
		return skipArray(data, i, depth+1)
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(data, i)
	case c == 't':
		return skipLiteral(data, i, "true")
	case c == 'f':
		return skipLiteral(data, i, "false")
	case c == 'n':
		return skipLiteral(data, i, "null")
	default:
		return i, syntaxErr(data, i, "expected a value")
	}
}

func skipLiteral(data []byte, i int, lit string) (int, error) {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return i, syntaxErr(data, i, "expected "+lit)
	}
	return i + len(lit), nil
}

// skipString returns the index past the closing quote of the string at
// data[i]. It rejects control characters and malformed escapes, as JSON does.
func skipString(data []byte, i int) (int, error) {
	i++ // opening quote
	for {
		// Skip eight bytes at a time while none of them ends the string,
		// starts an escape or is a control character: large results are
		// mostly long strings (text, base64), and every Decode and Field
		// lookup on them comes through here.
		for i+8 <= len(data) && !hasStringSpecial(binary.LittleEndian.Uint64(data[i:])) {
			i += 8
		}
		if i >= len(data) {
			break
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
				if len(data)-i < 6 {
					return i, syntaxErr(data, len(data), "in \\u escape")
				}
				for k := i + 2; k < i+6; k++ {
					if !isHex(data[k]) {
						return i, syntaxErr(data, k, "in \\u escape")
					}
				}
				i += 6
			default:
				return i, syntaxErr(data, i+1, "in string escape")
			}
		case c < 0x20:
			return i, syntaxErr(data, i, "control character in string")
		default:
			i++
		}
	}
	return i, syntaxErr(data, i, "in string")
}

// hasStringSpecial reports whether any byte of v is '"', '\\' or below
// 0x20 (the classic SWAR tests: a byte b is zero when (b-1) &^ b has its
// high bit set, and below n when (b-n) &^ b does).
func hasStringSpecial(v uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	q := v ^ (lo * '"')
	bs := v ^ (lo * '\\')
	return ((q-lo)&^q|(bs-lo)&^bs|(v-lo*0x20)&^v)&hi != 0
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// skipNumber follows the JSON number grammar exactly:
// -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
func skipNumber(data []byte, i int) (int, error) {
	if data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i] >= '1' && data[i] <= '9':
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	default:
		return i, syntaxErr(data, i, "in number")
	}
	if i < len(data) && data[i] == '.' {
		i++
		if i >= len(data) || !isDigit(data[i]) {
			return i, syntaxErr(data, i, "after decimal point")
		}
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || !isDigit(data[i]) {
			return i, syntaxErr(data, i, "in exponent")
		}
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	}
	return i, nil
}

func skipArray(data []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return i, fmt.Errorf("%w: nesting deeper than %d", errSyntax, maxDepth)
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = skipValueDepth(data, i, depth); err != nil {
			return i, err
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

func skipObject(data []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return i, fmt.Errorf("%w: nesting deeper than %d", errSyntax, maxDepth)
	}
	return eachMember(data, i, depth, nil, "", nil)
}

// memberFunc is called for each member of an object with the raw key
// (including its quotes) and the value's span; returning false stops the
// walk.
type memberFunc func(key []byte, valueStart, valueEnd int) bool

// eachMember validates the object starting at data[i] and returns the index
// just past it. It calls fn (when not nil) for each member. fn returning
// false stops the walk early: the rest is then not validated and the index
// returned is -1. When the value of member descend (an unescaped key)
// is an object, its members are walked with inner in the same pass;
// inner must not stop the walk.
func eachMember(data []byte, i, depth int, fn memberFunc, descend string, inner memberFunc) (int, error) {
	if i >= len(data) || data[i] != '{' {
		return i, syntaxErr(data, i, "expected an object")
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return i, syntaxErr(data, i, "expected an object key")
		}
		keyEnd, err := skipString(data, i)
		if err != nil {
			return i, err
		}
		key := data[i:keyEnd]
		i = skipSpace(data, keyEnd)
		if i >= len(data) || data[i] != ':' {
			return i, syntaxErr(data, i, "expected ':' after object key")
		}
		i = skipSpace(data, i+1)
		valueStart := i
		if descend != "" && i < len(data) && data[i] == '{' && keyEquals(key, descend) {
			if depth+1 > maxDepth {
				return i, fmt.Errorf("%w: nesting deeper than %d", errSyntax, maxDepth)
			}
			i, err = eachMember(data, i, depth+1, inner, "", nil)
		} else {
			i, err = skipValueDepth(data, i, depth)
		}
		if err != nil {
			return i, err
		}
		if fn != nil && !fn(key, valueStart, i) {
			return -1, nil
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
