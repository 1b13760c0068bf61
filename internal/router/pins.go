package router

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/mcp-gateway/mcp-gateway/internal/pin"
)

// Pins decides, at each catalog build, which definitions the catalog
// leaves out (pinning: *pin.Guard implements it). It is asked once per
// build with every definition of every serving (or down) upstream, and
// never per call: a quarantined definition is simply absent from the
// catalog, so that every path (lists, calls, search mode, tasks) treats
// it as it treats a name that never existed.
type Pins interface {
	// Vet returns, for each definition, whether to leave it out.
	Vet(defs []pin.Def) (withheld []bool)
	// Report is what the last Vet quarantined and flagged.
	Report() pin.Report
}

// PinStatus is one quarantined or flagged definition, and PinReport
// what pinning found, for /readyz.
type (
	PinStatus = pin.Status
	PinReport = pin.Report
)

// vetted is what of a build's entries the catalog keeps.
type vetted struct {
	tools, prompts []*entry
	resources      []resourceEntry
	templates      []templateEntry
	// instructions are the upstreams' instructions kept.
	instructions []upstreamInstructions
}

// vet builds the definitions of a catalog build, in build order, and,
// with Options.Pins, leaves out what it withholds. defs is every
// definition, withheld or not (see Definitions).
func (r *Router) vet(v vetted, ups []*upstreamState) (vetted, []pin.Def) {
	var defs []pin.Def
	for _, e := range v.tools {
		defs = append(defs, pin.Def{Kind: pin.KindTool, Name: e.original, Upstream: e.up.Name, Exposed: e.exposed, Raw: e.raw})
	}
	for _, e := range v.prompts {
		defs = append(defs, pin.Def{Kind: pin.KindPrompt, Name: e.original, Upstream: e.up.Name, Exposed: e.exposed, Raw: e.raw})
	}
	for _, re := range v.resources {
		defs = append(defs, pin.Def{Kind: pin.KindResource, Name: re.uri, Upstream: re.up.Name, Raw: re.raw})
	}
	for _, t := range v.templates {
		defs = append(defs, pin.Def{Kind: pin.KindTemplate, Name: t.original, Upstream: t.up.Name, Raw: t.raw})
	}
	// Each upstream's instructions are read once, here: what is vetted
	// is what the catalog keeps and initialize renders.
	var ins []upstreamInstructions
	for _, u := range ups {
		if !u.health().serving() {
			continue
		}
		if text := strings.TrimSpace(u.Client.Instructions()); text != "" {
			raw, _ := json.Marshal(text)
			defs = append(defs, pin.Def{Kind: pin.KindInstructions, Name: u.Name, Upstream: u.Name, Raw: raw})
			ins = append(ins, upstreamInstructions{up: u, text: text})
		}
	}
	if r.opts.Pins == nil {
		v.instructions = ins
		return v, defs
	}
	withheld := r.opts.Pins.Vet(defs)
	i := 0
	keep := func() bool { ok := !withheld[i]; i++; return ok }
	out := vetted{}
	for _, e := range v.tools {
		if keep() {
			out.tools = append(out.tools, e)
		}
	}
	for _, e := range v.prompts {
		if keep() {
			out.prompts = append(out.prompts, e)
		}
	}
	for _, re := range v.resources {
		if keep() {
			out.resources = append(out.resources, re)
		}
	}
	for _, t := range v.templates {
		if keep() {
			out.templates = append(out.templates, t)
		}
	}
	for _, in := range ins {
		if keep() {
			out.instructions = append(out.instructions, in)
		}
	}
	return out, defs
}

// Definitions returns every definition the catalog was last built from,
// quarantined or not, as `mcp-gateway pin` writes them to the lockfile:
// tools and prompts by their upstream's own name (with the exposed name
// for display), resources by URI and templates by
// URI template as their upstream lists them, and each serving upstream's
// instructions.
func (r *Router) Definitions() []pin.Def {
	return slices.Clone(r.catalog().defs)
}

// Rebuild builds the catalog again from the lists the router holds, for
// when Options.Pins decides differently (a re-read lockfile); hosts hear
// of the lists that changed.
func (r *Router) Rebuild() { r.rebuild() }

// Pinning returns what pinning quarantines and flags; false without
// Options.Pins.
func (r *Router) Pinning() (pin.Report, bool) {
	if r.opts.Pins == nil {
		return pin.Report{}, false
	}
	return r.opts.Pins.Report(), true
}
