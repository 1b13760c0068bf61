package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Message
	}{
		{
			name: "request",
			in:   `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{"a":[1,2]}}}`,
			want: Message{ID: json.RawMessage(`7`), Method: "tools/call", Params: json.RawMessage(`{"name":"x","arguments":{"a":[1,2]}}`)},
		},
		{
			name: "string id and whitespace",
			in:   " {\n \"id\" : \"a-1\" , \"method\":\"ping\",\"jsonrpc\":\"2.0\"}\n",
			want: Message{ID: json.RawMessage(`"a-1"`), Method: "ping"},
		},
		{
			name: "notification",
			in:   `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			want: Message{Method: "notifications/initialized"},
		},
		{
			name: "result",
			in:   `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`,
			want: Message{ID: json.RawMessage(`1`), Result: json.RawMessage(`{"content":[]}`)},
		},
		{
			name: "null result",
			in:   `{"jsonrpc":"2.0","id":1,"result":null}`,
			want: Message{ID: json.RawMessage(`1`), Result: json.RawMessage(`null`)},
		},
		{
			name: "error with data",
			in:   `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad","data":{"x":1}}}`,
			want: Message{ID: json.RawMessage(`null`), Error: &Error{Code: -32700, Message: "bad", Data: json.RawMessage(`{"x":1}`)}},
		},
		{
			name: "escaped method and key",
			in:   `{"jsonrpc":"2.0","id":1,"\u006dethod":"tools\/list"}`,
			want: Message{ID: json.RawMessage(`1`), Method: "tools/list"},
		},
		{
			name: "unknown top-level member ignored",
			in:   `{"jsonrpc":"2.0","id":1,"method":"ping","x-extra":{"deep":[true]}}`,
			want: Message{ID: json.RawMessage(`1`), Method: "ping"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode([]byte(tt.in))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := cmp.Diff(&tt.want, got); diff != "" {
				t.Errorf("Decode (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"empty", ``, ErrParse},
		{"truncated", `{"jsonrpc":"2.0","id":1,"method":"ping"`, ErrParse},
		{"trailing garbage", `{"jsonrpc":"2.0","id":1,"method":"ping"} x`, ErrParse},
		{"bad literal", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":tru}}`, ErrParse},
		{"bad number", `{"jsonrpc":"2.0","id":01,"method":"ping"}`, ErrParse},
		{"control char in string", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\x01\"}", ErrParse},
		{"plain text", `hello`, ErrParse},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, ErrInvalidRequest},
		{"not an object", `42`, ErrInvalidRequest},
		{"wrong version", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, ErrInvalidRequest},
		{"missing version", `{"id":1,"method":"ping"}`, ErrInvalidRequest},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, ErrInvalidRequest},
		{"null id on request", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, ErrInvalidRequest},
		{"numeric method", `{"jsonrpc":"2.0","id":1,"method":3}`, ErrInvalidRequest},
		{"empty method", `{"jsonrpc":"2.0","id":1,"method":""}`, ErrInvalidRequest},
		{"string params", `{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}`, ErrInvalidRequest},
		{"method and result", `{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}`, ErrInvalidRequest},
		{"result and error", `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}`, ErrInvalidRequest},
		{"result without id", `{"jsonrpc":"2.0","result":{}}`, ErrInvalidRequest},
		{"malformed error", `{"jsonrpc":"2.0","id":1,"error":"boom"}`, ErrInvalidRequest},
		{"nothing", `{"jsonrpc":"2.0","id":1}`, ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.in))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Decode(%q) error = %v, want one wrapping %v", tt.in, err, tt.want)
			}
		})
	}
}

