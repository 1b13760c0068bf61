package search

import (
	"strconv"
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
	// The word before, and whether it made the last term of out: two
	// words of a compound ("on call") make one term instead.
	prev, prevTerm := "", false
	eachWord(text, func(w string) {
		if c, ok := compounds[compoundKey{strings.ToLower(prev), strings.ToLower(w)}]; ok {
			if prevTerm {
				out = out[:len(out)-1]
			}
			out = append(out, c)
			prev, prevTerm = "", false
			return
		}
		t, ok := cache[w]
		if !ok {
			t = term(w)
			if cache != nil {
				cache[w] = t
			}
		}
		if t != "" {
			out = append(out, t)
		}
		prev, prevTerm = w, t != ""
	})
	return out
}

// term is the index term of word w, or "" for a stop word, a lone letter
// or a number (a value, not what a tool does: "the 3 VMs", "version 2";
// a name such as s3 or ec2 stays one word, see eachWord).
func term(w string) string {
	w = strings.ToLower(w)
	if stopWords[w] || len(w) < 2 || isDigits(w) {
		return ""
	}
	return porter(w)
}

func isDigits(w string) bool {
	for _, r := range w {
		if r < '0' || r > '9' {
			return false
		}
	}
	return w != ""
}

type compoundKey struct{ first, second string }

// compounds are pairs of words, one after the other, that name one
// thing and are also written as one word ("on call" and "oncall", "to
// do" and "todo"): each pair is indexed and searched as its one word,
// which its two words alone would not find ("on" and "to" are stop
// words). Their terms are stemmed.
var compounds = func() map[compoundKey]string {
	m := map[compoundKey]string{}
	for _, c := range strings.Split("on call,to do,e mail,log in,sign in,sign up,set up,time zone,web site,web page,check in,back up,time off,day off,turn on,turn off,put on,going on,got on,on time", ",") {
		a, b, _ := strings.Cut(c, " ")
		m[compoundKey{a, b}] = porter(a + b)
	}
	return m
}()

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
			unicode.IsDigit(r) != unicode.IsDigit(prev) && longLetters(rs, start, i):
			flush(i)
			start = i
		}
	}
	flush(len(rs))
}

// longLetters reports whether a split between letters and digits at
// rs[i] leaves a run of three letters or more on its letters' side
// (weather|2, context|7): two letters or fewer and their digits are one
// name (s3, ec2, k8s, q3, v1, 2fa).
func longLetters(rs []rune, start, i int) bool {
	n := 0
	if unicode.IsLetter(rs[i-1]) {
		for j := i - 1; j >= start && unicode.IsLetter(rs[j]); j-- {
			n++
		}
	} else {
		for j := i; j < len(rs) && unicode.IsLetter(rs[j]) && (j == i || !unicode.IsUpper(rs[j]) || unicode.IsUpper(rs[j-1])); j++ {
			n++
		}
	}
	return n >= 3
}

