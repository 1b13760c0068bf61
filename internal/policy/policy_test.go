package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
)

func TestAllowTool(t *testing.T) {
	r := &Rules{Upstreams: map[string]UpstreamRules{
		"search": {Allow: []string{"search_*", "fetch"}, Deny: []string{"*_admin"}},
		"files":  {Deny: []string{"write_*", "delete"}},
	}}
	tests := []struct {
		upstream, name string
		want           bool
	}{
		{"search", "search_web", true},
		{"search", "fetch", true},
		{"search", "search_admin", false}, // deny wins over allow
		{"search", "other", false},        // not in allow
		{"files", "read_file", true},
		{"files", "write_file", false},
		{"files", "delete", false},
		{"files", "Delete", true}, // names are case-sensitive
		{"unconfigured", "anything", true},
	}
	for _, tt := range tests {
		t.Run(tt.upstream+"/"+tt.name, func(t *testing.T) {
			if got := r.AllowTool(tt.upstream, tt.name); got != tt.want {
				t.Errorf("AllowTool(%q, %q) = %v, want %v", tt.upstream, tt.name, got, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	bad := &Rules{MaxTools: -1, Upstreams: map[string]UpstreamRules{"a": {Allow: []string{"[x"}}}}
	err := bad.Validate()
	if err == nil {
		t.Fatal("Validate accepted a bad pattern and a negative limit")
	}
	for _, want := range []string{"limits must not be negative", `"[x"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error %q does not mention %s", err, want)
		}
	}
	if err := (&Rules{}).Validate(); err != nil {
		t.Errorf("zero Rules: %v", err)
	}
}

func TestTrim(t *testing.T) {
	tests := []struct {
		name, in string
		max      int
		want     string
	}{
		{"within limit", "short text", 20, "short text"},
		{"no limit", "anything at all", 0, "anything at all"},
		{"word boundary", "Reads a file from the disk and returns it", 20, "Reads a file from…"},
		{"drops trailing punctuation", "Reads a file, then more words", 15, "Reads a file…"},
		{"long word is cut", "Supercalifragilisticexpialidocious", 10, "Supercalif…"[:len("Supercalif")-1] + "…"},
		{"runes not bytes", "héllo wörld ünïcode", 13, "héllo wörld…"},
		{"max one", "abc", 1, "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Trim(tt.in, tt.max)
			if got != tt.want {
				t.Errorf("Trim(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
			}
			if tt.max > 0 && utf8.RuneCountInString(got) > tt.max {
				t.Errorf("Trim(%q, %d) = %q is %d runes, over the limit", tt.in, tt.max, got, utf8.RuneCountInString(got))
			}
		})
	}
}

func TestViewsCombineLimits(t *testing.T) {
	r := &Rules{MaxTools: 10, MaxTokens: 500, Priority: []string{"a__*"}, Teams: []Team{
		{Name: "small", MaxTools: 3},
		{Name: "loose", MaxTools: 50, MaxTokens: 0},
	}}
	views := r.Views()
	want := []struct {
		name          string
		tools, tokens int
		private       bool
	}{{"", 10, 500, false}, {"small", 3, 500, true}, {"loose", 10, 500, true}}
	for i, w := range want {
		v := views[i]
		if v.Name != w.name || v.MaxTools != w.tools || v.MaxTokens != w.tokens || v.Private() != w.private {
			t.Errorf("view %d = %+v, want %+v", i, v, w)
		}
	}
}

// TestProfileViews: a profile's view of each team allows only what both
// allow, denies what either denies, never raises a limit, and inherits
// the team's mode and the policy's priority unless it has its own.
func TestProfileViews(t *testing.T) {
	r := &Rules{MaxTools: 10, Priority: []string{"a__*"}, Teams: []Team{
		{Name: "data", Allow: []string{"a__*", "b__*"}, Deny: []string{"a__rm"}, MaxTools: 4, Mode: config.ModeSearch},
	}, Profiles: []Team{
		{Name: "wide", Allow: []string{"a__*", "c__*"}, MaxTools: 50},
		{Name: "narrow", Deny: []string{"a__ls"}, MaxTools: 2, MaxTokens: 300, Priority: []string{"b__*"}, Mode: config.ModeFull},
	}}
	views := r.Views()
	type got struct {
		Name                string
		MaxTools, MaxTokens int
		Priority            []string
		Mode                config.ViewMode
		Private             bool
		Sees                []string
	}
	keys := []string{"a__ls", "a__rm", "b__get", "c__x"}
	var out []got
	for _, v := range views {
		g := got{v.Name, v.MaxTools, v.MaxTokens, v.Priority, v.Mode, v.Private(), nil}
		for _, k := range keys {
			if v.Allows(k) {
				g.Sees = append(g.Sees, k)
			}
		}
		out = append(out, g)
	}
	want := []got{
		{"", 10, 0, []string{"a__*"}, config.ModeFull, false, keys},
		{"data", 4, 0, []string{"a__*"}, config.ModeSearch, true, []string{"a__ls", "b__get"}},
		{"/wide", 10, 0, []string{"a__*"}, config.ModeFull, true, []string{"a__ls", "a__rm", "c__x"}},
		{"data/wide", 4, 0, []string{"a__*"}, config.ModeSearch, true, []string{"a__ls"}},
		{"/narrow", 2, 300, []string{"b__*"}, config.ModeFull, true, []string{"a__rm", "b__get", "c__x"}},
		{"data/narrow", 2, 300, []string{"b__*"}, config.ModeFull, true, []string{"b__get"}},
	}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("views (-want +got):\n%s", diff)
	}
	for _, k := range []string{"", "data", "/wide", "data/narrow"} {
		team, profile := SplitViewKey(k)
		if ViewKey(team, profile) != k {
			t.Errorf("SplitViewKey(%q) = %q, %q: does not make the key again", k, team, profile)
		}
	}
}

func TestViewsInheritMode(t *testing.T) {
	for _, tt := range []struct {
		name   string
		policy config.ViewMode
		teams  []config.ViewMode
		want   []bool // search, per view
	}{
		{"default full", "", []config.ViewMode{"", config.ModeSearch}, []bool{false, false, true}},
		{"policy search", config.ModeSearch, []config.ViewMode{"", config.ModeFull}, []bool{true, true, false}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &Rules{Mode: tt.policy}
			for i, m := range tt.teams {
				r.Teams = append(r.Teams, Team{Name: fmt.Sprint("t", i), Mode: m})
			}
			for i, v := range r.Views() {
				if v.Search() != tt.want[i] || v.Mode == "" {
					t.Errorf("view %q: mode %q, want search %v", v.Name, v.Mode, tt.want[i])
				}
			}
		})
	}
}

func TestLimit(t *testing.T) {
	names := []string{"b__one", "a__two", "b__three", "a__four"}
	sizes := []int{10, 40, 10, 30}
	tests := []struct {
		name string
		view View
		keep []int
		cut  []Cut
	}{
		{"no limits", View{}, []int{0, 1, 2, 3}, nil},
		{"max tools in catalog order", View{MaxTools: 2}, []int{0, 1}, []Cut{{"b__three", "max_tools"}, {"a__four", "max_tools"}}},
		{"max tools with priority", View{MaxTools: 2, Priority: []string{"a__*"}}, []int{1, 3}, []Cut{{"b__one", "max_tools"}, {"b__three", "max_tools"}}},
		{"max tokens first fit", View{MaxTokens: 55}, []int{0, 1}, []Cut{{"b__three", "max_tokens"}, {"a__four", "max_tokens"}}},
		{"max tokens skips a large one", View{MaxTokens: 55, Priority: []string{"a__four", "a__two"}}, []int{0, 2, 3}, []Cut{{"a__two", "max_tokens"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keep, cut := tt.view.Limit(names, func(i int) int { return sizes[i] })
			if diff := cmp.Diff(tt.keep, keep, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("keep (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.cut, cut); diff != "" {
				t.Errorf("cut (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAPIKeys(t *testing.T) {
	secret := "a-long-enough-secret-for-team-b"
	digest := sha256.Sum256([]byte(secret))
	keys, err := NewAPIKeys(map[string][]string{
		"a": {"key-for-team-a-0123456789"},
		"b": {"sha256:" + hex.EncodeToString(digest[:])},
	})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := keys.Identify("key-for-team-a-0123456789"); err != nil || id.Team != "a" {
		t.Errorf("team a's key: %+v, %v", id, err)
	}
	if id, err := keys.Identify(secret); err != nil || id.Team != "b" {
		t.Errorf("team b's key by digest: %+v, %v", id, err)
	}
	if _, err := keys.Identify(""); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("no key: %v", err)
	}
	if _, err := keys.Identify("wrong"); !errors.Is(err, ErrInvalidCredentials) {
		t.Errorf("wrong key: %v", err)
	}
	// Team answers for the identities of the table, by ID, and no other.
	b, _ := keys.Identify(secret)
	if team, ok := keys.Team(b.ID); !ok || team != "b" {
		t.Errorf("Team(%q) = %q, %v; want b", b.ID, team, ok)
	}
	for _, id := range []string{"", "key:", "key:zz", "key:" + hex.EncodeToString(digest[:4]), "oidc:" + hex.EncodeToString(digest[:]), "key:" + strings.Repeat("0", 64)} {
		if team, ok := keys.Team(id); ok {
			t.Errorf("Team(%q) = %q, want none", id, team)
		}
	}
	if _, err := NewAPIKeys(map[string][]string{"x": {"sha256:zz"}}); err == nil {
		t.Error("a malformed digest was accepted")
	}
	if _, err := NewAPIKeys(nil); err == nil {
		t.Error("no keys at all was accepted")
	}
}

// TestViewsInheritExposeFound: a team without its own expose_found takes
// the policy's; one with it keeps its own, true or false.
func TestViewsInheritExposeFound(t *testing.T) {
	yes, no := true, false
	for _, policyOn := range []bool{false, true} {
		r := &Rules{ExposeFound: policyOn, Teams: []Team{{Name: "inherits"}, {Name: "on", ExposeFound: &yes}, {Name: "off", ExposeFound: &no}}}
		got := map[string]bool{}
		for _, v := range r.Views() {
			got[v.Name] = v.ExposeFound
		}
		want := map[string]bool{"": policyOn, "inherits": policyOn, "on": true, "off": false}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("policy expose_found %v: views (-want +got):\n%s", policyOn, diff)
		}
	}
}
