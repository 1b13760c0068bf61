package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExpand(t *testing.T) {
	t.Parallel()
	env := map[string]string{"A": "x", "B_2": "y", "EMPTY": "", "DOLLAR": "${A}"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		in   string
		want string
		msgs []string
	}{
		{"plain", "plain", nil},
		{"${A}", "x", nil},
		{"pre-${A}-${B_2}-post", "pre-x-y-post", nil},
		{"${EMPTY}", "", nil},
		{"$${A}", "${A}", nil},
		{"$$${A}", "$${A}", nil}, // leftmost first: "$" then the escape
		{"$${A}${A}", "${A}x", nil},
		{"$A and $$ and $", "$A and $$ and $", nil},
		{"${DOLLAR}", "${A}", nil}, // values are not expanded again
		{"${MISSING}", "${MISSING}", []string{"environment variable MISSING is not set"}},
		{"${A}${MISSING}${OTHER}", "${A}${MISSING}${OTHER}", []string{
			"environment variable MISSING is not set",
			"environment variable OTHER is not set",
		}},
		{"${A", "${A", []string{`unterminated "${" (write "$${" for a literal "${")`}},
		{"${}", "${}", []string{`"" is not a variable name: use ${NAME} with letters, digits and _ (write "$${" for a literal "${")`}},
		{"${1A}", "${1A}", []string{`"1A" is not a variable name: use ${NAME} with letters, digits and _ (write "$${" for a literal "${")`}},
		{"${A:-default}", "${A:-default}", []string{`"A:-default" is not a variable name: use ${NAME} with letters, digits and _ (write "$${" for a literal "${")`}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, msgs := expand(tt.in, lookup)
			if got != tt.want {
				t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if diff := cmp.Diff(tt.msgs, msgs); diff != "" {
				t.Errorf("messages mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
