// Package mcpheader implements the HTTP header mirroring of MCP Streamable
// HTTP (2026-07-28 basic/transports/streamable-http "Request Metadata"):
// the value encoding of Mcp-Name and Mcp-Param-{Name}, and the
// x-mcp-header annotations that bind a tool's arguments to Mcp-Param
// headers.
//
// The gateway needs both directions: as a client of modern HTTP upstreams
// it mirrors arguments into headers; as a server it checks that a host's
// headers match the body it routes on.
package mcpheader

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// ParamPrefix starts the name of every header mirrored from a tool
// argument.
const ParamPrefix = "Mcp-Param-"

const (
	sentinelStart = "=?base64?"
	sentinelEnd   = "?="
)

// Encode encodes a value for Mcp-Name or Mcp-Param-*: as it is when it is
// visible ASCII, space and tab without leading or trailing whitespace;
// otherwise, and when it looks like the sentinel itself, as
// =?base64?...?=.
func Encode(v string) string {
	plain := !(strings.HasPrefix(v, sentinelStart) && strings.HasSuffix(v, sentinelEnd))
	for i := 0; plain && i < len(v); i++ {
		c := v[i]
		plain = c == '\t' || (c >= 0x20 && c <= 0x7e)
	}
	if plain && v != "" {
		first, last := v[0], v[len(v)-1]
		plain = first != ' ' && first != '\t' && last != ' ' && last != '\t'
	}
	if plain {
		return v
	}
	return sentinelStart + base64.StdEncoding.EncodeToString([]byte(v)) + sentinelEnd
}

// ErrInvalidValue is wrapped by Decode for a value no client may send.
var ErrInvalidValue = errors.New("invalid header value")

// Decode undoes Encode. It rejects characters a header value may not
// carry and a sentinel whose content is not base64 of UTF-8.
func Decode(v string) (string, error) {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c != '\t' && (c < 0x20 || c > 0x7e) {
			return "", fmt.Errorf("%w: character 0x%02x", ErrInvalidValue, c)
		}
	}
	if len(v) < len(sentinelStart)+len(sentinelEnd) || !strings.HasPrefix(v, sentinelStart) || !strings.HasSuffix(v, sentinelEnd) {
		return v, nil
	}
	b, err := base64.StdEncoding.DecodeString(v[len(sentinelStart) : len(v)-len(sentinelEnd)])
	if err != nil {
		return "", fmt.Errorf("%w: bad base64: %v", ErrInvalidValue, err)
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("%w: base64 content is not UTF-8", ErrInvalidValue)
	}
	return string(b), nil
}

// Binding is one x-mcp-header annotation of a tool: the header name part
// and the property path of the argument it mirrors.
type Binding struct {
	// Header is the {Name} of Mcp-Param-{Name}.
	Header string
	// Path is the chain of property names from the arguments object to
	// the annotated property.
	Path []string
}