func TestDecodeAliasesInput(t *testing.T) {
	in := []byte(`{"jsonrpc":"2.0","id":1,"result":{"big":"` + strings.Repeat("x", 1<<16) + `"}}`)
	m, err := Decode(in)
	if err != nil {
		t.Fatal(err)
	}
	// The result must be a window onto the input, not a copy.
	if &m.Result[0] != &in[bytes.Index(in, []byte(`{"big"`))] {
		t.Error("Decode copied the result instead of aliasing the input")
	}
	allocs := testing.AllocsPerRun(100, func() {
		var m Message
		if err := DecodeInto(&m, in); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Errorf("DecodeInto of a response allocated %v times, want 0", allocs)
	}
}

func TestAppendRoundTrip(t *testing.T) {
	msgs := []Message{
		{ID: json.RawMessage(`1`), Method: "tools/call", Params: json.RawMessage(`{"name":"a"}`)},
		{ID: json.RawMessage(`"s"`), Method: "ping"},
		{Method: "notifications/progress", Params: json.RawMessage(`{"progress":1}`)},
		{ID: json.RawMessage(`2`), Result: json.RawMessage(`{"x":"é\u2028"}`)},
		{ID: json.RawMessage(`3`), Error: &Error{Code: -32602, Message: "Unknown tool \"x\"\n", Data: json.RawMessage(`[1]`)}},
		{ID: json.RawMessage(`null`), Error: &Error{Code: -32700, Message: "parse error"}},
		{ID: json.RawMessage(`4`), Method: "méthode/ünïcode"},
	}
	for _, m := range msgs {
		wire := m.Append(nil)
		if !json.Valid(wire) {
			t.Fatalf("Append produced invalid JSON: %s", wire)
		}
		got, err := Decode(wire)
		if err != nil {
			t.Fatalf("Decode(%s): %v", wire, err)
		}
		if diff := cmp.Diff(&m, got); diff != "" {
			t.Errorf("round trip of %s (-want +got):\n%s", wire, diff)
		}
	}
}

func TestWriteResult(t *testing.T) {
	for _, size := range []int{10, 1 << 20} {
		result := json.RawMessage(`{"text":"` + strings.Repeat("y", size) + `"}`)
		var buf bytes.Buffer
		if err := WriteResult(&buf, json.RawMessage(`"id-1"`), result); err != nil {
			t.Fatal(err)
		}
		if want := AppendResult(nil, json.RawMessage(`"id-1"`), result); !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("WriteResult(size %d) differs from AppendResult", size)
		}
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain/ascii", "quote\"back\\slash", "ctl\x00\x1f", "ünï", "<&>", "\xff"} {
		got := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("AppendString(%q) = %s, not a JSON string: %v", s, got, err)
		}
		want := strings.ToValidUTF8(s, "\uFFFD")
		if back != want {
			t.Errorf("AppendString(%q) = %s, which decodes to %q, want %q", s, got, back, want)
		}
	}
}

