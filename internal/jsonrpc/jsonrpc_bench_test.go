package jsonrpc

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// Benchmarks of the hot path's JSON work, with -benchmem: decoding a
// request and an upstream's result, finding and rewriting params.name,
// building the request an upstream gets (with the gateway's own id) and
// writing the result out. Run:
//
//	go test -run '^$' -bench . -benchmem ./internal/jsonrpc
//
// Results of 1 KiB and 1 MiB are text content, as most tool results are.

// benchResult is a tool result whose text is size bytes long, followed
// by isError as the SDKs write it (after content).
func benchResult(size int) json.RawMessage {
	return json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("x", size) + `"}],"isError":false}`)
}

var benchSizes = []struct {
	name string
	size int
}{{"1KiB", 1 << 10}, {"1MiB", 1 << 20}}

// benchCallParams are the params of a tools/call with 1 KiB of arguments
// and _meta, name first (as hosts write it) or last (the worst case for a
// lookup).
func benchCallParams(nameLast bool) json.RawMessage {
	args := `"arguments":{"query":"` + strings.Repeat("q", 1<<10) + `","limit":10}`
	meta := `"_meta":{"progressToken":"tok-1"}`
	name := `"name":"search__web_search"`
	if nameLast {
		return json.RawMessage("{" + args + "," + meta + "," + name + "}")
	}
	return json.RawMessage("{" + name + "," + args + "," + meta + "}")
}

func BenchmarkDecode(b *testing.B) {
	cases := []struct {
		name string
		msg  []byte
	}{
		{"request", AppendRequest(nil, json.RawMessage(`7`), "tools/call", benchCallParams(false))},
	}
	for _, s := range benchSizes {
		cases = append(cases, struct {
			name string
			msg  []byte
		}{"result-" + s.name, AppendResult(nil, json.RawMessage(`7`), benchResult(s.size))})
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.msg)))
			b.ReportAllocs()
			var m Message
			for b.Loop() {
				if err := DecodeInto(&m, c.msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNameLookupAndRewrite is what dispatch does to a tools/call:
// read params.name, then replace it with the upstream's own name.
func BenchmarkNameLookupAndRewrite(b *testing.B) {
	for _, last := range []bool{false, true} {
		name := "name-first"
		if last {
			name = "name-last"
		}
		params := benchCallParams(last)
		original := String("web_search")
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(params)))
			b.ReportAllocs()
			for b.Loop() {
				n, ok := StringField(params, "name")
				if !ok || n != "search__web_search" {
					b.Fatal("no name")
				}
				if _, err := SetField(params, "name", original); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRemapID is the upstream side of id remapping: the request is
// written again with the client's own numeric id (the host's id stays
// with the host's request), and the answer's id is parsed back.
func BenchmarkRemapID(b *testing.B) {
	params := benchCallParams(false)
	b.ReportAllocs()
	buf := make([]byte, 0, len(params)+128)
	var id int64
	for b.Loop() {
		id++
		idRaw := strconv.AppendInt(nil, id, 10)
		buf = AppendRequest(buf[:0], idRaw, "tools/call", params)
		if n, ok := Int64ID(idRaw); !ok || n != id {
			b.Fatal("id")
		}
	}
}

// BenchmarkFindIsError is the telemetry's look at a tool result: is it
// isError? The member comes after the content, so the whole result is
// scanned.
func BenchmarkFindIsError(b *testing.B) {
	for _, s := range benchSizes {
		res := benchResult(s.size)
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(len(res)))
			b.ReportAllocs()
			for b.Loop() {
				if v, ok := Field(res, "isError"); !ok || string(v) != "false" {
					b.Fatal("no isError")
				}
			}
		})
	}
}

// BenchmarkWriteResult writes a response around a result; a large result
// goes out as its own write, never copied.
func BenchmarkWriteResult(b *testing.B) {
	for _, s := range benchSizes {
		res := benchResult(s.size)
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(len(res)))
			b.ReportAllocs()
			for b.Loop() {
				if err := WriteResult(io.Discard, json.RawMessage(`"host-7"`), res); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSkipString compares the scanner's string loop, which checks
// eight bytes at a time for a quote, a backslash or a control character
// and falls back to the byte loop only there, with the byte loop alone. Strings are what large results are made of (text, base64
// images), and Decode plus every Field lookup on a result scans them.
func BenchmarkSkipString(b *testing.B) {
	for _, s := range benchSizes {
		str := []byte(`"` + strings.Repeat("abcdefgh", s.size/8) + `"`)
		for _, impl := range []struct {
			name string
			skip func([]byte, int) (int, error)
		}{{"bytewise", bytewiseSkipString}, {"skipString", skipString}} {
			b.Run(s.name+"/"+impl.name, func(b *testing.B) {
				b.SetBytes(int64(len(str)))
				for b.Loop() {
					if end, err := impl.skip(str, 0); err != nil || end != len(str) {
						b.Fatal(end, err)
					}
				}
			})
		}
	}
}

// TestSkipStringFastPath checks that skipString agrees with the byte
// loop, end index and error alike, on strings around the 8-byte
// boundaries with every kind of special byte in every position.
func TestSkipStringFastPath(t *testing.T) {
	specials := []string{`"`, `\"`, `\\`, `\n`, `\u00e9`, `\u12`, `\x`, "\x01", "\x1f", " ", "\x7f", "é", "\xff", `\`}
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(in []byte) {
		t.Helper()
		wantEnd, wantErr := bytewiseSkipString(in, 0)
		gotEnd, gotErr := skipString(in, 0)
		if wantEnd != gotEnd || (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
			t.Fatalf("input %q: byte loop = %d, %v; skipString = %d, %v", in, wantEnd, wantErr, gotEnd, gotErr)
		}
	}
	for n := range 40 {
		for _, sp := range specials {
			for pos := 0; pos <= n; pos++ {
				body := strings.Repeat("a", pos) + sp + strings.Repeat("b", n-pos)
				check([]byte(`"` + body + `"`))
				check([]byte(`"` + body)) // unterminated
			}
		}
	}
	for range 20000 {
		var buf bytes.Buffer
		buf.WriteByte('"')
		for range rng.IntN(40) {
			if rng.IntN(6) == 0 {
				buf.WriteString(specials[rng.IntN(len(specials))])
			} else {
				buf.WriteByte(byte('a' + rng.IntN(26)))
			}
		}
		if rng.IntN(2) == 0 {
			buf.WriteByte('"')
		}
		check(buf.Bytes())
	}
}

// bytewiseSkipString is skipString without its eight-bytes-at-a-time
// fast path: the reference the fast path must agree with.
func bytewiseSkipString(data []byte, i int) (int, error) {
	i++ // opening quote
	for i < len(data) {
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

// BenchmarkWithCall: search mode's call_tool turning a host's request
// into the tools/call it runs (Request.WithCall), next to the strict
// decode of the same request, which it replaced a second one of.
func BenchmarkWithCall(b *testing.B) {
	args := `{"query":"` + strings.Repeat("q", 1<<10) + `","limit":10}`
	body := AppendRequest(nil, json.RawMessage(`7`), "tools/call",
		json.RawMessage(`{"name":"call_tool","arguments":{"name":"search__web_search","arguments":`+args+`},"_meta":{"progressToken":"tok-1"}}`))
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeRequest(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	r, err := DecodeRequest(body)
	if err != nil {
		b.Fatal(err)
	}
	inner, _ := Field(r.Arguments, "arguments")
	b.Run("with-call", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if c := r.WithCall("search__web_search", inner); !c.HasName {
				b.Fatal("no name")
			}
		}
	})
}
