package gateway

import (
	"fmt"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/olp-edu/borda/ratelimit"
)

// Client IP and identity as rate-limit subjects (docs/edge.md, "Client
// IP"; docs/rate-limiting.md), with the real ratelimit.Limiter on its
// in-memory store, through the full public handler.

// ipLimitHarness is route api to up behind trusted proxies 10.0.0.0/8,
// IPv6 clients grouped by /64, with the real Limiter deciding rule burst
// (limit requests per minute per client IP).
func ipLimitHarness(t *testing.T, up string, limit int64) *harness {
	return newHarness(t, Options{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		IPv6PrefixLen:  64,
		Routes:         []Route{testRoute(t, "api", up)},
	}, withLimiter(realLimiter(t, ratelimit.Rule{Name: "burst", Scope: ratelimit.ScopeIP, Limit: limit, Window: time.Minute, Routes: []string{"api"}})))
}

func TestSpoofedXFFDoesNotEvadeLimit(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := ipLimitHarness(t, up.URL, 100)
	for i := 1; i <= 200; i++ {
		req := h.newRequest(t, http.MethodGet, "", "/")
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("10.0.0.%d", i%250))
		req.Header.Set("X-Real-IP", fmt.Sprintf("10.1.0.%d", i%250))
		rr := h.serve(req, "203.0.113.9:40000")
		want := http.StatusOK
		if i > 100 {
			want = http.StatusTooManyRequests
		}
		if rr.Code != want {
			t.Fatalf("request %d: status %d, want %d", i, rr.Code, want)
		}
	}
	if n := up.calls(); n != 100 {
		t.Errorf("upstream calls = %d, want 100", n)
	}
	// Behind a trusted proxy the rightmost untrusted entry is the client,
	// whatever the client prepends.
	req := h.newRequest(t, http.MethodGet, "", "/")
	req.Header.Set("X-Forwarded-For", "1.2.3.4, 203.0.113.9")
	if rr := h.serve(req, "10.0.0.1:80"); rr.Code != http.StatusTooManyRequests {
		t.Errorf("via trusted proxy: status %d, want 429 (same client)", rr.Code)
	}
}

func TestIPv6GroupedBy64AndMappedIPv4(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := ipLimitHarness(t, up.URL, 3)
	for i, peer := range []string{"[2001:db8:1:2::1]:1", "[2001:db8:1:2::2]:1", "[2001:db8:1:2:ffff::3]:1", "[2001:db8:1:2::4]:1"} {
		rr := h.serve(h.newRequest(t, http.MethodGet, "", "/"), peer)
		want := http.StatusOK
		if i == 3 {
			want = http.StatusTooManyRequests
		}
		if rr.Code != want {
			t.Errorf("%s: status %d, want %d", peer, rr.Code, want)
		}
	}
	if rr := h.serve(h.newRequest(t, http.MethodGet, "", "/"), "[2001:db8:1:3::1]:1"); rr.Code != http.StatusOK {
		t.Errorf("another /64: status %d, want 200", rr.Code)
	}
	for i, peer := range []string{"203.0.113.9:1", "[::ffff:203.0.113.9]:1", "203.0.113.9:2", "[::ffff:203.0.113.9]:2"} {
		rr := h.serve(h.newRequest(t, http.MethodGet, "", "/"), peer)
		want := http.StatusOK
		if i == 3 {
			want = http.StatusTooManyRequests
		}
		if rr.Code != want {
			t.Errorf("%s: status %d, want %d (IPv4-mapped counts as IPv4)", peer, rr.Code, want)
		}
	}
}

// TestSubjectIPGroupsIPv6: IPv6 clients are grouped by IPv6PrefixLen
// (0: not grouped), IPv4-mapped addresses are IPv4.
func TestSubjectIPGroupsIPv6(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	for _, tc := range []struct {
		bits int
		want map[string]string
	}{
		{64, map[string]string{
			"[2001:db8:1:2:3:4:5:6]:9": "2001:db8:1:2::/64",
			"[::ffff:203.0.113.9]:9":   "203.0.113.9",
			"198.51.100.7:9":           "198.51.100.7",
		}},
		{0, map[string]string{"[2001:db8:1:2:3:4:5:6]:9": "2001:db8:1:2:3:4:5:6"}},
	} {
		checkSubjectIPs(t, newHarness(t, Options{IPv6PrefixLen: tc.bits, Routes: []Route{testRoute(t, "api", up.URL)}}), tc.want)
	}
}

func checkSubjectIPs(t *testing.T, h *harness, want map[string]string) {
	t.Helper()
	for peer, want := range want {
		h.serve(h.newRequest(t, http.MethodGet, "", "/"), peer)
		h.limiter.mu.Lock()
		got := h.limiter.subjects[len(h.limiter.subjects)-1]
		h.limiter.mu.Unlock()
		if got.IP != want || got.Route != "api" {
			t.Errorf("%s: subject = %+v, want IP %s route api", peer, got, want)
		}
	}
}

const testSecret = "test-secret-for-hs256-0123456789"

func signHS256(t testing.TB, secret string, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestJWTLimitsPerUserAndForgedTokenFallsBackToIP(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, routes(testRoute(t, "api", up.URL)), withVerifier(t), withLimiter(realLimiter(t,
		ratelimit.Rule{Name: "api", Scope: ratelimit.ScopeUser, Limit: 2, Window: time.Minute, Routes: []string{"api"}},
		ratelimit.Rule{Name: "burst", Scope: ratelimit.ScopeIP, Limit: 4, Window: time.Minute, Routes: []string{"api"}})))
	exp := time.Now().Add(time.Hour).Unix()
	good := signHS256(t, testSecret, jwt.MapClaims{"sub": "u-1", "exp": exp, "app_metadata": map[string]any{"escola_id": 42}})
	forged := signHS256(t, "not-the-secret", jwt.MapClaims{"sub": "u-1", "exp": exp})

	// A verified user is limited per user, from any address.
	for i, want := range []int{200, 200, 429} {
		req := h.newRequest(t, http.MethodGet, "", "/")
		req.AddCookie(&http.Cookie{Name: "olp_auth", Value: good})
		if rr := h.serve(req, fmt.Sprintf("198.51.100.%d:1", i+1)); rr.Code != want {
			t.Errorf("verified request %d: status %d, want %d", i+1, rr.Code, want)
		}
	}
	if got := up.last(t).Header.Get("Authorization"); got != "Bearer "+good {
		t.Errorf("upstream Authorization = %q, want the olp_auth value", got)
	}
	// A forged token is anonymous: no user limit, the IP limit applies.
	for i := 1; i <= 5; i++ {
		req := h.newRequest(t, http.MethodGet, "", "/")
		req.Header.Set("Authorization", "Bearer "+forged)
		want := http.StatusOK
		if i == 5 {
			want = http.StatusTooManyRequests
		}
		if rr := h.serve(req, "203.0.113.50:1"); rr.Code != want {
			t.Errorf("forged request %d: status %d, want %d", i, rr.Code, want)
		}
	}
	evs := h.rec.all()
	if len(evs) == 0 || evs[0].Escola != "42" {
		t.Errorf("telemetry escola = %+v, want 42 from the verified token", evs)
	}
}
