package router

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/yosida95/uritemplate/v3"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcpheader"
	"github.com/mcp-gateway/mcp-gateway/internal/namespace"
	"github.com/mcp-gateway/mcp-gateway/internal/pin"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/search"
)

// catalog is the merged catalog of every serving upstream, as each view
// sees it. It is immutable once built: a change builds a new one.
type catalog struct {
	// views are by view name: "" for the default view, else a team's,
	// or team/profile (policy.ViewKey).
	views map[string]*view
	// order names the views in the order of the Rules.Views they were
	// built from: a catalog is read with its own views, never with
	// rules stored since (a reload stores its rules before it builds
	// their catalog).
	order []string
	// collisions are the resource URIs and templates two upstreams list
	// in some view (see uriCollision): each is logged once, by the build
	// that first finds it, not at every re-list while it lasts.
	collisions map[uriCollision]bool
	// defs are the definitions the catalog was built from, quarantined
	// or not (see Definitions).
	defs []pin.Def
	// instructions are the upstreams' instructions the build vetted and
	// kept, in upstream order: initialize and server/discover render
	// only these, never what an upstream serves now (which a restart may
	// have changed before the next build vets it).
	instructions []upstreamInstructions
}

// upstreamInstructions are one upstream's instructions as a catalog
// build read them.
type upstreamInstructions struct {
	up   *upstreamState
	text string // trimmed, not empty
}

// gatewayScheme starts the gateway form of a resource URI or template,
// mcpgw://<upstream>/<URI as the upstream lists it>: what hosts see for
// a URI that an upstream earlier in the view also lists. The upstream's
// URI follows the prefix unchanged, so the form is reversible by cutting
// the prefix, and a template in gateway form is still a template whose
// expansions are the gateway forms of the original's.
const gatewayScheme = "mcpgw://"

// gatewayURI is upstream's uri in gateway form.
func gatewayURI(upstream, uri string) string { return gatewayScheme + upstream + "/" + uri }

// uriCollision is a resource URI (or, with template, a URI template)
// that upstream lists after owner does.
type uriCollision struct {
	uri, upstream, owner string
	template             bool
}

// view is what the callers of one view see and may call.
type view struct {
	rules   policy.View
	names   *namespace.Options
	tools   named
	prompts named

	// resources maps each listed resource URI, as hosts see it, to its
	// upstream and the URI that upstream knows.
	resources map[string]resourceRoute

	templates []templateEntry

	// The list results' item arrays, rendered once per catalog.
	toolsJSON, promptsJSON, resourcesJSON, templatesJSON []byte
	// toolsAsTasksJSON, when not nil, is the tools list for a legacy
	// host that takes tasks: the tools of upstreams with tasks.after
	// show execution.taskSupport "optional" (the gateway runs them as
	// tasks).
	toolsAsTasksJSON []byte

	// cut is what the view's limits removed; tokens is the estimated
	// size of its tools when a token limit applies (else 0).
	cut    []policy.Cut
	tokens int
	// measuredTokens is the size of the tools for the token gauge, when
	// no token limit measured it: counted once, at the first scrape.
	measured       sync.Once
	measuredTokens int

	// search says the view lists the gateway's search tools: its mode is
	// search, or auto and its catalog exceeds its max_tokens.
	search bool
	// index is the search index of the view's tools, for search mode
	// (searchmode.go): built once, by the first find_tools.
	searchOnce sync.Once
	index      *search.Index
}

// named is the tools or the prompts of a view: entries in catalog order,
// and an index by exposed name.
type named struct {
	entries []*entry
	byName  map[string]*entry
	// down are the entries the view would show but for their upstream
	// being down (restarting, breaker open, failed): not listed, but a
	// call by name gets an answer that says so rather than "unknown".
	down map[string]*entry
}

// entry is one tool or prompt.
type entry struct {
	exposed  string
	original string
	up       *upstreamState
	// raw is the upstream's definition; def is the definition as hosts
	// see it.
	raw, def json.RawMessage
	// bindings are a tool's x-mcp-header annotations.
	bindings []mcpheader.Binding
	// tokens is the estimated size of def, when a token limit needed it.
	tokens int
	// down: the upstream is down; the entry is only known, not listed.
	down bool
	// taskSupport is a tool's execution.taskSupport ("" when absent).
	taskSupport string
}

