package webhook

import (
	"bytes"
	"encoding/json"
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
// included), decoding escapes only when there are any.
func jsonString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	if skipString(raw, 0) == len(raw) && isPlain(raw[1:len(raw)-1]) {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
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
