package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var stripTests = []struct {
	name, in, want string
}{
	{
		name: "real definition",
		in:   echoDef,
		want: `{"name":"echo","title":"Echo Tool","description":"Echoes back the input string","inputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"message":{"type":"string"}},"required":["message"]},"annotations":{"readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false},"execution":{"taskSupport":"forbidden"}}`,
	},
	{
		name: "nested items and outputSchema",
		in:   editFileDef,
		want: `{"name":"edit_file","title":"Edit File","description":"Make line-based edits to a text file. Each edit replaces exact line sequences with new content. Returns a git-style diff showing the changes made. Only works within allowed directories.","inputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"path":{"type":"string"},"edits":{"type":"array","items":{"type":"object","properties":{"oldText":{"type":"string"},"newText":{"type":"string"}},"required":["oldText","newText"]}},"dryRun":{"default":false,"type":"boolean"}},"required":["path","edits"]},"annotations":{"readOnlyHint":false,"idempotentHint":false,"destructiveHint":true,"openWorldHint":false},"execution":{"taskSupport":"forbidden"},"outputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"content":{"type":"string"}},"required":["content"],"additionalProperties":false}}`,
	},
	{
		name: "properties named like keywords survive",
		in:   `{"name":"t","inputSchema":{"type":"object","title":"Args","properties":{"description":{"type":"string","description":"the description"},"title":{"type":"string","title":"Title"},"examples":{"type":"array","examples":[[1]]},"$comment":{"const":1}},"required":["description","title"]}}`,
		want: `{"name":"t","inputSchema":{"type":"object","properties":{"description":{"type":"string"},"title":{"type":"string"},"examples":{"type":"array"},"$comment":{"const":1}},"required":["description","title"]}}`,
	},
	{
		name: "tool description, title and annotations are left alone",
		in:   `{"title":"T","description":"D","annotations":{"title":"A"},"inputSchema":{"description":"S","type":"object"}}`,
		want: `{"title":"T","description":"D","annotations":{"title":"A"},"inputSchema":{"type":"object"}}`,
	},
	{
		name: "nested $defs and definitions",
		in:   `{"inputSchema":{"$defs":{"node":{"title":"Node","type":"object","properties":{"next":{"$ref":"#/$defs/node","description":"next node"}},"$defs":{"inner":{"$comment":"deep","type":"null"}}}},"definitions":{"old":{"description":"draft-07","type":"string"}},"$ref":"#/$defs/node"}}`,
		want: `{"inputSchema":{"$defs":{"node":{"type":"object","properties":{"next":{"$ref":"#/$defs/node"}},"$defs":{"inner":{"type":"null"}}}},"definitions":{"old":{"type":"string"}},"$ref":"#/$defs/node"}}`,
	},
	{
		name: "every subschema keyword",
		in: `{"inputSchema":{` +
			`"additionalProperties":{"title":"a","type":"string"},` +
			`"additionalItems":{"title":"a"},` +
			`"not":{"title":"a"},"if":{"title":"a"},"then":{"title":"a"},"else":{"title":"a"},` +
			`"contains":{"title":"a"},"propertyNames":{"title":"a","pattern":"^x"},` +
			`"unevaluatedProperties":{"title":"a"},"unevaluatedItems":{"title":"a"},"contentSchema":{"title":"a"},` +
			`"prefixItems":[{"title":"a"},true],"allOf":[{"title":"a"}],"anyOf":[{"title":"a"},{"title":"b"}],"oneOf":[{"title":"a"}],` +
			`"patternProperties":{"^d":{"title":"a"}},"dependentSchemas":{"x":{"title":"a"}},` +
			`"dependencies":{"x":{"title":"a"},"y":["title"]}}}`,
		want: `{"inputSchema":{` +
			`"additionalProperties":{"type":"string"},` +
			`"additionalItems":{},` +
			`"not":{},"if":{},"then":{},"else":{},` +
			`"contains":{},"propertyNames":{"pattern":"^x"},` +
			`"unevaluatedProperties":{},"unevaluatedItems":{},"contentSchema":{},` +
			`"prefixItems":[{},true],"allOf":[{}],"anyOf":[{},{}],"oneOf":[{}],` +
			`"patternProperties":{"^d":{}},"dependentSchemas":{"x":{}},` +
			`"dependencies":{"x":{},"y":["title"]}}}`,
	},
	{
		name: "items as a schema, as an array (draft-07) and as a boolean",
		in:   `{"inputSchema":{"properties":{"a":{"items":{"title":"x"}},"b":{"items":[{"title":"x"},{"title":"y"}]},"c":{"items":false}}}}`,
		want: `{"inputSchema":{"properties":{"a":{"items":{}},"b":{"items":[{},{}]},"c":{"items":false}}}}`,
	},
	{
		name: "data is never entered",
		in:   `{"inputSchema":{"type":"object","default":{"description":"d","title":"t"},"enum":[{"title":"t"}],"const":{"examples":1},"examples":[{"a":1}],"x-mcp-header":"X-Trace","x-vendor":{"description":"kept"},"properties":{"p":{"type":"object","default":{"title":"kept"},"x-mcp-header":"X-P"}}}}`,
		want: `{"inputSchema":{"type":"object","default":{"description":"d","title":"t"},"enum":[{"title":"t"}],"const":{"examples":1},"x-mcp-header":"X-Trace","x-vendor":{"description":"kept"},"properties":{"p":{"type":"object","default":{"title":"kept"},"x-mcp-header":"X-P"}}}}`,
	},
	{
		name: "whitespace and order are kept",
		in: "{\n  \"name\": \"t\",\n  \"inputSchema\": {\n    \"description\": \"first\",\n    \"type\" : \"object\",\n" +
			"    \"properties\" : {\n      \"a\" : { \"type\": \"string\" , \"title\": \"last\" }\n    }\n  }\n}\n",
		want: "{\n  \"name\": \"t\",\n  \"inputSchema\": {\n    \"type\" : \"object\",\n" +
			"    \"properties\" : {\n      \"a\" : { \"type\": \"string\" }\n    }\n  }\n}\n",
	},
	{
		name: "escaped keys are read as their values",
		in:   `{"inputSchema":{"descr\u0069ption":"x","propert\u0069es":{"a":{"t\u0069tle":"y","type":"string"}}}}`,
		want: `{"inputSchema":{"propert\u0069es":{"a":{"type":"string"}}}}`,
	},
	{
		name: "duplicate keys are all handled",
		in:   `{"inputSchema":{"title":"a","properties":{"p":{"title":"b"}},"title":"c","properties":{"q":{"title":"d"}}}}`,
		want: `{"inputSchema":{"properties":{"p":{}},"properties":{"q":{}}}}`,
	},
	{
		name: "schemas that are not objects",
		in:   `{"inputSchema":true,"outputSchema":null}`,
		want: `{"inputSchema":true,"outputSchema":null}`,
	},
	{
		name: "no schema",
		in:   `{"name":"p","description":"a prompt","arguments":[{"name":"x","description":"kept"}]}`,
		want: `{"name":"p","description":"a prompt","arguments":[{"name":"x","description":"kept"}]}`,
	},
	{
		name: "strings holding brackets and quotes",
		in:   `{"inputSchema":{"properties":{"a":{"pattern":"^[{}\\]\"]+$","title":"{\"x\":[1]}","enum":["]","}"]}}}}`,
		want: `{"inputSchema":{"properties":{"a":{"pattern":"^[{}\\]\"]+$","enum":["]","}"]}}}}`,
	},
	{
		name: "numbers and literals before closing brackets",
		in:   `{"inputSchema":{"minimum":-1.5e3,"properties":{"a":{"maximum":10,"title":"x"},"b":{"nullable":true}},"anyOf":[{"const":null},{"multipleOf":2,"$comment":"c"}]}}`,
		want: `{"inputSchema":{"minimum":-1.5e3,"properties":{"a":{"maximum":10},"b":{"nullable":true}},"anyOf":[{"const":null},{"multipleOf":2}]}}`,
	},
}

