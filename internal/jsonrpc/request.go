package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// _meta keys of the 2026-07-28 per-request protocol fields (basic/index
// "_meta").
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
)

// Request is a message from a host, decoded once and strictly by
// DecodeRequest: its JSON-RPC envelope, and the members of its params
// that the gateway reads. Everything behind the boundary reads these
// fields; nothing scans the raw params again. A host also sends
// notifications and (in the legacy era) responses: Message tells them
// apart.
//
// String fields are empty, and raw fields nil, when the member is absent
// or (for strings) not a string. Raw fields alias the decoded buffer,
// which must not change while the request is in use.
type Request struct {
	Message

	// Name is params.name (tools/call, prompts/get); HasName is set when
	// it is a string.
	Name    string
	HasName bool
	// URI is params.uri (resources/read, subscribe, unsubscribe).
	URI    string
	HasURI bool
	// Arguments is params.arguments (tools/call, prompts/get).
	Arguments json.RawMessage
	// Cursor is params.cursor of a list request.
	Cursor json.RawMessage
	// Level is params.level (logging/setLevel).
	Level string
	// RequestState (when a string) and InputResponses are the members of
	// a 2026-07-28 multi round-trip retry (basic/patterns/mrtr);
	// HasRequestState is set when requestState is present at all.
	RequestState    string
	HasRequestState bool
	InputResponses  json.RawMessage
	// RequestID is params.requestId (notifications/cancelled).
	RequestID json.RawMessage
	// TaskID is params.taskId (tasks/get, tasks/result, tasks/cancel,
	// tasks/update); HasTaskID is set when it is a string.
	TaskID    string
	HasTaskID bool
	// Task is params.task, the task augmentation of a 2025-11-25 request
	// (basic/utilities/tasks "Creating Tasks"); nil when absent.
	Task json.RawMessage
	// ProtocolVersion and Capabilities are initialize's.
	ProtocolVersion string
	Capabilities    json.RawMessage
	// Ref is params.ref (completion/complete).
	Ref Ref
	// Meta is params._meta.
	Meta Meta

	// params holds params' members in order, for Outgoing.
	params Object
	// buf backs the member lists of params, _meta and ref, which are
	// short, and out is the first Outgoing made from the request (most
	// make one): the whole Request is then one allocation.
	buf     [12]member
	out     Outgoing
	outUsed bool
}

// Ref is what completion/complete refers to: a prompt by name or a
// resource (template) by URI.
type Ref struct {
	Type, Name, URI string
	obj             Object
}

// Meta is what the gateway reads of params._meta.
type Meta struct {
	// ProgressToken is the raw token (a string or a number); nil when
	// absent or null.
	ProgressToken json.RawMessage
	// ProtocolVersion, ClientCapabilities (raw), ClientInfo (raw) and
	// LogLevel are the 2026-07-28 per-request fields.
	ProtocolVersion    string
	HasProtocolVersion bool
	ClientCapabilities json.RawMessage
	ClientInfo         json.RawMessage
	LogLevel           string
	// TraceParent, TraceState and Baggage are W3C trace context.
	TraceParent, TraceState, Baggage string

	obj Object
}

// Has reports whether params._meta is an object with a member key.
func (m *Meta) Has(key string) bool {
	_, ok := m.obj.get(key)
	return ok
}

// Object is a JSON object decoded once: its raw bytes, and its members
// in order, as offsets into the buffer it was decoded from.
type Object struct {
	Raw     json.RawMessage
	data    []byte
	members []member
}

// MaxRequestBytes is the largest message DecodeRequest reads: a member's
// place is kept in 32 bits. The fronts' own limits are lower
// (max_body_bytes is at most 1 GiB).
const MaxRequestBytes = math.MaxInt32

// member is one member of an Object: the spans of its key (quotes
// included, as written) and of its value in Object.data. Offsets keep
// it small and free of pointers, which the garbage collector need not
// follow.
type member struct{ k0, k1, v0, v1 int32 }

func (o *Object) add(k0, k1, v0, v1 int) {
	o.members = append(o.members, member{int32(k0), int32(k1), int32(v0), int32(v1)})
}

// rawKey is m's key as written, quotes included.
func (o *Object) rawKey(m member) []byte { return o.data[m.k0:m.k1] }

// key is m's key unescaped (a copy only when it had escapes).
func (o *Object) key(m member) []byte {
	raw := o.data[m.k0:m.k1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1]
	}
	return []byte(unquote(raw))
}

func (o *Object) value(m member) json.RawMessage { return o.data[m.v0:m.v1] }

func (o *Object) get(key string) (json.RawMessage, bool) {
	for _, m := range o.members {
		if string(o.key(m)) == key {
			return o.value(m), true
		}
	}
	return nil, false
}

