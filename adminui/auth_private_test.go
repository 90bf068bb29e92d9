package adminui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/olp-edu/borda/internal/rebinding"
)

// TestAdminPlaneNeedsTheTokenUnlessLoopback: the operator page answered
// reads with no token to any client that reached the admin port with an
// IP-literal Host (production binds 0.0.0.0:9091). Every Host form, every
// peer (loopback or not, as RemoteAddr: tests here all come from
// loopback), every admin path, every credential form: only probes and
// /metrics are open; the rest needs a loopback peer or the token.
func TestAdminPlaneNeedsTheTokenUnlessLoopback(t *testing.T) {
	t.Parallel()
	const token = "s3cret-admin"
	hosts := []string{"10.0.0.5:9091", "10.0.0.5", "[2001:db8::5]:9091", "[::1]:9091", "127.0.0.1:9091", "localhost:9091", "localhost", "borda.internal:9091", "",
		// DNS rebinding: a name that resolves to the listener (B10).
		"evil.example:9091", "127.0.0.1.nip.io:9091", "localhost.evil.example", "LOCALHOST.:9091"}
	peers := map[string]bool{
		"127.0.0.1:5000": true, "127.0.0.2:5000": true, "127.255.255.254:1": true, "[::1]:5000": true, "[::ffff:127.0.0.1]:5000": true,
		"10.0.0.9:5000": false, "203.0.113.5:443": false, "[2001:db8::9]:5000": false, "[::ffff:10.0.0.9]:5000": false,
		"0.0.0.0:1": false, "[::]:1": false, "garbage": false, "": false, "127.0.0.1": false,
	}
	open := []string{"/healthz", "/readyz", "/metrics"}
	guarded := []string{"/", "/ui", "/ui/", "/ui/dead-letters", "/ui/dead-letters/replay", "/ui/relax", "/ui/style.css", "/debug/pprof/", "/debug/pprof/heap", "/metrics/", "/healthz/x", "/Metrics", "//metrics"}
	creds := map[string]bool{
		"":                             false,
		"Bearer " + token:              true,
		"bearer " + token:              true,
		"BEARER  " + token:             true,
		"Bearer wrong":                 false,
		"Bearer " + token + "x":        false,
		"Basic " + basic("ops", token): true,
		"Basic " + basic("", token):    true,
		"Basic " + basic(token, ""):    false,
		"Basic " + basic("ops", "no"):  false,
		token:                          false,
	}
	for _, withToken := range []bool{true, false} {
		tok := ""
		if withToken {
			tok = token
		}
		h := Private(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(299) }), tok, nil, nil)
		for _, host := range hosts {
			for peer, loopback := range peers {
				for _, path := range append(append([]string{}, open...), guarded...) {
					for cred, good := range creds {
						r := httptest.NewRequest(http.MethodGet, "http://x"+path, nil)
						r.Host, r.RemoteAddr = host, peer
						if cred != "" {
							r.Header.Set("Authorization", cred)
						}
						r.Header.Set("X-Forwarded-For", "127.0.0.1") // never believed
						rr := httptest.NewRecorder()
						h.ServeHTTP(rr, r)
						isOpen := path == "/healthz" || path == "/readyz" || path == "/metrics"
						addressed := rebinding.AddressedLocally(host) || (withToken && good)
						want := addressed && (isOpen || loopback || (withToken && good))
						if got := rr.Code == 299; got != want {
							t.Errorf("token set %v, Host %q, peer %q, %s, Authorization %q: served %v (status %d), want %v",
								withToken, host, peer, path, cred, got, rr.Code, want)
						}
						if !addressed {
							if rr.Code != http.StatusMisdirectedRequest {
								t.Errorf("Host %q, peer %q, %s: status %d, want 421 (DNS rebinding)", host, peer, path, rr.Code)
							}
						} else if !want {
							if withToken && rr.Code != 401 || !withToken && rr.Code != 403 {
								t.Errorf("refusal status %d", rr.Code)
							}
							if withToken && !strings.HasPrefix(rr.Header().Get("WWW-Authenticate"), "Basic ") {
								t.Errorf("401 without a Basic challenge")
							}
						}
					}
				}
			}
		}
	}
}

func basic(user, pass string) string {
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.SetBasicAuth(user, pass)
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Basic ")
}
