package policy

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrBadPattern is wrapped by the errors ValidPattern returns.
var ErrBadPattern = errors.New("syntax error in pattern")

// Match reports whether name matches the glob pattern. In a pattern,
// '*' matches any run of characters (including none), '?' any one
// character, "[abc]" one character of the class, "[a-z]" one of a range
// and "[^abc]" one character not in the class, as in path.Match; a
// backslash makes the next character stand for itself, inside a class
// too.
//
// Every other character matches itself, case-sensitively. Unlike
// path.Match, '*' and '?' cross '/': team patterns apply to exposed tool
// names and to "<upstream>__<resource URI>" keys, so "everything__*"
// must cover "everything__test://static/x". Characters are runes; a
// byte that is not valid UTF-8 is one character, equal only to itself.
// A '*' never stops inside a multibyte character, which path.Match's
// can: it matches "é" with "*[^é]".
//
// A malformed pattern matches nothing; check patterns with ValidPattern
// when they are loaded.
func Match(pattern, name string) bool {
	g, err := compileGlob(pattern)
	if err != nil {
		return false
	}
	return g.match(name)
}

// ValidPattern reports why pattern is not a valid Match pattern: an
// unclosed or empty class, a '-' or ']' that should have been escaped
// inside a class, a byte that is not UTF-8 inside a class, or a trailing
// backslash, as path.Match does; and, which
// path.Match accepts, a range whose ends are reversed, such as "[z-a]":
// it could match nothing, so a deny rule holding it would silently deny
// nothing. The error wraps ErrBadPattern.
func ValidPattern(pattern string) error {
	_, err := compileGlob(pattern)
	return err
}

// globElem is one element of a compiled pattern. Every kind but star
// matches exactly one character, which is what lets match backtrack
// only to the last star.
type globElem struct {
	kind   globKind
	lit    string      // globLiteral: the character's bytes
	ranges []runeRange // globClass
	negate bool        // globClass
}

type globKind uint8

const (
	globLiteral globKind = iota
	globAny              // ?
	globStar             // *
	globClass            // [...]
)

type runeRange struct{ lo, hi rune }

type glob []globElem

func compileGlob(pattern string) (glob, error) {
	var g glob
	for i := 0; i < len(pattern); {
		c := pattern[i]
		switch c {
		case '*':
			i++
			if len(g) == 0 || g[len(g)-1].kind != globStar { // "**" is "*"
				g = append(g, globElem{kind: globStar})
			}
		case '?':
			i++
			g = append(g, globElem{kind: globAny})
		case '[':
			e, n, err := compileClass(pattern[i+1:])
			if err != nil {
				return nil, fmt.Errorf("%w: %q at offset %d: %v", ErrBadPattern, pattern, i, err)
			}
			i += 1 + n
			g = append(g, e)
		case '\\':
			if i+1 >= len(pattern) {
				return nil, fmt.Errorf("%w: %q ends with a lone backslash", ErrBadPattern, pattern)
			}
			_, n := utf8.DecodeRuneInString(pattern[i+1:])
			g = append(g, globElem{kind: globLiteral, lit: pattern[i+1 : i+1+n]})
			i += 1 + n
		default:
			_, n := utf8.DecodeRuneInString(pattern[i:])
			g = append(g, globElem{kind: globLiteral, lit: pattern[i : i+n]})
			i += n
		}
	}
	return g, nil
}

// compileClass reads a class from s, which follows the '['. It returns
// the element and the bytes it read, the closing ']' included. The
// syntax is path.Match's: a leading '^' negates, and '-' and ']' must be
// escaped except as a range's separator and the closing bracket.
func compileClass(s string) (globElem, int, error) {
	e := globElem{kind: globClass}
	i := 0
	if i < len(s) && s[i] == '^' {
		e.negate = true
		i++
	}
	for {
		if i < len(s) && s[i] == ']' && len(e.ranges) > 0 {
			return e, i + 1, nil
		}
		lo, n, err := classChar(s[i:])
		if err != nil {
			return globElem{}, 0, err
		}
		i += n
		hi := lo
		if i < len(s) && s[i] == '-' {
			if hi, n, err = classChar(s[i+1:]); err != nil {
				return globElem{}, 0, err
			}
			i += 1 + n
			if lo > hi {
				return globElem{}, 0, fmt.Errorf("range %q-%q is reversed", lo, hi)
			}
		}
		e.ranges = append(e.ranges, runeRange{lo, hi})
	}
}

func classChar(s string) (rune, int, error) {
	switch {
	case s == "":
		return 0, 0, errors.New("unclosed [")
	case s[0] == ']':
		return 0, 0, errors.New("unescaped ] in class")
	case s[0] == '-':
		return 0, 0, errors.New("unescaped - in class")
	}
	esc := 0
	if s[0] == '\\' {
		if len(s) == 1 {
			return 0, 0, errors.New("unclosed [")
		}
		esc = 1
	}
	r, n := utf8.DecodeRuneInString(s[esc:])
	if r == utf8.RuneError && n == 1 {
		return 0, 0, errors.New("invalid UTF-8 in class")
	}
	return r, esc + n, nil
}

// match runs the classic wildcard algorithm: on a mismatch, retry from
// the last star with one more character given to it. Every other
// element consumes exactly one character, so the last star is the only
// choice point worth revisiting, and the cost is at most
// len(pattern)*len(name).
func (g glob) match(name string) bool {
	pi, ni := 0, 0
	starP, starN := -1, 0
	for ni < len(name) {
		if pi < len(g) {
			e := g[pi]
			if e.kind == globStar {
				starP, starN = pi, ni
				pi++
				continue
			}
			if n := e.matchLen(name[ni:]); n > 0 {
				pi++
				ni += n
				continue
			}
		}
		if starP < 0 {
			return false
		}
		// Give the star one more character and try again after it.
		_, n := utf8.DecodeRuneInString(name[starN:])
		starN += n
		pi, ni = starP+1, starN
	}
	for pi < len(g) && g[pi].kind == globStar {
		pi++
	}
	return pi == len(g)
}

// matchLen returns how many bytes of s, which is not empty, e matches,
// or 0. A literal compares bytes, as path.Match does, so that two
// different bytes that are not valid UTF-8 stay different.
func (e globElem) matchLen(s string) int {
	if e.kind == globLiteral {
		if strings.HasPrefix(s, e.lit) {
			return len(e.lit)
		}
		return 0
	}
	r, n := utf8.DecodeRuneInString(s)
	if e.kind == globClass {
		in := false
		for _, rr := range e.ranges {
			if rr.lo <= r && r <= rr.hi {
				in = true
				break
			}
		}
		if in == e.negate {
			return 0
		}
	}
	return n
}
