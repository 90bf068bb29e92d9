package cookies

import (
	"net/http"
	"strings"
)

// OwnedPrefix starts the name of every cookie the portal itself sets
// (olp_auth, olp_mural, ...). It is matched case-insensitively and after
// a __Host- or __Secure- prefix (also any case, as RFC 6265bis §4.1.3
// has browsers match them): OLP_AUTH and __Host-olp_auth are treated as
// the portal's too, so they cannot slip past the filter to a third-party
// upstream, nor be set by one.
const OwnedPrefix = "olp_"

// MaxTokenBytes bounds a credential: the Authorization: Bearer token the
// identity layer verifies, and every olp_* cookie value forwarded to an
// upstream (as a cookie or as the Bearer token). One bound for both, so
// no credential reaches an upstream that the rate limiter could not read:
// an olp_* cookie value over it is removed by ApplyRequest, and the
// gateway answers a Bearer header over it with 431 (BearerTooLarge).
// Browsers keep cookies under 4096 bytes, and nginx refuses header lines
// over its default 8k large_client_header_buffers (docs/edge.md,
// Identity).
const MaxTokenBytes = 8 << 10

// Forward says how one request cookie reaches a route's upstream.
type Forward struct {
	// Cookie is the cookie name, matched exactly (RFC 6265 names are
	// case-sensitive).
	Cookie string
	// AsAuthorization sends the value as "Authorization: Bearer <value>"
	// instead of as a cookie, and only when the request carries no
	// Authorization header of its own; the cookie itself is not forwarded.
	AsAuthorization bool
}

// IsOwned reports whether name is one of the portal's cookies: OwnedPrefix,
// case-insensitively, after an optional __Host- or __Secure- prefix (any
// case), either as sent or as the frameworks that decode cookie names
// read it (frameworkCookieName: PHP and Rack percent-decode names, PHP
// also reads '+' as a space and ' ', '.' and '[' as '_'), so "olp%5Fauth",
// "olp.auth" and "olp+auth" are olp_auth to such a portal upstream.
//
// The name is read after trimming what any modelled reader takes as
// whitespace (trimReaderSpace: latin-1 NBSP and NEL, Unicode spaces), as
// Django's parse_cookie strips it: "<0xA0>olp_auth" is olp_auth there.
func IsOwned(name string) bool {
	name = trimReaderSpace(name)
	if hasOwnedPrefix(name) {
		return true
	}
	if d, ok := frameworkCookieName(name); ok {
		return hasOwnedPrefix(d)
	}
	return false
}

// hasOwnedPrefix is IsOwned on the name as it is.
func hasOwnedPrefix(name string) bool {
	for _, p := range []string{"__Host-", "__Secure-"} {
		if len(name) >= len(p) && strings.EqualFold(name[:len(p)], p) {
			name = name[len(p):]
			break
		}
	}
	return len(name) >= len(OwnedPrefix) && strings.EqualFold(name[:len(OwnedPrefix)], OwnedPrefix)
}

// frameworkCookieName returns a cookie name as PHP reads it into $_COOKIE
// (and, for the escapes, as Rack does): "%XX" escapes decoded, '+' a
// space, then ' ', '.' and '[' replaced by '_'. ok is false when name
// holds none of these, so the common case allocates nothing.
func frameworkCookieName(name string) (string, bool) {
	if !strings.ContainsAny(name, "%+. [") {
		return "", false
	}
	b := make([]byte, 0, len(name))
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '%' && i+2 < len(name) {
			if hi, ok := unhexCookie(name[i+1]); ok {
				if lo, ok := unhexCookie(name[i+2]); ok {
					c = hi<<4 | lo
					i += 2
				}
			}
		} else if c == '+' {
			c = ' '
		}
		if c == ' ' || c == '.' || c == '[' {
			c = '_'
		}
		b = append(b, c)
	}
	return string(b), true
}

