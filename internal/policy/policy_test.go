package policy

import (
	"strings"
	"testing"
	"unicode/utf8"
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
	for _, want := range []string{"max_tools", `"[x"`} {
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
