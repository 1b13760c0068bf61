package jsonrpc

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOutgoing(t *testing.T) {
	host := func(params string) *Request {
		t.Helper()
		r, err := DecodeRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + params + `}`))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tt := range []struct {
		name   string
		params string
		edit   func(o *Outgoing)
		want   string
	}{
		{"untouched", `{ "name" : "a__x",  "arguments":{"k": [1, 2]} }`, func(*Outgoing) {},
			`{ "name" : "a__x",  "arguments":{"k": [1, 2]} }`},
		{"name rewritten, the rest byte for byte", `{"arguments":{"k": [1, 2], "s":"\u00e9"},"name":"a__x","x-new":{"y":null}}`,
			func(o *Outgoing) { o.Set("name", String("x")) },
			`{"arguments":{"k": [1, 2], "s":"\u00e9"},"name":"x","x-new":{"y":null}}`},
		{"escaped key kept", `{"na\u006de":"a__x"}`, func(o *Outgoing) { o.Set("name", String("x")) }, `{"na\u006de":"x"}`},
		{"meta members set and removed", `{"name":"a","_meta":{"progressToken":"host","io.modelcontextprotocol/clientInfo":{"n":1},"keep":true}}`,
			func(o *Outgoing) {
				o.SetMeta("progressToken", String("gw-1"))
				o.SetMeta(MetaClientInfo, nil)
				o.SetMeta(MetaProtocolVersion, String("2026-07-28"))
			},
			`{"name":"a","_meta":{"progressToken":"gw-1","keep":true,"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`},
		{"meta added", `{"name":"a"}`, func(o *Outgoing) { o.SetMeta("traceparent", String("00-x")) }, `{"name":"a","_meta":{"traceparent":"00-x"}}`},
		{"meta removal of what is absent", `{"name":"a"}`, func(o *Outgoing) { o.SetMeta(MetaClientInfo, nil) }, `{"name":"a"}`},
		{"member added and removed", `{"name":"a","requestState":"s"}`, func(o *Outgoing) {
			o.Set("requestState", nil)
			o.Set("inputResponses", json.RawMessage(`{"k":{}}`))
		}, `{"name":"a","inputResponses":{"k":{}}}`},
		{"no params, meta set", ``, func(o *Outgoing) { o.SetMeta("k", json.RawMessage("1")) }, `{"_meta":{"k":1}}`},
		{"empty object", `{}`, func(o *Outgoing) { o.Set("name", String("x")) }, `{"name":"x"}`},
		{"last set wins", `{"name":"a"}`, func(o *Outgoing) { o.Set("name", String("b")); o.Set("name", String("c")) }, `{"name":"c"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var r *Request
			if tt.params == "" {
				var err error
				if r, err = DecodeRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)); err != nil {
					t.Fatal(err)
				}
			} else {
				r = host(tt.params)
			}
			o := r.Outgoing()
			tt.edit(o)
			if got := string(o.Params()); got != tt.want {
				t.Errorf("params\n got %s\nwant %s", got, tt.want)
			}
			msg := o.AppendRequest(nil, json.RawMessage("42"))
			if _, err := DecodeRequest(msg); err != nil {
				t.Errorf("the request %s does not decode strictly: %v", msg, err)
			}
		})
	}

	t.Run("more rewrites than a word has bits", func(t *testing.T) {
		var params, want strings.Builder
		params.WriteString(`{"_meta":{`)
		want.WriteString(`{"_meta":{`)
		for i := range 70 {
			if i > 0 {
				params.WriteByte(',')
				want.WriteByte(',')
			}
			fmt.Fprintf(&params, `"m%d":0`, i)
			fmt.Fprintf(&want, `"m%d":1`, i)
		}
		params.WriteString(`}`)
		want.WriteString(`}`)
		for i := range 70 {
			fmt.Fprintf(&params, `,"p%d":0`, i)
			fmt.Fprintf(&want, `,"p%d":1`, i)
		}
		params.WriteString(`}`)
		want.WriteString(`,"new":1}`)
		o := host(params.String()).Outgoing()
		for i := range 70 {
			o.Set(fmt.Sprintf("p%d", i), json.RawMessage("1"))
			o.SetMeta(fmt.Sprintf("m%d", i), json.RawMessage("1"))
		}
		o.Set("new", json.RawMessage("1"))
		if got := string(o.Params()); got != want.String() {
			t.Errorf("params\n got %s\nwant %s", got, want.String())
		}
	})
	t.Run("a _meta that is not an object", func(t *testing.T) {
		o := host(`{"name":"a","_meta":[1]}`).Outgoing()
		o.SetMeta(MetaClientInfo, nil) // removing what is not there
		if got := string(o.Params()); got != `{"name":"a","_meta":[1]}` {
			t.Errorf("removal from a non-object _meta rewrote it: %s", got)
		}
	})
	t.Run("lookups see the rewrites", func(t *testing.T) {
		o := host(`{"name":"a__x","arguments":{"q":1},"_meta":{"progressToken":"h"}}`).Outgoing()
		o.Set("name", String("x"))
		o.SetMeta("progressToken", String("gw-1"))
		if n, _ := o.StringParam("name"); n != "x" {
			t.Errorf("name %q", n)
		}
		if a, _ := o.Param("arguments"); string(a) != `{"q":1}` {
			t.Errorf("arguments %s", a)
		}
		if tok, _ := o.MetaParam("progressToken"); string(tok) != `"gw-1"` {
			t.Errorf("token %s", tok)
		}
		o.Set("name", nil)
		if _, ok := o.Param("name"); ok {
			t.Error("a removed member is still found")
		}
	})
	t.Run("gateway params", func(t *testing.T) {
		o := NewOutgoing("resources/subscribe", json.RawMessage(`{"uri":"file:///a","_meta":{"x":1}}`))
		if u, _ := o.StringParam("uri"); u != "file:///a" {
			t.Errorf("uri %q", u)
		}
		o.SetMeta("y", json.RawMessage("2"))
		if got := string(o.Params()); got != `{"uri":"file:///a","_meta":{"x":1,"y":2}}` {
			t.Errorf("params %s", got)
		}
		if got := string(NewOutgoing("ping", nil).AppendRequest(nil, json.RawMessage("1"))); got != `{"jsonrpc":"2.0","id":1,"method":"ping"}` {
			t.Errorf("request without params: %s", got)
		}
	})
	t.Run("clone", func(t *testing.T) {
		o := host(`{"name":"a"}`).Outgoing()
		o.Set("name", String("x"))
		c := o.Clone()
		c.Set("inputResponses", json.RawMessage(`{}`))
		c.Set("name", String("y"))
		if got := string(o.Params()); got != `{"name":"x"}` {
			t.Errorf("the original changed: %s", got)
		}
		if got := string(c.Params()); got != `{"name":"y","inputResponses":{}}` {
			t.Errorf("clone %s", got)
		}
	})
	t.Run("ref", func(t *testing.T) {
		r := host(`{"ref":{"type":"ref/prompt","name":"a__p","x":[1]},"argument":{"name":"n","value":"v"}}`)
		if got := string(r.Ref.With("name", String("p"))); got != `{"type":"ref/prompt","name":"p","x":[1]}` {
			t.Errorf("ref %s", got)
		}
	})
}

// FuzzOutgoing: rewriting a host's request changes exactly the members
// rewritten, as encoding/json reads the result.
func FuzzOutgoing(f *testing.F) {
	for _, s := range []string{
		`{"name":"a","arguments":{"x":1}}`, `{"_meta":{"progressToken":1,"io.modelcontextprotocol/clientInfo":{}}}`,
		`{}`, `{"requestState":"s","na\u006de":"e"}`, `[1,2]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		r, err := DecodeRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"m","params":` + string(params) + `}`))
		if err != nil || r.params.Raw == nil {
			return
		}
		o := r.Outgoing()
		o.Set("name", String("rewritten"))
		o.Set("requestState", nil)
		o.SetMeta("progressToken", String("gw"))
		o.SetMeta(MetaClientInfo, nil)
		var want map[string]any
		if err := json.Unmarshal(params, &want); err != nil {
			t.Fatal(err)
		}
		want["name"] = "rewritten"
		delete(want, "requestState")
		meta, _ := want["_meta"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		meta["progressToken"] = "gw"
		delete(meta, MetaClientInfo)
		want["_meta"] = meta
		out := o.Params()
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s from %s: %v", out, params, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s from %s (-want +got):\n%s", out, params, diff)
		}
		if _, err := DecodeRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"m","params":` + string(out) + `}`)); err != nil && !strings.Contains(err.Error(), "differs only in case") {
			t.Fatalf("%s does not decode strictly: %v", out, err)
		}
	})
}
