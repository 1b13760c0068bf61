package jsonrpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Field returns the raw value of the top-level member key of the JSON
// object obj, as a sub-slice of obj. It reports false when obj is not an
// object or has no such member. When a key occurs twice the first wins,
// matching Go's json package on a struct field.
func Field(obj json.RawMessage, key string) (json.RawMessage, bool) {
	vs, ve, ok := fieldSpan(obj, key)
	if !ok {
		return nil, false
	}
	return obj[vs:ve], true
}

// CaseVariant returns a top-level member name of obj that differs from
// key only in case (as encoding/json matches struct fields:
// bytes.EqualFold), when obj has one: a parser that matches names so
// could take that member for key.
func CaseVariant(obj json.RawMessage, key string) (string, bool) {
	scanning(obj)
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return "", false
	}
	var variant string
	_, _ = eachMember(obj, i, 0, func(k []byte, _, _ int) bool {
		name := unquote(k)
		if name != key && strings.EqualFold(name, key) {
			variant = name
			return false
		}
		return true
	}, "", nil)
	return variant, variant != ""
}

// StringField returns the value of the top-level string member key.
func StringField(obj json.RawMessage, key string) (string, bool) {
	v, ok := Field(obj, key)
	if !ok || len(v) == 0 || v[0] != '"' {
		return "", false
	}
	return unquote(v), true
}

func fieldSpan(obj json.RawMessage, key string) (vs, ve int, ok bool) {
	scanning(obj)
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return 0, 0, false
	}
	_, _ = eachMember(obj, i, 0, func(k []byte, s, e int) bool {
		if keyEquals(k, key) {
			vs, ve, ok = s, e, true
			return false
		}
		return true
	}, "", nil)
	return vs, ve, ok
}

// keyEquals compares a raw JSON key with a plain one without allocating
// in the common case of a key without escapes.
func keyEquals(raw []byte, key string) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return len(raw) == len(key)+2 && string(raw[1:len(raw)-1]) == key
	}
	return unquote(raw) == key
}

// SetField returns a new object: obj with member key set to value. An
// existing member is replaced in place; otherwise the member is added
// first. Everything else is copied byte for byte. A nil or empty obj is
// treated as {}.
func SetField(obj json.RawMessage, key string, value json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(obj)) == 0 {
		obj = json.RawMessage("{}")
	}
	start := skipSpace(obj, 0)
	if start >= len(obj) || obj[start] != '{' {
		return nil, fmt.Errorf("%w: expected a JSON object", ErrInvalidRequest)
	}
	if vs, ve, ok := fieldSpan(obj, key); ok {
		out := make([]byte, 0, len(obj)-(ve-vs)+len(value))
		out = append(out, obj[:vs]...)
		out = append(out, value...)
		return append(out, obj[ve:]...), nil
	}
	out := make([]byte, 0, len(obj)+len(key)+len(value)+4)
	out = append(out, obj[:start+1]...)
	out = AppendString(out, key)
	out = append(out, ':')
	out = append(out, value...)
	if rest := skipSpace(obj, start+1); rest < len(obj) && obj[rest] != '}' {
		out = append(out, ',')
	}
	return append(out, obj[start+1:]...), nil
}

// DeleteField returns obj without its top-level member key (all
// occurrences). obj is returned unchanged when it has no such member.
func DeleteField(obj json.RawMessage, key string) json.RawMessage {
	return DeleteFields(obj, key)
}

// DeleteFields is DeleteField for several keys at once, in one pass over
// obj and one copy.
func DeleteFields(obj json.RawMessage, keys ...string) json.RawMessage {
	scanning(obj)
	type span struct{ from, to int }
	var cut []span
	start := skipSpace(obj, 0)
	if start >= len(obj) || obj[start] != '{' {
		return obj
	}
	prevEnd := start + 1 // just past '{' or past the previous member
	_, _ = eachMember(obj, start, 0, func(k []byte, vs, ve int) bool {
		for _, key := range keys {
			if keyEquals(k, key) {
				cut = append(cut, span{prevEnd, ve})
				break
			}
		}
		prevEnd = ve
		return true
	}, "", nil)
	if len(cut) == 0 {
		return obj
	}
	out := make([]byte, 0, len(obj))
	from := 0
	for _, c := range cut {
		out = append(out, obj[from:c.from]...)
		from = c.to
	}
	out = append(out, obj[from:]...)
	return fixCommas(out)
}

// fixCommas repairs the separators DeleteField leaves behind: a member
// cut from the front of an object leaves "{," and the cuts never leave a
// trailing comma because each cut starts at the end of the previous
// member (its comma is kept only when a member follows).
func fixCommas(obj []byte) []byte {
	i := skipSpace(obj, 0)
	j := skipSpace(obj, i+1)
	if j < len(obj) && obj[j] == ',' {
		return append(obj[:i+1], obj[j+1:]...)
	}
	return obj
}
