// Package formkey reads the keys of an application/x-www-form-urlencoded
// body or a query string as the parsers upstreams run read them: PHP
// ($_GET, $_POST, parse_str), Rack 2 (parse_nested_query) and ASP.NET
// (names without case), besides Go's url.ParseQuery. The gateway uses it
// for the credential a query or form may carry, the webhook ingress for
// the fields of a form body.
package formkey

import "strings"

// Unescape decodes a key as PHP's urldecode does: '+' is a space, a valid
// %XX escape its byte, and an invalid '%' stays as it is (url.QueryUnescape
// refuses "access_token%00%zz", which PHP reads as access_token).
func Unescape(s string) string {
	if !strings.ContainsAny(s, "%+") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			b.WriteByte(' ')
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b.WriteByte(hexValue(s[i+1])<<4 | hexValue(s[i+2]))
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Readings returns the names key (decoded: Unescape) is read under, in
// lower case (ASP.NET reads names without case): PHP's, then Rack 2's
// when it differs.
//
//   - PHP: the name ends at a NUL byte, leading spaces are dropped,
//     "name[...]" is an array under name, and ' ', '.' and an unmatched
//     '[' read as '_';
//   - Rack 2: leading '[' and ']' are dropped, and the name ends at the
//     first '[' or ']'.
func Readings(key string) []string {
	php := key
	if i := strings.IndexByte(php, 0); i >= 0 {
		php = php[:i]
	}
	php = strings.TrimLeft(php, " ")
	if i := strings.IndexByte(php, '['); i >= 0 && strings.IndexByte(php[i:], ']') > 0 {
		php = php[:i]
	}
	php = strings.ToLower(strings.NewReplacer(" ", "_", ".", "_", "[", "_").Replace(php))
	rack := strings.TrimLeft(key, "[]")
	if i := strings.IndexAny(rack, "[]"); i >= 0 {
		rack = rack[:i]
	}
	rack = strings.ToLower(rack)
	if rack == php {
		return []string{php}
	}
	return []string{php, rack}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func hexValue(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