type templateEntry struct {
	up  *upstreamState
	key string          // <upstream><separator><uriTemplate>, for views
	raw json.RawMessage // the upstream's definition
	// original is the uriTemplate as the upstream lists it; exposed is
	// as hosts see it (in a view, original or its gateway form), and tpl
	// is exposed parsed (nil if it does not parse).
	original, exposed string
	tpl               *uritemplate.Template
}

// resourceRoute is where a resource URI hosts use goes: an upstream,
// and the URI as that upstream knows it.
type resourceRoute struct {
	up  *upstreamState
	uri string
}

type resourceEntry struct {
	up  *upstreamState
	uri string
	raw json.RawMessage
}

// candidate is an upstream item on its way into the catalog.
type candidate struct {
	up       *upstreamState
	name     string // as exposed before prefixing (renamed)
	original string // as the upstream knows it
	raw      json.RawMessage
	down     bool // the upstream is down: known, not listed
}

// view returns the view of name; nil for an unknown name.
func (c *catalog) view(name string) *view { return c.views[name] }

func (r *Router) buildCatalog() *catalog {
	var toolCands, promptCands []candidate
	var resources []resourceEntry
	var templates []templateEntry
	rules, names := r.settings()

	for _, u := range r.upstreams() {
		h := u.health()
		down := h.down() && u.listed() // its entries are known, not listed
		if !h.serving() && !down {
			continue
		}
		u.mu.Lock()
		tools, prompts, res, tpls := u.tools, u.prompts, u.resources, u.templates
		u.mu.Unlock()
		if down {
			res, tpls = nil, nil
		}

		kept := 0
		limit := rules.UpstreamLimit(u.Name)
		for _, raw := range tools {
			name, ok := jsonrpc.StringField(raw, "name")
			if !ok || name == "" {
				r.log.Warn("upstream tool without a name skipped", keyUpstream, u.Name)
				continue
			}
			if !rules.AllowTool(u.Name, name) || (limit > 0 && kept >= limit) {
				continue
			}
			kept++
			toolCands = append(toolCands, candidate{u, rules.Rename(u.Name, name), name, raw, down})
		}
		for _, raw := range prompts {
			name, ok := jsonrpc.StringField(raw, "name")
			if !ok || name == "" {
				r.log.Warn("upstream prompt without a name skipped", keyUpstream, u.Name)
				continue
			}
			promptCands = append(promptCands, candidate{u, name, name, raw, down})
		}
		for _, raw := range res {
			uri, ok := jsonrpc.StringField(raw, "uri")
			if !ok {
				r.log.Warn("upstream resource without a uri skipped", keyUpstream, u.Name)
				continue
			}
			resources = append(resources, resourceEntry{u, uri, raw})
		}
		for _, raw := range tpls {
			s, ok := jsonrpc.StringField(raw, "uriTemplate")
			if !ok {
				continue
			}
			tpl, err := uritemplate.New(s)
			if err != nil {
				r.log.Warn("upstream resource template does not parse", keyUpstream, u.Name, "template", s, keyErr, err)
			}
			templates = append(templates, templateEntry{up: u, key: resourceKey(names, u, s), raw: raw, original: s, exposed: s, tpl: tpl})
		}
	}

	tools := r.name(rules, names, toolCands, true)
	prompts := r.name(rules, names, promptCands, false)
	// Pinning leaves out what it quarantines after naming, so that a
	// quarantined tool does not change the names of the others.
	kept, defs := r.vet(vetted{tools: tools, prompts: prompts, resources: resources, templates: templates}, r.upstreams())
	tools, prompts, resources, templates = kept.tools, kept.prompts, kept.resources, kept.templates
	views := rules.Views()
	if slices.ContainsFunc(views, func(v policy.View) bool { return v.MaxTokens > 0 }) {
		for _, e := range tools {
			if !e.down {
				e.tokens = r.tokens(e.def)
			}
		}
	}
	cat := &catalog{views: map[string]*view{}, collisions: map[uriCollision]bool{}, defs: defs, instructions: kept.instructions}
	// Rules.Views lists the views of teams (and the default) before
	// those of profiles, each narrowing a view built before it.
	for _, v := range views {
		var within *view
		if team, profile := policy.SplitViewKey(v.Name); profile != "" {
			if within = cat.views[team]; within == nil {
				continue // no view to narrow: none rather than a wider one
			}
		}
		cat.views[v.Name] = r.buildView(v, within, names, tools, prompts, resources, templates, cat.collisions)
		cat.order = append(cat.order, v.Name)
	}
	var prev map[uriCollision]bool
	if old := r.catalog(); old != nil {
		prev = old.collisions
	}
	for c, exposed := range cat.collisions {
		switch {
		case prev[c]:
		case c.template && exposed:
			r.log.Warn("resource template listed by two upstreams; the later is exposed in gateway form",
				"template", c.uri, keyUpstream, c.upstream, "owner", c.owner, "exposed", gatewayURI(c.upstream, c.uri))
		case c.template:
			r.log.Warn("resource template listed by two upstreams, and its gateway form by one of them; the later is skipped",
				"template", c.uri, keyUpstream, c.upstream, "owner", c.owner)
		case exposed:
			r.log.Warn("resource listed by two upstreams; the later is exposed in gateway form",
				"uri", c.uri, keyUpstream, c.upstream, "owner", c.owner, "exposed", gatewayURI(c.upstream, c.uri))
		default:
			r.log.Warn("resource listed by two upstreams, and its gateway form by one of them; the later is skipped",
				"uri", c.uri, keyUpstream, c.upstream, "owner", c.owner)
		}
	}
	return cat
}

