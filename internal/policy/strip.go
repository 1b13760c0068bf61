package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// ErrInvalidDefinition is wrapped by the errors StripSchemaDecorations
// returns for input that is not a JSON object.
var ErrInvalidDefinition = errors.New("definition is not a JSON object")

// schemaDecorations are the JSON Schema keywords that only annotate a
// schema: removing them leaves what the schema accepts unchanged
// (JSON Schema 2020-12 Validation, section 9, "basic meta-data
// annotations"; "$comment" is in Core, section 8.3).
var schemaDecorations = []string{"description", "title", "examples", "$comment"}

// StripSchemaDecorations returns a copy of the tool definition def
// whose inputSchema and outputSchema no longer carry the annotation
// keywords "description", "title", "examples" and "$comment", in the
// root schema and in every subschema at any depth. They help a human
// reading the schema more than a model calling the tool, and often
// repeat the tool's description, yet every one of them is paid for in
// the context of every session.
//
// Only keywords are removed. The walk follows the keywords that hold
// subschemas (properties, patternProperties, additionalProperties,
// items, prefixItems, additionalItems, allOf, anyOf, oneOf, not, if,
// then, else, $defs, definitions, dependentSchemas, dependencies,
// contains, propertyNames, unevaluatedProperties, unevaluatedItems,
// contentSchema) and reads the maps among them (properties,
// patternProperties, $defs, definitions, dependentSchemas, dependencies)
// as names mapped to schemas, so a property named "description" or
// "title" stays, and its own schema is stripped. Values that are data,
// not schemas (default, enum, const, required, x-mcp-header and any
// unknown keyword), are never entered, whatever they contain. The
// tool's own top-level description and title are left alone: cut the
// description with Trim.
//
// Every byte that is not removed is kept as it was, whitespace and key
// order included. def itself is never modified, and the result never
// shares memory with it. A definition without schemas comes back as an
// equal copy. Input that is not a JSON object gives an error wrapping
// ErrInvalidDefinition.
func StripSchemaDecorations(def json.RawMessage) (json.RawMessage, error) {
	if !json.Valid(def) {
		var v any
		err := json.Unmarshal(def, &v) // only for the message
		return nil, fmt.Errorf("policy: strip schema decorations: %w: %v", ErrInvalidDefinition, err)
	}
	if i := skipSpace(def, 0); i >= len(def) || def[i] != '{' {
		return nil, fmt.Errorf("policy: strip schema decorations: %w", ErrInvalidDefinition)
	}
	return mapValues(def, func(key string, v []byte) []byte {
		if key == "inputSchema" || key == "outputSchema" {
			return stripSchema(v)
		}
		return v
	}), nil
}

// How a keyword holds subschemas.
type subschemas uint8

const (
	noSchema     subschemas = iota
	oneSchema               // the value is a schema
	schemaList              // an array of schemas
	schemaMap               // an object whose values are schemas
	schemaOrList            // items: a schema, or (before 2020-12) an array of them
)

// schemaKeywords lists the keywords whose values are or hold schemas, in
// JSON Schema 2020-12 and the drafts MCP servers still emit (draft-07's
// definitions, dependencies, additionalItems and array form of items).
var schemaKeywords = map[string]subschemas{
	"additionalProperties":  oneSchema,
	"additionalItems":       oneSchema,
	"not":                   oneSchema,
	"if":                    oneSchema,
	"then":                  oneSchema,
	"else":                  oneSchema,
	"contains":              oneSchema,
	"propertyNames":         oneSchema,
	"unevaluatedProperties": oneSchema,
	"unevaluatedItems":      oneSchema,
	"contentSchema":         oneSchema,
	"items":                 schemaOrList,
	"prefixItems":           schemaList,
	"allOf":                 schemaList,
	"anyOf":                 schemaList,
	"oneOf":                 schemaList,
	"properties":            schemaMap,
	"patternProperties":     schemaMap,
	"$defs":                 schemaMap,
	"definitions":           schemaMap,
	"dependentSchemas":      schemaMap,
	// draft-07: a schema, or an array of property names (left as is).
	"dependencies": schemaMap,
}

// stripSchema strips one schema, given as a valid JSON value without
// surrounding space. Boolean schemas, and values that are not schemas at
// all, come back unchanged.
func stripSchema(s []byte) []byte {
	if len(s) == 0 || s[0] != '{' {
		return s
	}
	for _, k := range schemaDecorations {
		s = jsonrpc.DeleteField(s, k)
	}
	return mapValues(s, func(key string, v []byte) []byte {
		kind := schemaKeywords[key]
		switch {
		case kind == oneSchema, kind == schemaOrList && v[0] == '{':
			return stripSchema(v)
		case (kind == schemaList || kind == schemaOrList) && v[0] == '[',
			kind == schemaMap && v[0] == '{':
			return mapValues(v, func(_ string, sub []byte) []byte { return stripSchema(sub) })
		}
		return v
	})
}

// mapValues returns a new copy of raw, a valid JSON object or array,
// with each member or element value v replaced by fn(key, v); key is ""
// for array elements. Every other byte is copied as it is. fn gets v
// without surrounding space and must return valid JSON. Any other raw
// value is returned as is.
func mapValues(raw []byte, fn func(key string, v []byte) []byte) []byte {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' && raw[i] != '[' {
		return raw
	}
	object := raw[i] == '{'
	out := make([]byte, 0, len(raw))
	last := 0 // raw[:last] has been written to out
	i++
	for {
		i = skipSpace(raw, i)
		if raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
		if raw[i] == '}' || raw[i] == ']' {
			break
		}
		var key string
		if object {
			ke := skipValue(raw, i)
			key = unquoteKey(raw[i:ke])
			i = skipSpace(raw, ke)  // at ':'
			i = skipSpace(raw, i+1) // at the value
		}
		ve := skipValue(raw, i)
		out = append(out, raw[last:i]...)
		out = append(out, fn(key, raw[i:ve])...)
		last, i = ve, ve
	}
	return append(out, raw[last:]...)
}

func unquoteKey(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	_ = json.Unmarshal(raw, &s) // raw is a valid JSON string
	return s
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the offset just past the JSON value starting at
// b[i]. b must be valid JSON: it checks nothing.
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		for i++; b[i] != '"'; i++ {
			if b[i] == '\\' {
				i++
			}
		}
		return i + 1
	case '{', '[':
		depth := 0
		for {
			switch b[i] {
			case '"':
				i = skipValue(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
	}
	// A number, true, false or null.
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' &&
		b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i
}