// DecodeRequest decodes a message a host sent, strictly: besides what
// Decode checks, the message must be I-JSON (RFC 7493: valid UTF-8, no
// lone surrogates, no object with two members of one name after
// unescaping), and no member of params, params._meta, params.ref or the
// message itself may differ only in case from a member the gateway
// reads there (encoding/json would match it). Such a message is refused
// with an error that wraps ErrInvalidRequest and names the member,
// because an upstream's parser could read it differently from the
// gateway: a check the gateway made would not be what the upstream runs.
//
// The whole message is walked once; the typed fields come from that walk.
func DecodeRequest(data []byte) (*Request, error) {
	if len(data) > MaxRequestBytes {
		return nil, fmt.Errorf("%w: a message of %d bytes is larger than the %d a request may be", ErrInvalidRequest, len(data), MaxRequestBytes)
	}
	scanning(data)
	r := &Request{}
	r.params.members = r.buf[0:0:6]
	r.Meta.obj.members = r.buf[6:6:10]
	r.Ref.obj.members = r.buf[10:10:12]
	s := scanners.Get().(*strictScan)
	defer s.release()
	*s = strictScan{data: data, keys: s.keys[:0], msg: &r.Message}
	s.objects[levelParams] = &r.params
	s.objects[levelMeta] = &r.Meta.obj
	s.objects[levelRef] = &r.Ref.obj
	i := skipSpace(data, 0)
	if i >= len(data) {
		return nil, fmt.Errorf("%w: %v", ErrParse, syntaxErr(data, i, "expected a value"))
	}
	if data[i] != '{' {
		end, err := s.value(i, 0)
		if err == nil && skipSpace(data, end) != len(data) {
			err = syntaxErr(data, skipSpace(data, end), "after the message")
		}
		if err = strictErr(err); err != nil {
			return nil, err
		}
		if data[i] == '[' {
			return nil, fmt.Errorf("%w: JSON-RPC batches are not supported", ErrInvalidRequest)
		}
		return nil, fmt.Errorf("%w: a message must be a JSON object", ErrInvalidRequest)
	}
	end, err := s.object(i, 0, levelTop)
	if err == nil && skipSpace(data, end) != len(data) {
		err = syntaxErr(data, skipSpace(data, end), "after the message")
	}
	if err = strictErr(err); err != nil {
		return nil, err
	}
	if err := r.Message.check(&s.env); err != nil {
		return nil, err
	}
	r.fill()
	return r, nil
}

// strictErr wraps a scanner error as DecodeRequest returns it.
func strictErr(err error) error {
	var se *errStrict
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return fmt.Errorf("%w: %s (a message that JSON parsers could read in different ways is refused)", ErrInvalidRequest, se)
	}
	return fmt.Errorf("%w: %v", ErrParse, err)
}

// fill sets the typed fields from the members the scan recorded.
func (r *Request) fill() {
	p := &r.params
	for _, m := range p.members {
		v := p.value(m)
		switch string(p.key(m)) {
		case "name":
			r.Name, r.HasName = stringValue(v)
		case "uri":
			r.URI, r.HasURI = stringValue(v)
		case "arguments":
			r.Arguments = v
		case "cursor":
			r.Cursor = v
		case "level":
			r.Level, _ = stringValue(v)
		case "requestState":
			r.RequestState, _ = stringValue(v)
			r.HasRequestState = true
		case "inputResponses":
			r.InputResponses = v
		case "requestId":
			r.RequestID = v
		case "taskId":
			r.TaskID, r.HasTaskID = stringValue(v)
		case "task":
			r.Task = v
		case "protocolVersion":
			r.ProtocolVersion, _ = stringValue(v)
		case "capabilities":
			r.Capabilities = v
		}
	}
	ref := &r.Ref.obj
	for _, m := range ref.members {
		switch string(ref.key(m)) {
		case "type":
			r.Ref.Type, _ = stringValue(ref.value(m))
		case "name":
			r.Ref.Name, _ = stringValue(ref.value(m))
		case "uri":
			r.Ref.URI, _ = stringValue(ref.value(m))
		}
	}
	meta := &r.Meta
	for _, m := range meta.obj.members {
		v := meta.obj.value(m)
		switch string(meta.obj.key(m)) {
		case "progressToken":
			if !bytes.Equal(v, []byte("null")) {
				meta.ProgressToken = v
			}
		case MetaProtocolVersion:
			meta.ProtocolVersion, meta.HasProtocolVersion = stringValue(v)
		case MetaClientCapabilities:
			meta.ClientCapabilities = v
		case MetaClientInfo:
			meta.ClientInfo = v
		case MetaLogLevel:
			meta.LogLevel, _ = stringValue(v)
		case "traceparent":
			meta.TraceParent, _ = stringValue(v)
		case "tracestate":
			meta.TraceState, _ = stringValue(v)
		case "baggage":
			meta.Baggage, _ = stringValue(v)
		}
	}
}