// buildView selects and limits what one view sees. A profile's view
// narrows within, its team's (or the default) view: its tools are chosen
// among those within kept, after within's limits and mode, so that the
// profile's own priority and mode work inside that cut and never bring
// back a tool it removed; what within cut, the profile reports as cut
// too (where its patterns would show it).
//
// Resource URIs and templates are made unique within the view (see
// gatewayScheme); collisions gets each collision found, true when the
// later one is exposed in gateway form, false when it had to be skipped.
func (r *Router) buildView(rules policy.View, within *view, names *namespace.Options, tools, prompts []*entry, resources []resourceEntry, templates []templateEntry, collisions map[uriCollision]bool) *view {
	v := &view{rules: rules, names: names, resources: map[string]resourceRoute{}}

	var visible, downTools []*entry
	var exposed []string
	for _, e := range tools {
		switch {
		case !rules.Allows(e.exposed):
		case within != nil && within.tools.byName[e.exposed] != e && within.tools.down[e.exposed] != e:
			// within did not keep it (its limits cut it).
		case e.down:
			downTools = append(downTools, e)
		default:
			visible = append(visible, e)
			exposed = append(exposed, e.exposed)
		}
	}
	v.search = rules.Search()
	limits := rules
	if rules.Mode == config.ModeAuto && rules.MaxTokens > 0 {
		// Past its budget the view searches its whole catalog rather
		// than cutting it (max_tools still applies).
		total := 0
		for _, e := range visible {
			total += e.tokens
		}
		if v.search = total > rules.MaxTokens; v.search {
			limits.MaxTokens = 0
		}
	}
	keep, cut := limits.Limit(exposed, func(i int) int { return visible[i].tokens })
	if within != nil {
		for _, c := range within.cut {
			if rules.Allows(c.Name) {
				v.cut = append(v.cut, c)
			}
		}
	}
	v.cut = append(v.cut, cut...)
	kept := make([]*entry, 0, len(keep))
	for _, i := range keep {
		kept = append(kept, visible[i])
		if rules.MaxTokens > 0 {
			v.tokens += visible[i].tokens
		}
	}
	v.tools, v.toolsJSON = index(kept, downTools)
	v.toolsAsTasksJSON = toolsAsTasks(kept)

	var shown, downPrompts []*entry
	for _, e := range prompts {
		switch {
		case !rules.Allows(e.exposed):
		case e.down:
			downPrompts = append(downPrompts, e)
		default:
			shown = append(shown, e)
		}
	}
	v.prompts, v.promptsJSON = index(shown, downPrompts)

	// Only what the view shows takes part: an upstream it hides is as if
	// it did not exist, and does not push another's URI into gateway form.
	var res, tpls []json.RawMessage
	resources = slices.DeleteFunc(slices.Clone(resources), func(re resourceEntry) bool {
		return !rules.Allows(resourceKey(names, re.up, re.uri))
	})
	owners := map[string]*upstreamState{}
	for _, re := range resources {
		if owners[re.uri] == nil {
			owners[re.uri] = re.up
		}
	}
	for _, re := range resources {
		exposed, ok := uniqueURI(owners, re.up, re.uri, false, collisions)
		if !ok {
			continue
		}
		if _, dup := v.resources[exposed]; dup {
			continue // listed twice by one upstream
		}
		def := re.raw
		if exposed != re.uri {
			var err error
			if def, err = jsonrpc.SetField(re.raw, "uri", jsonrpc.String(exposed)); err != nil {
				r.log.Warn("upstream resource skipped", keyUpstream, re.up.Name, "uri", re.uri, keyErr, err)
				continue
			}
		}
		v.resources[exposed] = resourceRoute{re.up, re.uri}
		res = append(res, def)
	}
	templates = slices.DeleteFunc(slices.Clone(templates), func(t templateEntry) bool { return !rules.Allows(t.key) })
	clear(owners)
	for _, t := range templates {
		if owners[t.original] == nil {
			owners[t.original] = t.up
		}
	}
	seen := map[string]bool{}
	for _, t := range templates {
		exposed, ok := uniqueURI(owners, t.up, t.original, true, collisions)
		if !ok || seen[exposed] {
			continue
		}
		seen[exposed] = true
		def := t.raw
		if exposed != t.original {
			var err error
			if def, err = jsonrpc.SetField(t.raw, "uriTemplate", jsonrpc.String(exposed)); err != nil {
				r.log.Warn("upstream resource template skipped", keyUpstream, t.up.Name, "template", t.original, keyErr, err)
				continue
			}
			t.exposed = exposed
			// The prefix has no expressions: this parses if the original does.
			t.tpl, _ = uritemplate.New(exposed)
		}
		v.templates = append(v.templates, t)
		tpls = append(tpls, def)
	}
	v.resourcesJSON = joinArray(res)
	v.templatesJSON = joinArray(tpls)
	return v
}