// stopWords carry no meaning for finding a tool: function words, the
// fillers of a request ("called", "everything") and the tails of
// contractions ("don't": don, t).
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an and are as at be by can do does for from has have how i if in into is it its
		me my of on or please should so some that the their them then there these this to use used using want was we what
		when which while who will with would you your
		everything anything something everyone anyone someone just also called named
		am been but could did each had he her here him his our ours us she than too very were why
		ll re ve don won isn doesn didn haven rn gimme pls plz lemme wanna gonna`) {
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
// "url", "domain", "email address", "file path" and its extension (a
// path without one is a "folder path"), a phone number and more; a
// file name keeps its words and adds "file" ("contract.pdf": contract,
// pdf, file). A quoted phrase stands for "text" (what a tool that
// translates, sends or writes takes), and the word after "called",
// "named" or "titled" for nothing. A day or a time (friday, tonight, July,
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
		// A phone number or a place's coordinates written in several
		// words (07700 900461, +1 415 555 0134; 53.4808, -2.2426).
		if n := phoneWords(fields[i:]); n > 0 {
			b.WriteString("phone number ")
			i += n - 1
			continue
		}
		if isCoordinates(fields[i:]) {
			b.WriteString("coordinates ")
			i++
			continue
		}
		if r, _ := utf8.DecodeRuneInString(core); isQuote(r) {
			// An opening quote: the phrase ends at this word if the word
			// also ends with a quote, else at the next word that does;
			// with none, it was an apostrophe ('90s) and this a word.
			if endsQuote(strings.TrimLeftFunc(core, isQuote)) {
				b.WriteString("text ")
				continue
			}
			if lastClose > i {
				quoted = true
				b.WriteString("text ")
				continue
			}
		}
		if isDate(core, i) {
			// Its own word, and the one tools use for it.
			b.WriteString(f)
			b.WriteString(" date ")
			continue
		}
		if core == "X" && i > 0 && xPrepositions[strings.ToLower(fields[i-1])] {
			// "what are people on X saying": the network, not a letter.
			b.WriteString("twitter ")
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

// xPrepositions are the words before "X" when it names the social
// network (on X, to X, from X).
var xPrepositions = map[string]bool{"on": true, "to": true, "from": true, "at": true}

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
	case strings.Contains(w, "://"):
		// A web address is a url; another scheme (s3://, ftp://) also
		// says where it points. What its last element's extension says
		// it holds (.png, .csv) counts too.
		kind := "url"
		if scheme := strings.ToLower(w[:strings.Index(w, "://")]); scheme != "http" && scheme != "https" && isWord(scheme) {
			kind = scheme + " url"
		}
		if ext := extension(w[strings.Index(w, "://")+3:]); ext != "" && strings.Contains(w[strings.Index(w, "://")+3:], "/") {
			kind += " " + ext
		}
		return kind
	case strings.HasPrefix(w, "www.") || isHostPath(w):
		return "url"
	case strings.Count(w, "@") == 1 && strings.Contains(w[strings.IndexByte(w, '@'):], "."):
		return "email address"
	case strings.HasPrefix(w, "/") || strings.HasPrefix(w, "~/") || strings.HasPrefix(w, "./") || strings.Contains(w, `:\`):
		if ext := extension(w); ext != "" {
			return "file path " + ext
		}
		return "folder path"
	case isPhone(w):
		return "phone number"
	case isIPv4(w):
		return "ip address"
	case len(w) > 1 && w[0] == '#' && isWord(dropDashes.Replace(w[1:])) && !isDigits(w[1:]):
		return "channel" // #general, #data-requests
	case isIssueKey(w):
		return "issue" // PROD-482, as trackers number them
	case isRepo(w):
		return "repository" // acme/api, acme/api#482
	case letterDigitChanges(w) >= 3:
		return "id" // Q3X9ZKL, a1b2c3
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

// isWord reports whether w is ASCII letters and digits only.
func isWord(w string) bool {
	for _, r := range w {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return w != ""
}

// isHostPath reports whether w is a web address without its scheme:
// a domain, then a path (rivalco.com/pricing).
func isHostPath(w string) bool {
	host, _, ok := strings.Cut(w, "/")
	if !ok || strings.IndexByte(host, '.') <= 0 {
		return false
	}
	tld := strings.ToLower(host[strings.LastIndexByte(host, '.')+1:])
	return topLevelDomains[tld] || strings.Count(host, ".") >= 2 && isWord(tld) && !isDigits(tld)
}

// isPhone reports whether w is a phone number: + and 8 to 15 digits
// (+14155550142), 7 to 15 digits in groups split by dashes
// (415-555-0134, 555-0134; not a date, 2026-12-01), or three groups of
// 3, 3 and 4 digits split by dots (415.555.0134; not an address,
// 10.0.3.17).
func isPhone(w string) bool {
	if w[0] != '+' && (w[0] < '0' || w[0] > '9') {
		return false
	}
	if rest, ok := strings.CutPrefix(w, "+"); ok {
		return isDigits(rest) && len(rest) >= 8 && len(rest) <= 15
	}
	if g := strings.Split(w, "."); len(g) == 3 && len(g[0]) == 3 && len(g[1]) == 3 && len(g[2]) == 4 {
		return isDigits(g[0] + g[1] + g[2])
	}
	g := strings.Split(w, "-")
	digits := strings.Join(g, "")
	return len(g) >= 2 && isDigits(digits) && len(digits) >= 7 && len(digits) <= 15 && !isISODate(w)
}

// isIssueKey reports whether w is a tracker's issue key: 2 to 10
// capitals, a dash and a number (PROD-482).
func isIssueKey(w string) bool {
	key, num, ok := strings.Cut(w, "-")
	if !ok || len(key) < 2 || len(key) > 10 || !isDigits(num) {
		return false
	}
	for _, r := range key {
		if r < 'A' || r > 'Z' {
			return false
		}
	}
	return true
}

// phoneWords returns how many of the first words of fields make one
// phone number (groups of up to 6 digits, the first maybe with +, 9 to 15
// digits in all, at least two groups), or 0.
func phoneWords(fields []string) int {
	digits, n := 0, 0
	for _, f := range fields {
		g := strings.Trim(f, "(),.;:!?")
		if n == 0 {
			g = strings.TrimPrefix(g, "+")
		}
		if !isDigits(g) || len(g) > 6 || digits+len(g) > 15 {
			break
		}
		digits += len(g)
		n++
		if strings.ContainsAny(f[len(f)-1:], ",.;:!?") {
			break // punctuation ends the number
		}
	}
	if n < 2 || digits < 9 {
		return 0
	}
	return n
}

// isCoordinates reports whether fields start with a latitude and a
// longitude: two decimal numbers (with a dot) in their ranges.
func isCoordinates(fields []string) bool {
	if len(fields) < 2 {
		return false
	}
	lat, ok1 := decimal(strings.TrimRight(fields[0], ","))
	lon, ok2 := decimal(strings.TrimRight(fields[1], ",.;:!?"))
	return ok1 && ok2 && lat >= -90 && lat <= 90 && lon >= -180 && lon <= 180
}

// decimal parses a number with a decimal point (-2.2426), and only such.
func decimal(w string) (float64, bool) {
	whole, frac, ok := strings.Cut(strings.TrimPrefix(w, "-"), ".")
	if !ok || !isDigits(whole) || !isDigits(frac) || len(whole) > 3 {
		return 0, false
	}
	v, err := strconv.ParseFloat(w, 64)
	return v, err == nil
}

// isRepo reports whether w names a repository as owner/name, maybe with
// #number (acme/api, acme/api#482): two names without dots, one slash.
func isRepo(w string) bool {
	w, num, _ := strings.Cut(w, "#")
	if num != "" && !isDigits(num) {
		return false
	}
	owner, name, ok := strings.Cut(w, "/")
	if !ok || !isWord(dropDashes.Replace(owner)) || !isWord(dropDashes.Replace(name)) || isDigits(owner) {
		return false
	}
	// Two plain words are as often a pair of words (read/write, and/or)
	// as a repository: a number, a dash or a digit says which.
	return num != "" || strings.ContainsAny(w, "-_0123456789")
}

// dropDashes removes the dashes and underscores of a name.
var dropDashes = strings.NewReplacer("-", "", "_", "")

// letterDigitChanges counts the changes between letters and digits in
// w, other characters aside (a1-b2: three).
func letterDigitChanges(w string) int {
	n, last := 0, byte(0) // last: 'a' after a letter, '0' after a digit
	for _, r := range w {
		var class byte
		switch {
		case r >= '0' && r <= '9':
			class = '0'
		case unicode.IsLetter(r):
			class = 'a'
		default:
			continue
		}
		if last != 0 && class != last {
			n++
		}
		last = class
	}
	return n
}

// isIPv4 reports whether w is four numbers of at most three digits
// split by dots.
func isIPv4(w string) bool {
	if w[0] < '0' || w[0] > '9' {
		return false
	}
	parts := strings.Split(w, ".")
	if len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		if len(p) > 3 || !isDigits(p) {
			return false
		}
	}
	return true
}

// topLevelDomains are the common ones that are not also common file
// extensions: "notes.md" is a file, "go.dev" a domain.
var topLevelDomains = map[string]bool{
	"com": true, "org": true, "net": true, "io": true, "dev": true, "app": true, "ai": true,
	"co": true, "uk": true, "de": true, "fr": true, "eu": true, "edu": true, "gov": true,
	"so": true, "me": true, "us": true, "ca": true, "ly": true, "tv": true,
}

// isDate reports whether w, the i-th word of a query, names a day, a
// month or a time of day: a word of dateWords, "May" past the first word
// (else it is the verb), a time (10:30) or an ISO date (2026-12-01).
func isDate(w string, i int) bool {
	lw := strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(w, "'s"), "’s"))
	if dateWords[lw] || w == "May" && i > 0 {
		return true
	}
	// A time of day with am or pm (3pm, 10:30am), a day of a month
	// (22nd, 1st).
	if strings.HasSuffix(lw, "am") || strings.HasSuffix(lw, "pm") {
		n := lw[:len(lw)-2]
		if h, m, ok := strings.Cut(n, ":"); ok && len(m) == 2 && isDigits(m) {
			n = h
		}
		if isDigits(n) && len(n) <= 2 {
			return true
		}
	}
	for _, suffix := range []string{"st", "nd", "rd", "th"} {
		if n, ok := strings.CutSuffix(lw, suffix); ok && isDigits(n) && len(n) <= 2 {
			return true
		}
	}
	if isISODate(w) {
		return true
	}
	h, m, ok := strings.Cut(w, ":")
	return ok && isDigits(h) && isDigits(m) && len(h) <= 2 && len(m) == 2
}

// isISODate reports whether w is a date as 2026-12-01.
func isISODate(w string) bool {
	if len(w) != len("2026-12-01") {
		return false
	}
	parts := strings.Split(w, "-")
	return len(parts) == 3 && len(parts[0]) == 4 && len(parts[1]) == 2 && len(parts[2]) == 2 &&
		isDigits(parts[0]) && isDigits(parts[1]) && isDigits(parts[2])
}

var dateWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`today tomorrow tmrw tmr yesterday tonight weekend morning afternoon evening noon midnight
		monday tuesday wednesday thursday friday saturday sunday
		january february march april june july august september october november december
		jan feb mar apr jun jul aug sep sept oct nov dec mon tue tues wed thu thur thurs fri`) {
		m[w] = true
	}
	return m
}()
