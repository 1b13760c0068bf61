package policy

import (
	"sync"
	"unicode"

	"github.com/pkoukk/tiktoken-go"
	loader "github.com/pkoukk/tiktoken-go-loader"
)

// Tokens returns the number of tokens that def, a tool or prompt
// definition as JSON bytes, costs in a model's context. It counts the
// bytes exactly as given, whitespace included, so pass the form the
// gateway sends (upstream definitions are usually compact already).
//
// The count uses OpenAI's cl100k_base encoding (tiktoken, as in GPT-4).
// Other models tokenize differently, so for them the count is an
// estimate; it serves to compare definitions and to add them up, which
// is what the gateway uses it for. Special-token text such as "<|endoftext|>" is
// counted as ordinary text.
//
// The tokenizer is loaded on the first call, once for the process, and
// stays loaded: the vocabulary ships inside the binary (no network), but
// parsing it takes about 0.15 s and keeps about 11 MB of heap live (16 MB
// of RSS; 23 MB are allocated on the way), which a gateway that never
// asks for a token count does not pay. Loading calls
// tiktoken.SetBpeLoader, a package-level setting of tiktoken-go; this is
// the only place in the gateway that calls it, always with the offline
// loader. If the tokenizer cannot be loaded (only a broken build can
// cause that) Tokens falls back to one token per four bytes, rounded up.
//
// tiktoken's merge step is quadratic in the length of a single piece (a
// word, or a run of spaces or of punctuation), so a definition holding a
// run of more than 128 letters, spaces or other symbols is counted in
// parts, cut inside such runs: the cost stays linear and the count of
// each cut run may be off by a token. Text without such runs, which is
// all real text, is counted exactly.
//
// Tokens is safe for concurrent use.
func Tokens(def []byte) int {
	return cl100k.count(string(def))
}

// TokensString is Tokens for text that is not JSON, such as a single
// description.
func TokensString(s string) int {
	return cl100k.count(s)
}

// cl100k is the process's tokenizer, loaded on first use. It is the only
// package-level state of policy.
var cl100k = tokenCounter{load: loadCL100K}

func loadCL100K() (*tiktoken.Tiktoken, error) {
	// The default loader downloads the vocabulary and caches it on disk;
	// the offline one reads the copy embedded in tiktoken-go-loader.
	tiktoken.SetBpeLoader(loader.NewOfflineLoader())
	return tiktoken.GetEncoding("cl100k_base")
}

// tokenCounter loads an encoding on the first count. A separate type
// lets tests exercise a loader that fails.
type tokenCounter struct {
	load func() (*tiktoken.Tiktoken, error)

	once sync.Once
	enc  *tiktoken.Tiktoken // nil when load failed
}

func (c *tokenCounter) count(s string) int {
	c.once.Do(func() {
		enc, err := c.load()
		if err == nil {
			c.enc = enc
		}
	})
	if c.enc == nil {
		return (len(s) + 3) / 4
	}
	n := 0
	for s != "" {
		var part string
		part, s = cutLongRun(s, maxRun)
		// EncodeOrdinary neither panics on nor specially encodes text
		// that looks like a special token, unlike Encode with "all"
		// disallowed.
		n += len(c.enc.EncodeOrdinary(part))
	}
	return n
}

// maxRun is the longest run of one character class that is counted in
// one piece; see Tokens. Counting a worst-case megabyte takes about a
// quarter second with 128, against minutes without a cap.
const maxRun = 128

// cutLongRun splits s after the max-th character of its first run of
// more than max characters of one class, or returns s whole. cl100k's
// pre-tokenizer never puts characters of two classes in one piece except
// one leading space or symbol before a word and line breaks after
// symbols, so a piece is at most about 2*max+1 characters long.
func cutLongRun(s string, max int) (head, tail string) {
	prev, run := runeClass(-1), 0
	for i, r := range s {
		c := classOf(r)
		if c != prev {
			prev, run = c, 0
		}
		if c == classNumber {
			continue // the pattern cuts digits in threes anyway
		}
		run++
		if run > max {
			return s[:i], s[i:]
		}
	}
	return s, ""
}

// runeClass partitions characters the way cl100k's pre-tokenizer
// pattern does: \p{L}, \p{N}, \s (in regexp2's .NET sense) and the rest.
type runeClass int8

const (
	classLetter runeClass = iota
	classNumber
	classSpace
	classOther
)

func classOf(r rune) runeClass {
	switch {
	case unicode.IsLetter(r):
		return classLetter
	case unicode.IsNumber(r):
		return classNumber
	case r == '\t' || r == '\n' || r == '\v' || r == '\f' || r == '\r' || r == 0x85 || unicode.In(r, unicode.Z):
		return classSpace
	}
	return classOther
}
