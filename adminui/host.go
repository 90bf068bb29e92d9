package adminui

import (
	"net/http"

	"github.com/olp-edu/borda/internal/rebinding"
)

// hostGuard refuses a request whose Host is a DNS name other than
// localhost (421 Misdirected Request). The admin listener is reached on
// loopback, a pod IP or through `kubectl port-forward` (docs/operations.md),
// so a browser names it by an IP literal or localhost; any other name is a
// DNS-rebinding page (evil.example resolving to 127.0.0.1) reading the
// dead letters from the operator's own browser, where the same-origin
// check cannot help: the rebinding page's Origin is its own Host.
func (p *Page) hostGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !rebinding.AddressedLocally(r.Host) {
			p.log.Warn("operator page refused: addressed by a DNS name (DNS rebinding?)", "host", r.Host, "peer", r.RemoteAddr)
			p.problem(w, http.StatusMisdirectedRequest, "Refused: open this page by IP address or localhost (http://127.0.0.1:PORT/ui), not by a host name.")
			return
		}
		next.ServeHTTP(w, r)
	})
}
