package pin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of a diff in a log line.
const (
	diffMaxLines     = 40
	diffMaxLineChars = 160
	// diffMaxInput bounds the lines compared once the common first and
	// last lines are set aside (the LCS table is the product of the two
	// counts): past it, the diff is the two differing parts, cut.
	diffMaxInput = 400
)

// Diff is a readable diff of the locked definition old and the live one,
// line by line over their indented canonical forms: "-" lines are the
// lock's, "+" lines the live one's. It has at most diffMaxLines lines of
// at most diffMaxLineChars characters each (invisible characters shown
// as \u escapes), so that it fits in a log line.
func Diff(old, live Entry) string {
	out := diffLines(old, live)
	if len(out) > diffMaxLines {
		more := len(out) - diffMaxLines
		out = append(out[:diffMaxLines], fmt.Sprintf("... %d more lines", more))
	}
	for i, l := range out {
		out[i] = clip(l)
	}
	return strings.Join(out, "\n")
}

// FullDiff is Diff with nothing cut: every changed line whole (invisible
// characters shown as \u escapes), for a reviewer who approves what it
// shows (the console).
func FullDiff(old, live Entry) string {
	out := diffLines(old, live)
	for i, l := range out {
		out[i] = Visible(l)
	}
	return strings.Join(out, "\n")
}

// Reviewable is a definition as a reviewer reads it: its canonical form
// indented, whole, invisible characters shown as \u escapes.
func Reviewable(def json.RawMessage) string {
	ls := lines(def)
	for i, l := range ls {
		ls[i] = Visible(l)
	}
	return strings.Join(ls, "\n")
}

// diffLines is the changed lines of old to live, prefixed "- " and "+ ".
func diffLines(old, live Entry) []string {
	a, b := lines(old.Definition), lines(live.Definition)
	var out []string
	if old.Upstream != live.Upstream {
		out = append(out, "- upstream: "+old.Upstream, "+ upstream: "+live.Upstream)
	}
	// Set aside the lines both share at the start and at the end.
	for len(a) > 0 && len(b) > 0 && a[0] == b[0] {
		a, b = a[1:], b[1:]
	}
	for len(a) > 0 && len(b) > 0 && a[len(a)-1] == b[len(b)-1] {
		a, b = a[:len(a)-1], b[:len(b)-1]
	}
	if len(a) > diffMaxInput || len(b) > diffMaxInput {
		for _, l := range a {
			out = append(out, "- "+l)
		}
		for _, l := range b {
			out = append(out, "+ "+l)
		}
	} else {
		out = append(out, lineDiff(a, b)...)
	}
	return out
}

func lines(def json.RawMessage) []string {
	var b bytes.Buffer
	if err := json.Indent(&b, def, "", "  "); err != nil {
		return []string{string(def)}
	}
	return strings.Split(b.String(), "\n")
}

// lineDiff is the changed lines of a to b, by longest common subsequence.
func lineDiff(a, b []string) []string {
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			i, j = i+1, j+1
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			out = append(out, "- "+a[i])
			i++
		default:
			out = append(out, "+ "+b[j])
			j++
		}
	}
	return out
}

// clip shortens a line to diffMaxLineChars characters and shows the
// characters a reader could not see or a terminal would act on (controls,
// DEL and the C1 controls, format characters such as tags, zero-width
// and bidi controls, and anything else unicode.IsPrint refuses) as \u
// escapes.
func clip(l string) string { return escape(l, diffMaxLineChars) }

// Visible shows the characters of s a reader could not see, or a
// terminal would act on, as \u escapes, as clip does, cutting nothing.
func Visible(s string) string { return escape(s, -1) }

// escape is s with its invisible characters escaped, cut after max
// characters (-1: never).
func escape(l string, max int) string {
	var b strings.Builder
	n := 0
	for _, r := range l {
		if n == max {
			b.WriteString("...")
			break
		}
		if r == utf8.RuneError || !unicode.IsPrint(r) || isInvisible(r) {
			fmt.Fprintf(&b, "\\u{%X}", r)
		} else {
			b.WriteRune(r)
		}
		n++
	}
	return b.String()
}

func isInvisible(r rune) bool {
	return (r >= 0xE0000 && r <= 0xE007F) || r == 0x200B || r == 0x200C || r == 0x200D || r == 0x2060 || r == 0xFEFF ||
		(r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069) || r == 0x200E || r == 0x200F || r == 0x061C
}
