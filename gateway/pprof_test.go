package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func pprofStatus(t *testing.T, cfg Pprof, remote, auth string) int {
	t.Helper()
	return pprofStatusAt(t, cfg, remote, "127.0.0.1:9091", auth)
}

func pprofStatusAt(t *testing.T, cfg Pprof, remote, host, auth string) int {
	t.Helper()
	mux := http.NewServeMux()
	newPprofGate(cfg).register(mux)
	req := httptest.NewRequest(http.MethodGet, "/debug/pprof/cmdline", nil)
	req.RemoteAddr, req.Host = remote, host
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	return rec.Code
}

// TestPprofFromTheClusterNetworkIsRefusedByDefault: with the admin
// listener on 0.0.0.0 (production.yaml, the Kubernetes overlay), a peer
// off the host must not reach /debug/pprof/ (cmdline, heap, CPU profiles);
// forged forwarding headers do not help, loopback peers still do.
func TestPprofFromTheClusterNetworkIsRefusedByDefault(t *testing.T) {
	cfg := Pprof{} // the zero value: loopback, as admin_pprof's default
	for _, remote := range []string{"10.0.3.7:40000", "[fd00::7]:40000", "[::ffff:10.0.3.7]:40000", "192.0.2.1:1"} {
		if got := pprofStatus(t, cfg, remote, ""); got != http.StatusNotFound {
			t.Errorf("peer %s: %d, want 404", remote, got)
		}
	}
	for _, remote := range []string{"127.0.0.1:40000", "127.9.9.9:1", "[::1]:40000", "[::ffff:127.0.0.1]:1"} {
		if got := pprofStatus(t, cfg, remote, ""); got != http.StatusOK {
			t.Errorf("loopback peer %s: %d, want 200", remote, got)
		}
	}
}

// TestPprofOnLoopbackRefusesADNSRebindingHostName: a page on evil.example
// rebound to 127.0.0.1 reaches the admin listener from the operator's own
// browser, a loopback peer; in loopback mode pprof answers only a Host
// that names the listener by address or localhost (as the operator page).
func TestPprofOnLoopbackRefusesADNSRebindingHostName(t *testing.T) {
	for host, want := range map[string]int{
		"127.0.0.1:9091": http.StatusOK, "[::1]:9091": http.StatusOK, "localhost:9091": http.StatusOK,
		"evil.example:9091": http.StatusNotFound, "127.0.0.1.nip.io:9091": http.StatusNotFound,
		"localhost.evil.example": http.StatusNotFound, "": http.StatusNotFound,
	} {
		if got := pprofStatusAt(t, Pprof{}, "127.0.0.1:40000", host, ""); got != want {
			t.Errorf("loopback peer, Host %q: %d, want %d", host, got, want)
		}
	}
	// token mode needs a header a rebinding page cannot send: any Host.
	tok := Pprof{Mode: PprofToken, Token: "0123456789abcdef0123456789abcdef"}
	if got := pprofStatusAt(t, tok, "10.0.3.7:1", "borda.internal:9091", "Bearer 0123456789abcdef0123456789abcdef"); got != http.StatusOK {
		t.Errorf("token mode with a DNS Host: %d, want 200", got)
	}
}

// TestPprofTokenModeNeedsTheExactToken: admin_pprof: token serves any peer
// with the right bearer token and no other (wrong, prefix, longer, empty,
// other scheme).
func TestPprofTokenModeNeedsTheExactToken(t *testing.T) {
	cfg := Pprof{Mode: PprofToken, Token: "0123456789abcdef0123456789abcdef"}
	if got := pprofStatus(t, cfg, "10.0.3.7:1", "Bearer 0123456789abcdef0123456789abcdef"); got != http.StatusOK {
		t.Errorf("right token: %d", got)
	}
	for _, auth := range []string{"", "Bearer", "Bearer 0123456789abcdef", "Bearer 0123456789abcdef0123456789abcdef0",
		"Basic 0123456789abcdef0123456789abcdef", "Bearer wrong"} {
		if got := pprofStatus(t, cfg, "127.0.0.1:1", auth); got != http.StatusUnauthorized {
			t.Errorf("Authorization %q: %d, want 401", auth, got)
		}
	}
	cfg.Token = ""
	if got := pprofStatus(t, cfg, "127.0.0.1:1", "Bearer "); got != http.StatusNotFound {
		t.Errorf("token mode without a token: %d, want 404 (off)", got)
	}
}

// TestPprofOffIsNotRouted: admin_pprof: off answers 404 even on loopback.
func TestPprofOffIsNotRouted(t *testing.T) {
	cfg := Pprof{Mode: PprofOff}
	if got := pprofStatus(t, cfg, "127.0.0.1:1", ""); got != http.StatusNotFound {
		t.Errorf("off: %d, want 404", got)
	}
}
