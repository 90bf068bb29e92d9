package ingress

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// The ingress's JSON scanner, each reader one pass over the bytes without
// decoding into maps (every webhook body goes through it): jsonValid
// (exactly encoding/json.Valid), jsonRefused (UTF-8 and duplicate
// members, for bodies parsers would read differently), jsonMember and
// jsonString (one member's value, decoded as encoding/json decodes it:
// the event id), and the skip* helpers they and redactFields share.

// maxJSONDepth is encoding/json's nesting limit: a deeper document is not
// valid to json.Valid.
const maxJSONDepth = 10000

// jsonValid reports exactly what encoding/json.Valid reports for b (RFC
// 8259 grammar, bytes ≥ 0x20 of any kind inside strings, nesting up to
// 10 000), in one pass without its per-byte state machine: the ingress
// checks every JSON body, and json.Valid cost a sixth of the handler's
// time on a 1 KB event (BenchmarkIngressEvent). FuzzJSONValidMatchesEncodingJSON
// holds it to json.Valid.
func jsonValid(b []byte) bool {
	var buf [64]byte
	stack := buf[:0] // '{' or '[' per open container
	i := skipSpace(b, 0)
	for {
		// A value starts at i.
		if i >= len(b) {
			return false
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(stack) == maxJSONDepth {
				return false
			}
			stack = append(stack, c)
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == c+2 { // '}' is '{'+2, ']' is '['+2
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				if i = objectKey(b, i); i < 0 {
					return false
				}
			}
			continue // the first member's value
		case c == '"':
			if i = validString(b, i); i < 0 {
				return false
			}
		case c == '-' || (c >= '0' && c <= '9'):
			if i = validNumber(b, i); i < 0 {
				return false
			}
		case c == 't':
			if i = literal(b, i, "true"); i < 0 {
				return false
			}
		case c == 'f':
			if i = literal(b, i, "false"); i < 0 {
				return false
			}
		case c == 'n':
			if i = literal(b, i, "null"); i < 0 {
				return false
			}
		default:
			return false
		}
		// After a complete value: close containers, or a comma and the
		// next value.
		for {
			i = skipSpace(b, i)
			if len(stack) == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			top := stack[len(stack)-1]
			if b[i] == top+2 {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if b[i] != ',' {
				return false
			}
			i = skipSpace(b, i+1)
			if top == '{' {
				if i = objectKey(b, i); i < 0 {
					return false
				}
			}
			break
		}
	}
}

// objectKey checks `"key" :` at b[i] and returns the index of the value
// after it (spaces skipped), or -1.
func objectKey(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = validString(b, i); i < 0 {
		return -1
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return skipSpace(b, i+1)
}

// validString checks the string starting at b[i] (a '"') and returns the
// index just past its closing quote, or -1.
func validString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			if i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					return -1
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// validNumber checks the number starting at b[i] and returns the index
// just past it, or -1: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func validNumber(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// literal checks that word (true, false, null) starts at b[i] and returns
// the index past it, or -1.
func literal(b []byte, i int, word string) int {
	if len(b)-i < len(word) || string(b[i:i+len(word)]) != word {
		return -1
	}
	return i + len(word)
}

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

// skipComma returns the offset just past the ',' that follows i (after
// whitespace), or i when the next byte is not a comma.
func skipComma(b []byte, i int) int {
	j := i
	for j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\n' || b[j] == '\r') {
		j++
	}
	if j < len(b) && b[j] == ',' {
		return j + 1
	}
	return i
}

// jsonRefused returns why body, valid JSON (jsonValid), is refused, or "":
// ReasonInvalidUTF8, ReasonNumberOutOfRange or ReasonDuplicateMember.
// Every object at every depth
// is checked: the members Borda reads (id_fields, redact_fields,
// Stripe's id) are not the only ones its consumers read.
func jsonRefused(body []byte) string {
	if !utf8.Valid(body) || jsonLoneSurrogate(body) {
		return ReasonInvalidUTF8
	}
	if jsonNumberOutOfRange(body) {
		return ReasonNumberOutOfRange
	}
	if jsonDuplicateMember(body) {
		return ReasonDuplicateMember
	}
	return ""
}

// pgNumericScaleDigits is the most digits after the decimal point of
// PostgreSQL's numeric, which jsonb stores numbers as (its display scale,
// trailing zeros included; 131 072 before the point).
const pgNumericScaleDigits = 16383

// pgMaxExponent is the smallest exponent magnitude PostgreSQL's numeric
// input refuses whatever the digits before it ("value overflows numeric
// format" for 0e1073741823 as for 1e1073741823).
const pgMaxExponent = 1073741823

// jsonNumberOutOfRange reports whether a number of b (valid JSON) is one
// its consumers cannot all read (fresh attack pass 3 W12): beyond float64
// (1e999999, -1e400, a 400-digit integer: encoding/json refuses to decode
// it into float64 or interface{}, PHP, Python and JavaScript read it as
// ±infinity), or beyond PostgreSQL's numeric (1e-16384, 1.5e-16383, 0.
// followed by 16 384 zeros: jsonb refuses the body, "value overflows
// numeric format"). Like a lone surrogate (A036), such a body would be
// acknowledged and then never delivered or read alike. Numbers that
// underflow float64 but fit numeric (1e-400) read as 0 in Go and are
// kept. In valid JSON a '-' or a digit outside a string starts a number.
func jsonNumberOutOfRange(b []byte) bool {
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == '"':
			i = skipString(b, i)
			continue
		case c == '-' || (c >= '0' && c <= '9'):
			j := i
			for j < len(b) && (b[j] == '-' || b[j] == '+' || b[j] == '.' || b[j] == 'e' || b[j] == 'E' || (b[j] >= '0' && b[j] <= '9')) {
				j++
			}
			if numberOutOfRange(b[i:j]) {
				return true
			}
			i = j
			continue
		}
		i++
	}
	return false
}

