// Package jsonrpc reads and writes JSON-RPC 2.0 messages for MCP while
// keeping params, results and ids as raw JSON.
//
// The gateway's hot path forwards a result from an upstream server to a
// host. Decode therefore returns sub-slices of its input instead of copies,
// and the Append and Write functions splice raw bytes into their output
// without re-encoding them, so a result crosses the gateway byte for byte
// and fields from protocol revisions newer than ours pass through untouched.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Standard JSON-RPC 2.0 error codes, and the codes MCP reserves in the
// implementation-defined range (spec 2026-07-28, basic/index "Error Codes").
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603

	// CodeHeaderMismatch: the HTTP headers do not match the body, or a
	// required header is missing (2026-07-28).
	CodeHeaderMismatch = -32020
	// CodeMissingRequiredClientCapability: the request needs a client
	// capability that was not declared (2026-07-28).
	CodeMissingRequiredClientCapability = -32021
	// CodeUnsupportedProtocolVersion: the requested protocol version is not
	// implemented; data.supported lists the versions that are (2026-07-28).
	CodeUnsupportedProtocolVersion = -32022
)

// Sentinel errors wrapped by Decode. They match *Error values with the same
// code through Error.Is, so callers can branch with errors.Is either way.
var (
	ErrParse          = &Error{Code: CodeParseError, Message: "parse error"}
	ErrInvalidRequest = &Error{Code: CodeInvalidRequest, Message: "invalid request"}
)

// Error is a JSON-RPC error object. It is also a Go error.
type Error struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message)
}

// Is reports whether target is an *Error with the same code, so that
// errors.Is(err, ErrParse) holds for any parse error whatever its message.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}

