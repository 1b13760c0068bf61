// Package policy decides what a caller may see and call: which of an
// upstream's tools, prompts and resources are exposed, how many, and how
// their definitions are trimmed.
//
// The router applies a Rules value to every upstream catalog before it
// names and merges the entries, so an entry a rule removes is absent from
// every list and cannot be called: the router resolves calls only against
// what a view holds.
//
// Today there is one view shared by every caller. Teams and identities
// (api_key, jwt) come later and will choose among several views; the
// Rules type is the seam they extend.
package policy

import (
	"fmt"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Rules are the policy settings of gateway.yaml that apply to every
// caller. The zero value allows everything and limits nothing.
type Rules struct {
	// Upstreams holds the per-upstream rules, keyed by upstream name. An
	// upstream without an entry allows everything.
	Upstreams map[string]UpstreamRules
	// MaxTools caps the number of tools in a view, across all upstreams;
	// 0 means no limit. Tools are kept in catalog order (upstream order,
	// then each upstream's own order) until the limit is reached.
	MaxTools int
	// DescriptionMaxChars cuts tool and prompt descriptions longer than
	// this many characters at a word boundary and appends an ellipsis; 0
	// means no limit.
	DescriptionMaxChars int
}

// UpstreamRules are the rules of one upstream.
type UpstreamRules struct {
	// Allow lists glob patterns (path.Match syntax) on the upstream's
	// original tool names; when not empty, only matching tools are kept.
	Allow []string
	// Deny lists glob patterns on original tool names; a matching tool is
	// removed even when Allow matches it too.
	Deny []string
	// MaxTools caps the number of tools kept from this upstream, in the
	// upstream's order; 0 means no limit.
	MaxTools int
}

// Validate reports malformed glob patterns and negative limits.
func (r *Rules) Validate() error {
	var problems []string
	if r.MaxTools < 0 {
		problems = append(problems, "max_tools must not be negative")
	}
	if r.DescriptionMaxChars < 0 {
		problems = append(problems, "description_max_chars must not be negative")
	}
	for name, u := range r.Upstreams {
		for _, p := range append(append([]string(nil), u.Allow...), u.Deny...) {
			if _, err := path.Match(p, ""); err != nil {
				problems = append(problems, fmt.Sprintf("upstream %s: bad pattern %q: %v", name, p, err))
			}
		}
		if u.MaxTools < 0 {
			problems = append(problems, fmt.Sprintf("upstream %s: max_tools must not be negative", name))
		}
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

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// UpstreamLimit returns the MaxTools of one upstream (0 = no limit).
func (r *Rules) UpstreamLimit(upstream string) int {
	return r.Upstreams[upstream].MaxTools
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
