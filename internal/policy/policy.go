// Package policy decides what a caller may see and call: which of an
// upstream's tools, prompts and resources are exposed, to which team, how
// many, and how their definitions are trimmed.
//
// A view is what one identity sees: the default view (everyone, when
// there are no teams) or a team's. The router builds every view from the
// same rendered catalog and resolves each call only against the caller's
// view, so an entry a rule hides is absent from every list the caller
// gets and cannot be called: it is unknown.
//
// Limits cut in a deterministic priority: the Priority patterns first,
// then catalog order (upstream order, then each upstream's own order).
// What a limit cuts is reported, never silent.
package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
)

// Rules are the policy settings of gateway.yaml. The zero value allows
// everything and limits nothing.
type Rules struct {
	// Upstreams holds the per-upstream rules, keyed by upstream name. An
	// upstream without an entry allows everything.
	Upstreams map[string]UpstreamRules
	// MaxTools caps the number of tools in every view; 0 means no limit.
	MaxTools int
	// MaxTokens caps the estimated size of every view's tools/list, in
	// tokens; 0 means no limit.
	MaxTokens int
	// DescriptionMaxChars cuts tool and prompt descriptions longer than
	// this many characters at a word boundary and appends an ellipsis; 0
	// means no limit.
	DescriptionMaxChars int
	// SlimSchemas strips the decorating keywords of tool schemas (see
	// StripSchemaDecorations).
	SlimSchemas bool
	// Priority lists patterns (see Match) on exposed names: when a limit
	// cuts, names matching an earlier pattern are kept first.
	Priority []string
	// Teams are the views besides the default one.
	Teams []Team
	// Profiles narrow each of those views on their own paths: every
	// team (and the default view) has one view per profile too (see
	// ProfileView).
	Profiles []Team
	// Mode is how the default view lists its tools, and that of a team
	// without a mode of its own; "" means config.DefaultMode.
	Mode config.ViewMode
	// ExposeFound adds the tools a caller finds in search mode to that
	// caller's own tools/list (search.expose_found), in the default view
	// and every team without a setting of its own.
	ExposeFound bool
}

// UpstreamRules are the rules of one upstream, on the names the upstream
// itself uses.
type UpstreamRules struct {
	// Allow lists patterns on the upstream's original tool names; when
	// not empty, only matching tools are kept.
	Allow []string
	// Deny lists patterns on original tool names; a matching tool is
	// removed even when Allow matches it too.
	Deny []string
	// MaxTools caps the number of tools kept from this upstream, in the
	// upstream's order; 0 means no limit.
	MaxTools int
	// Rename gives tools other names (original -> new) before the
	// prefix is added; the upstream is still called with the original.
	Rename map[string]string
	// Descriptions replace tool descriptions, by original name.
	Descriptions map[string]string
}

// Team is one team's view, or a profile's: patterns on exposed names
// and its own limits, which apply on top of the policy's (a profile's,
// on top of its caller's view's).
type Team struct {
	Name        string
	Allow, Deny []string
	MaxTools    int
	MaxTokens   int
	// Priority replaces the policy's priority patterns when set (a
	// profile's, within what its caller's view kept; a team has none of
	// its own).
	Priority []string
	// Mode is how the team's view lists its tools; "" takes the
	// policy's (a profile's "" takes its caller's view's).
	Mode config.ViewMode
	// ExposeFound, when not nil, overrides Rules.ExposeFound.
	ExposeFound *bool
}

// View is the rules of one view, as the router applies them.
type View struct {
	// Name is the team's name, or "" for the default view.
	Name string
	// Allow and Deny are the team's patterns on keys: exposed names of
	// tools and prompts, and <upstream><separator><URI> of resources.
	// A profile's view denies what the team or the profile denies.
	Allow, Deny []string
	// ProfileAllow are a profile's allow patterns: a key must match
	// them too (when set), so that a profile only narrows its team.
	ProfileAllow []string
	// MaxTools and MaxTokens are the limits that apply: the smaller of
	// the team's and the policy's, where set.
	MaxTools, MaxTokens int
	// Priority is the policy's priority patterns.
	Priority []string
	// Mode is how the view lists its tools: the team's, else the
	// policy's, else config.DefaultMode; never "".
	Mode config.ViewMode
	// ExposeFound: what a caller finds in search mode is added to its
	// own tools/list (the team's setting, else the policy's).
	ExposeFound bool
}

