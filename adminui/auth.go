package adminui

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"
)

// tokenGate holds the SHA-256 of ADMIN_TOKEN: comparing digests in
// constant time hides both the token's bytes and its length.
type tokenGate struct {
	set    bool
	digest [sha256.Size]byte
}

func newTokenGate(token string) tokenGate {
	if token == "" {
		return tokenGate{}
	}
	return tokenGate{set: true, digest: sha256.Sum256([]byte(token))}
}

// valid reports whether given is the token (false when none is set).
func (g tokenGate) valid(given string) bool {
	if !g.set || given == "" {
		return false
	}
	d := sha256.Sum256([]byte(given))
	return subtle.ConstantTimeCompare(d[:], g.digest[:]) == 1
}

// sameOrigin is the CSRF check of a mutating request
// (docs/operations.md, "Replaying"): a browser's Sec-Fetch-Site, when
// sent, must be same-origin, and its Origin, when sent, must be this
// page's own host. A request with neither header is not from a browser
// (curl, a script), which no other site can make send it; it still needs
// the token like any other.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	return sameHost(origin, r.Host)
}

func sameHost(raw, host string) bool {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return strings.EqualFold(u.Host, host)
}
