package config

import (
	"fmt"
	"strings"
)

// expand replaces each ${VAR} in s with the value lookup gives for VAR, and
// each $${ with a literal ${.
//
// It returns the expanded string and one message per problem: a variable
// that is not set, a malformed name, an unterminated ${. When there are
// problems the returned string is s unchanged, so that later checks see the
// text the user wrote instead of a half-expanded value. Messages name
// variables but never contain their values.
func expand(s string, lookup func(string) (string, bool)) (string, []string) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var (
		b    strings.Builder
		msgs []string
	)
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			b.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				msgs = append(msgs, `unterminated "${" (write "$${" for a literal "${")`)
				i = len(s)
				continue
			}
			name := s[i+2 : i+2+end]
			i += 2 + end + 1
			if !isVarName(name) {
				msgs = append(msgs, fmt.Sprintf("%q is not a variable name: use ${NAME} with letters, digits and _ (write \"$${\" for a literal \"${\")", name))
				continue
			}
			v, ok := lookup(name)
			if !ok {
				msgs = append(msgs, fmt.Sprintf("environment variable %s is not set", name))
				continue
			}
			b.WriteString(v)
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	if len(msgs) > 0 {
		return s, msgs
	}
	return b.String(), nil
}

// isVarName reports whether s is a portable environment variable name:
// a letter or _ followed by letters, digits and _.
func isVarName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
