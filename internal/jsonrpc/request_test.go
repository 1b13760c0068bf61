package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeRequest(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"files__read","arguments":{"path":"/a","n":[1,{"x":null}]},` +
		`"_meta":{"progressToken":"p-1","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},` +
		`"io.modelcontextprotocol/logLevel":"info","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","other":1}}}`
	r, err := DecodeRequest([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{
		"id": string(r.ID), "method": r.Method, "name": r.Name, "hasName": r.HasName,
		"arguments": string(r.Arguments), "token": string(r.Meta.ProgressToken),
		"version": r.Meta.ProtocolVersion, "caps": string(r.Meta.ClientCapabilities),
		"level": r.Meta.LogLevel, "traceparent": r.Meta.TraceParent, "hasOther": r.Meta.Has("other"),
		"params": string(r.Params),
	}
	want := map[string]any{
		"id": "7", "method": "tools/call", "name": "files__read", "hasName": true,
		"arguments": `{"path":"/a","n":[1,{"x":null}]}`, "token": `"p-1"`,
		"version": "2026-07-28", "caps": `{"sampling":{}}`,
		"level": "info", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "hasOther": true,
		"params": in[strings.Index(in, `{"name"`) : len(in)-1],
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DecodeRequest (-want +got):\n%s", diff)
	}

	for _, tt := range []struct{ name, in, field, want string }{
		{"escaped name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"na\u006de":"a\/b"}}`, "name", "a/b"},
		{"uri", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///x"}}`, "uri", "file:///x"},
		{"ref", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"}}}`, "ref", "ref/prompt p"},
		{"surrogate pair", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\ud83d\ude00"}}`, "name", "😀"},
		{"raw non-ASCII", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"héllo wörld"}}`, "name", "héllo wörld"},
		{"null token", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":null}}}`, "token", ""},
		{"number token", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":42}}}`, "token", "42"},
		{"same key at other levels", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"name":"b","x":{"name":"c"}}}}`, "name", "a"},
		{"case variants where the gateway reads nothing", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"Name":"b","NAME":"c"}}}`, "name", "a"},
		{"initialize", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{}}}}`, "init", "2025-11-25 {\"roots\":{}}"},
		{"cancelled", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"r-9"}}`, "requestId", `"r-9"`},
		{"response", `{"jsonrpc":"2.0","id":3,"result":{"action":"accept"}}`, "result", `{"action":"accept"}`},
		{"task id", `{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{"task\u0049d":"gw-1"}}`, "taskId", "gw-1"},
		{"task augmentation", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"a","task":{"ttl":60000}}}`, "task", `{"ttl":60000}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := DecodeRequest([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			var got string
			switch tt.field {
			case "name":
				got = r.Name
			case "uri":
				got = r.URI
			case "ref":
				got = r.Ref.Type + " " + r.Ref.Name
			case "token":
				got = string(r.Meta.ProgressToken)
			case "init":
				got = r.ProtocolVersion + " " + string(r.Capabilities)
			case "requestId":
				got = string(r.RequestID)
			case "taskId":
				got = r.TaskID
			case "task":
				got = string(r.Task)
			case "result":
				got = string(r.Result)
			}
			if got != tt.want {
				t.Errorf("%s = %q, want %q", tt.field, got, tt.want)
			}
		})
	}
}

