package adminui

import (
	"crypto/sha256"
	"crypto/subtle"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/olp-edu/borda/internal/rebinding"
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

// openPaths are the admin paths that answer without the token from any
// peer: probes and the Prometheus scrape (docs/operations.md, "Admin
// listener"), which carry no dead letter, route or limit.
var openPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// Private guards the whole admin listener (docs/security.md, "admin"):
// a request whose Host is a DNS name other than localhost (not
// rebinding.AddressedLocally) is 421 on every path unless it carries the
// token (DNS rebinding); then every path but /healthz, /readyz and /metrics answers only to a
// loopback peer (the TCP peer of the connection, 127.0.0.0/8 or ::1,
// never a header: kubectl port-forward and a same-host operator arrive
// so) or to a request carrying token, as "Authorization: Bearer TOKEN" or
// as the password of HTTP Basic (any user name: a browser asks for it
// after the 401). Anything else is 401 with WWW-Authenticate, or 403 when
// no token is set (ADMIN_TOKEN empty: only loopback may read). The token
// is compared as the page's is (SHA-256 digests in constant time).
// isLoopback decides what a loopback peer is (nil: IsLoopbackPeer).
func Private(next http.Handler, token string, isLoopback func(remoteAddr string) bool, log *slog.Logger) http.Handler {
	gate := newTokenGate(token)
	if isLoopback == nil {
		isLoopback = IsLoopbackPeer
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tokenOK := gate.valid(requestToken(r))
		if !tokenOK && !rebinding.AddressedLocally(r.Host) {
			// Every admin path, the open ones too: a DNS-rebinding page
			// (evil.example resolving to 127.0.0.1 or the pod's IP) in
			// an operator's browser would read /metrics and /readyz with
			// the browser's own peer address. A scraper or probe names
			// the listener by IP (Prometheus' pod discovery, kubelet) or
			// localhost; one that uses a DNS name sends the token.
			log.Warn("admin listener refused: addressed by a DNS name without the admin token (DNS rebinding?)", "path", r.URL.Path, "host", r.Host, "peer", r.RemoteAddr)
			h := w.Header()
			h.Set("Cache-Control", "no-store")
			h.Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusMisdirectedRequest)
			_, _ = io.WriteString(w, "Refused: address the admin listener by IP or localhost, or send the admin token.\n")
			return
		}
		if openPaths[r.URL.Path] || isLoopback(r.RemoteAddr) || tokenOK {
			next.ServeHTTP(w, r)
			return
		}
		log.Warn("admin listener refused: not loopback and no valid admin token", "path", r.URL.Path, "peer", r.RemoteAddr)
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Type", "text/plain; charset=utf-8")
		if !gate.set {
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, "Refused: the admin listener answers only loopback peers when ADMIN_TOKEN is not set.\n")
			return
		}
		h.Set("WWW-Authenticate", `Basic realm="borda admin", charset="UTF-8"`)
		h.Add("WWW-Authenticate", `Bearer realm="borda admin"`)
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, "Refused: send the admin token (Authorization: Bearer ADMIN_TOKEN, or as the Basic password).\n")
	})
}

// IsLoopbackPeer reports whether remoteAddr (an http.Request's
// RemoteAddr, "IP:port") is a loopback address: 127.0.0.0/8, ::1, or an
// IPv4-mapped loopback. Anything unparsable is not.
func IsLoopbackPeer(remoteAddr string) bool {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return false
	}
	return ap.Addr().Unmap().IsLoopback()
}

// requestToken is the credential of r: a Bearer token or a Basic
// password (the scheme's name in any case), else "".
func requestToken(r *http.Request) string {
	if _, pass, ok := r.BasicAuth(); ok {
		return pass
	}
	auth := r.Header.Get("Authorization")
	if len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
		return strings.TrimSpace(auth[7:])
	}
	return ""
}
