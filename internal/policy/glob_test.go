package policy

import (
	"errors"
	"path"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		// Team patterns cover resource keys, which hold slashes.
		{"everything__*", "everything__test://static/x", true},
		{"everything__*", "everything__echo", true},
		{"everything__*", "everything_echo", false},
		{"everything__*", "other__echo", false},
		{"*", "", true},
		{"*", "a/b/c", true},
		{"**", "a/b", true},
		{"", "", true},
		{"", "a", false},
		{"a*b", "a/x/b", true},
		{"a*b", "a/x/c", false},
		{"*_admin", "search_admin", true},
		{"*_admin", "search_admin2", false},
		{"search_*", "search_", true},
		{"*ab", "aab", true}, // the star must give back what it took
		{"*a*b*c*", "xaybzc", true},
		{"*a*b*c*", "xaybz", false},
		{"a*a*a*a*b", strings.Repeat("a", 200), false},
		// ? is one character, '/' and multibyte runes included.
		{"?", "/", true},
		{"?", "é", true},
		{"?", "", false},
		{"?", "ab", false},
		{"a?c", "a/c", true},
		// Classes, as in path.Match.
		{"[a-c]x", "bx", true},
		{"[a-c]x", "dx", false},
		{"[^a-c]x", "dx", true},
		{"[^a-c]x", "ax", false},
		{"[abc]", "c", true},
		{"[a-cx-z]", "y", true},
		{"[^/]", "/", false},
		{"[é-ë]", "ê", true},
		{"*[^é]", "é", false}, // path.Match says true: its * can stop inside é
		// Escapes.
		{`\*`, "*", true},
		{`\*`, "a", false},
		{`a\?b`, "a?b", true},
		{`a\?b`, "axb", false},
		{`[\]]`, "]", true},
		{`[\-]`, "-", true},
		{`\\`, `\`, true},
		// Case matters.
		{"Search_*", "search_web", false},
		// A malformed pattern matches nothing, not even itself.
		{"[x", "[x", false},
		{"[x", "x", false},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+" "+tt.name, func(t *testing.T) {
			if got := Match(tt.pattern, tt.name); got != tt.want {
				t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
			}
		})
	}
}

func TestValidPattern(t *testing.T) {
	for _, p := range []string{"", "*", "a?b", "everything__*", "[a-z]", "[^a]", `[\]]`, `\[`, `[\-a]`, "[a-a]", "é*"} {
		if err := ValidPattern(p); err != nil {
			t.Errorf("ValidPattern(%q) = %v, want nil", p, err)
		}
	}
	for _, p := range []string{"[", "[x", "a[b", "[]", "[^]", "[]a]", `a\`, `[\`, "[z-a]", "[a-]", "[-a]", "[a-b-c]"} {
		err := ValidPattern(p)
		if !errors.Is(err, ErrBadPattern) {
			t.Errorf("ValidPattern(%q) = %v, want an error wrapping ErrBadPattern", p, err)
		} else if !strings.Contains(err.Error(), p) {
			t.Errorf("ValidPattern(%q) = %v, which does not quote the pattern", p, err)
		}
	}
}

// FuzzMatch checks Match against path.Match on ASCII names without '/',
// where the two must agree, and pattern validity on every pattern but
// the reversed ranges that ValidPattern rejects. (On other names
// path.Match's '*' may stop inside a multibyte character, so that
// "*[^é]" matches "é"; Match's does not.)
func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{{"*", "abc"}, {"a*b?c", "axxbyc"}, {"[a-c]*", "b"}, {`[^\]x]`, "y"}, {"*a*b", "aab"}, {"[z-a]", "q"}, {`\`, ""}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if strings.Contains(name, "/") || strings.Contains(pattern, "/") {
			return
		}
		ascii := true
		for i := range len(name) {
			ascii = ascii && name[i] < utf8.RuneSelf
		}
		want, werr := path.Match(pattern, name)
		// path.Match reports a malformed pattern only when it reads that
		// far; ValidPattern reads it all.
		if _, err := path.Match(pattern, ""); err != nil {
			werr = err
		}
		got, gerr := Match(pattern, name), ValidPattern(pattern)
		if werr == nil && gerr != nil && strings.Contains(gerr.Error(), "reversed") {
			return // path.Match accepts a reversed range, which matches nothing
		}
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("pattern %q: path.Match error %v, ValidPattern %v", pattern, werr, gerr)
		}
		if werr == nil && ascii && got != want {
			t.Fatalf("Match(%q, %q) = %v, path.Match says %v", pattern, name, got, want)
		}
	})
}
