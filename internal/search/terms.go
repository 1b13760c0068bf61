package search

import (
	"strings"
	"unicode"
	"unicode/utf8"
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

// queryTerms returns the terms of a query: its Terms, except for the
// literal values in it, which name a thing rather than say what to do
// with it, and whose words would match tools that share them by chance
// ("make a folder called invoices" is not about invoices, nor "say 'good
// morning' in French" about mornings, and "https://go.dev/blog" is not a
// blog about Go). A literal stands for its kind instead (literalKind):
// "url", "domain", "email address", "file path" and its extension; a
// file name keeps its words and adds "file" ("contract.pdf": contract,
// pdf, file). A quoted phrase, and the word after "called", "named" or
// "titled", stand for nothing. A day or a time (friday, tonight, July,
// 2026-12-01, 10:30) also adds "date", the word tools use for what
// takes one ("remind me on friday": a task with a due date; "a room for
// next weekend": a hotel's check-in date). Documents are indexed with
// Terms: a tool's text describes its literals, it does not give them.
//
// Only the first maxQueryWords words are read.
func queryTerms(query string) []string {
	var b strings.Builder
	b.Grow(len(query) + 64) // a literal's kind may be longer than it
	fields := make([]string, 0, 16)
	for f := range strings.FieldsSeq(query) {
		if len(fields) == maxQueryWords {
			break
		}
		fields = append(fields, f)
	}
	// lastClose is the last word that ends a quote: an opening quote
	// before it starts a phrase.
	lastClose := -1
	for i, f := range fields {
		if endsQuote(f) {
			lastClose = i
		}
	}
	quoted := false // inside a quoted phrase
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		core := strings.TrimFunc(f, func(r rune) bool { return strings.ContainsRune(",.;:!?()[]<>", r) })
		if core == "" {
			continue
		}
		if quoted {
			quoted = !endsQuote(core)
			continue
		}
		if r, _ := utf8.DecodeRuneInString(core); isQuote(r) {
			// An opening quote: the phrase ends at this word if the word
			// also ends with a quote, else at the next word that does;
			// with none, it was an apostrophe ('90s) and this a word.
			if endsQuote(strings.TrimLeftFunc(core, isQuote)) {
				continue
			}
			if lastClose > i {
				quoted = true
				continue
			}
		}
		if isDate(core, i) {
			// Its own word, and the one tools use for it.
			b.WriteString(f)
			b.WriteString(" date ")
			continue
		}
		if kind := literalKind(core); kind != "" {
			b.WriteString(kind)
			b.WriteByte(' ')
			continue
		}
		b.WriteString(f)
		b.WriteByte(' ')
		switch strings.ToLower(core) {
		case "called", "named", "titled":
			i++ // the name it introduces
		}
	}
	return Terms(b.String())
}

// maxQueryWords is how many words of a query queryTerms reads: far more
// than the maxQueryTerms terms that count, and the rest of a huge query
// costs nothing.
const maxQueryWords = 4 * maxQueryTerms

func isQuote(r rune) bool { return strings.ContainsRune("'\"‘’“”", r) }

// endsQuote reports whether w ends a quoted phrase: it ends with a quote,
// maybe followed by punctuation ('…everyone',).
func endsQuote(w string) bool {
	w = strings.TrimRightFunc(w, func(r rune) bool { return unicode.IsPunct(r) && !isQuote(r) })
	r, _ := utf8.DecodeLastRuneInString(w)
	return w != "" && isQuote(r)
}

// literalKind names the kind of literal value w is, in words a tool's
// text uses, or returns "" when w looks like a plain word.
func literalKind(w string) string {
	switch {
	case strings.Contains(w, "://") || strings.HasPrefix(w, "www."):
		return "url"
	case strings.Count(w, "@") == 1 && strings.Contains(w[strings.IndexByte(w, '@'):], "."):
		return "email address"
	case strings.HasPrefix(w, "/") || strings.HasPrefix(w, "~/") || strings.HasPrefix(w, "./") || strings.Contains(w, `:\`):
		if ext := extension(w); ext != "" {
			return "file path " + ext
		}
		return "file path"
	}
	// name.ext: a domain (google.com, blog.example.com) or a file
	// (contract.pdf), whose name and extension say what it holds.
	ext := extension(w)
	if ext == "" || strings.IndexByte(w, '.') == 0 {
		return ""
	}
	if strings.Count(w, ".") >= 2 || topLevelDomains[ext] {
		return "domain"
	}
	return w + " file"
}

// extension returns the lower-case letters after the last dot of the
// last path element of w, if there are two to four of them.
func extension(w string) string {
	base := w[strings.LastIndexAny(w, `/\`)+1:]
	i := strings.LastIndexByte(base, '.')
	if i < 0 {
		return ""
	}
	ext := base[i+1:]
	if len(ext) < 2 || len(ext) > 4 {
		return ""
	}
	for _, r := range ext {
		if r < 'a' || r > 'z' {
			return ""
		}
	}
	return ext
}

// topLevelDomains are the common ones that are not also common file
// extensions: "notes.md" is a file, "go.dev" a domain.
var topLevelDomains = map[string]bool{
	"com": true, "org": true, "net": true, "io": true, "dev": true, "app": true, "ai": true,
	"co": true, "uk": true, "de": true, "fr": true, "eu": true, "edu": true, "gov": true,
}

// isDate reports whether w, the i-th word of a query, names a day, a
// month or a time of day: a word of dateWords, "May" past the first word
// (else it is the verb), a time (10:30) or an ISO date (2026-12-01).
func isDate(w string, i int) bool {
	lw := strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(w, "'s"), "’s"))
	if dateWords[lw] || w == "May" && i > 0 {
		return true
	}
	digits, seps := 0, 0
	for _, r := range w {
		switch {
		case r >= '0' && r <= '9':
			digits++
		case r == ':' || r == '-':
			seps++
		default:
			return false
		}
	}
	return digits >= 3 && (seps == 1 && strings.Contains(w, ":") || seps == 2 && strings.Count(w, "-") == 2)
}

var dateWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`today tomorrow yesterday tonight weekend morning afternoon evening noon midnight
		monday tuesday wednesday thursday friday saturday sunday
		january february march april june july august september october november december`) {
		m[w] = true
	}
	return m
}()
