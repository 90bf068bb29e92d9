package cookies

import (
	"net/http"
	"strings"
)

// ResponsePolicy is what happens to a route's upstream Set-Cookie headers.
type ResponsePolicy struct {
	// Domain replaces the Domain attribute of every Set-Cookie that has
	// one (as nginx's proxy_cookie_domain). Empty: left as sent. Host-only
	// cookies (no Domain attribute) stay host-only.
	Domain string
	// SameSite is the SameSite value olp_* cookies leave with: "Lax"
	// (default when empty), "Strict" or "None" (any case).
	SameSite string
	// Forward is the route's request policy (cookies.forward): the only
	// olp_* cookies its upstream may set or clear are the ones listed here
	// (exact names), as a cookie or as the Bearer token.
	Forward []Forward
}

// ApplySetCookie rewrites the Set-Cookie headers of an upstream response
// in place (RFC 6265 §4.1) and returns the names of the lines it removed:
//
//   - a line that hides an olp_* cookie after a ',' or whitespace
//     (hidesOwnedCookie: the comma-joined "x=1, olp_auth=evil") is removed
//     on every route;
//   - a line that would set or clear an olp_* cookie (IsOwned: any case,
//     also behind __Host-/__Secure-) that p.Forward does not list is
//     removed, whatever its attributes (Max-Age=0 and a past Expires
//     clear, so they are refused too): a route may only set the portal
//     cookies it is given. A nameless cookie whose value the browser
//     would send back as olp_...= is removed on every route;
//   - the other Set-Cookie headers stay several headers, in order;
//     nothing is merged or re-encoded;
//   - the Domain attribute is rewritten when p.Domain is set;
//   - olp_* cookies always leave with Secure, HttpOnly and SameSite
//     (p.SameSite, default Lax), replacing whatever the upstream said;
//   - a line that changes in no way is kept byte for byte, malformed
//     lines included.
func ApplySetCookie(h http.Header, p ResponsePolicy) (removed []string) {
	lines := h["Set-Cookie"]
	kept := lines[:0]
	for _, line := range lines {
		name, nameless := setCookieName(line)
		if hidesOwnedCookie(line) {
			// "x=1, olp_auth=evil": a client that splits folded lines,
			// or a parser that later reads the stored value back, sees
			// an olp_* cookie no policy hardened.
			removed = append(removed, name)
			continue
		}
		if IsOwned(name) {
			if _, ok := lookup(p.Forward, name); !ok || nameless {
				removed = append(removed, name)
				continue
			}
		}
		kept = append(kept, rewriteSetCookie(line, name, p))
	}
	switch {
	case len(kept) == 0:
		delete(h, "Set-Cookie")
	case len(removed) > 0:
		clear(lines[len(kept):])
		h["Set-Cookie"] = kept
	}
	return removed
}

// setCookieName returns the name a browser sends the cookie of a
// Set-Cookie line back under (RFC 6265bis §5.7 step 5): the text before
// the first '=' of the name-value pair, trimmed. A pair without '=', or
// with an empty name, makes a nameless cookie that the browser sends as
// its bare value ("Set-Cookie: =olp_auth=x" comes back as
// "Cookie: olp_auth=x"), so the name is then read from the value and
// nameless is true.
func setCookieName(line string) (name string, nameless bool) {
	pair, _, _ := strings.Cut(line, ";")
	pair = strings.TrimSpace(pair)
	name, value, ok := strings.Cut(pair, "=")
	name = strings.TrimSpace(name)
	if ok && name != "" {
		return name, false
	}
	if ok {
		pair = strings.TrimSpace(value)
	}
	name, _, _ = strings.Cut(pair, "=")
	return strings.TrimSpace(name), true
}

func rewriteSetCookie(line, name string, p ResponsePolicy) string {
	first, attrs, _ := strings.Cut(line, ";")
	owned := IsOwned(name)
	if !owned && (p.Domain == "" || !hasDomainAttr(attrs)) {
		return line
	}
	var b strings.Builder
	b.Grow(len(line) + 40)
	b.WriteString(strings.TrimSpace(first))
	for a := range strings.SplitSeq(attrs, ";") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		key, _, _ := strings.Cut(a, "=")
		switch strings.ToLower(strings.TrimSpace(key)) {
		case "domain":
			if p.Domain != "" {
				a = "Domain=" + p.Domain
			}
		case "secure", "httponly", "samesite":
			if owned {
				continue
			}
		}
		b.WriteString("; ")
		b.WriteString(a)
	}
	if owned {
		b.WriteString("; Secure; HttpOnly; SameSite=")
		b.WriteString(sameSite(p.SameSite))
	}
	return b.String()
}

func hasDomainAttr(attrs string) bool {
	for a := range strings.SplitSeq(attrs, ";") {
		key, _, _ := strings.Cut(a, "=")
		if strings.EqualFold(strings.TrimSpace(key), "domain") {
			return true
		}
	}
	return false
}

func sameSite(s string) string {
	switch strings.ToLower(s) {
	case "strict":
		return "Strict"
	case "none":
		return "None"
	default:
		return "Lax"
	}
}
