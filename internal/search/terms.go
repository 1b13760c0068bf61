package search

import (
	"strings"
	"unicode"
)

// Terms splits text into index terms: words split at spaces,
// punctuation, underscores, dashes and case changes (readFile: read,
// file), lower-cased, stop words dropped, each stemmed (porter).
func Terms(text string) []string {
	return appendTerms(nil, text, nil)
}

// appendTerms appends the terms of text to out. A non-nil cache keeps
// each word's term ("" for a dropped word), so that New stems each
// distinct word of a catalog once.
func appendTerms(out []string, text string, cache map[string]string) []string {
	eachWord(text, func(w string) {
		if t, ok := cache[w]; ok {
			if t != "" {
				out = append(out, t)
			}
			return
		}
		t := term(w)
		if cache != nil {
			cache[w] = t
		}
		if t != "" {
			out = append(out, t)
		}
	})
	return out
}

// term is the index term of word w, or "" for a stop word or a lone
// letter.
func term(w string) string {
	w = strings.ToLower(w)
	if stopWords[w] || len(w) < 2 && !unicode.IsDigit(rune(w[0])) {
		return ""
	}
	return porter(w)
}

// eachWord calls f with each word of text, a substring of it: text split
// at non-alphanumerics and at lower-to-upper case changes (and before the
// last capital of a run that starts a word: HTTPServer: HTTP, Server; but
// URLs stays one), and between letters and digits.
func eachWord(text string, f func(string)) {
	// The runes of text and where each starts; the end is len(text).
	rs := []rune(text)
	offs := make([]int, 0, len(rs)+1)
	for i := range text {
		offs = append(offs, i)
	}
	offs = append(offs, len(text))
	start := -1
	flush := func(end int) {
		if start >= 0 && end > start {
			f(text[offs[start]:offs[end]])
		}
		start = -1
	}
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush(i)
			continue
		}
		if start < 0 {
			start = i
			continue
		}
		prev := rs[i-1]
		switch {
		case unicode.IsUpper(r) && unicode.IsLower(prev),
			unicode.IsUpper(r) && unicode.IsUpper(prev) && i+2 < len(rs) && unicode.IsLower(rs[i+1]) && unicode.IsLower(rs[i+2]),
			unicode.IsDigit(r) != unicode.IsDigit(prev):
			flush(i)
			start = i
		}
	}
	flush(len(rs))
}

// stopWords carry no meaning for finding a tool: function words, the
// fillers of a request ("called", "everything") and the tails of
// contractions ("don't": don, t).
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an and are as at be by can do does for from has have how i if in into is it its
		me my of on or please should so some that the their them then there these this to use used using want was we what
		when where which while who will with would you your
		everything anything something everyone anyone someone just also called named
		am been but could did each had he her here him his our ours us she than too very were why
		ll re ve don won isn doesn didn haven`) {
		m[w] = true
	}
	return m
}()
