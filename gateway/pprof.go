package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"strings"

	"github.com/olp-edu/borda/internal/rebinding"
)

// pprofGate serves net/http/pprof on the admin mux as Options.Pprof says
// (docs/configuration.md, admin_pprof):
//
//   - loopback (default): only to peers whose TCP address is
//     loopback (127.0.0.0/8, ::1; an IPv4-mapped ::ffff:127.x counts)
//     and that name the listener by address or localhost (Host; a DNS
//     name is a rebinding page in a local browser, internal/rebinding);
//     others get 404, as if nothing were there. The peer is the socket's,
//     never a header, so X-Forwarded-For cannot unlock it.
//   - token: to any peer with "Authorization: Bearer <ADMIN_PPROF_TOKEN>",
//     compared in constant time over SHA-256 digests (length leaks
//     nothing); others get 401 with WWW-Authenticate: Bearer.
//   - off: not routed (404).
//
// The token is never logged: it is held as its digest only.
type pprofGate struct {
	mode   PprofMode
	digest [sha256.Size]byte
}

func newPprofGate(p Pprof) pprofGate {
	g := pprofGate{mode: p.Mode}
	if g.mode == PprofToken {
		if p.Token == "" {
			g.mode = PprofOff // configs refuses it; never serve with an empty token
		}
		g.digest = sha256.Sum256([]byte(p.Token))
	}
	return g
}

// register adds the pprof handlers to mux behind the gate.
func (g pprofGate) register(mux *http.ServeMux) {
	if g.mode == PprofOff {
		return
	}
	for path, h := range map[string]http.HandlerFunc{
		"/debug/pprof/":        pprof.Index,
		"/debug/pprof/cmdline": pprof.Cmdline,
		"/debug/pprof/profile": pprof.Profile,
		"/debug/pprof/symbol":  pprof.Symbol,
		"/debug/pprof/trace":   pprof.Trace,
	} {
		mux.Handle(path, g.wrap(h))
	}
}

func (g pprofGate) wrap(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.allowed(w, r) {
			return
		}
		h(w, r)
	})
}

// allowed reports whether r may reach pprof, answering it when not.
func (g pprofGate) allowed(w http.ResponseWriter, r *http.Request) bool {
	switch g.mode {
	case PprofLoopback:
		if loopbackPeer(r.RemoteAddr) && rebinding.AddressedLocally(r.Host) {
			return true
		}
		http.NotFound(w, r)
		return false
	case PprofToken:
		auth := r.Header.Get("Authorization")
		scheme, tok, ok := strings.Cut(auth, " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			d := sha256.Sum256([]byte(strings.TrimSpace(tok)))
			if subtle.ConstantTimeCompare(d[:], g.digest[:]) == 1 {
				return true
			}
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="borda-pprof"`)
		writeJSON(w, http.StatusUnauthorized, map[string]any{"status": "UNAUTHORIZED", "message": "token de acesso ao pprof ausente ou inválido"})
		return false
	}
	http.NotFound(w, r)
	return false
}

// loopbackPeer reports whether a RemoteAddr ("ip:port") is a loopback
// address.
func loopbackPeer(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
