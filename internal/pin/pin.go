// Package pin guards the catalog against definitions that changed after
// review: it writes and reads the lockfile of reviewed definitions
// (tools.lock), decides which live definitions differ from it, and flags
// definitions that carry invisible or deceptive text. The router asks it,
// once per catalog build, which definitions to leave out (Guard.Vet);
// nothing here runs per call.
package pin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// Kind is what a definition defines.
type Kind string

const (
	KindTool         Kind = "tool"
	KindPrompt       Kind = "prompt"
	KindResource     Kind = "resource"
	KindTemplate     Kind = "resource_template"
	KindInstructions Kind = "instructions"
)

// kindOrder is the order of kinds in the lockfile.
var kindOrder = []Kind{KindTool, KindPrompt, KindResource, KindTemplate, KindInstructions}

// Def is one definition as the gateway would list it.
type Def struct {
	Kind Kind
	// Name identifies it among its upstream's definitions of its kind,
	// as the upstream names it: the upstream's own name of a tool or
	// prompt (never the exposed name, which prefix mode, the separator,
	// renames and other upstreams' names change), the URI of a resource,
	// the uriTemplate of a template, the upstream's name for its
	// instructions.
	Name string
	// Upstream is the upstream that lists it.
	Upstream string
	// Exposed is the name hosts know a tool or prompt by, for display
	// and for naming it to Approve; "" when it is Name. It is not part
	// of what identifies the definition.
	Exposed string
	// Raw is the upstream's own definition (before the gateway renames
	// or trims it); for instructions, a JSON string.
	Raw json.RawMessage
}

// key identifies a definition in the lock: its kind, its upstream and
// the upstream's own name for it, so that a definition keeps its entry
// (and its quarantine) whatever name the gateway exposes it under, and
// two upstreams may list one name or resource URI.
type key struct {
	kind           Kind
	name, upstream string
}

func (d Def) key() key { return key{d.Kind, d.Name, d.Upstream} }

func (e Entry) key() key { return key{e.Kind, e.Name, e.Upstream} }

// Display is the name d is shown by: its exposed name, else Name.
func (d Def) Display() string { return display(d.Exposed, d.Name) }

// Display is the name e is shown by: its exposed name when pinned, else
// Name.
func (e Entry) Display() string { return display(e.Exposed, e.Name) }

func display(exposed, name string) string {
	if exposed != "" {
		return exposed
	}
	return name
}

// qualified is the upstream/name form Approve accepts for a tool or
// prompt, whatever its exposed name; "" for other kinds.
func qualified(k Kind, upstream, name string) string {
	if k != KindTool && k != KindPrompt {
		return ""
	}
	return upstream + "/" + name
}

// Canonical is raw in canonical form: object keys sorted, no
// insignificant whitespace, strings re-encoded (so that \u0041 and A are
// one spelling) without HTML escaping, numbers as written. Two
// definitions that differ only in key order or whitespace have the same
// canonical form; any change of a value changes it.
//
// raw must be I-JSON (RFC 7493, jsonrpc.CheckIJSON): with a repeated
// member the router and hosts read the first where a decoder into a map
// keeps the last, so a rug pull could hash as the reviewed definition;
// invalid UTF-8 and lone surrogates would be replaced by U+FFFD and
// several spellings share one hash. Such a definition has no canonical
// form.
func Canonical(raw json.RawMessage) ([]byte, error) {
	if err := jsonrpc.CheckIJSON(raw); err != nil {
		return nil, fmt.Errorf("definition is not I-JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("definition is not JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("definition is not one JSON value")
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	// encoding/json writes map keys sorted.
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Hash is the hex SHA-256 of raw's canonical form.
func Hash(raw json.RawMessage) (string, error) {
	c, err := Canonical(raw)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// sortDefs orders definitions as the lockfile lists them: by kind, then
// name, then upstream.
func less(ak Kind, an, au string, bk Kind, bn, bu string) int {
	if ak != bk {
		return slices.Index(kindOrder, ak) - slices.Index(kindOrder, bk)
	}
	if an != bn {
		if an < bn {
			return -1
		}
		return 1
	}
	switch {
	case au < bu:
		return -1
	case au > bu:
		return 1
	}
	return 0
}