// Search reports whether the view is in search mode: its tools/list
// holds the gateway's search tools instead of its catalog. (A view in
// mode auto is in search mode while its catalog exceeds MaxTokens: the
// router decides it for each catalog.)
func (v *View) Search() bool { return v.Mode == config.ModeSearch }

// Views returns the default view and one per team, in that order, then
// each of those views narrowed by each profile (ProfileView): a profile's
// view always comes after the view it narrows.
func (r *Rules) Views() []View {
	mode := cmp.Or(r.Mode, config.DefaultMode)
	views := []View{{MaxTools: r.MaxTools, MaxTokens: r.MaxTokens, Priority: r.Priority, Mode: mode, ExposeFound: r.ExposeFound}}
	for _, t := range r.Teams {
		expose := r.ExposeFound
		if t.ExposeFound != nil {
			expose = *t.ExposeFound
		}
		views = append(views, View{
			Name: t.Name, Allow: t.Allow, Deny: t.Deny,
			MaxTools:    tighter(r.MaxTools, t.MaxTools),
			MaxTokens:   tighter(r.MaxTokens, t.MaxTokens),
			Priority:    r.Priority,
			Mode:        cmp.Or(t.Mode, mode),
			ExposeFound: expose,
		})
	}
	if len(r.Profiles) == 0 {
		return views
	}
	base := len(views)
	for _, p := range r.Profiles {
		for _, v := range views[:base] {
			views = append(views, ProfileView(v, p))
		}
	}
	return views
}

// ProfileView is view v narrowed by profile p: named ViewKey(team,
// profile), it allows what both allow, denies what either denies, and
// takes the tighter of their limits; p's priority and mode, where set,
// replace v's. Its tools are chosen only among those v keeps once v's own
// limits and mode have applied (the router builds it from v's result), so
// that p's priority, or its mode auto, orders and limits within v's cut
// and never brings back a tool v's limits cut. What the caller finds is
// exposed as in v.
func ProfileView(v View, p Team) View {
	priority := v.Priority
	if len(p.Priority) > 0 {
		priority = p.Priority
	}
	return View{
		Name:         ViewKey(v.Name, p.Name),
		Allow:        v.Allow,
		ProfileAllow: p.Allow,
		Deny:         slices.Concat(v.Deny, p.Deny),
		MaxTools:     tighter(v.MaxTools, p.MaxTools),
		MaxTokens:    tighter(v.MaxTokens, p.MaxTokens),
		Priority:     priority,
		Mode:         cmp.Or(p.Mode, v.Mode),
		ExposeFound:  v.ExposeFound,
	}
}

// ViewKey names the view of a team ("" for the default view) on a
// profile's path: the team's name alone without a profile, else
// team/profile. Neither name may hold "/", so the key is unambiguous.
func ViewKey(team, profile string) string {
	if profile == "" {
		return team
	}
	return team + "/" + profile
}

// SplitViewKey returns the team and the profile of a view key.
func SplitViewKey(key string) (team, profile string) {
	team, profile, _ = strings.Cut(key, "/")
	return team, profile
}

