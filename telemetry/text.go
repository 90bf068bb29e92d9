package telemetry

import (
	"unicode"
	"unicode/utf8"
)

// maxDimensionLen bounds a gateway_metrics.dimension value in bytes: a
// route name, ":" and a template of at most maxTemplateLen bytes fit.
// Longer values are not counters any Recorder writes.
const maxDimensionLen = 512

// maxEscolaLen bounds an escola_id counted per school (the identity's own
// bound, cookies' maxClaimBytes, is the same).
const maxEscolaLen = 256

// ValidText reports whether s may become part of a counter key and a
// gateway_metrics row: valid UTF-8 (PostgreSQL refuses anything else in a
// UTF8 database, and refuses NUL in any text), with no C0 control
// (U+0000–U+001F), DEL (U+007F) or C1 control (U+0080–U+009F). A request
// path decodes "%ff" into a raw 0xff byte and "%00" into NUL, so a path
// is checked after decoding; docs/telemetry.md, "Keys". Characters that
// render as nothing or as a blank (invisible) are refused too, so a
// dashboard never shows two endpoints that read alike.
func ValidText(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			return false // invalid or truncated sequence (overlong forms included)
		}
		if r <= 0x9f || r == 0x2028 || r == 0x2029 || unicode.Is(unicode.Cf, r) || invisible(r) {
			return false // C1 control, separator, format or invisible character
		}
		i += n
	}
	return true
}

// invisible reports whether r renders as nothing or as a blank in a
// dashboard though it is not a control or format character (fresh attack
// pass 7 T05: "/api/alunos" followed by U+3164 HANGUL FILLER was its own
// key, shown as "/api/alunos"): Unicode's Default_Ignorable_Code_Point
// beyond Cf (Other_Default_Ignorable_Code_Point: the Hangul fillers,
// U+034F, U+115F; variation selectors), every space but ASCII's (Zs:
// NBSP, U+3000), and U+2800 BRAILLE PATTERN BLANK.
func invisible(r rune) bool {
	return unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) || unicode.Is(unicode.Variation_Selector, r) ||
		unicode.Is(unicode.Zs, r) || r == 0x2800
}