// uniqueURI is the URI (or template) hosts see for u's uri in a view
// where owners maps each URI to the first upstream listing it: uri
// itself for its owner, else its gateway form, unless an upstream lists
// that form itself (false: skipped). It records collisions.
func uniqueURI(owners map[string]*upstreamState, u *upstreamState, uri string, template bool, collisions map[uriCollision]bool) (string, bool) {
	owner := owners[uri]
	if owner == u {
		return uri, true
	}
	exposed := gatewayURI(u.Name, uri)
	_, taken := owners[exposed]
	c := uriCollision{uri: uri, upstream: u.Name, owner: owner.Name, template: template}
	collisions[c] = collisions[c] || !taken
	return exposed, !taken
}

// index builds a named table and its list items; down are the entries
// of upstreams that are down.
func index(entries, down []*entry) (named, []byte) {
	n := named{entries: entries, byName: make(map[string]*entry, len(entries))}
	for _, e := range down {
		if n.down == nil {
			n.down = map[string]*entry{}
		}
		n.down[e.exposed] = e
	}
	items := make([]json.RawMessage, len(entries))
	for i, e := range entries {
		n.byName[e.exposed] = e
		items[i] = e.def
	}
	return n, joinArray(items)
}

// resourceKey is what view patterns match for a resource or template:
// the upstream's prefix and the URI, like an exposed name.
func resourceKey(names *namespace.Options, u *upstreamState, uri string) string {
	sep := names.Separator
	if sep == "" {
		sep = namespace.DefaultSeparator
	}
	return u.Name + sep + uri
}

// tokens estimates the size of a definition in tokens.
func (r *Router) tokens(def json.RawMessage) int {
	if r.opts.Tokens != nil {
		return r.opts.Tokens(def)
	}
	return policy.Tokens(def)
}