// NewError returns an *Error with a formatted message.
func NewError(code int64, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Message is one JSON-RPC message: a request (Method and ID set), a
// notification (Method set, ID nil) or a response (Method empty, and Result
// or Error set). Raw fields alias the buffer the message was decoded from:
// that buffer must not be modified while the message is in use.
type Message struct {
	// ID is the raw JSON id (a string or a number, or null in an error
	// response to an unreadable request); nil when absent.
	ID json.RawMessage
	// Method is the unescaped method name; empty in responses.
	Method string
	// Params is the raw params value; nil when absent.
	Params json.RawMessage
	// Result is the raw result value of a successful response.
	Result json.RawMessage
	// Error is the error of a failed response.
	Error *Error
	// ToolError, ResultType and HasResultType describe a result that is
	// an object, as Decode found them in the same pass: its "isError"
	// member is true (a tool error), its "resultType" member ("" when
	// absent or not a string), and whether it has one at all.
	ToolError     bool
	ResultType    string
	HasResultType bool
	// Members says which of the result's top-level members that one
	// protocol era defines and another lacks it has, as Decode found
	// them in the same pass: a router translates a result between eras
	// (TranslateResult) only when it has one of them.
	Members Members

	// Spans is where Decode found those members in Result (nil when
	// none), so that TranslateResult copies without walking Result
	// again.
	Spans *ResultSpans
}

// Members is a set of a result's top-level members that matter when a
// result crosses protocol eras.
type Members uint8

// The members of a result that 2026-07-28 added (changelog, major
// changes 7 and 8, minor change 5), and _meta, which carries the
// server's identity in that revision (basic/index "_meta").
const (
	MemberResultType Members = 1 << iota
	MemberTTLMs
	MemberCacheScope
	MemberInputRequests
	MemberRequestState
	MemberMeta

	// ModernMembers are the members only 2026-07-28 defines.
	ModernMembers = MemberResultType | MemberTTLMs | MemberCacheScope | MemberInputRequests | MemberRequestState
)

// IsRequest reports whether m is a request, which expects a response.
func (m *Message) IsRequest() bool { return m.Method != "" && m.ID != nil }

// IsNotification reports whether m is a notification.
func (m *Message) IsNotification() bool { return m.Method != "" && m.ID == nil }

// IsResponse reports whether m is a response to a request.
func (m *Message) IsResponse() bool { return m.Method == "" }

// Decode parses one JSON-RPC message. The returned message's raw fields are
// sub-slices of data; nothing large is copied. Errors wrap ErrParse
// (malformed JSON) or ErrInvalidRequest (well-formed JSON that is not a
// JSON-RPC 2.0 message; batches are not supported by any revision the
// gateway speaks since 2025-06-18 and are rejected as well).
func Decode(data []byte) (*Message, error) {
	var m Message
	if err := DecodeInto(&m, data); err != nil {
		return nil, err
	}
	return &m, nil
}

// DecodeInto is Decode into a caller-provided message, which it overwrites.
func DecodeInto(m *Message, data []byte) error {
	*m = Message{}
	scanning(data)
	i := skipSpace(data, 0)
	if i < len(data) && data[i] == '[' {
		if _, err := skipValue(data, i); err != nil {
			return fmt.Errorf("%w: %v", ErrParse, err)
		}
		return fmt.Errorf("%w: JSON-RPC batches are not supported", ErrInvalidRequest)
	}
	if i >= len(data) || data[i] != '{' {
		if _, err := skipValue(data, i); err != nil {
			return fmt.Errorf("%w: %v", ErrParse, err)
		}
		return fmt.Errorf("%w: a message must be a JSON object", ErrInvalidRequest)
	}
	var e envelope
	// The flags of a result are gathered while it is walked, and kept
	// when the result member itself is (the last, if it is repeated).
	var flags struct {
		toolError, hasResultType bool
		resultType               string
		members                  Members
		era                      ResultSpans
	}
	// prevEnd is where the result member walked last ends: a member cut
	// from the result takes the separator before it (see DeleteField).
	prevEnd := -1
	end, err := eachMember(data, i, 0, func(key []byte, vs, ve int) bool {
		name := key[1 : len(key)-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			name = []byte(unquote(key))
		}
		if string(name) == "result" {
			m.ToolError, m.ResultType, m.HasResultType, m.Members = flags.toolError, flags.resultType, flags.hasResultType, flags.members
			m.Spans = nil
			if flags.members != 0 {
				spans := flags.era
				spans.rebase(vs)
				m.Spans = &spans
			}
		}
		flags.toolError, flags.resultType, flags.hasResultType, flags.members = false, "", false, 0
		flags.era, prevEnd = ResultSpans{}, -1
		e.member(m, name, data[vs:ve])
		return true
	}, "result", func(key []byte, vs, ve int) bool {
		v := data[vs:ve]
		from := prevEnd
		prevEnd = ve
		var kind Members
		switch {
		case keyEquals(key, "isError"):
			flags.toolError = string(v) == "true"
		case keyEquals(key, "resultType"):
			flags.resultType, flags.hasResultType = resultType(v), true
			kind = MemberResultType
		case keyEquals(key, "ttlMs"):
			kind = MemberTTLMs
		case keyEquals(key, "cacheScope"):
			kind = MemberCacheScope
		case keyEquals(key, "inputRequests"):
			kind = MemberInputRequests
		case keyEquals(key, "requestState"):
			kind = MemberRequestState
		case keyEquals(key, "_meta"):
			kind = MemberMeta
			flags.era.noteMeta(data, vs, ve)
		}
		if kind != 0 {
			flags.members |= kind
			flags.era.note(kind, from, ve)
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrParse, err)
	}
	if rest := skipSpace(data, end); rest != len(data) {
		return fmt.Errorf("%w: %v", ErrParse, syntaxErr(data, rest, "after the message"))
	}
	return m.check(&e)
}

// envelope is what a message's top-level members say, before check.
type envelope struct {
	version, method, errRaw []byte
	hasID, hasResult        bool
}

// member takes one top-level member (key unescaped, without quotes).
// JSON-RPC 2.0 defines no other members and MCP adds none at the top
// level; unknown members are ignored, as a newer peer may add some.
func (e *envelope) member(m *Message, key, v []byte) {
	switch string(key) {
	case "jsonrpc":
		e.version = v
	case "id":
		m.ID, e.hasID = v, true
	case "method":
		e.method = v
	case "params":
		m.Params = v
	case "result":
		m.Result, e.hasResult = v, true
	case "error":
		e.errRaw = v
	}
}

// check validates the envelope as JSON-RPC 2.0 and completes m.
func (m *Message) check(e *envelope) error {
	version, method, errRaw, hasID, hasResult := e.version, e.method, e.errRaw, e.hasID, e.hasResult
	if !bytes.Equal(version, []byte(`"2.0"`)) {
		return fmt.Errorf(`%w: "jsonrpc" must be "2.0"`, ErrInvalidRequest)
	}
	if hasID {
		switch c := m.ID[0]; {
		case c == '"', c == '-', c >= '0' && c <= '9':
		case c == 'n': // null: only valid in an error response
			if method != nil || errRaw == nil {
				return fmt.Errorf("%w: id must be a string or a number", ErrInvalidRequest)
			}
		default:
			return fmt.Errorf("%w: id must be a string or a number", ErrInvalidRequest)
		}
	}
	switch {
	case method != nil:
		if method[0] != '"' {
			return fmt.Errorf(`%w: "method" must be a string`, ErrInvalidRequest)
		}
		m.Method = unquote(method)
		if m.Method == "" {
			return fmt.Errorf(`%w: "method" must not be empty`, ErrInvalidRequest)
		}
		if hasResult || errRaw != nil {
			return fmt.Errorf(`%w: a message cannot have both "method" and "result" or "error"`, ErrInvalidRequest)
		}
		if m.Params != nil && m.Params[0] != '{' && m.Params[0] != '[' {
			return fmt.Errorf(`%w: "params" must be an object or an array`, ErrInvalidRequest)
		}
	case hasResult && errRaw != nil:
		return fmt.Errorf(`%w: a response cannot have both "result" and "error"`, ErrInvalidRequest)
	case hasResult:
		if !hasID {
			return fmt.Errorf(`%w: a response needs an "id"`, ErrInvalidRequest)
		}
	case errRaw != nil:
		if !hasID {
			return fmt.Errorf(`%w: a response needs an "id"`, ErrInvalidRequest)
		}
		var e Error
		if errRaw[0] != '{' || json.Unmarshal(errRaw, &e) != nil {
			return fmt.Errorf(`%w: "error" must be an object with an integer "code" and a string "message"`, ErrInvalidRequest)
		}
		m.Error = &e
	default:
		return fmt.Errorf(`%w: a message needs "method", "result" or "error"`, ErrInvalidRequest)
	}
	return nil
}

// resultType returns the value of a raw resultType member without
// allocating for the values the protocol defines.
func resultType(v []byte) string {
	switch string(v) {
	case `"complete"`:
		return "complete"
	case `"input_required"`:
		return "input_required"
	}
	s, _ := stringValue(v)
	return s
}

// unquote returns the value of a raw JSON string, which must be valid.
// Invalid UTF-8 becomes U+FFFD, as with encoding/json.
func unquote(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	_ = json.Unmarshal(raw, &s) // raw was validated by the scanner
	return s
}

// IDString returns a printable form of a raw id, for logs.
func IDString(id json.RawMessage) string {
	if len(id) > 0 && id[0] == '"' {
		return unquote(id)
	}
	return string(id)
}

// Int64ID parses a raw numeric id. It reports false for string ids and for
// numbers that are not integers.
func Int64ID(id json.RawMessage) (int64, bool) {
	n, err := strconv.ParseInt(string(id), 10, 64)
	return n, err == nil
}