func TestStripSchemaDecorations(t *testing.T) {
	for _, tt := range stripTests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			got, err := StripSchemaDecorations(in)
			if err != nil {
				t.Fatalf("StripSchemaDecorations: %v", err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if string(in) != tt.in {
				t.Errorf("the input was modified: %s", in)
			}
			again, err := StripSchemaDecorations(got)
			if err != nil || !bytes.Equal(again, got) {
				t.Errorf("not idempotent: second pass gave %s, %v", again, err)
			}
			if len(got) > 0 && len(in) > 0 && &got[0] == &in[0] {
				t.Errorf("the result shares memory with the input")
			}
		})
	}
}

func TestStripSchemaDecorationsSavesTokens(t *testing.T) {
	got, err := StripSchemaDecorations([]byte(editFileDef))
	if err != nil {
		t.Fatal(err)
	}
	// The three property descriptions cost 28 of the 240 tokens.
	if before, after := Tokens([]byte(editFileDef)), Tokens(got); before != 240 || after != 212 {
		t.Errorf("tokens before, after = %d, %d; want 240, 212", before, after)
	}
}

func TestStripSchemaDecorationsErrors(t *testing.T) {
	for _, in := range []string{``, ` `, `{`, `{"inputSchema":{"title":}}`, `[]`, `"tool"`, `null`, `{} {}`, `{"a":1}x`} {
		t.Run(in, func(t *testing.T) {
			got, err := StripSchemaDecorations([]byte(in))
			if !errors.Is(err, ErrInvalidDefinition) {
				t.Errorf("StripSchemaDecorations(%q) = %q, %v; want an error wrapping ErrInvalidDefinition", in, got, err)
			}
		})
	}
}

