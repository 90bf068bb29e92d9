package ingress

import (
	"bytes"
	"encoding/json"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonMember returns the raw bytes of the value of the member named key in
// the JSON object obj, and whether there is one. When obj names key more
// than once the last one wins, as encoding/json does when it decodes into
// a map. obj must be valid JSON (the ingress checked it with json.Valid);
// on anything else the answer is unspecified but the call never panics or
// reads out of bounds.
//
// It reads obj once and allocates only for a key written with escapes or
// non-ASCII bytes, which it compares after decoding as encoding/json would:
// the event id is taken from every delivery, and decoding a 1 KB body into
// maps to read three fields cost a third of the ingress's handler time.
func jsonMember(obj []byte, key string) ([]byte, bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil, false
	}
	i++
	var found []byte
	ok := false
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return found, ok // '}' (or malformed)
		}
		kStart := i
		kEnd := skipString(obj, i)
		i = skipSpace(obj, kEnd)
		if i >= len(obj) || obj[i] != ':' {
			return found, ok
		}
		vStart := skipSpace(obj, i+1)
		vEnd := skipValue(obj, vStart)
		if keyEquals(obj[kStart:kEnd], key) {
			found, ok = obj[vStart:vEnd], true
		}
		i = skipSpace(obj, vEnd)
		if i >= len(obj) || obj[i] != ',' {
			return found, ok
		}
		i++
	}
}

// keyEquals compares a member name (quoted, as in the body) with key:
// byte for byte when the name is plain ASCII, else after decoding it as
// encoding/json does (escapes, invalid UTF-8 as U+FFFD).
func keyEquals(quoted []byte, key string) bool {
	if len(quoted) >= 2 && isPlain(quoted[1:len(quoted)-1]) {
		return string(quoted[1:len(quoted)-1]) == key
	}
	var s string
	return json.Unmarshal(quoted, &s) == nil && s == key
}

// jsonString returns the text of a JSON string value raw (quotes
// included), decoding escapes only when there are any. Unlike
// encoding/json it loses nothing: invalid UTF-8 bytes are kept as they
// are and a lone surrogate escape (\ud800) becomes its 3-byte WTF-8 form,
// where encoding/json makes both U+FFFD, so two different hostile ids
// would become one event id and the second event would be dropped as a
// duplicate. Equal texts written differently ("\u0041" and "A") decode
// alike, as before.
func jsonString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || skipString(raw, 0) != len(raw) {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	if isPlain(in) {
		return string(in), true
	}
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); {
		c := in[i]
		if c != '\\' {
			if c < 0x20 { // a raw control character is not JSON
				return "", false
			}
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(in) {
			return "", false
		}
		switch e := in[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(in[i+2:])
			if !ok {
				return "", false
			}
			i += 6
			if r >= 0xd800 && r < 0xdc00 && i+6 <= len(in) && in[i] == '\\' && in[i+1] == 'u' {
				if lo, ok := hex4(in[i+2:]); ok && lo >= 0xdc00 && lo < 0xe000 {
					r = utf16.DecodeRune(r, lo)
					i += 6
				}
			}
			if r >= 0xd800 && r < 0xe000 { // lone surrogate: WTF-8, not U+FFFD
				out = append(out, byte(0xe0|r>>12), byte(0x80|(r>>6)&0x3f), byte(0x80|r&0x3f))
			} else {
				out = utf8.AppendRune(out, r)
			}
			continue
		default:
			return "", false
		}
		i += 2
	}
	return string(out), true
}

// hex4 decodes the 4 hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i]
// (a '"'), or len(b) when it does not end. It jumps from quote to quote
// (bytes.IndexByte), so a long message text costs little.
func skipString(b []byte, i int) int {
	start := i + 1
	for j := start; j < len(b); {
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			break
		}
		j += q
		backslashes := 0
		for k := j - 1; k >= start && b[k] == '\\'; k-- {
			backslashes++
		}
		if backslashes%2 == 0 { // not an escaped quote: the end
			return j + 1
		}
		j++
	}
	return len(b)
}

// isPlain reports whether s is ASCII without escapes.
func isPlain(s []byte) bool {
	for _, c := range s {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

// skipValue returns the index just past the value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) { // number, true, false, null
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}