func TestFieldAndSetField(t *testing.T) {
	obj := json.RawMessage(`{ "name" : "old", "arguments": {"name":"inner"}, "_meta": {"progressToken": 5} }`)
	if v, ok := StringField(obj, "name"); !ok || v != "old" {
		t.Errorf(`StringField(name) = %q, %v; want "old", true`, v, ok)
	}
	if v, ok := Field(obj, "_meta"); !ok || string(v) != `{"progressToken": 5}` {
		t.Errorf("Field(_meta) = %s, %v", v, ok)
	}
	if _, ok := Field(obj, "missing"); ok {
		t.Error("Field(missing) reported a member")
	}
	if _, ok := Field(json.RawMessage(`[1]`), "name"); ok {
		t.Error("Field on an array reported a member")
	}

	tests := []struct {
		name, in, key, value, want string
	}{
		{"replace", `{"name":"old","arguments":{"name":"inner"}}`, "name", `"new"`, `{"name":"new","arguments":{"name":"inner"}}`},
		{"add to object", `{"a":1}`, "name", `"n"`, `{"name":"n","a":1}`},
		{"add to empty", `{ }`, "name", `"n"`, `{"name":"n" }`},
		{"nil object", ``, "name", `"n"`, `{"name":"n"}`},
		{"keeps bytes of others", `{"a": 1.50 ,"name":"x"}`, "name", `"y"`, `{"a": 1.50 ,"name":"y"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SetField(json.RawMessage(tt.in), tt.key, json.RawMessage(tt.value))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("SetField = %s, want %s", got, tt.want)
			}
		})
	}
	if _, err := SetField(json.RawMessage(`[1]`), "a", json.RawMessage(`1`)); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("SetField on an array: err = %v, want ErrInvalidRequest", err)
	}
}

func TestDeleteField(t *testing.T) {
	tests := []struct{ in, key, want string }{
		{`{"a":1,"b":2,"c":3}`, "b", `{"a":1,"c":3}`},
		{`{"a":1,"b":2,"c":3}`, "a", `{"b":2,"c":3}`},
		{`{"a":1,"b":2,"c":3}`, "c", `{"a":1,"b":2}`},
		{`{"a":1}`, "a", `{}`},
		{`{"a":1,"a":2,"b":3}`, "a", `{"b":3}`},
		{`{ "a" : 1 , "b" : 2 }`, "a", `{ "b" : 2 }`},
		{`{"a":1}`, "z", `{"a":1}`},
	}
	for _, tt := range tests {
		got := DeleteField(json.RawMessage(tt.in), tt.key)
		if string(got) != tt.want {
			t.Errorf("DeleteField(%s, %q) = %s, want %s", tt.in, tt.key, got, tt.want)
		}
		if !json.Valid(got) {
			t.Errorf("DeleteField(%s, %q) produced invalid JSON %s", tt.in, tt.key, got)
		}
	}
}

func TestInt64ID(t *testing.T) {
	if n, ok := Int64ID(json.RawMessage(`42`)); !ok || n != 42 {
		t.Errorf("Int64ID(42) = %d, %v", n, ok)
	}
	for _, id := range []string{`"42"`, `4.2`, `1e3`, ``} {
		if _, ok := Int64ID(json.RawMessage(id)); ok {
			t.Errorf("Int64ID(%s) accepted a non-integer id", id)
		}
	}
}

func TestErrorIs(t *testing.T) {
	err := error(NewError(CodeInvalidParams, "Unknown tool: %q", "x"))
	if !errors.Is(err, &Error{Code: CodeInvalidParams}) {
		t.Error("errors.Is does not match an *Error by code")
	}
	if errors.Is(err, ErrParse) {
		t.Error("errors.Is matched a different code")
	}
}

func FuzzScanMatchesValid(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `"a\u00e9\n"`, `-0.5e+10`, `{"a":[1,{"b":null}]}`, `01`, `1.`, `"\x"`, `tru`, `{"a" 1}`, `[1,]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		i := skipSpace(data, 0)
		end, err := skipValue(data, i)
		ok := err == nil && skipSpace(data, end) == len(data)
		if ok != json.Valid(data) {
			t.Fatalf("scanner says valid=%v, encoding/json says %v, for %q (err %v)", ok, json.Valid(data), data, err)
		}
	})
}

func FuzzDecode(f *testing.F) {
	seeds := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}`,
		`{"jsonrpc":"2.0","id":"x","result":{"content":[{"type":"text","text":"hi"}]}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m"}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":2}}`,
		`[{"jsonrpc":"2.0"}]`, `{`, `null`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrParse) && !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("Decode error %v wraps neither ErrParse nor ErrInvalidRequest", err)
			}
			return
		}
		wire := m.Append(nil)
		m2, err := Decode(wire)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", wire, err)
		}
		if diff := cmp.Diff(m, m2); diff != "" {
			t.Fatalf("decode-encode-decode is not stable (-first +second):\n%s", diff)
		}
	})
}

func BenchmarkDecodeResponse1MiB(b *testing.B) {
	in := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat("z", 1<<20) + `"}]}}`)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	var m Message
	for b.Loop() {
		if err := DecodeInto(&m, in); err != nil {
			b.Fatal(err)
		}
	}
}

