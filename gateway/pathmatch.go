package gateway

import "strings"

// matchPrefix reports whether the escaped request path p lies under the
// decoded route prefix on whole segments, and returns the escaped rest
// ("" or starting with "/"). Percent-escapes in p are decoded byte by
// byte while comparing, so /ap%69 matches /api, but an escaped slash
// (%2F) never matches a '/' of the prefix nor ends a segment: /api%2Fx is
// the single segment "api/x" (RFC 3986 §2.2), not under /api.
//
// Path parameters (";x" or "%3Bx" up to the segment's end) of a request
// segment that the prefix spans are skipped, as servlet containers
// (Tomcat, Jetty) strip them before they route: /api;x/login is under
// /api, so it gets /api's limits, CORS and cookie policy rather than a
// catch-all route's while such an upstream serves it as /api/login
// (docs/edge.md, "Paths").
//
// prefix "/" matches every path and returns p itself.
func matchPrefix(p, prefix string) (string, bool) {
	if prefix == "/" {
		return p, true
	}
	i := 0
	for j := 0; j < len(prefix); j++ {
		if prefix[j] == '/' && j > 0 {
			i = skipParams(p, i)
		}
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
	rest := p[skipParams(p, i):]
	if rest == "" || rest[0] == '/' {
		return rest, true
	}
	return "", false
}

// skipParams returns the index of the '/' (or the end) that ends the
// segment of the escaped path p when p[i] starts its path parameters (';'
// or %3B, any case), else i. An escaped slash does not end the segment.
func skipParams(p string, i int) int {
	if i >= len(p) || (p[i] != ';' && !(p[i] == '%' && i+2 < len(p) && p[i+1] == '3' && (p[i+2] == 'b' || p[i+2] == 'B'))) {
		return i
	}
	for i < len(p) && p[i] != '/' {
		i++
	}
	return i
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

// removeDotSegments resolves the "." and ".." segments of the escaped
// path p (RFC 3986 §5.2.4), a segment spelled with %2e counting as a dot
// too, and reports whether p had any (false: p is returned as is, without
// allocating). Routing and the upstream must see the same path: unresolved,
// "/api/../login" would match the /api route (its limits, its cookie
// policy) while the upstream serves /login, and "/v2/../x" would leave a
// route's upstream base path. A ".." at the root stays at the root.
//
// Empty segments are merged too ("//api//x" → "/api/x", as nginx's
// merge_slashes): "//api/login" would otherwise miss the /api route (and
// its limits) and reach an upstream that merges slashes as /api/login.
func removeDotSegments(p string) (string, bool) {
	if !hasDotSegment(p) {
		return p, false
	}
	segs := strings.Split(p, "/")
	out := make([]string, 0, len(segs))
	trailing := false
	for i, s := range segs {
		if i == 0 && s == "" {
			continue // the leading slash
		}
		if s == "" {
			trailing = i == len(segs)-1 && len(out) > 0
			continue // a merged slash, or the trailing one
		}
		switch dotSegment(s) {
		case 1:
			trailing = true
		case 2:
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			trailing = true
		default:
			out = append(out, s)
			trailing = false
		}
	}
	clean := "/" + strings.Join(out, "/")
	if trailing && len(out) > 0 {
		clean += "/"
	}
	return clean, true
}

// hasDotSegment reports whether a segment of p is "." or ".." (also as
// %2e), or whether p has an empty segment ("//"), without allocating
// ("/static/app.js" has none).
func hasDotSegment(p string) bool {
	if strings.Contains(p, "//") {
		return true
	}
	for p != "" {
		seg := p
		if i := strings.IndexByte(p, '/'); i >= 0 {
			seg, p = p[:i], p[i+1:]
		} else {
			p = ""
		}
		if dotSegment(seg) > 0 {
			return true
		}
	}
	return false
}

// dotSegment returns 1 for a "." segment, 2 for "..", 0 otherwise; "%2e"
// (any case) counts as a dot.
func dotSegment(s string) int {
	if len(s) == 0 || len(s) > 6 {
		return 0
	}
	dots := 0
	for i := 0; i < len(s); {
		switch {
		case s[i] == '.':
			i++
		case i+2 < len(s) && s[i] == '%' && s[i+1] == '2' && (s[i+2] == 'e' || s[i+2] == 'E'):
			i += 3
		default:
			return 0
		}
		dots++
	}
	if dots > 2 {
		return 0
	}
	return dots
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
