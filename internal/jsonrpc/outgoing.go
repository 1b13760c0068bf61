package jsonrpc

import (
	"encoding/json"
)

// Outgoing is a request the gateway sends to an upstream, encoded once.
// It starts from the params of a host's request (Request.Outgoing) or
// from params of the gateway's own (NewOutgoing), and collects the
// members each layer rewrites (the router a tool's original name and the
// gateway's progress token, the upstream client the _meta its server's
// era needs, and the trace context); AppendRequest then writes the
// message in one pass, every member nobody rewrote copied byte for byte.
//
// An Outgoing is used by one goroutine at a time and must not be kept
// after the call it was made for.
type Outgoing struct {
	// Method is the request's method.
	Method string

	// raw is the params value to start from; nil when there is none.
	raw json.RawMessage
	// params and meta are raw's members and those of its _meta, once
	// parsed (a host's request comes parsed; the gateway's own params are
	// parsed when first needed).
	params, meta Object
	parsed       bool
	// set and metaSet are the members rewritten, in the order first set;
	// a nil value removes the member.
	set, metaSet []setMember
	buf          [6]setMember
}

// setMember is a member an Outgoing rewrites.
type setMember struct {
	key   string
	value json.RawMessage
}

// Outgoing returns a request to an upstream that starts from r's params.
// The first is part of r (no allocation); each is independent of the
// others. Like the Outgoings it returns, it must not be called
// concurrently.
func (r *Request) Outgoing() *Outgoing {
	o := &r.out
	if r.outUsed {
		o = &Outgoing{}
	}
	r.outUsed = true
	*o = Outgoing{Method: r.Method, raw: r.params.Raw, params: r.params, meta: r.Meta.obj, parsed: true}
	if r.Params != nil && r.params.Raw == nil {
		o.raw = r.Params // not an object (an array): sent as it is
	}
	o.set, o.metaSet = o.buf[0:0:3], o.buf[3:3:6]
	return o
}

// NewOutgoing returns a request with params of the gateway's own, which
// must be valid JSON (or nil for none).
func NewOutgoing(method string, params json.RawMessage) *Outgoing {
	o := &Outgoing{Method: method, raw: params}
	o.set, o.metaSet = o.buf[0:0:3], o.buf[3:3:6]
	return o
}

// Clone returns a copy that can be rewritten without changing o.
func (o *Outgoing) Clone() *Outgoing {
	c := *o
	c.set = append(c.buf[0:0:3], o.set...)
	c.metaSet = append(c.buf[3:3:6], o.metaSet...)
	return &c
}

// parse reads the members of gateway-made params.
func (o *Outgoing) parse() {
	if o.parsed {
		return
	}
	o.parsed = true
	i := skipSpace(o.raw, 0)
	if i >= len(o.raw) || o.raw[i] != '{' {
		return
	}
	o.params = scanObject(o.raw, i)
	if m, ok := o.params.get("_meta"); ok {
		if j := skipSpace(m, 0); j < len(m) && m[j] == '{' {
			o.meta = scanObject(m, j)
		}
	}
}

// scanObject records the members of the valid object at data[i].
func scanObject(data []byte, i int) Object {
	scanning(data)
	obj := Object{data: data}
	end, err := eachMember(data, i, 0, func(rawKey []byte, vs, ve int) bool {
		k0 := cap(data) - cap(rawKey) // rawKey is data[k0:k0+len(rawKey)]
		obj.add(k0, k0+len(rawKey), vs, ve)
		return true
	}, "", nil)
	if err == nil {
		obj.Raw = data[i:end]
	}
	return obj
}

// Set sets params member key to value (raw JSON), replacing the
// original; a nil value removes it.
func (o *Outgoing) Set(key string, value json.RawMessage) { o.set = withSet(o.set, key, value) }

// SetMeta sets member key of params._meta to value (raw JSON); a nil
// value removes it.
func (o *Outgoing) SetMeta(key string, value json.RawMessage) {
	o.metaSet = withSet(o.metaSet, key, value)
}

func withSet(ms []setMember, key string, value json.RawMessage) []setMember {
	for i := range ms {
		if ms[i].key == key {
			ms[i].value = value
			return ms
		}
	}
	return append(ms, setMember{key: key, value: value})
}

// Param returns params member key as the upstream will read it.
func (o *Outgoing) Param(key string) (json.RawMessage, bool) {
	if v, ok := lookup(o.set, key); ok {
		return v, v != nil
	}
	o.parse()
	return o.params.get(key)
}

// StringParam returns params member key as the upstream will read it,
// when it is a string.
func (o *Outgoing) StringParam(key string) (string, bool) {
	v, _ := o.Param(key)
	return stringValue(v)
}

// MetaParam returns member key of params._meta as the upstream will read
// it.
func (o *Outgoing) MetaParam(key string) (json.RawMessage, bool) {
	if v, ok := lookup(o.metaSet, key); ok {
		return v, v != nil
	}
	if _, ok := lookup(o.set, "_meta"); ok {
		return nil, false // _meta itself was replaced (not done today)
	}
	o.parse()
	return o.meta.get(key)
}