// numberOutOfRange reports whether the JSON number n overflows float64
// or PostgreSQL's numeric (jsonNumberOutOfRange). Short numbers without
// an exponent (at most 300 bytes) are in range and not parsed.
func numberOutOfRange(n []byte) bool {
	exp := bytes.IndexAny(n, "eE")
	if exp < 0 && len(n) <= 300 {
		return false
	}
	if f, err := strconv.ParseFloat(string(n), 64); err != nil && math.IsInf(f, 0) {
		return true // beyond float64
	}
	mant, e := n, int64(0)
	if exp >= 0 {
		mant = n[:exp]
		v, err := strconv.ParseInt(string(n[exp+1:]), 10, 64)
		if err != nil { // |exponent| beyond int64
			v = math.MaxInt32
			if n[exp+1] == '-' {
				v = math.MinInt32
			}
		}
		e = max(min(v, math.MaxInt32), math.MinInt32)
		if e >= pgMaxExponent || e <= -pgMaxExponent {
			return true // PostgreSQL refuses the exponent whatever the digits (0e2147483647: fresh attack pass 6 W01)
		}
	}
	var frac []byte
	if dot := bytes.IndexByte(mant, '.'); dot >= 0 {
		frac = mant[dot+1:]
	}
	// PostgreSQL's scale: too many digits after the point, even of 0.
	// (Its 131 072 digits before the point are far beyond float64.)
	return int64(len(frac))-e > pgNumericScaleDigits
}

