package jsonrpc

import "encoding/json"

// MetaServerInfo is the _meta member in which a 2026-07-28 result names
// the server that produced it (basic/index "_meta").
const MetaServerInfo = "io.modelcontextprotocol/serverInfo"

// maxEraSpans bounds the era members Decode notes the place of; a result
// with more (a repeated member) is translated by walking it instead.
const maxEraSpans = 8

// Span is a range of bytes, [From, To).
type Span struct{ From, To int }

// ResultSpans is where a result's era members stand, as offsets into the
// result (into the decoded message until rebase). It is Decode's note
// for TranslateResult; its fields are exported only so that a Message
// stays comparable by cmp.
type ResultSpans struct {
	N     int
	Kinds [maxEraSpans]Members
	// Cuts are the spans that deleting a member removes: from the end
	// of the member before it (-1: just past the result's '{') to the
	// end of its value.
	Cuts [maxEraSpans]Span
	// Info is the value of the serverInfo in _meta; Metas and Infos
	// count the _meta members and the serverInfo members in them.
	Info         Span
	Metas, Infos int
	Overflow     bool
}

func (e *ResultSpans) note(kind Members, from, to int) {
	if e.N == maxEraSpans {
		e.Overflow = true
		return
	}
	e.Kinds[e.N] = kind
	e.Cuts[e.N].From, e.Cuts[e.N].To = from, to
	e.N++
}

// noteMeta walks a _meta value (data[vs:ve], already scanned as valid)
// for its serverInfo.
func (e *ResultSpans) noteMeta(data []byte, vs, ve int) {
	e.Metas++
	if data[vs] != '{' {
		return
	}
	_, _ = eachMember(data[:ve], vs, 2, func(k []byte, s, t int) bool {
		if keyEquals(k, MetaServerInfo) {
			e.Infos++
			e.Info.From, e.Info.To = s, t
		}
		return true
	}, "", nil)
}

// rebase turns offsets into data into offsets into the result that
// starts at data[start].
func (e *ResultSpans) rebase(start int) {
	for i := range e.N {
		if e.Cuts[i].From < 0 {
			e.Cuts[i].From = start + 1
		}
		e.Cuts[i].From -= start
		e.Cuts[i].To -= start
	}
	e.Info.From -= start
	e.Info.To -= start
}

// TranslateResult returns m's result with its top-level members of the
// set drop removed (MemberMeta is never removed) and, when serverInfo is
// not nil, the serverInfo in its _meta, if it has one, replaced by
// serverInfo. Everything else is copied byte for byte. m.Result itself
// is returned when there is nothing to change. A result Decode noted
// the members of is copied once, without being walked again; one whose
// members repeat, or that was not decoded so, is walked.
func (m *Message) TranslateResult(drop Members, serverInfo json.RawMessage) json.RawMessage {
	drop &^= MemberMeta
	result := m.Result
	if m.Members&drop == 0 && (serverInfo == nil || m.Members&MemberMeta == 0) {
		return result
	}
	e := m.Spans
	if e == nil || e.Overflow || e.Metas > 1 || e.Infos > 1 {
		return translateWalking(result, drop, serverInfo)
	}
	replace := serverInfo != nil && e.Infos == 1
	out := make([]byte, 0, len(result)+len(serverInfo))
	from := 0
	for i := range e.N {
		if e.Kinds[i]&drop == 0 {
			continue
		}
		c := e.Cuts[i]
		if replace && from <= e.Info.From && e.Info.From < c.From {
			out = append(out, result[from:e.Info.From]...)
			out = append(out, serverInfo...)
			from, replace = e.Info.To, false
		}
		out = append(out, result[from:c.From]...)
		from = c.To
	}
	if replace {
		out = append(out, result[from:e.Info.From]...)
		out = append(out, serverInfo...)
		from = e.Info.To
	}
	out = append(out, result[from:]...)
	return fixCommas(out)
}

// translateWalking is TranslateResult for a result with repeated
// members: every occurrence of a dropped member goes, and every _meta
// but the first, whose every serverInfo is replaced by one (placed
// first), so that no parser that takes the last of repeated members
// reads what was meant to go.
func translateWalking(result json.RawMessage, drop Members, serverInfo json.RawMessage) json.RawMessage {
	var keys []string
	for i, k := range []string{"resultType", "ttlMs", "cacheScope", "inputRequests", "requestState"} {
		if drop&(1<<i) != 0 {
			keys = append(keys, k)
		}
	}
	out := DeleteFields(result, keys...)
	if serverInfo == nil {
		return out
	}
	meta, ok := Field(out, "_meta")
	if !ok {
		return out
	}
	if _, named := Field(meta, MetaServerInfo); !named {
		if count(out, "_meta") == 1 {
			return out // one _meta, which names no server
		}
	}
	meta, err := SetField(DeleteField(meta, MetaServerInfo), MetaServerInfo, serverInfo)
	if err != nil {
		return out // a _meta that is not an object names no server
	}
	if replaced, err := SetField(DeleteField(out, "_meta"), "_meta", meta); err == nil {
		return replaced
	}
	return out
}

// count returns how many top-level members named key obj has.
func count(obj json.RawMessage, key string) int {
	scanning(obj)
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return 0
	}
	n := 0
	_, _ = eachMember(obj, i, 0, func(k []byte, _, _ int) bool {
		if keyEquals(k, key) {
			n++
		}
		return true
	}, "", nil)
	return n
}