func lookup(ms []setMember, key string) (json.RawMessage, bool) {
	for _, m := range ms {
		if m.key == key {
			return m.value, true
		}
	}
	return nil, false
}

// AppendRequest appends the request with id.
func (o *Outgoing) AppendRequest(dst []byte, id json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"method":`...)
	dst = AppendString(dst, o.Method)
	if o.raw != nil || anySet(o.set) || anySet(o.metaSet) {
		dst = append(dst, `,"params":`...)
		dst = o.AppendParams(dst)
	}
	return append(dst, '}')
}

// Params returns the params as they will be sent; nil when there are
// none. It encodes them: for tests and the few callers that need the
// bytes themselves.
func (o *Outgoing) Params() json.RawMessage {
	if o.raw == nil && !anySet(o.set) && !anySet(o.metaSet) {
		return nil
	}
	return o.AppendParams(nil)
}

// AppendParams appends the params: the original members in their order,
// each rewritten one with its new value, the members set anew at the end.
func (o *Outgoing) AppendParams(dst []byte) []byte {
	if encodeHook != nil {
		encodeHook(o)
	}
	if len(o.set) == 0 && len(o.metaSet) == 0 {
		if o.raw == nil {
			return append(dst, "{}"...)
		}
		return append(dst, o.raw...)
	}
	o.parse()
	if o.raw != nil && o.params.Raw == nil {
		return append(dst, o.raw...) // not an object: nothing can be rewritten
	}
	dst = append(dst, '{')
	first := true
	hasMeta := false
	p := &o.params
	for _, m := range p.members {
		key, value := p.key(m), p.value(m)
		if i := index(o.set, key); i >= 0 {
			if value = o.set[i].value; value == nil {
				continue
			}
		} else if string(key) == "_meta" {
			hasMeta = true
			// A _meta that is not an object is kept as written unless a
			// member is set in it (then it becomes an object of those).
			if len(o.metaSet) > 0 && (o.meta.Raw != nil || anySet(o.metaSet)) {
				dst, first = appendMemberStart(dst, first, p.rawKey(m), ""), false
				dst = appendObject(dst, &o.meta, o.metaSet)
				continue
			}
		}
		dst, first = appendMemberStart(dst, first, p.rawKey(m), ""), false
		dst = append(dst, value...)
	}
	for _, m := range o.set {
		if _, inPlace := p.get(m.key); inPlace || m.value == nil {
			continue
		}
		dst, first = appendMemberStart(dst, first, nil, m.key), false
		dst = append(dst, m.value...)
	}
	if !hasMeta && anySet(o.metaSet) {
		if _, replaced := lookup(o.set, "_meta"); !replaced {
			dst, _ = appendMemberStart(dst, first, nil, "_meta"), false
			dst = appendObject(dst, &Object{}, o.metaSet)
		}
	}
	return append(dst, '}')
}

// appendObject appends the object obj with sets applied.
func appendObject(dst []byte, obj *Object, sets []setMember) []byte {
	dst = append(dst, '{')
	first := true
	for _, m := range obj.members {
		value := obj.value(m)
		if i := index(sets, obj.key(m)); i >= 0 {
			if value = sets[i].value; value == nil {
				continue
			}
		}
		dst, first = appendMemberStart(dst, first, obj.rawKey(m), ""), false
		dst = append(dst, value...)
	}
	for _, m := range sets {
		if _, inPlace := obj.get(m.key); inPlace || m.value == nil {
			continue
		}
		dst, first = appendMemberStart(dst, first, nil, m.key), false
		dst = append(dst, m.value...)
	}
	return append(dst, '}')
}

// appendMemberStart appends a separator unless first, then the key (raw
// as written, else key encoded) and a colon.
func appendMemberStart(dst []byte, first bool, rawKey []byte, key string) []byte {
	if !first {
		dst = append(dst, ',')
	}
	if rawKey != nil {
		dst = append(dst, rawKey...)
	} else {
		dst = AppendString(dst, key)
	}
	return append(dst, ':')
}

func index(ms []setMember, key []byte) int {
	for i := range ms {
		if ms[i].key == string(key) {
			return i
		}
	}
	return -1
}

func anySet(ms []setMember) bool {
	for _, m := range ms {
		if m.value != nil {
			return true
		}
	}
	return false
}

// IsObject reports whether the params are an object, or absent (then
// rewrites make one).
func (o *Outgoing) IsObject() bool {
	o.parse()
	return o.raw == nil || o.params.Raw != nil
}

// SizeHint is about the size of the encoded params.
func (o *Outgoing) SizeHint() int {
	n := len(o.raw) + 16
	for _, m := range o.set {
		n += len(m.key) + len(m.value) + 4
	}
	for _, m := range o.metaSet {
		n += len(m.key) + len(m.value) + 4
	}
	return n
}
