package gateway

import (
	"net/url"
	"strings"
)

// slashAction is the escaped_slashes policy (docs/edge.md, "Paths"): what
// happens to a request path holding %2F, %5C (any case) or a raw '\'.
type slashAction uint8

const (
	// slashReject answers 400 (the default).
	slashReject slashAction = iota
	// slashUnescape turns every escaped slash and backslash into "/"
	// before dot segments are resolved and the route is matched.
	slashUnescape
	// slashKeep forwards them as sent (a raw '\' as %5C); a dot segment
	// hidden behind one is still refused.
	slashKeep
)

// pathFault says why a request path is refused with 400 (pathOK: it is
// not).
type pathFault uint8

const (
	pathOK pathFault = iota
	// pathEscapedSlash: %2F, %5C or '\' where the policy is reject.
	pathEscapedSlash
	// pathControl: a control character (%00-%1F, %7F), raw or escaped.
	pathControl
	// pathDoubleEncoded: %25 followed by the escape of a slash,
	// backslash, dot, percent or control character (%252F, %255c,
	// %252e, %2525, %2500): only an upstream that decodes twice gives
	// them a meaning, and then it is a separator or a dot.
	pathDoubleEncoded
	// pathHiddenDot: a "." or ".." segment that survives dot-segment
	// resolution because it is spelled with path parameters ("..;x",
	// Tomcat's and Jetty's "..;/") or, under keep, behind an escaped
	// slash ("..%2F").
	pathHiddenDot
)

// wirePath returns the escaped path as the client sent it. url.URL keeps
// RawPath only when it differs from Path's default encoding, and
// EscapedPath drops it when it is not a valid encoding (a raw '\' makes
// it invalid), which would decode "..%2f" into "../" behind the
// policy's back; so RawPath is taken as is when present.
func wirePath(u *url.URL) string {
	if u.RawPath != "" {
		return u.RawPath
	}
	return u.EscapedPath()
}

// scanPath looks at an escaped path p once, without allocating: whether it
// holds an escaped slash or backslash (or a raw backslash), and the first
// fault that refuses it whatever the policy (control characters, double
// encoding).
func scanPath(p string) (slashes bool, fault pathFault) {
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\':
			slashes = true
		case c < 0x20 || c == 0x7f:
			return slashes, pathControl
		case c == '%':
			v, ok := unescapeAt(p, i)
			if !ok {
				continue // not an escape; the URL parser refused the bad ones
			}
			switch {
			case v == '/' || v == '\\':
				slashes = true
			case v < 0x20 || v == 0x7f:
				return slashes, pathControl
			case v == '%':
				// "%25" then two hex digits, each sent as it is or itself
				// escaped ("%252e", "%25%32%65", "%252%65"): what a second
				// decoding makes of the first one's "%2e".
				if w, ok := doubleDecodedAt(p, i+3); ok && (w == '/' || w == '\\' || w == '.' || w == '%' || w < 0x20 || w == 0x7f) {
					return slashes, pathDoubleEncoded
				}
			}
			i += 2
		}
	}
	return slashes, pathOK
}

// doubleDecodedAt decodes the two hex digits that follow a "%25" at p[j:]
// as one decoding pass leaves them: each digit is either sent as it is or
// escaped itself ("%32" is '2'), so "%25%32%65" and "%252%65" are "%2e"
// after one pass and "." after two, like "%252e" (false when the pass
// leaves no two hex digits there).
func doubleDecodedAt(p string, j int) (byte, bool) {
	var d [2]byte
	for k := range d {
		if j >= len(p) {
			return 0, false
		}
		c := p[j]
		if v, ok := unescapeAt(p, j); ok {
			c, j = v, j+3
		} else {
			j++
		}
		h, ok := unhex(c)
		if !ok {
			return 0, false
		}
		d[k] = h
	}
	return d[0]<<4 | d[1], true
}

// unescapeAt decodes the escape "%XX" at p[i] (false when there is none).
func unescapeAt(p string, i int) (byte, bool) {
	if i >= len(p) || p[i] != '%' {
		return 0, false
	}
	return hexPair(p, i+1)
}

// hexPair decodes the two hex digits at p[j:j+2] (false when there are
// none).
func hexPair(p string, j int) (byte, bool) {
	if j+1 >= len(p) {
		return 0, false
	}
	hi, ok1 := unhex(p[j])
	lo, ok2 := unhex(p[j+1])
	return hi<<4 | lo, ok1 && ok2
}

// unescapeSlashes replaces every %2F and %5C (any case) and every raw
// '\' of p with "/" (escaped_slashes: unescape); other escapes stay.
func unescapeSlashes(p string) string {
	var b strings.Builder
	b.Grow(len(p))
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '%' {
			if v, ok := unescapeAt(p, i); ok && (v == '/' || v == '\\') {
				b.WriteByte('/')
				i += 2
				continue
			}
		}
		if c == '\\' {
			c = '/'
		}
		b.WriteByte(c)
	}
	return b.String()
}

// hasHiddenDotSegment reports whether the escaped path p, after its real
// dot segments were resolved (removeDotSegments), still has a segment
// that some upstream resolves as "." or "..": one whose part before a
// ';' (or %3B) is a dot segment ("..;x", "%2e%2e;"), or, when
// splitEscaped, one made by splitting at %2F, %5C and '\' too.
func hasHiddenDotSegment(p string, splitEscaped bool) bool {
	start := 0
	for i := 0; i <= len(p); i++ {
		end, skip := -1, 0
		switch {
		case i == len(p) || p[i] == '/':
			end = i
		case splitEscaped && p[i] == '\\':
			end = i
		case splitEscaped && p[i] == '%':
			if v, ok := unescapeAt(p, i); ok && (v == '/' || v == '\\') {
				end, skip = i, 2
			}
		}
		if end < 0 {
			continue
		}
		if seg := p[start:end]; seg != "" && dotSegment(beforeParams(seg)) > 0 {
			return true
		}
		i += skip
		start = i + 1
	}
	return false
}

// beforeParams cuts a segment at its first ';' or %3B (RFC 3986 §3.3
// path parameters, which servlet containers strip before resolving).
func beforeParams(seg string) string {
	for i := 0; i < len(seg); i++ {
		if seg[i] == ';' {
			return seg[:i]
		}
		if v, ok := unescapeAt(seg, i); ok && v == ';' {
			return seg[:i]
		}
	}
	return seg
}

// escapeRawBytes percent-encodes every byte of the escaped path p that is
// not allowed raw in a path (RFC 3986 §3.3 pchar, '/' and '%'), such as
// '\', '{' or '"'; p is returned as is, without allocating, when it has
// none. url.URL.EscapedPath discards a RawPath holding such a byte and
// re-encodes Path instead, decoding every %2F into "/" on the way; after
// this the path sent is the path checked.
func escapeRawBytes(p string) string {
	i := 0
	for i < len(p) && rawPathByte(p[i]) {
		i++
	}
	if i == len(p) {
		return p
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(p) + 8)
	b.WriteString(p[:i])
	for ; i < len(p); i++ {
		if c := p[i]; rawPathByte(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// rawPathByte reports whether c may appear unescaped in an escaped path
// as url.URL keeps it (unreserved, sub-delims, ':', '@', '/', '%' and,
// as net/url allows them, '[' and ']').
func rawPathByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+,;=:@/%[]", c) >= 0
}
