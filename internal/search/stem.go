package search

// porter returns the stem of w, a lower-case ASCII word, by the Porter
// (1980) algorithm ("An algorithm for suffix stripping", Program 14(3),
// with the later bli→ble and logi→log rules): "connection", "connected"
// and "connecting" all become "connect", "directories" and "directory"
// "directori". Stems are index keys, not words. Words with a byte
// outside a–z, and words of two letters or fewer, are returned as given.
func porter(w string) string {
	if len(w) <= 2 {
		return w
	}
	if t, ok := stemExceptions[w]; ok {
		return t
	}
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return w
		}
	}
	s := stemmer{b: []byte(w)}
	s.step1ab()
	if len(s.b) > 2 {
		s.step1c()
		s.step2()
		s.step3()
		s.step4()
		s.step5()
	}
	return string(s.b)
}

// stemmer holds the word being stemmed; j marks the end of the stem
// when a suffix matched (ends sets it).
type stemmer struct {
	b []byte
	j int
}

// cons reports whether b[i] is a consonant: not a vowel, and y only
// after a vowel or at the start.
func (s *stemmer) cons(i int) bool {
	switch s.b[i] {
	case 'a', 'e', 'i', 'o', 'u':
		return false
	case 'y':
		return i == 0 || !s.cons(i-1)
	}
	return true
}

// m measures b[:j]: the number of vowel-consonant sequences.
func (s *stemmer) m() int {
	n, i := 0, 0
	for i < s.j && s.cons(i) {
		i++
	}
	for i < s.j {
		for i < s.j && !s.cons(i) {
			i++
		}
		if i >= s.j {
			break
		}
		for i < s.j && s.cons(i) {
			i++
		}
		n++
	}
	return n
}

// vowelInStem reports whether b[:j] holds a vowel.
func (s *stemmer) vowelInStem() bool {
	for i := 0; i < s.j; i++ {
		if !s.cons(i) {
			return true
		}
	}
	return false
}

// doublec reports whether b[i-1:i+1] is a double consonant.
func (s *stemmer) doublec(i int) bool {
	return i >= 1 && s.b[i] == s.b[i-1] && s.cons(i)
}

// cvc reports whether b[i-2:i+1] is consonant-vowel-consonant with the
// last not w, x or y (hop, not hoy): a short syllable.
func (s *stemmer) cvc(i int) bool {
	if i < 2 || !s.cons(i) || s.cons(i-1) || !s.cons(i-2) {
		return false
	}
	switch s.b[i] {
	case 'w', 'x', 'y':
		return false
	}
	return true
}

// ends reports whether b ends with suf, and sets j to where it starts.
func (s *stemmer) ends(suf string) bool {
	n := len(s.b) - len(suf)
	if n < 0 || string(s.b[n:]) != suf {
		return false
	}
	s.j = n
	return true
}

// setTo replaces b[j:] with r.
func (s *stemmer) setTo(r string) {
	s.b = append(s.b[:s.j], r...)
}

// r replaces the suffix with r when the stem's measure is positive.
func (s *stemmer) r(r string) {
	if s.m() > 0 {
		s.setTo(r)
	}
}

// step1ab removes plurals and -ed or -ing.
func (s *stemmer) step1ab() {
	if s.b[len(s.b)-1] == 's' {
		switch {
		case s.ends("sses"):
			s.b = s.b[:len(s.b)-2]
		case s.ends("ies"):
			s.setTo("i")
		case len(s.b) >= 2 && s.b[len(s.b)-2] != 's':
			s.b = s.b[:len(s.b)-1]
		}
	}
	if s.ends("eed") {
		if s.m() > 0 {
			s.b = s.b[:len(s.b)-1]
		}
		return
	}
	if !(s.ends("ed") || s.ends("ing")) || !s.vowelInStem() {
		return
	}
	s.b = s.b[:s.j]
	switch {
	case s.ends("at"):
		s.setTo("ate")
	case s.ends("bl"):
		s.setTo("ble")
	case s.ends("iz"):
		s.setTo("ize")
	case s.doublec(len(s.b) - 1):
		switch s.b[len(s.b)-1] {
		case 'l', 's', 'z':
		default:
			s.b = s.b[:len(s.b)-1]
		}
	default:
		s.j = len(s.b)
		if s.m() == 1 && s.cvc(len(s.b)-1) {
			s.b = append(s.b, 'e')
		}
	}
}

// step1c turns a final y into i when there is another vowel.
func (s *stemmer) step1c() {
	if s.ends("y") && s.vowelInStem() {
		s.b[len(s.b)-1] = 'i'
	}
}

// suffixRule is one replacement of steps 2 to 4.
type suffixRule struct{ suf, to string }

var step2Rules = []suffixRule{
	{"ational", "ate"}, {"tional", "tion"}, {"enci", "ence"}, {"anci", "ance"},
	{"izer", "ize"}, {"bli", "ble"}, {"alli", "al"}, {"entli", "ent"},
	{"eli", "e"}, {"ousli", "ous"}, {"ization", "ize"}, {"ation", "ate"},
	{"ator", "ate"}, {"alism", "al"}, {"iveness", "ive"}, {"fulness", "ful"},
	{"ousness", "ous"}, {"aliti", "al"}, {"iviti", "ive"}, {"biliti", "ble"},
	{"logi", "log"},
}

var step3Rules = []suffixRule{
	{"icate", "ic"}, {"ative", ""}, {"alize", "al"}, {"iciti", "ic"},
	{"ical", "ic"}, {"ful", ""}, {"ness", ""},
}

// step2 maps double suffixes to single ones (-ization to -ize).
func (s *stemmer) step2() {
	for _, r := range step2Rules {
		if s.ends(r.suf) {
			s.r(r.to)
			return
		}
	}
}

// step3 deals with -ic-, -full, -ness.
func (s *stemmer) step3() {
	for _, r := range step3Rules {
		if s.ends(r.suf) {
			s.r(r.to)
			return
		}
	}
}

var step4Suffixes = []string{
	"al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment",
	"ent", "ion", "ou", "ism", "ate", "iti", "ous", "ive", "ize",
}

// step4 removes a last suffix from a long enough stem (-ant, -ence).
func (s *stemmer) step4() {
	for _, suf := range step4Suffixes {
		if !s.ends(suf) {
			continue
		}
		if suf == "ion" && (s.j == 0 || s.b[s.j-1] != 's' && s.b[s.j-1] != 't') {
			return
		}
		if s.m() > 1 {
			s.b = s.b[:s.j]
		}
		return
	}
}

// step5 removes a final -e and turns -ll into -l on long stems.
func (s *stemmer) step5() {
	s.j = len(s.b)
	if s.b[len(s.b)-1] == 'e' {
		s.j--
		if m := s.m(); m > 1 || m == 1 && !s.cvc(len(s.b)-2) {
			s.b = s.b[:len(s.b)-1]
		}
	}
	s.j = len(s.b)
	if s.b[len(s.b)-1] == 'l' && s.doublec(len(s.b)-1) && s.m() > 1 {
		s.b = s.b[:len(s.b)-1]
	}
}

// stemExceptions are words whose Porter stem is another common word's:
// "news" is not "new" (every tool that creates a new thing).
var stemExceptions = map[string]string{"news": "news"}
