package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// LoadOptions tune [Load] and [Parse]. A nil *LoadOptions is the zero value.
type LoadOptions struct {
	// LookupEnv reads environment variables, both for ${VAR} in values and
	// for MCP_GATEWAY_* overrides. Nil means os.LookupEnv. Tests pass a map
	// lookup so they need not touch the process environment.
	LookupEnv func(string) (string, bool)
}

func (o *LoadOptions) lookup() func(string) (string, bool) {
	if o == nil || o.LookupEnv == nil {
		return os.LookupEnv
	}
	return o.LookupEnv
}

// Load reads the config file at path, applies ${VAR} expansion and
// MCP_GATEWAY_* overrides, decodes and validates it. A file whose name ends
// in .json is read as JSON (a claude_desktop_config.json works as is); any
// other as YAML. A relative cwd or telemetry.audit.path is resolved
// against the file's directory.
//
// When the file cannot be read the error wraps the os error (test it with
// errors.Is(err, fs.ErrNotExist)). On any problem with the contents Load
// returns a nil Config and a *ValidationError listing every problem. Warnings
// do not fail Load: see [Config.Warnings].
func Load(path string, opts *LoadOptions) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	format := "yaml"
	if strings.EqualFold(filepath.Ext(path), ".json") {
		format = "json"
	}
	dir := filepath.Dir(path)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return Parse(data, format, dir, opts)
}

// overrides lists the key paths MCP_GATEWAY_* variables may set: every
// scalar outside the lists. See the package documentation.
var overrides = []string{
	"listen",
	"endpoint",
	"separator",
	"prefix",
	"max_body_bytes",
	"policy.max_tools",
	"policy.description_max_chars",
	"auth.mode",
	"telemetry.log_level",
	"telemetry.metrics",
	"telemetry.otlp_endpoint",
	"telemetry.audit.enabled",
	"telemetry.audit.path",
	"telemetry.audit.arguments",
}

// envName returns the variable that overrides key path p.
func envName(p string) string {
	return "MCP_GATEWAY_" + strings.ToUpper(strings.ReplaceAll(p, ".", "_"))
}

// Parse is [Load] on the bytes of a file: format is "yaml" or "json" (""
// means yaml), and baseDir is the directory a relative cwd or audit path
// is resolved against (empty leaves it relative).
func Parse(data []byte, format, baseDir string, opts *LoadOptions) (*Config, error) {
	var (
		root *yaml.Node
		err  error
	)
	// Editors on Windows may start a file with a UTF-8 byte order mark,
	// which encoding/json rejects.
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	switch strings.ToLower(format) {
	case "", "yaml":
		root, err = parseYAML(data)
	case "json":
		root, err = parseJSON(data)
	default:
		return nil, fmt.Errorf("config: unknown format %q (want yaml or json)", format)
	}
	if err != nil {
		var se syntaxError
		if !errors.As(err, &se) {
			se.Problem = Problem{Message: err.Error()}
		}
		return nil, &ValidationError{Problems: []Problem{se.Problem}}
	}
	if isNull(root) {
		root = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	}

	d := &decoder{
		lookup:  opts.lookup(),
		baseDir: baseDir,
		literal: map[*yaml.Node]bool{},
		hostApp: strings.EqualFold(format, "json") && hasKey(root, "mcpServers"),
		lines:   map[string]int{},
	}
	set := d.applyOverrides(root)

	c := Default()
	d.config(root, c)
	ps := d.problems
	// A decode cut short by the size limit leaves a partial Config, whose
	// problems would be noise.
	if err := c.Validate(); err != nil && !d.tooLarge {
		var ve *ValidationError
		errors.As(err, &ve)
		for _, p := range ve.Problems {
			if !covered(p.Path, d.problems) {
				p.Line = d.lineOf(p.Path)
				ps = append(ps, p)
			}
		}
	}
	if len(ps) == 0 {
		return c, nil
	}
	// File order reads best; problems without a line (values from the
	// environment) go last.
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Compare(lineKey(a.Line), lineKey(b.Line))
	})
	for i := range ps {
		if name, ok := set[ps[i].Path]; ok {
			ps[i].Message += " (set by " + name + ")"
		}
	}
	return nil, &ValidationError{Problems: ps}
}

func lineKey(line int) int {
	if line <= 0 {
		return math.MaxInt
	}
	return line
}

// covered reports whether a problem at path p merely repeats one the decoder
// found: at p or above it (a value that failed to decode keeps its default or
// is left as written, and Validate would complain about it again), or at
// p.command or p.url (a command that is not a string is not also missing).
func covered(p string, decoded problems) bool {
	for _, q := range decoded {
		switch {
		case p == q.Path, q.Path == p+".command", q.Path == p+".url":
			return true
		case q.Path != "" && (strings.HasPrefix(p, q.Path+".") || strings.HasPrefix(p, q.Path+"[")):
			return true
		}
	}
	return false
}

// parseYAML parses one YAML document into its root node; nil for an empty
// file.
func parseYAML(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, yamlError(err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, yamlError(err)
	default:
		return nil, syntaxError{Problem{Line: next.Line, Message: "the file holds more than one YAML document; put everything in one"}}
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		return resolve(doc.Content[0]), nil
	}
	return nil, nil
}

// syntaxError carries the Problem of a file that does not parse.
type syntaxError struct{ Problem }