// Bindings reads the x-mcp-header annotations of a tool definition and
// checks them ("Schema Extension"): each must sit on a property reached
// through "properties" alone, be a non-empty HTTP token unique without
// regard to case, and annotate a string, integer or boolean. An error
// means the tool is invalid and must be left out of tools/list. The
// bindings are sorted by header name.
func Bindings(tool json.RawMessage) ([]Binding, error) {
	schema, ok := jsonrpc.Field(tool, "inputSchema")
	if !ok || !bytes.Contains(schema, []byte("x-mcp-header")) {
		return nil, nil
	}
	var bindings []Binding
	seen := map[string]bool{}
	var walk func(s json.RawMessage, path []string, reachable bool) error
	walk = func(s json.RawMessage, path []string, reachable bool) error {
		var obj map[string]json.RawMessage
		if json.Unmarshal(s, &obj) != nil {
			return nil // boolean schemas and the like carry no annotations
		}
		if raw, ok := obj["x-mcp-header"]; ok {
			where := strings.Join(path, ".")
			if !reachable || len(path) == 0 {
				return fmt.Errorf("x-mcp-header at %q is not reachable through properties alone", where)
			}
			var h string
			if json.Unmarshal(raw, &h) != nil || !isToken(h) {
				return fmt.Errorf("property %q: x-mcp-header must be a non-empty HTTP token", where)
			}
			var typ string
			_ = json.Unmarshal(obj["type"], &typ)
			if typ != "string" && typ != "integer" && typ != "boolean" {
				return fmt.Errorf("property %q: x-mcp-header needs type string, integer or boolean, not %s", where, obj["type"])
			}
			lower := strings.ToLower(h)
			if seen[lower] {
				return fmt.Errorf("property %q: x-mcp-header %q is not unique", where, h)
			}
			seen[lower] = true
			bindings = append(bindings, Binding{Header: h, Path: append([]string(nil), path...)})
		}
		if raw, ok := obj["properties"]; ok {
			var props map[string]json.RawMessage
			if json.Unmarshal(raw, &props) == nil {
				for k, p := range props {
					if err := walk(p, append(path[:len(path):len(path)], k), reachable); err != nil {
						return err
					}
				}
			}
		}
		for k, v := range obj {
			switch schemaKeyword(k) {
			case "schema":
				if err := walk(v, append(path[:len(path):len(path)], k), false); err != nil {
					return err
				}
			case "array":
				var list []json.RawMessage
				_ = json.Unmarshal(v, &list)
				for _, e := range list {
					if err := walk(e, append(path[:len(path):len(path)], k), false); err != nil {
						return err
					}
				}
			case "map":
				var m map[string]json.RawMessage
				_ = json.Unmarshal(v, &m)
				for mk, e := range m {
					if err := walk(e, append(path[:len(path):len(path)], k, mk), false); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	if err := walk(schema, nil, true); err != nil {
		return nil, err
	}
	sort.Slice(bindings, func(i, j int) bool { return bindings[i].Header < bindings[j].Header })
	return bindings, nil
}

// schemaKeyword tells how a JSON Schema keyword holds subschemas: one
// ("schema"), a list ("array") or a map ("map"); "" for other keywords. An
// x-mcp-header below one of them is not statically reachable.
func schemaKeyword(k string) string {
	switch k {
	case "items", "additionalItems", "contains", "additionalProperties", "unevaluatedProperties",
		"unevaluatedItems", "propertyNames", "not", "if", "then", "else", "$ref":
		return "schema"
	case "prefixItems", "allOf", "anyOf", "oneOf":
		return "array"
	case "patternProperties", "dependentSchemas", "$defs", "definitions":
		return "map"
	}
	return ""
}

// isToken reports whether s is an RFC 9110 token (1*tchar).
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return s != ""
}

// ErrAmbiguous: an argument a binding reads is also spelled with other
// case in the same object, which a parser that matches names
// case-insensitively (Go's encoding/json) could read instead.
var ErrAmbiguous = errors.New("an argument bound to a header has two spellings")

// Ambiguous reports, wrapping ErrAmbiguous, an argument on a binding's
// path that the arguments also hold under another spelling of its name,
// so that the value a header carries could differ from the one an
// upstream reads.
func Ambiguous(bindings []Binding, arguments json.RawMessage) error {
	for _, b := range bindings {
		v := arguments
		for i, k := range b.Path {
			if other, ok := jsonrpc.CaseVariant(v, k); ok {
				return fmt.Errorf("%w: arguments.%s and %q (bound to %s%s)", ErrAmbiguous, strings.Join(b.Path[:i+1], "."), other, ParamPrefix, b.Header)
			}
			var ok bool
			if v, ok = jsonrpc.Field(v, k); !ok {
				break
			}
		}
	}
	return nil
}

// Value returns the header form of the argument a binding mirrors:
// strings as they are, integers in decimal, booleans as true or false. It
// reports false when the argument is absent or null, or not of those
// kinds: no header is then sent or expected.
func (b Binding) Value(arguments json.RawMessage) (string, bool) {
	v := arguments
	for _, k := range b.Path {
		var ok bool
		if v, ok = jsonrpc.Field(v, k); !ok {
			return "", false
		}
	}
	return headerString(v)
}

func headerString(v json.RawMessage) (string, bool) {
	if len(v) == 0 {
		return "", false
	}
	switch v[0] {
	case '"':
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "", false
		}
		return s, true
	case 't', 'f':
		switch string(v) {
		case "true", "false":
			return string(v), true
		}
		return "", false
	case 'n':
		return "", false
	}
	if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
		return strconv.FormatInt(n, 10), true
	}
	// An integer written as 42.0 or 4.2e1.
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53-1 {
		return "", false
	}
	return strconv.FormatInt(int64(f), 10), true
}

// Check validates the Mcp-Param-* headers of a tools/call against its
// arguments ("Server Behavior for Custom Headers"): every bound argument
// that has a value needs its header, with a value that decodes to the
// same (integers compared as numbers), and a header value with invalid
// characters is rejected. get returns a header's value ("" when absent).
// Arguments spelled twice (Ambiguous) are the router's to refuse, for
// hosts of both eras.
func Check(bindings []Binding, arguments json.RawMessage, get func(name string) string) error {
	for _, b := range bindings {
		name := ParamPrefix + b.Header
		raw := get(name)
		want, has := b.Value(arguments)
		if !has {
			if raw != "" {
				if _, err := Decode(raw); err != nil {
					return fmt.Errorf("%s header: %w", name, err)
				}
			}
			continue
		}
		if raw == "" {
			return fmt.Errorf("%s header is required: the body has a value for %s", name, strings.Join(b.Path, "."))
		}
		got, err := Decode(raw)
		if err != nil {
			return fmt.Errorf("%s header: %w", name, err)
		}
		if got != want && !sameNumber(got, want) {
			return fmt.Errorf("%s header value %q does not match body value %q", name, got, want)
		}
	}
	return nil
}

func sameNumber(a, b string) bool {
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	return err1 == nil && err2 == nil && x == y
}
