package gateway

import "strings"

// matchPrefix reports whether the escaped request path p lies under the
// decoded route prefix on whole segments, and returns the escaped rest
// ("" or starting with "/"). Percent-escapes in p are decoded byte by
// byte while comparing, so /ap%69 matches /api, but an escaped slash
// (%2F) never matches a '/' of the prefix nor ends a segment: /api%2Fx is
// the single segment "api/x" (RFC 3986 §2.2), not under /api.
//
// prefix "/" matches every path and returns p itself.
func matchPrefix(p, prefix string) (string, bool) {
	if prefix == "/" {
		return p, true
	}
	i := 0
	for j := 0; j < len(prefix); j++ {
		if i >= len(p) {
			return "", false
		}
		c, n := p[i], 1
		if c == '%' {
			if i+2 >= len(p) {
				return "", false
			}
			hi, ok1 := unhex(p[i+1])
			lo, ok2 := unhex(p[i+2])
			if !ok1 || !ok2 {
				return "", false
			}
			c, n = hi<<4|lo, 3
			if c == '/' {
				return "", false
			}
		}
		if c != prefix[j] {
			return "", false
		}
		i += n
	}
	rest := p[i:]
	if rest == "" || rest[0] == '/' {
		return rest, true
	}
	return "", false
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// joinPath joins an upstream's escaped base path and an escaped request
// path with exactly one slash at the seam: ("/a", "/b%2fc") → "/a/b%2fc",
// ("/a/", "/x") → "/a/x", ("/a", "") → "/a", ("", "") → "/". Escapes are
// kept as they are (never decoded and re-encoded), and no "//" is made at
// the seam; slashes inside rest are the client's own.
func joinPath(base, rest string) string {
	if rest != "" && rest[0] != '/' {
		rest = "/" + rest
	}
	switch {
	case rest == "" && base == "":
		return "/"
	case rest == "":
		return base
	case base == "" || base == "/":
		return rest
	}
	return strings.TrimSuffix(base, "/") + rest
}

// normalizePrefix drops a trailing slash ("/api/" → "/api"), keeping "/".
func normalizePrefix(p string) string {
	if p == "" {
		return "/"
	}
	if len(p) > 1 {
		p = strings.TrimRight(p, "/")
		if p == "" {
			return "/"
		}
	}
	return p
}
