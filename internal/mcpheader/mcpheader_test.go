package mcpheader

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestEncodeDecode(t *testing.T) {
	// The examples of the spec's "Value Encoding" table.
	tests := []struct{ in, want string }{
		{"us-west1", "us-west1"},
		{"Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="},
		{" padded ", "=?base64?IHBhZGRlZCA=?="},
		{"line1\nline2", "=?base64?bGluZTEKbGluZTI=?="},
		{"=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="},
		{"", ""},
		// Edge cases beyond the table.
		{"tab\tinside", "tab\tinside"},
		{"\ttab first", "=?base64?CXRhYiBmaXJzdA==?="},
		{"=?base64?no end", "=?base64?no end"},
		{"del\x7f", "=?base64?ZGVsfw==?="},
	}
	for _, tt := range tests {
		if got := Encode(tt.in); got != tt.want {
			t.Errorf("Encode(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if back, err := Decode(tt.want); err != nil || back != tt.in {
			t.Errorf("Decode(%q) = %q, %v; want %q", tt.want, back, err, tt.in)
		}
	}
	for _, bad := range []string{"a\x00b", "caf\xc3\xa9", "=?base64?***?=", "=?base64?/w==?="} {
		if _, err := Decode(bad); !errors.Is(err, ErrInvalidValue) {
			t.Errorf("Decode(%q) error = %v, want ErrInvalidValue", bad, err)
		}
	}
}

func tool(schema string) json.RawMessage {
	return json.RawMessage(`{"name":"t","inputSchema":` + schema + `}`)
}

func TestBindings(t *testing.T) {
	got, err := Bindings(tool(`{"type":"object","properties":{
		"region":{"type":"string","x-mcp-header":"Region"},
		"opts":{"type":"object","properties":{"dry":{"type":"boolean","x-mcp-header":"Dry"}}},
		"count":{"type":"integer","x-mcp-header":"Count"},
		"plain":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Binding{{"Count", []string{"count"}}, {"Dry", []string{"opts", "dry"}}, {"Region", []string{"region"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Bindings (-want +got):\n%s", diff)
	}
	if b, err := Bindings(tool(`{"type":"object"}`)); b != nil || err != nil {
		t.Errorf("no annotations: %v, %v", b, err)
	}
}

func TestCheck(t *testing.T) {
	bindings := []Binding{{"Region", []string{"region"}}, {"Count", []string{"count"}}, {"Dry", []string{"opts", "dry"}}}
	headers := func(h map[string]string) func(string) string { return func(k string) string { return h[k] } }
	ok := []struct {
		name string
		args string
		h    map[string]string
	}{
		{"all present", `{"region":"eu","count":3,"opts":{"dry":true}}`, map[string]string{"Mcp-Param-Region": "eu", "Mcp-Param-Count": "3", "Mcp-Param-Dry": "true"}},
		{"absent values need no header", `{}`, nil},
		{"null value", `{"region":null}`, nil},
		{"integer as float", `{"count":42.0}`, map[string]string{"Mcp-Param-Count": "42"}},
		{"extra header for an absent value", `{}`, map[string]string{"Mcp-Param-Region": "eu"}},
	}
	for _, tt := range ok {
		if err := Check(bindings, json.RawMessage(tt.args), headers(tt.h)); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
	bad := []struct {
		name, args string
		h          map[string]string
		want       string
	}{
		{"missing", `{"region":"eu"}`, nil, "Mcp-Param-Region header is required"},
		{"mismatch", `{"count":3}`, map[string]string{"Mcp-Param-Count": "4"}, `"4" does not match body value "3"`},
		{"invalid characters", `{"region":"eu"}`, map[string]string{"Mcp-Param-Region": "e\x01u"}, "invalid header value"},
		{"invalid extra", `{}`, map[string]string{"Mcp-Param-Region": "=?base64?%%?="}, "bad base64"},
	}
	for _, tt := range bad {
		err := Check(bindings, json.RawMessage(tt.args), headers(tt.h))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

func TestHeaderString(t *testing.T) {
	tests := []struct {
		in     string
		want   string
		wantOK bool
	}{
		{`"s"`, "s", true},
		{`"esc\u00e9"`, "escé", true},
		{`42`, "42", true},
		{`-7`, "-7", true},
		{`42.0`, "42", true},
		{`4.2e1`, "42", true},
		{`4.5`, "", false},
		{`9007199254740993.0`, "", false},
		{`true`, "true", true},
		{`false`, "false", true},
		{`null`, "", false},
		{`{}`, "", false},
		{`[1]`, "", false},
	}
	for _, tt := range tests {
		got, ok := headerString(json.RawMessage(tt.in))
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("headerString(%s) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestBindingsTable(t *testing.T) {
	tests := []struct {
		name    string
		schema  string
		want    []string // path=header
		wantErr string
	}{
		{"none", `{"type":"object","properties":{"a":{"type":"string"}}}`, nil, ""},
		{"top and nested", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A"},"o":{"type":"object","properties":{"b":{"type":"integer","x-mcp-header":"B-2"}}}}}`, []string{"a=A", "o.b=B-2"}, ""},
		{"property named like the keyword", `{"type":"object","properties":{"x-mcp-header":{"type":"string"}}}`, nil, ""},
		{"in items", `{"type":"object","properties":{"l":{"type":"array","items":{"type":"string","x-mcp-header":"I"}}}}`, nil, "not reachable"},
		{"in anyOf", `{"type":"object","anyOf":[{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}]}`, nil, "not reachable"},
		{"in $defs", `{"type":"object","$defs":{"d":{"type":"string","x-mcp-header":"D"}}}`, nil, "not reachable"},
		{"on the root", `{"type":"object","x-mcp-header":"R"}`, nil, "not reachable"},
		{"number type", `{"type":"object","properties":{"a":{"type":"number","x-mcp-header":"A"}}}`, nil, "type string, integer or boolean"},
		{"object type", `{"type":"object","properties":{"a":{"type":"object","x-mcp-header":"A"}}}`, nil, "type string, integer or boolean"},
		{"empty", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":""}}}`, nil, "non-empty HTTP token"},
		{"not a token", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"a:b"}}}`, nil, "non-empty HTTP token"},
		{"control character", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"a\r\nb"}}}`, nil, "non-empty HTTP token"},
		{"not a string", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":1}}}`, nil, "non-empty HTTP token"},
		{"duplicate", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"Dup"},"b":{"type":"string","x-mcp-header":"dup"}}}`, nil, "not unique"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Bindings(json.RawMessage(`{"name":"t","inputSchema":` + tt.schema + `}`))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, x := range b {
				got = append(got, strings.Join(x.Path, ".")+"="+x.Header)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("bindings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMediaType(t *testing.T) {
	for in, want := range map[string]string{
		"application/json":                   "application/json",
		"Application/JSON; charset=utf-8":    "application/json",
		" text/event-stream ;q=1":            "text/event-stream",
		"text/event-stream":                  "text/event-stream",
		"":                                   "",
		"not a type":                         "not a type",
		"application/json ; charset=\"x;y\"": "application/json",
	} {
		if got := MediaType(in); got != want {
			t.Errorf("MediaType(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAmbiguousBoundArgument(t *testing.T) {
	bindings := []Binding{{Header: "Region", Path: []string{"region"}}, {Header: "Dry", Path: []string{"opts", "dry"}}}
	for _, tt := range []struct {
		args string
		bad  bool
	}{
		{`{"region":"us","opts":{"dry":true}}`, false},
		{`{"region":"us","other":"REGION"}`, false},
		{`{"region":"us","Region":"eu"}`, true},
		{`{"REGION":"eu"}`, true},
		{`{"region":"us","opts":{"dry":true,"Dry":false}}`, true},
		{`{"region":"us","Opts":{"dry":false}}`, true},
	} {
		err := Ambiguous(bindings, json.RawMessage(tt.args))
		if (err != nil) != tt.bad || (err != nil && !errors.Is(err, ErrAmbiguous)) {
			t.Errorf("%s: %v, want ambiguous %v", tt.args, err, tt.bad)
		}
	}
}