func FuzzStripSchemaDecorations(f *testing.F) {
	for _, tt := range stripTests {
		f.Add([]byte(tt.in))
	}
	f.Add([]byte(`{"inputSchema":{"properties":{"a":{"items":[{"title":1}]}},"allOf":[{"not":{"$comment":""}}]}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := bytes.Clone(in)
		got, err := StripSchemaDecorations(in)
		if !bytes.Equal(in, orig) {
			t.Fatalf("the input was modified")
		}
		var v any
		if json.Unmarshal(in, &v) != nil {
			if err == nil {
				t.Fatalf("invalid JSON %q accepted", in)
			}
			return
		}
		if _, isObject := v.(map[string]any); !isObject {
			if !errors.Is(err, ErrInvalidDefinition) {
				t.Fatalf("non-object %q: err = %v", in, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("StripSchemaDecorations(%q): %v", in, err)
		}
		var gotV any
		if err := json.Unmarshal(got, &gotV); err != nil {
			t.Fatalf("output %q is not JSON: %v", got, err)
		}
		if diff := cmp.Diff(referenceStrip(v), gotV); diff != "" {
			t.Fatalf("input %s\noutput %s\nagainst the reference (-want +got):\n%s", in, got, diff)
		}
		if again, _ := StripSchemaDecorations(got); !bytes.Equal(again, got) {
			t.Fatalf("not idempotent: %q then %q", got, again)
		}
		if a, b := Tokens(got), Tokens(in); a > b {
			t.Fatalf("more tokens after (%d) than before (%d): %q -> %q", a, b, in, got)
		}
	})
}

// referenceStrip strips a decoded definition with maps, independently of
// the byte-splicing implementation, with its own keyword lists.
func referenceStrip(def any) any {
	m := def.(map[string]any)
	for _, k := range []string{"inputSchema", "outputSchema"} {
		if s, ok := m[k]; ok {
			m[k] = referenceStripSchema(s)
		}
	}
	return m
}

func referenceStripSchema(s any) any {
	m, ok := s.(map[string]any)
	if !ok {
		return s
	}
	for _, k := range []string{"description", "title", "examples", "$comment"} {
		delete(m, k)
	}
	for _, k := range []string{"additionalProperties", "additionalItems", "not", "if", "then", "else", "contains",
		"propertyNames", "unevaluatedProperties", "unevaluatedItems", "contentSchema", "items"} {
		if v, ok := m[k]; ok {
			m[k] = referenceStripSchema(v)
		}
	}
	for _, k := range []string{"prefixItems", "allOf", "anyOf", "oneOf", "items"} {
		if a, ok := m[k].([]any); ok {
			for i := range a {
				a[i] = referenceStripSchema(a[i])
			}
		}
	}
	for _, k := range []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"} {
		if sm, ok := m[k].(map[string]any); ok {
			for name, sub := range sm {
				sm[name] = referenceStripSchema(sub)
			}
		}
	}
	return m
}
