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
}

// ApplySetCookie rewrites the Set-Cookie headers of an upstream response
// in place (RFC 6265 §4.1):
//
//   - several Set-Cookie headers stay several headers, in order; nothing
//     is merged, dropped or re-encoded;
//   - the Domain attribute is rewritten when p.Domain is set;
//   - olp_* cookies always leave with Secure, HttpOnly and SameSite
//     (p.SameSite, default Lax), replacing whatever the upstream said;
//   - a line that changes in no way is kept byte for byte, malformed
//     lines included.
func ApplySetCookie(h http.Header, p ResponsePolicy) {
	lines := h["Set-Cookie"]
	for i, line := range lines {
		lines[i] = rewriteSetCookie(line, p)
	}
}

func rewriteSetCookie(line string, p ResponsePolicy) string {
	first, attrs, _ := strings.Cut(line, ";")
	name, _, _ := strings.Cut(first, "=")
	owned := IsOwned(strings.TrimSpace(name))
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
