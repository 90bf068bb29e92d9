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
// is checked after decoding; docs/telemetry.md, "Keys".
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
		if r <= 0x9f || r == 0x2028 || r == 0x2029 || unicode.Is(unicode.Cf, r) {
			return false // C1 control, separator or format character
		}
		i += n
	}
	return true
}
