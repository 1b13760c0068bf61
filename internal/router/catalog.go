package router

import (
	"encoding/json"
	"log/slog"
	"unicode/utf8"

	"github.com/yosida95/uritemplate/v3"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcpheader"
	"github.com/mcp-gateway/mcp-gateway/internal/namespace"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

// catalog is one merged, policy-filtered view of every serving upstream.
// It is immutable once built: a change builds a new one.
type catalog struct {
	tools   named
	prompts named

	resources []json.RawMessage
	// resourceOwner maps a listed resource URI to the upstream that
	// listed it first.
	resourceOwner map[string]*upstreamState

	templates []templateEntry

	// The list results' item arrays, rendered once per catalog.
	toolsJSON, promptsJSON, resourcesJSON, templatesJSON []byte
}

// named is the tools or the prompts of a catalog: entries in catalog
// order, and an index by exposed name.
type named struct {
	entries []*entry
	byName  map[string]*entry
}

// entry is one tool or prompt.
type entry struct {
	exposed  string
	original string
	up       *upstreamState
	// def is the definition as hosts see it.
	def json.RawMessage
	// bindings are a tool's x-mcp-header annotations.
	bindings []mcpheader.Binding
}

type templateEntry struct {
	up  *upstreamState
	tpl *uritemplate.Template // nil when the upstream's template does not parse
}

// candidate is an upstream item on its way into the catalog.
type candidate struct {
	up   *upstreamState
	name string
	raw  json.RawMessage
}

func (r *Router) buildCatalog() *catalog {
	var toolCands, promptCands []candidate
	var resources []json.RawMessage
	owner := map[string]*upstreamState{}
	var templates []templateEntry
	var templatesRaw []json.RawMessage
	seenTemplate := map[string]bool{}

	for _, u := range r.upstreams {
		u.mu.Lock()
		if !u.serving() {
			u.mu.Unlock()
			continue
		}
		tools, prompts, res, tpls := u.tools, u.prompts, u.resources, u.templates
		u.mu.Unlock()

		kept := 0
		limit := r.opts.Rules.UpstreamLimit(u.Name)
		for _, raw := range tools {
			name, ok := jsonrpc.StringField(raw, "name")
			if !ok || name == "" {
				r.log.Warn("upstream tool without a name skipped", telemetry.KeyUpstream, u.Name)
				continue
			}
			if !r.opts.Rules.AllowTool(u.Name, name) || (limit > 0 && kept >= limit) {
				continue
			}
			kept++
			toolCands = append(toolCands, candidate{u, name, raw})
		}
		for _, raw := range prompts {
			name, ok := jsonrpc.StringField(raw, "name")
			if !ok || name == "" {
				r.log.Warn("upstream prompt without a name skipped", telemetry.KeyUpstream, u.Name)
				continue
			}
			promptCands = append(promptCands, candidate{u, name, raw})
		}
		for _, raw := range res {
			uri, ok := jsonrpc.StringField(raw, "uri")
			if !ok {
				r.log.Warn("upstream resource without a uri skipped", telemetry.KeyUpstream, u.Name)
				continue
			}
			if prev, dup := owner[uri]; dup {
				r.log.Warn("resource listed by two upstreams; the first wins",
					"uri", uri, telemetry.KeyUpstream, u.Name, "owner", prev.Name)
				continue
			}
			owner[uri] = u
			resources = append(resources, raw)
		}
		for _, raw := range tpls {
			s, ok := jsonrpc.StringField(raw, "uriTemplate")
			if !ok || seenTemplate[s] {
				continue
			}
			seenTemplate[s] = true
			tpl, err := uritemplate.New(s)
			if err != nil {
				r.log.Warn("upstream resource template does not parse", telemetry.KeyUpstream, u.Name, "template", s, telemetry.KeyErr, err)
			}
			templates = append(templates, templateEntry{up: u, tpl: tpl})
			templatesRaw = append(templatesRaw, raw)
		}
	}

	cat := &catalog{
		resources:     resources,
		resourceOwner: owner,
		templates:     templates,
	}
	var toolItems, promptItems []json.RawMessage
	cat.tools, toolItems = r.name(toolCands, r.opts.Rules.MaxTools)
	cat.prompts, promptItems = r.name(promptCands, 0)
	cat.toolsJSON = joinArray(toolItems)
	cat.promptsJSON = joinArray(promptItems)
	cat.resourcesJSON = joinArray(resources)
	cat.templatesJSON = joinArray(templatesRaw)
	return cat
}

// name gives candidates their exposed names, applies the global limit in
// catalog order, and renders each definition as hosts see it.
func (r *Router) name(cands []candidate, limit int) (named, []json.RawMessage) {
	entries := make([]namespace.Entry, len(cands))
	for i, c := range cands {
		entries[i] = namespace.Entry{Upstream: c.up.Name, Name: c.name}
	}
	table := namespace.Build(entries, &r.opts.Namespace)
	n := named{byName: make(map[string]*entry, len(cands))}
	var items []json.RawMessage
	for _, c := range cands {
		if limit > 0 && len(n.entries) >= limit {
			break
		}
		exposed, ok := table.Exposed(namespace.Entry{Upstream: c.up.Name, Name: c.name})
		if !ok || n.byName[exposed] != nil {
			continue // a duplicate name within one upstream: the first wins
		}
		raw, err := r.render(c.raw, exposed)
		if err != nil {
			r.log.Warn("upstream entry skipped", telemetry.KeyUpstream, c.up.Name, "name", c.name, telemetry.KeyErr, err)
			continue
		}
		// The upstream client already left out tools whose annotations
		// are invalid; an error here only means no bindings.
		bindings, _ := mcpheader.Bindings(raw)
		e := &entry{exposed: exposed, original: c.name, up: c.up, def: raw, bindings: bindings}
		n.entries = append(n.entries, e)
		n.byName[exposed] = e
		items = append(items, raw)
	}
	return n, items
}

// render rewrites a definition's name and trims its description. Every
// other byte of the upstream's definition is kept.
func (r *Router) render(raw json.RawMessage, exposed string) (json.RawMessage, error) {
	out, err := jsonrpc.SetField(raw, "name", jsonrpc.String(exposed))
	if err != nil {
		return nil, err
	}
	if max := r.opts.Rules.DescriptionMaxChars; max > 0 {
		if d, ok := jsonrpc.StringField(out, "description"); ok {
			if t := policy.Trim(d, max); t != d {
				return jsonrpc.SetField(out, "description", jsonrpc.String(t))
			}
		}
	}
	return out, nil
}

func joinArray(items []json.RawMessage) []byte {
	n := 2
	for _, it := range items {
		n += len(it) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, it := range items {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, it...)
	}
	return append(out, ']')
}

func (c *catalog) countTools(upstream int) int   { return c.tools.count(upstream) }
func (c *catalog) countPrompts(upstream int) int { return c.prompts.count(upstream) }

func (n named) count(upstream int) int {
	k := 0
	for _, e := range n.entries {
		if e.up.index == upstream {
			k++
		}
	}
	return k
}

// resourceUpstream finds the upstream that serves a resource URI: the one
// that listed it, else the one whose template matches it, else the only
// upstream offering resources at all.
func (c *catalog) resourceUpstream(uri string, all []*upstreamState, log *slog.Logger) *upstreamState {
	if u, ok := c.resourceOwner[uri]; ok {
		return u
	}
	for _, t := range c.templates {
		if t.tpl != nil && t.tpl.Match(uri) != nil {
			return t.up
		}
	}
	var only *upstreamState
	for _, u := range all {
		u.mu.Lock()
		offers := u.serving() && parseCapabilities(u.Client.Capabilities()).resources
		u.mu.Unlock()
		if !offers {
			continue
		}
		if only != nil {
			log.Debug("resource URI matches no listed resource or template", "uri", uri)
			return nil
		}
		only = u
	}
	return only
}

// ToolInfo describes one tool of the catalog, for `mcp-gateway tools`.
type ToolInfo struct {
	Name     string `json:"name"`
	Upstream string `json:"upstream"`
	Original string `json:"original_name"`
	// DescriptionChars is the length of the description hosts see, in
	// characters.
	DescriptionChars int `json:"description_chars"`
	// DefinitionBytes is the size of the whole definition hosts see.
	DefinitionBytes int `json:"definition_bytes"`
}

// Tools returns the catalog's tools in catalog order.
func (r *Router) Tools() []ToolInfo {
	cat := r.catalog()
	out := make([]ToolInfo, 0, len(cat.tools.entries))
	for _, e := range cat.tools.entries {
		d, _ := jsonrpc.StringField(e.def, "description")
		out = append(out, ToolInfo{
			Name: e.exposed, Upstream: e.up.Name, Original: e.original,
			DescriptionChars: utf8.RuneCountInString(d), DefinitionBytes: len(e.def),
		})
	}
	return out
}

// ParamBindings returns the x-mcp-header bindings of the exposed tool
// name; nil for a tool without any, or a name the catalog does not hold.
func (r *Router) ParamBindings(name string) []mcpheader.Binding {
	if e := r.catalog().tools.byName[name]; e != nil {
		return e.bindings
	}
	return nil
}