// unhexCookie decodes one hex digit.
func unhexCookie(c byte) (byte, bool) {
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

// ApplyRequest rewrites the outbound request header h in place according
// to forward and to r, the request's one credential (Resolve):
//
//   - cookies whose name does not start with olp_ pass untouched (byte for
//     byte, malformed pairs included), unless another common parser would
//     read an olp_* cookie out of the pair (hidesOwnedCookie: "a=1
//     olp_auth=x" to Python's SimpleCookie, "a=1, olp_auth=x" to Rack 2 and
//     RFC 2965 parsers): such a pair is removed;
//   - the upstream's credential is r and nothing else: "Authorization:
//     Bearer <r.Bearer>" when r.Bearer is set (the client's own Bearer
//     header spelled canonically, or the cookie the route lists
//     AsAuthorization), the client's Bearer header removed when it lost to
//     another candidate, and exactly one "olp_auth=<r.Cookie>" on a route
//     that forwards olp_auth as a cookie; every other olp_auth pair and
//     every AsAuthorization cookie is removed;
//   - another olp_* cookie listed in forward passes as it is, unless its
//     value is longer than MaxTokenBytes;
//   - every other olp_* cookie is removed.
//
// Several Cookie lines (HTTP/2 clients split them) are merged into one,
// as RFC 6265 §5.4 requires for HTTP/1.1; an empty result removes the
// header.
func ApplyRequest(h http.Header, forward []Forward, r Resolved) {
	if r.dropBearer {
		delete(h, "Authorization")
	}
	if r.Bearer != "" {
		h["Authorization"] = []string{"Bearer " + r.Bearer}
	}
	lines := h["Cookie"]
	if len(lines) == 0 {
		return
	}
	changed := len(lines) > 1
	authSent := false
	kept := make([]string, 0, 8)
	for _, line := range lines {
		for part := range strings.SplitSeq(line, ";") {
			pair := strings.TrimSpace(part)
			if pair == "" {
				changed = true
				continue
			}
			name, value, _ := strings.Cut(pair, "=")
			name = strings.TrimSpace(name)
			if !IsOwned(name) {
				if hidesOwnedCookie(pair) {
					changed = true
					continue
				}
				kept = append(kept, pair)
				continue
			}
			fw, listed := lookup(forward, name)
			switch {
			case !listed, fw.AsAuthorization:
				changed = true
			case name == AuthCookie:
				changed = true
				if r.Cookie != "" && !authSent {
					kept = append(kept, AuthCookie+"="+r.Cookie)
					authSent = true
				}
			case len(unquote(strings.TrimSpace(value))) > MaxTokenBytes:
				changed = true
			default:
				kept = append(kept, pair)
			}
		}
	}
	if !changed {
		return
	}
	if len(kept) == 0 {
		delete(h, "Cookie")
		return
	}
	h["Cookie"] = []string{strings.Join(kept, "; ")}
}

// hidesOwnedCookie reports whether s (a request cookie pair or a whole
// Set-Cookie line) holds, after its first name, a "name=" that IsOwned,
// separated by whitespace, ',' or ';': Python's SimpleCookie (and so
// Django before 1.11 and Tornado) ends a pair at whitespace, Rack 2, Tomcat's
// legacy processor and RFC 2965 parsers at ',', and a comma-joined
// Set-Cookie ("x=1, olp_auth=evil") is two cookies to any client that
// splits folded lines. Whitespace is any reader's (isReaderSpace: a
// latin-1 NBSP or NEL, which Python and JavaScript trim; fresh attack
// pass 7 K02: "x=1<0xA0>olp_auth=evil" was passed, Chromium stored it and
// sent it back byte for byte). Such text is the portal's cookie to some
// parser, so it is never passed.
func hidesOwnedCookie(s string) bool {
	if strings.IndexFunc(s, cookieSeparator) < 0 {
		return false
	}
	first := true
	for piece := range strings.FieldsFuncSeq(s, cookieSeparator) {
		if first {
			first = false
			continue
		}
		if n, _, ok := strings.Cut(piece, "="); ok && IsOwned(strings.Trim(n, `"`)) {
			return true
		}
	}
	return false
}

// cookieSeparator is what ends a cookie pair to some parser: ',', ';'
// and any reader's whitespace (isReaderSpace).
func cookieSeparator(c rune) bool { return c == ',' || c == ';' || isReaderSpace(c) }

func lookup(forward []Forward, name string) (Forward, bool) {
	for _, f := range forward {
		if f.Cookie == name {
			return f, true
		}
	}
	return Forward{}, false
}

func unquote(v string) string {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1]
	}
	return v
}

// validBearer accepts the characters of RFC 6750 b64token plus the other
// visible ASCII a JWT or opaque token may carry, refusing separators that
// would corrupt the header (space, comma, semicolon, quote, backslash).
func validBearer(v string) bool {
	if v == "" || len(v) > MaxTokenBytes {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c <= ' ' || c >= 0x7f || c == ',' || c == ';' || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// ForwardsSession reports whether a route with policy forward hands its
// upstream the portal's session: an olp_* cookie as the Bearer token, or
// the olp_auth cookie itself. A route that does not is a third party on the
// portal's origin (docs/edge.md, "Untrusted routes").
func ForwardsSession(forward []Forward) bool {
	for _, f := range forward {
		if f.AsAuthorization || f.Cookie == AuthCookie {
			return true
		}
	}
	return false
}