func TestDecodeResultFlags(t *testing.T) {
	for _, tt := range []struct {
		in            string
		toolError     bool
		resultType    string
		hasResultType bool
	}{
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}`, true, "", false},
		{`{"jsonrpc":"2.0","id":1,"result":{"isError":false,"resultType":"complete"}}`, false, "complete", true},
		{`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"k":{"isError":true}}}}`, false, "input_required", true},
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[{"isError":true,"resultType":"x"}]}}`, false, "", false},
		{`{"jsonrpc":"2.0","id":1,"result":{"resultType":"t\u0061sk"}}`, false, "task", true},
		{`{"jsonrpc":"2.0","id":1,"result":[{"isError":true}]}`, false, "", false},
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":{"isError":true,"resultType":"complete"}}`, false, "", false},
		// A resultType that is there but not a usable string is there:
		// the gateway must not add a second.
		{`{"jsonrpc":"2.0","id":1,"result":{"resultType":null}}`, false, "", true},
		{`{"jsonrpc":"2.0","id":1,"result":{"resultType":""}}`, false, "", true},
		{`{"jsonrpc":"2.0","id":1,"result":{"resultType":7}}`, false, "", true},
		// Of a repeated result, the flags are the kept one's (the last).
		{`{"jsonrpc":"2.0","id":1,"result":{"isError":true,"resultType":"input_required"},"result":{"content":[]}}`, false, "", false},
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[]},"result":{"isError":true}}`, true, "", false},
	} {
		m, err := Decode([]byte(tt.in))
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		if m.ToolError != tt.toolError || m.ResultType != tt.resultType || m.HasResultType != tt.hasResultType {
			t.Errorf("%s: ToolError %v, ResultType %q (present %v); want %v, %q (%v)", tt.in, m.ToolError, m.ResultType, m.HasResultType, tt.toolError, tt.resultType, tt.hasResultType)
		}
	}
}

// TestDecodeResultMembers: Decode notes the era members a result has at
// its top level, escaped spellings too, and nothing nested deeper.
func TestDecodeResultMembers(t *testing.T) {
	for in, want := range map[string]Members{
		`{"content":[]}`: 0,
		`{"resultType":"complete","ttlMs":0,"cacheScope":"public"}`: MemberResultType | MemberTTLMs | MemberCacheScope,
		`{"inputRequests":{},"requestState":"s","_meta":{}}`:        MemberInputRequests | MemberRequestState | MemberMeta,
		`{"t\u0074lMs":1}`: MemberTTLMs,
		`{"content":[{"ttlMs":1,"_meta":{}}],"structuredContent":{"requestState":1}}`: 0,
	} {
		m, err := Decode([]byte(`{"jsonrpc":"2.0","id":1,"result":` + in + `}`))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if m.Members != want {
			t.Errorf("%s: Members %b, want %b", in, m.Members, want)
		}
	}
}

// TestDeleteFields: several members go in one pass, wherever they stand,
// and everything else stays byte for byte.
func TestDeleteFields(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":1,"b": {"x" : 2},"c":3}`:              `{"b": {"x" : 2}}`,
		`{"b":[ 1 ],"a":1,"c":3}`:                   `{"b":[ 1 ]}`,
		`{"c":3,"a":1}`:                             `{}`,
		`{"a":1,"b":2,"a":3}`:                       `{"b":2}`,
		`{"b":2}`:                                   `{"b":2}`,
		`{ "c" : 1 , "b" : 2 , "a" : 3 , "d" : 4 }`: `{ "b" : 2 , "d" : 4 }`,
	} {
		got := DeleteFields(json.RawMessage(in), "a", "c")
		if string(got) != want {
			t.Errorf("DeleteFields(%s, a, c) = %s, want %s", in, got, want)
		}
	}
}