// name gives candidates their exposed names and renders each definition
// as hosts see it. tools says whether they are tools (whose schemas the
// policy may slim).
func (r *Router) name(rules *policy.Rules, names *namespace.Options, cands []candidate, tools bool) []*entry {
	entries := make([]namespace.Entry, len(cands))
	for i, c := range cands {
		entries[i] = namespace.Entry{Upstream: c.up.Name, Name: c.name}
	}
	table := namespace.Build(entries, names)
	seen := map[string]bool{}
	var out []*entry
	for _, c := range cands {
		exposed, ok := table.Exposed(namespace.Entry{Upstream: c.up.Name, Name: c.name})
		if !ok || seen[exposed] {
			continue // a duplicate name within one upstream: the first wins
		}
		def, err := render(rules, c, exposed, tools)
		if err != nil {
			r.log.Warn("upstream entry skipped", keyUpstream, c.up.Name, "name", c.original, keyErr, err)
			continue
		}
		seen[exposed] = true
		e := &entry{exposed: exposed, original: c.original, up: c.up, raw: c.raw, def: def, down: c.down, taskSupport: taskSupportOf(c.raw)}
		if tools {
			// The upstream client already left out tools whose annotations
			// are invalid; an error here only means no bindings.
			e.bindings, _ = mcpheader.Bindings(def)
		}
		out = append(out, e)
	}
	return out
}

// render rewrites a definition as hosts see it: its exposed name, the
// configured description, trimmed, and for tools slimmed schemas. Every
// other byte of the upstream's definition is kept.
func render(rules *policy.Rules, c candidate, exposed string, tool bool) (json.RawMessage, error) {
	out, err := jsonrpc.SetField(c.raw, "name", jsonrpc.String(exposed))
	if err != nil {
		return nil, err
	}
	desc, has := jsonrpc.StringField(out, "description")
	if tool {
		if d, ok := rules.Description(c.up.Name, c.original); ok {
			desc, has = d, true
		}
	}
	if has {
		if t := policy.Trim(desc, rules.DescriptionMaxChars); !bytes.Equal(jsonrpc.String(t), fieldOrNil(out, "description")) {
			if out, err = jsonrpc.SetField(out, "description", jsonrpc.String(t)); err != nil {
				return nil, err
			}
		}
	}
	if tool && rules.SlimSchemas {
		return policy.StripSchemaDecorations(out)
	}
	return out, nil
}

