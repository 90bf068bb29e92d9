package cookies

import (
	"unicode"
	"unicode/utf8"
)

// isReaderSpace reports whether r, read from a header value, is
// whitespace to one of the parsers upstreams run. Header values reach
// Python (WSGI), Node and Java as latin-1 text, where the obs-text bytes
// 0x85 (NEL) and 0xA0 (NBSP) are characters that Python's str.split and
// str.strip, and JavaScript's trim, take as whitespace; Python also takes
// 0x1C-0x1F; a reader that decodes UTF-8 takes every Unicode space and
// the BOM. Go's net/http lets every byte from 0x80 on through a header
// value (fresh attack pass 7 N01/N02: "Bearer<0xA0><JWT>" and
// "<0xA0>olp_auth=<JWT>" were anonymous to the limiter while
// flask-jwt-extended and Django read the user). utf8.RuneError stands
// for a byte that is not UTF-8 (a latin-1 0x85 or 0xA0 alone).
func isReaderSpace(r rune) bool {
	switch {
	case r == ' ', r == '\t', r == '\n', r == '\v', r == '\f', r == '\r', 0x1C <= r && r <= 0x1F:
		return true
	case r == utf8.RuneError, r == 0x85, r == 0xA0, r == 0xFEFF:
		return true
	}
	return unicode.IsSpace(r)
}

// trimReaderSpace trims what any modelled reader takes as whitespace
// (isReaderSpace) from both ends of s: a byte that is not UTF-8 is
// trimmed only when it is 0x85 or 0xA0 (latin-1 NEL and NBSP).
func trimReaderSpace(s string) string {
	for s != "" {
		r, n := utf8.DecodeRuneInString(s)
		if !readerSpaceAt(s[:n], r) {
			break
		}
		s = s[n:]
	}
	for s != "" {
		r, n := utf8.DecodeLastRuneInString(s)
		if !readerSpaceAt(s[len(s)-n:], r) {
			break
		}
		s = s[:len(s)-n]
	}
	return s
}

// readerSpaceAt is isReaderSpace for the bytes b that decoded to r.
func readerSpaceAt(b string, r rune) bool {
	if r == utf8.RuneError && len(b) == 1 {
		return b[0] == 0x85 || b[0] == 0xA0
	}
	return isReaderSpace(r)
}