func (e syntaxError) Error() string { return e.String() }

func yamlError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var line int
	fmt.Sscanf(msg, "line %d:", &line)
	return syntaxError{Problem{Line: line, Message: "invalid YAML: " + msg}}
}

// hasKey reports whether mapping n has the key written in it.
func hasKey(n *yaml.Node, key string) bool {
	return n.Kind == yaml.MappingNode && keyIndex(n, key) >= 0
}

// keyIndex returns the index in n.Content of the key node, or -1.
func keyIndex(n *yaml.Node, key string) int {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Tag != "!!merge" && k.Value == key {
			return i
		}
	}
	return -1
}

// applyOverrides writes the values of MCP_GATEWAY_* variables into the
// tree, marking them literal, and returns which variable set which key path.
func (d *decoder) applyOverrides(root *yaml.Node) map[string]string {
	set := map[string]string{}
	if root.Kind != yaml.MappingNode {
		return set // the decoder reports it
	}
	for _, p := range overrides {
		name := envName(p)
		if v, ok := d.lookup(name); ok && v != "" {
			if n := setPath(root, strings.Split(p, "."), v); n != nil {
				d.literal[n] = true
				set[p] = name
			}
		}
	}
	return set
}

// setPath sets the scalar at key path keys under mapping m to value,
// creating mappings on the way, and returns the new node. It returns nil,
// changing nothing, when something on the way is not a mapping: the decoder
// reports that.
func setPath(m *yaml.Node, keys []string, value string) *yaml.Node {
	for i, key := range keys {
		idx := keyIndex(m, key)
		if i == len(keys)-1 {
			n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value}
			if idx >= 0 {
				m.Content[idx+1] = n
			} else {
				m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, n)
			}
			return n
		}
		if idx < 0 {
			child := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, child)
			m = child
			continue
		}
		child := m.Content[idx+1]
		switch target := resolve(child); {
		case isNull(target):
			child = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		case target.Kind != yaml.MappingNode:
			return nil
		case child.Kind == yaml.AliasNode:
			// Copy, so that other aliases of the anchor keep the file's values.
			cp := *target
			cp.Anchor = ""
			cp.Content = slices.Clone(target.Content)
			child = &cp
		}
		m.Content[idx+1] = child
		m = child
	}
	return nil
}

// maxJSONDepth bounds nesting in JSON files; the deepest valid key is five
// levels down.
const maxJSONDepth = 64

// parseJSON parses a JSON document into YAML nodes, keeping key order and
// lines. JSON is nearly YAML, but not quite (YAML rejects escapes such as
// \/ and tab indentation in places), so it gets its own parser. nil for an
// empty file.
func parseJSON(data []byte) (*yaml.Node, error) {
	p := &jsonParser{dec: json.NewDecoder(bytes.NewReader(data)), data: data}
	p.dec.UseNumber()
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	n, err := p.value(0)
	if err != nil {
		return nil, p.fail(err)
	}
	if _, err := p.dec.Token(); !errors.Is(err, io.EOF) {
		return nil, syntaxError{Problem{Line: p.line(p.dec.InputOffset()), Message: "invalid JSON: unexpected data after the top-level value"}}
	}
	return n, nil
}

type jsonParser struct {
	dec  *json.Decoder
	data []byte
}

// line returns the line of the first token at or after byte offset off.
func (p *jsonParser) line(off int64) int {
	off = min(max(off, 0), int64(len(p.data)))
	for off < int64(len(p.data)) && strings.IndexByte(" \t\r\n,:", p.data[off]) >= 0 {
		off++
	}
	return 1 + bytes.Count(p.data[:off], []byte("\n"))
}

func (p *jsonParser) fail(err error) error {
	var se syntaxError
	if errors.As(err, &se) {
		return se
	}
	line := p.line(p.dec.InputOffset())
	var jse *json.SyntaxError
	if errors.As(err, &jse) {
		line = p.line(jse.Offset - 1)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return syntaxError{Problem{Line: line, Message: "invalid JSON: unexpected end of file"}}
	}
	return syntaxError{Problem{Line: line, Message: fmt.Sprintf("invalid JSON: line %d: %v", line, err)}}
}

func (p *jsonParser) value(depth int) (*yaml.Node, error) {
	if depth > maxJSONDepth {
		return nil, syntaxError{Problem{Line: p.line(p.dec.InputOffset()), Message: "invalid JSON: nested too deeply"}}
	}
	line := p.line(p.dec.InputOffset())
	tok, err := p.dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: line}
			for p.dec.More() {
				kline := p.line(p.dec.InputOffset())
				tok, err := p.dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := tok.(string)
				if !ok {
					return nil, syntaxError{Problem{Line: kline, Message: "invalid JSON: object key is not a string"}}
				}
				v, err := p.value(depth + 1)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k, Line: kline}, v)
			}
			_, err := p.dec.Token() // '}'
			return n, err
		case '[':
			n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: line}
			for p.dec.More() {
				v, err := p.value(depth + 1)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, v)
			}
			_, err := p.dec.Token() // ']'
			return n, err
		}
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: t, Line: line}, nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(string(t), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: string(t), Line: line}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(t), Line: line}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null", Line: line}, nil
	}
	return nil, syntaxError{Problem{Line: line, Message: "invalid JSON: unexpected delimiter"}}
}