// stringValue returns the value of a raw JSON string.
func stringValue(v json.RawMessage) (string, bool) {
	if len(v) == 0 || v[0] != '"' {
		return "", false
	}
	return unquote(v), true
}

// With returns the ref object with member key set to value (raw JSON),
// every other member as the host wrote it.
func (r *Ref) With(key string, value json.RawMessage) json.RawMessage {
	return appendObject(nil, &r.obj, []setMember{{key: key, value: value}})
}

// WithCall returns the request r would be with params.name set to name
// and params.arguments to arguments (raw JSON, which must be valid; nil
// removes the member): a call of one tool made from a request that
// names another (search mode's call_tool). Every other member of params,
// _meta included, is r's as the host wrote it, in its place; the typed
// fields are r's but Name and Arguments. The new params are written
// once, their members recorded as they are written (nothing walks them
// again), and are the result's Params and what its Outgoing starts from.
// r is not changed, and the result shares r's buffer, which must not
// change while either is in use.
func (r *Request) WithCall(name string, arguments json.RawMessage) *Request {
	c := &Request{}
	*c = *r
	c.out, c.outUsed = Outgoing{}, false
	c.Name, c.HasName, c.Arguments = name, true, arguments
	c.Meta.obj.members = append(c.buf[6:6:10], r.Meta.obj.members...)
	c.Ref.obj.members = append(c.buf[10:10:12], r.Ref.obj.members...)

	p := &r.params
	// The new params are r's with two values replaced (call_tool's
	// arguments hold the tool's, so they shrink): sized for that.
	size := len(p.Raw) + len(name) + len(arguments) + len(`,"name":"","arguments":}`)
	if old, ok := p.get("arguments"); ok {
		size -= len(old)
	}
	w := objectWriter{buf: make([]byte, 1, size), members: c.buf[0:0:6]}
	w.buf[0] = '{'
	hasName, hasArguments := false, false
	for _, m := range p.members {
		switch string(p.key(m)) {
		case "name":
			hasName = true
			w.string(p.rawKey(m), name)
		case "arguments":
			hasArguments = true
			if arguments != nil {
				w.raw(p.rawKey(m), arguments)
			}
		default:
			w.raw(p.rawKey(m), p.value(m))
		}
	}
	if !hasName {
		w.string([]byte(`"name"`), name)
	}
	if !hasArguments && arguments != nil {
		w.raw([]byte(`"arguments"`), arguments)
	}
	w.buf = append(w.buf, '}')
	c.params = Object{Raw: w.buf, data: w.buf, members: w.members}
	c.Params = w.buf
	return c
}

// objectWriter writes an object's members and records where each is, as
// an Object's members.
type objectWriter struct {
	buf     []byte
	members []member
}

// key starts a member: a separator unless it is the first, and the raw
// key (quotes included); it returns where the key starts.
func (w *objectWriter) key(rawKey []byte) int {
	if len(w.members) > 0 {
		w.buf = append(w.buf, ',')
	}
	k0 := len(w.buf)
	w.buf = append(append(w.buf, rawKey...), ':')
	return k0
}

func (w *objectWriter) raw(rawKey []byte, value []byte) {
	k0 := w.key(rawKey)
	v0 := len(w.buf)
	w.buf = append(w.buf, value...)
	w.members = append(w.members, member{int32(k0), int32(k0 + len(rawKey)), int32(v0), int32(len(w.buf))})
}

func (w *objectWriter) string(rawKey []byte, s string) {
	k0 := w.key(rawKey)
	v0 := len(w.buf)
	w.buf = AppendString(w.buf, s)
	w.members = append(w.members, member{int32(k0), int32(k0 + len(rawKey)), int32(v0), int32(len(w.buf))})
}

// EachMember calls fn with each member of the JSON object obj, in order,
// its key unescaped and its value raw, until fn returns false. It
// reports whether obj is a valid object (as far as fn let it be read).
// It does not look for repeated members: fn is given each, and decides.
func EachMember(obj json.RawMessage, fn func(key []byte, value json.RawMessage) bool) bool {
	scanning(obj)
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	end, err := eachMember(obj, i, 0, func(k []byte, vs, ve int) bool {
		key := k[1 : len(k)-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			key = []byte(unquote(k))
		}
		return fn(key, obj[vs:ve])
	}, "", nil)
	return err == nil && (end < 0 || skipSpace(obj, end) == len(obj))
}

// StringValue returns the value of v, a raw JSON value, when it is a
// string.
func StringValue(v json.RawMessage) (string, bool) { return stringValue(v) }