// The smuggling attempts: each makes a first-member lookup and an
// upstream's parser (last member wins, or case-insensitive) read
// different names, tokens or methods.
func TestDecodeRequestRefusesAmbiguity(t *testing.T) {
	many := func(key string) string {
		var b strings.Builder
		for i := range 40 {
			b.WriteString(`"k` + strings.Repeat("x", i) + `":1,`)
		}
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{` + b.String() + `"` + key + `":2}}}`
	}
	for _, tt := range []struct{ name, in, want string }{
		{"repeated name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"allowed","name":"hidden"}}`,
			`member "name" appears more than once in params`},
		{"escaped repeat", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"allowed","na\u006de":"hidden"}}`,
			`member "name" appears more than once in params`},
		{"escaped first", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"\u006eame":"allowed","name":"hidden"}}`,
			`member "name" appears more than once in params`},
		{"repeated uri", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///ok","uri":"file:///secret"}}`,
			`member "uri" appears more than once in params`},
		{"repeated ref name", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"a","name":"b"}}}`,
			`member "name" appears more than once in params.ref`},
		{"repeated progress token", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":"x","progressToken":"gw-5"}}}`,
			`member "progressToken" appears more than once in params._meta`},
		{"repeated params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"params":{"name":"b"}}`,
			`member "params" appears more than once in the message`},
		{"repeated method", `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call"}`,
			`member "method" appears more than once in the message`},
		{"repeated key deep in arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"list":[{"x":1},{"y":1,"y":2}]}}}`,
			`member "y" appears more than once in params.arguments.list[1]`},
		{"repeat in a large object", many("k"), `member "k" appears more than once in params.arguments`},
		{"upper-case name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"allowed","NAME":"hidden"}}`,
			`member "NAME" in params differs only in case from "name"`},
		{"capitalised alone", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Name":"hidden"}}`,
			`member "Name" in params differs only in case from "name"`},
		{"method in capitals", `{"jsonrpc":"2.0","id":1,"method":"tools/list","METHOD":"tools/call"}`,
			`member "METHOD" in the message differs only in case from "method"`},
		{"long s folds to s", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","argument\u017f":{}}}`,
			`member "argumentſ" in params differs only in case from "arguments"`},
		{"Kelvin sign folds to k", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"x","progressTo\u212aen":"gw-1"}}}`,
			"member \"progressTo\u212aen\" in params._meta differs only in case from \"progressToken\""},
		{"lone high surrogate", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a\ud800"}}`,
			`a string in params.name holds a lone UTF-16 surrogate (\ud800)`},
		{"lone low surrogate", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\udc00a"}}`,
			`a string in params.name holds a lone UTF-16 surrogate (\udc00)`},
		{"high surrogate then not low", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"t":"\ud800\u0041"}}}`,
			`a string in params.arguments.t holds a lone UTF-16 surrogate (\ud800)`},
		{"surrogate in a key", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"\ud800":1}}`,
			`a string in params holds a lone UTF-16 surrogate`},
		{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"hid\xffden\"}}",
			`a string in params.name is not valid UTF-8`},
		{"overlong UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"\xc0\xaf\"}}",
			`is not valid UTF-8`},
		{"UTF-8 surrogate", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"\xed\xa0\x80\"}}",
			`is not valid UTF-8`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := DecodeRequest([]byte(tt.in))
			if err == nil {
				t.Fatalf("accepted, name %q", r.Name)
			}
			if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrInvalidRequest saying %q", err, tt.want)
			}
		})
	}
}

func TestDecodeRequestMatchesDecode(t *testing.T) {
	for _, in := range []string{
		``, `  `, `[]`, `[{"jsonrpc":"2.0"}]`, `null`, `"x"`, `{`, `{"jsonrpc":"2.0","id":1,"method":"ping"} x`,
		`{"jsonrpc":"1.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":{},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":3}`, `{"jsonrpc":"2.0","id":1}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"}}`,
	} {
		_, want := Decode([]byte(in))
		_, got := DecodeRequest([]byte(in))
		switch {
		case (want == nil) != (got == nil):
			t.Errorf("%q: Decode err %v, DecodeRequest err %v", in, want, got)
		case want != nil && (errors.Is(want, ErrParse) != errors.Is(got, ErrParse)):
			t.Errorf("%q: Decode err %v, DecodeRequest err %v: different kinds", in, want, got)
		}
	}
}