func fieldOrNil(obj json.RawMessage, key string) json.RawMessage {
	v, _ := jsonrpc.Field(obj, key)
	return v
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

func (n named) count(u *upstreamState) int {
	k := 0
	for _, e := range n.entries {
		if e.up == u {
			k++
		}
	}
	return k
}

// ownURI is uri as u knows it: uri without the prefix of u's gateway
// form if it has it (true), else uri.
func ownURI(u *upstreamState, uri string) (string, bool) {
	rest, ok := strings.CutPrefix(uri, gatewayURI(u.Name, ""))
	if !ok {
		return uri, false
	}
	return rest, true
}

// contentsAs rewrites a resources/read result whose contents carry the
// upstream's uri to carry exposed (its gateway form) instead, as the host
// asked for it; other contents keep their URIs. A result it cannot read
// is returned as it is.
func contentsAs(result json.RawMessage, uri, exposed string) json.RawMessage {
	raw, ok := jsonrpc.Field(result, "contents")
	if !ok {
		return result
	}
	var contents []json.RawMessage
	if json.Unmarshal(raw, &contents) != nil {
		return result
	}
	changed := false
	for i, c := range contents {
		if s, ok := jsonrpc.StringField(c, "uri"); ok && s == uri {
			if out, err := jsonrpc.SetField(c, "uri", jsonrpc.String(exposed)); err == nil {
				contents[i], changed = out, true
			}
		}
	}
	if !changed {
		return result
	}
	out, err := jsonrpc.SetField(result, "contents", joinArray(contents))
	if err != nil {
		return result
	}
	return out
}

// resourceUpstream finds the upstream that serves a resource URI (or a
// template, for completion/complete) in this view, and the URI to send
// it: the one that listed it, else the one that listed it as a template,
// else the one whose template matches it (templates in gateway form
// first, so that a broad template does not catch another's gateway form),
// else the only upstream offering resources whose resources the view may
// see at all. A URI in gateway form becomes the upstream's own; one that
// is neither listed nor matched goes only to the upstream it names (if
// the view shows its resources), so that a hidden upstream's gateway form
// is as unknown as a nonexistent one's.
func (v *view) resourceUpstream(r *Router, uri string, log *slog.Logger) (*upstreamState, string) {
	if route, ok := v.resources[uri]; ok {
		return route.up, route.uri
	}
	for _, t := range v.templates {
		if t.exposed == uri {
			return t.up, t.original
		}
	}
	for _, gateway := range []bool{true, false} {
		for _, t := range v.templates {
			if (t.exposed != t.original) == gateway && t.tpl != nil && t.tpl.Match(uri) != nil {
				if gateway {
					return t.up, strings.TrimPrefix(uri, gatewayURI(t.up.Name, ""))
				}
				return t.up, uri
			}
		}
	}
	var only *upstreamState
	for _, u := range r.upstreams() {
		own, named := ownURI(u, uri)
		if !named && strings.HasPrefix(uri, gatewayScheme) {
			continue // another's gateway form, or no upstream's
		}
		offers := u.health().serving() && parseCapabilities(u.Client.Capabilities()).resources
		if !offers || !v.rules.Allows(resourceKey(v.names, u, own)) {
			continue
		}
		if named {
			return u, own
		}
		if only != nil {
			log.Debug("resource URI matches no listed resource or template", "uri", uri)
			return nil, ""
		}
		only = u
	}
	return only, uri
}

// ViewTokens is the estimated size of the named view's tools, in tokens:
// as its token limit measured it, else counted once per catalog, when
// first asked (the token gauge asks at each metrics collection).
func (r *Router) ViewTokens(name string) int {
	v := r.catalog().view(name)
	if v == nil {
		return 0
	}
	return r.viewTokens(v)
}

// ListedTokens is the estimated size of the named view's tools/list, in
// tokens, as hosts get it: ViewTokens in full mode, the gateway's own
// tools in search mode.
func (r *Router) ListedTokens(name string) int {
	v := r.catalog().view(name)
	if v == nil {
		return 0
	}
	if v.search {
		return r.searchListTokens()
	}
	return r.viewTokens(v)
}

// listedTokens is ListedTokens as /readyz shows it: in full mode, only
// when a token limit measured the catalog (readyz does not load the
// tokenizer for a view that has no token figure).
func (r *Router) listedTokens(v *view) int {
	if v.search {
		return r.searchListTokens()
	}
	return v.tokens
}

func (r *Router) viewTokens(v *view) int {
	if v.rules.MaxTokens > 0 {
		return v.tokens
	}
	v.measured.Do(func() {
		for _, e := range v.tools.entries {
			v.measuredTokens += r.tokens(e.def)
		}
	})
	return v.measuredTokens
}

// shows reports whether the view lists anything of u: a tool, prompt,
// resource or resource template.
func (v *view) shows(u *upstreamState) bool {
	if v.tools.count(u) > 0 || v.prompts.count(u) > 0 {
		return true
	}
	for _, route := range v.resources {
		if route.up == u {
			return true
		}
	}
	for _, t := range v.templates {
		if t.up == u {
			return true
		}
	}
	return false
}

// ToolInfo describes one tool of a view, for `mcp-gateway tools`.
type ToolInfo struct {
	Name     string `json:"name"`
	Upstream string `json:"upstream"`
	Original string `json:"original_name"`
	// DescriptionChars is the length of the description hosts see, in
	// characters.
	DescriptionChars int `json:"description_chars"`
	// Raw and Definition are the upstream's definition and the one hosts
	// see.
	Raw        json.RawMessage `json:"-"`
	Definition json.RawMessage `json:"-"`
}

// ViewInfo is one view's tools and what its limits cut.
type ViewInfo struct {
	Name  string       `json:"view"`
	Tools []ToolInfo   `json:"tools"`
	Cut   []policy.Cut `json:"cut,omitempty"`
	// Mode is how the view lists its tools now: full, or search (a view
	// in mode auto says which it is in).
	Mode config.ViewMode `json:"mode"`
	// Listed are the definitions its tools/list holds in search mode (the
	// gateway's tools); nil in full mode, where they are Tools'.
	Listed []json.RawMessage `json:"-"`
}

// Tools returns the tools of the named view ("" = default) in catalog
// order, and what its limits cut; false for an unknown view.
func (r *Router) Tools(viewName string) (ViewInfo, bool) {
	v := r.catalog().view(viewName)
	if v == nil {
		return ViewInfo{}, false
	}
	info := ViewInfo{Name: viewName, Cut: v.cut, Mode: config.ModeFull, Tools: make([]ToolInfo, 0, len(v.tools.entries))}
	if v.search {
		info.Mode, info.Listed = config.ModeSearch, searchToolDefs()
	}
	for _, e := range v.tools.entries {
		d, _ := jsonrpc.StringField(e.def, "description")
		info.Tools = append(info.Tools, ToolInfo{
			Name: e.exposed, Upstream: e.up.Name, Original: e.original,
			DescriptionChars: utf8.RuneCountInString(d), Raw: e.raw, Definition: e.def,
		})
	}
	return info, true
}

// ParamBindings returns the x-mcp-header bindings of a tool by exposed
// name in the named view; nil for a tool without any, or one the view
// does not hold, so that checking them tells nothing of another view's
// tools.
func (r *Router) ParamBindings(viewName, name string) []mcpheader.Binding {
	v := r.catalog().view(viewName)
	if v == nil {
		return nil
	}
	if e := v.tools.byName[name]; e != nil {
		return e.bindings
	}
	return nil
}

// toolsAsTasks is the tools list with the tools of upstreams that have
// tasks.after marked as runnable as tasks; nil when there are none.
func toolsAsTasks(tools []*entry) []byte {
	items := make([]json.RawMessage, len(tools))
	changed := false
	for i, e := range tools {
		def, ok := e.asTask()
		items[i] = def
		changed = changed || ok
	}
	if !changed {
		return nil
	}
	return joinArray(items)
}

// asTask is a tool's definition for a legacy host that takes tasks: for
// a tool of an upstream with tasks.after, with execution.taskSupport
// "optional" (ok), since the gateway runs it as a task; else def as it
// is.
func (e *entry) asTask() (json.RawMessage, bool) {
	if e.up.TaskAfter <= 0 || e.taskSupport == "optional" || e.taskSupport == "required" {
		return e.def, false
	}
	exec, ok := jsonrpc.Field(e.def, "execution")
	if !ok || len(exec) == 0 || exec[0] != '{' {
		exec = json.RawMessage(`{}`)
	}
	exec, err := jsonrpc.SetField(jsonrpc.DeleteField(exec, "taskSupport"), "taskSupport", jsonrpc.String("optional"))
	if err != nil {
		return e.def, false
	}
	def, err := jsonrpc.SetField(jsonrpc.DeleteField(e.def, "execution"), "execution", exec)
	if err != nil {
		return e.def, false
	}
	return def, true
}

// unambiguous returns the items of an upstream's list that every JSON
// parser reads the same way (I-JSON: no repeated member, valid UTF-8, no
// lone surrogate; jsonrpc.CheckIJSON), and logs each one it leaves out.
// The gateway reads a definition's first "name" or "description", a host
// may read the last: what the views, trimming and pinning check must be
// what the host reads, so such a definition reaches no host.
func (r *Router) unambiguous(upstream, method string, items []json.RawMessage) []json.RawMessage {
	out := items
	for i, raw := range items {
		err := jsonrpc.CheckIJSON(raw)
		if err == nil {
			if len(out) < len(items) {
				out = append(out, raw)
			}
			continue
		}
		if len(out) == len(items) {
			out = append(make([]json.RawMessage, 0, len(items)), items[:i]...)
		}
		r.log.Warn("upstream definition left out: JSON parsers could read it differently",
			keyUpstream, upstream, keyMethod, method, keyErr, err)
	}
	return out
}