// jsonLoneSurrogate reports whether a string of b (valid JSON) holds a
// \u escape of a surrogate that is not half of a pair ("\ud83d" alone,
// a low one first). It is not text: Go reads it as U+FFFD, Python decodes
// it and cannot encode it again, PostgreSQL's jsonb and PHP's json_decode
// refuse the body, so an acknowledged event could never be delivered
// (fresh attack pass A036); the same code point as raw bytes is invalid
// UTF-8, already refused. In valid JSON a backslash occurs only inside a
// string, so one pass over the escapes suffices.
func jsonLoneSurrogate(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if i+1 >= len(b) || b[i+1] != 'u' {
			i++ // a two-byte escape: skip what it escapes (\\ included)
			continue
		}
		r, ok := hex4(b[i+2:])
		if !ok {
			return false // not valid JSON: jsonValid refuses it
		}
		i += 5
		switch {
		case r >= 0xdc00 && r < 0xe000:
			return true // a low surrogate first
		case r >= 0xd800 && r < 0xdc00:
			if i+6 >= len(b) || b[i+1] != '\\' || b[i+2] != 'u' {
				return true
			}
			lo, ok := hex4(b[i+3:])
			if !ok || lo < 0xdc00 || lo >= 0xe000 {
				return true
			}
			i += 6
		}
	}
	return false
}

// smallObject is how many member names an object's check compares
// pairwise before it switches to a map.
const smallObject = 16

// jsonDuplicateMember reports whether an object of b (valid JSON) names a
// member twice. Names are compared after decoding (`"\u0069d"` is `"id"`)
// and case-insensitively under Unicode simple folding, as encoding/json
// matches a member to a struct field (bytes.EqualFold: "Instance",
// "INSTANCE", "ſtate" with U+017F and "\u212aey" with the Kelvin sign are
// "instance", "state" and "key" to it, and it keeps the last), while
// PHP, Python, JavaScript and PostgreSQL read names exactly: two names
// equal under folding are one member to one reader and two to the others
// (fresh attack pass A34). It reads b once; plain ASCII names are
// compared in place, without allocating.
func jsonDuplicateMember(b []byte) bool {
	type frame struct {
		object bool
		first  int                 // this object's names: names[first:]
		big    map[string]struct{} // once it holds more than smallObject
	}
	var stackBuf [16]frame
	stack := stackBuf[:0]
	var namesBuf [32][]byte
	names := namesBuf[:0]
	for i := 0; i < len(b); {
		switch b[i] {
		case '"':
			end := skipString(b, i)
			if n := len(stack); n > 0 && stack[n-1].object {
				if j := skipSpace(b, end); j < len(b) && b[j] == ':' { // a member name
					top := &stack[n-1]
					name := memberName(b[i:end])
					if top.big != nil {
						folded := string(foldName(name))
						if _, dup := top.big[folded]; dup {
							return true
						}
						top.big[folded] = struct{}{}
					} else {
						for _, prev := range names[top.first:] {
							if bytes.EqualFold(prev, name) {
								return true
							}
						}
						names = append(names, name)
						if len(names)-top.first > smallObject {
							top.big = make(map[string]struct{}, 2*smallObject)
							for _, prev := range names[top.first:] {
								top.big[string(foldName(prev))] = struct{}{}
							}
							names = names[:top.first]
						}
					}
				}
			}
			i = end
			continue
		case '{', '[':
			stack = append(stack, frame{object: b[i] == '{', first: len(names)})
		case '}', ']':
			if n := len(stack); n > 0 {
				names = names[:stack[n-1].first]
				stack = stack[:n-1]
			}
		}
		i++
	}
	return false
}

// memberName is a quoted member name decoded as encoding/json decodes it;
// a plain ASCII name is returned in place.
func memberName(quoted []byte) []byte {
	if len(quoted) < 2 {
		return quoted
	}
	inner := quoted[1 : len(quoted)-1]
	if isPlain(inner) {
		return inner
	}
	var s string
	if json.Unmarshal(quoted, &s) != nil {
		return inner
	}
	return []byte(s)
}

// foldName returns name folded as encoding/json folds member names:
// foldName(x) == foldName(y) exactly when bytes.EqualFold(x, y). ASCII
// letters become upper case, every other rune the smallest rune of its
// simple folding orbit (unicode.SimpleFold: ſ U+017F is S, the Kelvin
// sign U+212A is K).
func foldName(name []byte) []byte {
	out := make([]byte, 0, len(name))
	for i := 0; i < len(name); {
		if c := name[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(name[i:])
		for {
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				r = r2
				break
			}
			r = r2
		}
		out = utf8.AppendRune(out, r)
		i += n
	}
	return out
}