// goMessage is how a Go upstream built on encoding/json reads a request:
// struct fields match case-insensitively and the last member wins.
type goMessage struct {
	Method json.RawMessage `json:"method"`
	Params *struct {
		Name      json.RawMessage `json:"name"`
		URI       json.RawMessage `json:"uri"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      *struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	} `json:"params"`
}

// lastWins reads an object as JSON.parse and Python's json do: keys are
// exact and the last of two wins.
func lastWins(raw json.RawMessage, key string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m[key]
}

// hasDuplicate is an independent check for repeated keys, on
// encoding/json's token stream.
func hasDuplicate(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		obj  bool
		keys map[string]bool
		key  bool // the next string token in an object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF || err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		isKey := top != nil && top.obj && top.key
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				if top != nil && top.obj {
					top.key = true
				}
				stack = append(stack, &frame{obj: true, keys: map[string]bool{}, key: true})
			case '[':
				if top != nil && top.obj {
					top.key = true
				}
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		case string:
			if isKey {
				if top.keys[v] {
					return true
				}
				top.keys[v] = true
				top.key = false
				continue
			}
		}
		if top != nil && top.obj {
			top.key = true
		}
	}
}

func rawString(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// FuzzDecodeRequestDifferential: for any message DecodeRequest accepts,
// the method, name, uri, arguments and progress token it routes on are
// exactly what encoding/json (case-insensitive fields, last member wins)
// and a last-member-wins parser read; a message with a repeated key is
// never accepted; errors wrap ErrParse or ErrInvalidRequest.
func FuzzDecodeRequestDifferential(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":1},"_meta":{"progressToken":"t"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"allowed","name":"hidden"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"allowed","na\u006de":"hidden"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"allowed","NAME":"hidden"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"a","uri":"b"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"x","progressTo\u212aen":"gw-1"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a\ud800"}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"\xff\"}}",
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","METHOD":"tools/call"}`,
		`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","arguments":{"a":"b","a":"c"}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeRequest(data)
		if err != nil {
			if !errors.Is(err, ErrParse) && !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("error %v wraps neither ErrParse nor ErrInvalidRequest", err)
			}
			return
		}
		if hasDuplicate(data) {
			t.Fatalf("accepted a message with a repeated key: %q", data)
		}
		var g goMessage
		if err := json.Unmarshal(data, &g); err != nil {
			return // e.g. params is an array: nothing to compare
		}
		if m, _ := rawString(g.Method); m != r.Method {
			t.Fatalf("method: gateway %q, encoding/json %q", r.Method, m)
		}
		if m, _ := rawString(lastWins(data, "method")); m != r.Method {
			t.Fatalf("method: gateway %q, last-wins %q", r.Method, m)
		}
		if g.Params == nil {
			return
		}
		params := lastWins(data, "params")
		for _, c := range []struct {
			what           string
			gateway        string
			has            bool
			goRaw, lastRaw json.RawMessage
		}{
			{"name", r.Name, r.HasName, g.Params.Name, lastWins(params, "name")},
			{"uri", r.URI, r.HasURI, g.Params.URI, lastWins(params, "uri")},
		} {
			gs, gok := rawString(c.goRaw)
			ls, lok := rawString(c.lastRaw)
			if gok != c.has || lok != c.has || gs != c.gateway || ls != c.gateway {
				t.Fatalf("%s: gateway %q (%v), encoding/json %q (%v), last-wins %q (%v)", c.what, c.gateway, c.has, gs, gok, ls, lok)
			}
		}
		if !bytes.Equal(r.Arguments, g.Params.Arguments) || !bytes.Equal(r.Arguments, lastWins(params, "arguments")) {
			t.Fatalf("arguments: gateway %s, encoding/json %s, last-wins %s", r.Arguments, g.Params.Arguments, lastWins(params, "arguments"))
		}
		var goToken json.RawMessage
		if g.Params.Meta != nil {
			goToken = g.Params.Meta.ProgressToken
		}
		lastToken := lastWins(lastWins(params, "_meta"), "progressToken")
		if string(goToken) == "null" {
			goToken, lastToken = nil, nil
		}
		if !bytes.Equal(r.Meta.ProgressToken, goToken) || !bytes.Equal(r.Meta.ProgressToken, lastToken) {
			t.Fatalf("progress token: gateway %s, encoding/json %s, last-wins %s", r.Meta.ProgressToken, goToken, lastToken)
		}
	})
}

func BenchmarkDecodeRequest(b *testing.B) {
	in := []byte(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"everything__echo","arguments":{"message":"hello, world","n":3},"_meta":{"progressToken":"tok-1"}}}`)
	b.Run("Decode", func(b *testing.B) {
		b.ReportAllocs()
		var m Message
		for b.Loop() {
			if err := DecodeInto(&m, in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DecodeRequest", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeRequest(in); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestScannerReleaseBoundsItsKeys: a scanner that walked a huge object
// goes back to the pool without its key stack, and one that walked a
// small one without references into the message.
func TestScannerReleaseBoundsItsKeys(t *testing.T) {
	huge := &strictScan{keys: make([][]byte, maxPooledKeys+1), used: maxPooledKeys + 1}
	huge.release()
	if cap(huge.keys) > maxPooledKeys {
		t.Errorf("released with a key stack of %d", cap(huge.keys))
	}
	small := &strictScan{keys: [][]byte{[]byte("a"), []byte("b")}, used: 2}
	kept := small.keys
	small.release()
	if kept[0] != nil || kept[1] != nil || len(small.keys) != 0 {
		t.Errorf("released holding %q", kept)
	}
}

// TestDecodeRequestRefusesEveryReadNameInAnotherCase: each member the
// gateway reads, at each level it reads it, is refused when a key spells
// it in another case (encoding/json would take it for the member).
func TestDecodeRequestRefusesEveryReadNameInAnotherCase(t *testing.T) {
	wrap := [...]func(member string) string{
		levelTop:    func(m string) string { return `{"jsonrpc":"2.0","id":1,"method":"tools/call",` + m + `}` },
		levelParams: func(m string) string { return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + m + `}}` },
		levelMeta: func(m string) string {
			return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{` + m + `}}}`
		},
		levelRef: func(m string) string {
			return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"ref":{` + m + `}}}`
		},
	}
	// What the gateway reads (Request's fields and the envelope), listed
	// here apart from readNames so that a name dropped there fails.
	read := [...][]string{
		levelTop: {"jsonrpc", "id", "method", "params", "result", "error"},
		levelParams: {"name", "uri", "arguments", "_meta", "ref", "cursor", "level",
			"requestState", "inputResponses", "requestId", "protocolVersion", "capabilities",
			"taskId", "task"},
		levelMeta: {"progressToken", MetaProtocolVersion, MetaClientCapabilities, MetaClientInfo,
			MetaLogLevel, "traceparent", "tracestate", "baggage"},
		levelRef: {"type", "name", "uri"},
	}
	for l := levelTop; l <= levelRef; l++ {
		for _, name := range read[l] {
			variant := strings.ToUpper(name)
			in := wrap[l](`"` + variant + `":1`)
			if _, err := DecodeRequest([]byte(in)); err == nil || !strings.Contains(err.Error(), "differs only in case from "+strconv.Quote(name)) {
				t.Errorf("%s: err = %v, want it refused as a case variant of %q", in, err, name)
			}
		}
	}
}

// TestDecodeRequestRefusesMore: invalid UTF-8 far from a string's ends,
// and nesting past the bound, in objects and arrays.
func TestDecodeRequestRefusesMore(t *testing.T) {
	long := strings.Repeat("a", 40)
	for name, tt := range map[string]struct{ in, want string }{
		"a bad byte inside a long string": {`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + long + "\xff" + long + `"}}`, "not valid UTF-8"},
		"deep arrays":                     {`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"a":` + strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1) + `}}}`, "nesting deeper"},
		"deep objects":                    {`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":` + strings.Repeat(`{"a":`, maxDepth+1) + "1" + strings.Repeat("}", maxDepth+1) + `}}`, "nesting deeper"},
	} {
		if _, err := DecodeRequest([]byte(tt.in)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tt.want)
		}
	}
}

// TestOutgoingsOfOneRequestAreIndependent: each Outgoing of a request
// (the setLevel fan-out makes one per upstream, concurrently) rewrites
// only itself.
func TestOutgoingsOfOneRequestAreIndependent(t *testing.T) {
	r, err := DecodeRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	first, second := r.Outgoing(), r.Outgoing()
	first.Set("name", String("one"))
	second.Set("name", String("two"))
	if a, b := string(first.Params()), string(second.Params()); a != `{"name":"one"}` || b != `{"name":"two"}` {
		t.Errorf("params %s and %s, want each its own name", a, b)
	}
}

// TestWithCall: the request a call_tool becomes has the new name and
// arguments in the typed fields, in Params and in what its Outgoing
// sends (with the rewrites of the layers below applied on top), every
// other member as the host wrote it; the host's request is unchanged.
func TestWithCall(t *testing.T) {
	for _, tc := range []struct {
		name, params, args, want string
	}{
		{"in place", `{"name":"call_tool","arguments":{"name":"t","arguments":{"x":1}},"_meta":{"progressToken":"p"},"task":{"ttl":1}}`, `{"x":1}`,
			`{"name":"t","arguments":{"x":1},"_meta":{"progressToken":"p"},"task":{"ttl":1}}`},
		{"arguments removed", `{"_meta":{"progressToken":7},"name":"call_tool","arguments":{"name":"t"}}`, ``,
			`{"_meta":{"progressToken":7},"name":"t"}`},
		{"arguments added", `{"name":"call_tool"}`, `{"y":[1,2]}`,
			`{"name":"t","arguments":{"y":[1,2]}}`},
		{"escaped keys kept", `{"n\u0061me":"call_tool","\u0061rguments":{"name":"t"}}`, `{}`,
			`{"n\u0061me":"t","\u0061rguments":{}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := AppendRequest(nil, json.RawMessage(`"id-1"`), "tools/call", json.RawMessage(tc.params))
			r, err := DecodeRequest(body)
			if err != nil {
				t.Fatal(err)
			}
			var args json.RawMessage
			if tc.args != "" {
				args = json.RawMessage(tc.args)
			}
			c := r.WithCall("t", args)
			if c.Name != "t" || !c.HasName || string(c.Arguments) != tc.args || string(c.Params) != tc.want {
				t.Errorf("WithCall: name %q %v, arguments %s, params %s; want t, %s, %s", c.Name, c.HasName, c.Arguments, c.Params, tc.args, tc.want)
			}
			if string(c.ID) != `"id-1"` || c.Method != "tools/call" || !cmp.Equal(c.Meta.ProgressToken, r.Meta.ProgressToken) || !cmp.Equal(c.Task, r.Task) {
				t.Errorf("WithCall lost a field: %+v", c.Message)
			}
			// The Outgoing reads the new params: a rewrite below lands in them.
			out := c.Outgoing()
			if v, _ := out.StringParam("name"); v != "t" {
				t.Errorf("Outgoing name %q, want t", v)
			}
			out.Set("name", String("orig"))
			out.SetMeta("progressToken", String("gw-1"))
			want, err := DecodeRequest(AppendRequest(nil, c.ID, c.Method, c.Params))
			if err != nil {
				t.Fatalf("WithCall's params do not decode: %v", err)
			}
			wantOut := want.Outgoing()
			wantOut.Set("name", String("orig"))
			wantOut.SetMeta("progressToken", String("gw-1"))
			if got, w := out.AppendRequest(nil, c.ID), wantOut.AppendRequest(nil, c.ID); string(got) != string(w) {
				t.Errorf("sent %s, want %s (the same params decoded)", got, w)
			}
			// The host's request is as it was.
			if r.Name != "call_tool" || string(r.Params) != tc.params || string(r.Outgoing().AppendRequest(nil, r.ID)) != string(body) {
				t.Errorf("WithCall changed the host's request: %q %s", r.Name, r.Params)
			}
		})
	}
}

func TestEachMember(t *testing.T) {
	var got []string
	ok := EachMember(json.RawMessage(`{"a":1, "b\u0063":{"x":[2]},"a":"s"}`), func(k []byte, v json.RawMessage) bool {
		got = append(got, string(k)+"="+string(v))
		return true
	})
	if want := []string{"a=1", `bc={"x":[2]}`, `a="s"`}; !ok || !cmp.Equal(got, want) {
		t.Errorf("EachMember: %v %v, want %v", ok, got, want)
	}
	for _, bad := range []string{``, `[]`, `"x"`, `{"a":}`, `{"a":1} x`, `null`} {
		if EachMember(json.RawMessage(bad), func([]byte, json.RawMessage) bool { return true }) {
			t.Errorf("EachMember(%q) reported an object", bad)
		}
	}
	n := 0
	if !EachMember(json.RawMessage(`{"a":1,"b":2}`), func([]byte, json.RawMessage) bool { n++; return false }) || n != 1 {
		t.Errorf("EachMember did not stop when told: %d calls", n)
	}
}