// tighter returns the smaller of two limits where 0 means none.
func tighter(a, b int) int {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// Validate reports malformed patterns and negative limits.
func (r *Rules) Validate() error {
	var problems []string
	check := func(what string, patterns []string) {
		for _, p := range patterns {
			if err := ValidPattern(p); err != nil {
				problems = append(problems, fmt.Sprintf("%s: bad pattern %q: %v", what, p, err))
			}
		}
	}
	if r.MaxTools < 0 || r.MaxTokens < 0 || r.DescriptionMaxChars < 0 {
		problems = append(problems, "limits must not be negative")
	}
	check("priority", r.Priority)
	for name, u := range r.Upstreams {
		check("upstream "+name, u.Allow)
		check("upstream "+name, u.Deny)
		if u.MaxTools < 0 {
			problems = append(problems, fmt.Sprintf("upstream %s: max_tools must not be negative", name))
		}
	}
	for _, t := range r.Teams {
		check("team "+t.Name, t.Allow)
		check("team "+t.Name, t.Deny)
	}
	for _, p := range r.Profiles {
		check("profile "+p.Name, p.Allow)
		check("profile "+p.Name, p.Deny)
		check("profile "+p.Name, p.Priority)
	}
	if len(problems) > 0 {
		return fmt.Errorf("policy: %s", strings.Join(problems, "; "))
	}
	return nil
}

// AllowTool reports whether the upstream's allow and deny lists keep the
// tool with the given original name. It does not apply limits.
func (r *Rules) AllowTool(upstream, name string) bool {
	u, ok := r.Upstreams[upstream]
	if !ok {
		return true
	}
	if len(u.Allow) > 0 && !matchAny(u.Allow, name) {
		return false
	}
	return !matchAny(u.Deny, name)
}

// UpstreamLimit returns the MaxTools of one upstream (0 = no limit).
func (r *Rules) UpstreamLimit(upstream string) int {
	return r.Upstreams[upstream].MaxTools
}

// Rename returns the name a tool is exposed under before prefixing.
func (r *Rules) Rename(upstream, name string) string {
	if to, ok := r.Upstreams[upstream].Rename[name]; ok {
		return to
	}
	return name
}

// Description returns the configured description of a tool, if any.
func (r *Rules) Description(upstream, name string) (string, bool) {
	d, ok := r.Upstreams[upstream].Descriptions[name]
	return d, ok
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if Match(p, name) {
			return true
		}
	}
	return false
}

// Allows reports whether the view's patterns let its callers see key.
func (v *View) Allows(key string) bool {
	if len(v.Allow) > 0 && !matchAny(v.Allow, key) {
		return false
	}
	if len(v.ProfileAllow) > 0 && !matchAny(v.ProfileAllow, key) {
		return false
	}
	return !matchAny(v.Deny, key)
}

// Private reports whether the view's lists differ per caller (a team's,
// or a profile's): caches must not share them across callers (2026-07-28
// caching).
func (v *View) Private() bool { return v.Name != "" }

// Cut is one entry a limit removed from a view.
type Cut struct {
	Name string `json:"name"`
	// Limit is "max_tools" or "max_tokens".
	Limit string `json:"limit"`
}

// Limit applies the view's limits to the names of its tools, given in
// catalog order, with tokens(i) the size of tool i (called only when a
// token limit is set). It returns the indices kept, in catalog order,
// and what was cut. Tools are taken in priority order — the Priority
// patterns, then catalog order — and each is kept if it still fits:
// a tool too large for what is left is cut, and smaller ones after it
// may still fit.
func (v *View) Limit(names []string, tokens func(i int) int) (keep []int, cut []Cut) {
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	if len(v.Priority) > 0 {
		rank := func(i int) int {
			for r, p := range v.Priority {
				if Match(p, names[i]) {
					return r
				}
			}
			return len(v.Priority)
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(rank(a), rank(b)) })
	}
	used := 0
	for _, i := range order {
		switch {
		case v.MaxTools > 0 && len(keep) >= v.MaxTools:
			cut = append(cut, Cut{names[i], "max_tools"})
			continue
		case v.MaxTokens > 0:
			t := tokens(i)
			if used+t > v.MaxTokens {
				cut = append(cut, Cut{names[i], "max_tokens"})
				continue
			}
			used += t
		}
		keep = append(keep, i)
	}
	slices.Sort(keep)
	return keep, cut
}

// Trim cuts s to at most max characters (runes), at the last word
// boundary that leaves room for an ellipsis, and appends "…". Strings
// within the limit, and max <= 0, return s unchanged.
func Trim(s string, max int) string {
	if max <= 0 || utf8.RuneCountInString(s) <= max {
		return s
	}
	if max == 1 {
		return "…"
	}
	// Byte offset of the rune at index max-1: the cut leaves one rune of
	// room for the ellipsis.
	cut, n := 0, 0
	for i := range s {
		if n == max-1 {
			cut = i
			break
		}
		n++
	}
	head := s[:cut]
	// Back up to the last whitespace so that no word is cut in half,
	// unless that would throw away more than half of what fits.
	if i := strings.LastIndexFunc(head, unicode.IsSpace); i > len(head)/2 {
		head = head[:i]
	}
	return strings.TrimRightFunc(head, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) && r != ')' }) + "…"
}
