package pin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
)

// SpaceRun is the length of a run of whitespace (spaces, tabs, line
// breaks, and the blanks U+2800 and U+3164 that render as spaces) after which more text makes a definition suspicious: text
// pushed out of sight of a person reading it in a narrow window.
const SpaceRun = 40

// Suspicious reports the first invisible or deceptive text in a
// definition, as a sentence ("" when none): every string in it (keys and
// values, at any depth: names, titles, descriptions, schema text, enum
// values, instructions) is checked for
//
//   - Unicode tag characters, U+E0000 to U+E007F (invisible; models read
//     them as ASCII);
//   - zero-width characters: U+200B, U+200C, U+200D, U+2060, U+FEFF;
//   - bidirectional controls: U+202A to U+202E, U+2066 to U+2069, U+200E,
//     U+200F, U+061C;
//   - variation selectors: U+FE00 to U+FE0F, U+E0100 to U+E01EF (which
//     can carry bytes unseen, one per selector);
//   - other invisible characters: the invisible operators U+2061 to
//     U+2064, the soft hyphen U+00AD, U+180E, the Hangul fillers U+115F,
//     U+1160 and U+3164, the interlinear annotation controls U+FFF9 to
//     U+FFFB;
//   - HTML comments ("<!--"), which renderers hide;
//   - text after SpaceRun or more whitespace characters in a row.
//
// It is a filter for known tricks, not a promise that what passes is
// harmless.
func Suspicious(raw json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		if s, ok := tok.(string); ok {
			if why := suspiciousText(s); why != "" {
				return why
			}
		}
	}
}

func suspiciousText(s string) string {
	run := 0
	for i, r := range s {
		switch {
		case r >= 0xE0000 && r <= 0xE007F:
			return fmt.Sprintf("Unicode tag character U+%04X at byte %d", r, i)
		case r == 0x200B || r == 0x200C || r == 0x200D || r == 0x2060 || r == 0xFEFF:
			return fmt.Sprintf("zero-width character U+%04X at byte %d", r, i)
		case (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069) || r == 0x200E || r == 0x200F || r == 0x061C:
			return fmt.Sprintf("bidirectional control U+%04X at byte %d", r, i)
		case (r >= 0xFE00 && r <= 0xFE0F) || (r >= 0xE0100 && r <= 0xE01EF):
			return fmt.Sprintf("variation selector U+%04X at byte %d", r, i)
		case (r >= 0x2061 && r <= 0x2064) || r == 0x00AD || r == 0x180E || r == 0x115F || r == 0x1160 || r == 0x3164 || (r >= 0xFFF9 && r <= 0xFFFB):
			return fmt.Sprintf("invisible character U+%04X at byte %d", r, i)
		}
		if unicode.IsSpace(r) || r == 0x2800 || r == 0x3164 {
			run++
			continue
		}
		if run >= SpaceRun {
			return fmt.Sprintf("text after %d whitespace characters at byte %d", run, i)
		}
		run = 0
	}
	if i := strings.Index(s, "<!--"); i >= 0 {
		return fmt.Sprintf("HTML comment at byte %d", i)
	}
	return ""
}
