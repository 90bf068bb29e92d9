package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/olp-edu/borda/cookies"
	"github.com/olp-edu/borda/ratelimit"
)

// A Bearer token over cookies.MaxTokenBytes is answered 431 with the PT-BR
// problem and never reaches the upstream, with or without auth
// configured: the limiter could not have read it.
func TestBearerOverTheTokenBoundIsRefusedBeforeTheUpstream(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string][]harnessOpt{"with auth": {withVerifier(t)}, "without auth": nil} {
		up := newRecordingUpstream(t, nil)
		h := newHarness(t, routes(testRoute(t, "api", up.URL)), opts...)
		req := h.newRequest(t, http.MethodGet, "", "/")
		req.Header.Set("Authorization", "Bearer "+strings.Repeat("a", cookies.MaxTokenBytes+1))
		rr := h.serve(req, "198.51.100.1:1")
		if rr.Code != http.StatusRequestHeaderFieldsTooLarge || rr.Header().Get("Content-Language") != "pt-BR" {
			t.Errorf("%s: %d %q, want 431 in PT-BR", name, rr.Code, rr.Body.String())
		}
		if up.calls() != 0 {
			t.Errorf("%s: upstream called %d times", name, up.calls())
		}
		req = h.newRequest(t, http.MethodGet, "", "/")
		req.Header.Set("Authorization", "Bearer "+strings.Repeat("a", cookies.MaxTokenBytes))
		if rr := h.serve(req, "198.51.100.1:1"); rr.Code != http.StatusOK || up.calls() != 1 {
			t.Errorf("%s: token of exactly the bound: %d, upstream calls %d", name, rr.Code, up.calls())
		}
	}
}

// A client sent `Authorization: Basic x`, `Connection: Authorization` and
// its own olp_auth cookie: identity was read from the Authorization header
// (not Bearer → anonymous, so the user limit was skipped) while
// ReverseProxy dropped that header as hop-by-hop and the upstream got the
// olp_auth cookie as its Bearer token. The user rule must key on the token
// the upstream actually sees.
func TestConnectionNominatedAuthorizationCannotEvadeUserLimit(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, routes(testRoute(t, "api", up.URL)), withVerifier(t),
		withLimiter(realLimiter(t, ratelimit.Rule{Name: "api", Scope: ratelimit.ScopeUser, Limit: 2, Window: time.Minute, Routes: []string{"api"}})))
	good := signHS256(t, testSecret, jwt.MapClaims{"sub": "u-evader", "exp": time.Now().Add(time.Hour).Unix()})
	for i, want := range []int{200, 200, 429} {
		req := h.newRequest(t, http.MethodGet, "", "/")
		req.Header.Set("Authorization", "Basic eDp5")
		req.Header.Set("Connection", "Authorization")
		req.AddCookie(&http.Cookie{Name: "olp_auth", Value: good})
		rr := h.serve(req, fmt.Sprintf("198.51.100.%d:1", i+1))
		if rr.Code != want {
			t.Fatalf("request %d: status %d, want %d", i+1, rr.Code, want)
		}
		if i == 0 {
			if got := up.last(t).Header.Get("Authorization"); got != "Bearer "+good {
				t.Fatalf("upstream Authorization = %q, want the olp_auth token", got)
			}
		}
	}
}

// `Cookie: olp_auth=; olp_auth=<valid JWT>`: identity read the first
// olp_auth (empty: anonymous, user limit skipped) while the cookie filter
// skipped the unusable first value and sent the second to the upstream as
// its Bearer token. Both must pick the same cookie.
func TestDuplicateAuthCookieCannotEvadeUserLimit(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, routes(testRoute(t, "api", up.URL)), withVerifier(t),
		withLimiter(realLimiter(t, ratelimit.Rule{Name: "api", Scope: ratelimit.ScopeUser, Limit: 2, Window: time.Minute, Routes: []string{"api"}})))
	good := signHS256(t, testSecret, jwt.MapClaims{"sub": "u-dup", "exp": time.Now().Add(time.Hour).Unix()})
	for _, first := range []string{"", "a,b", `"x y"`} {
		up := up
		for i := range 3 {
			req := h.newRequest(t, http.MethodGet, "", "/")
			req.Header.Set("Cookie", "olp_auth="+first+"; olp_auth="+good)
			rr := h.serve(req, fmt.Sprintf("198.51.100.%d:1", i+1))
			if i == 0 && rr.Code == 200 {
				if got := up.last(t).Header.Get("Authorization"); got != "Bearer "+good {
					t.Fatalf("first=%q: upstream Authorization = %q, want the valid olp_auth", first, got)
				}
			}
			if i == 2 && rr.Code != http.StatusTooManyRequests {
				t.Fatalf("first=%q: request 3 of user u-dup: status %d, want 429", first, rr.Code)
			}
		}
	}
}

// Two Authorization lines: identity verified the first, the upstream got
// both and could pick the other. Refused with 400 before identity.
func TestDuplicateAuthorizationIsRefused(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, routes(testRoute(t, "api", up.URL)))
	res, body := rawGet(t, h, "/x", "Authorization: Bearer a.b.c", "Authorization: Bearer d.e.f")
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "Authorization") {
		t.Fatalf("got %d %q, want 400", res.StatusCode, body)
	}
	if up.calls() != 0 || h.limiter.calls() != 0 {
		t.Fatalf("upstream %d, limiter %d calls", up.calls(), h.limiter.calls())
	}
	if res, _ := rawGet(t, h, "/x", "Authorization: Bearer a.b.c"); res.StatusCode != 200 {
		t.Fatalf("one Authorization: %d", res.StatusCode)
	}
	if got := up.last(t).Header["Authorization"]; len(got) != 1 {
		t.Fatalf("upstream Authorization %q", got)
	}
}

// Issue 22 item 1: `olp_auth=<non-canonical decoy>; olp_auth=<valid JWT>`
// was anonymous to the limiter (it verified the first) while the upstream
// got the second as its Bearer token; on a route forwarding olp_auth as a
// cookie, `olp_auth=decoy; olp_auth=<jwt>` reached upstreams that read the
// last value. Now the one credential is the verified one, in both forms,
// and two that both verify are refused 400.
func TestDecoyAuthCookieCannotSplitTheLimiterFromTheUpstream(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	legacy := under(testRoute(t, "legacy", up.URL), "/legacy")
	legacy.Cookies.Forward = []cookies.Forward{{Cookie: "olp_auth"}}
	h := newHarness(t, routes(under(testRoute(t, "api", up.URL), "/api"), legacy), withVerifier(t),
		withLimiter(realLimiter(t, ratelimit.Rule{Name: "peruser", Scope: ratelimit.ScopeUser, Limit: 2, Window: time.Minute, Routes: []string{"api", "legacy"}})))
	exp := time.Now().Add(time.Hour).Unix()
	for _, tc := range []struct{ path, decoy, user string }{
		{"/api/x", "eyJhbGciOiJIUzI1NiJ9=.e30.x", "u-bearer"},
		{"/legacy/x", "decoy", "u-cookie"},
	} {
		good := signHS256(t, testSecret, jwt.MapClaims{"sub": tc.user, "exp": exp})
		for i, want := range []int{200, 200, 429} {
			res, _ := rawGet(t, h, tc.path, "Cookie: olp_auth="+tc.decoy+"; olp_auth="+good)
			if res.StatusCode != want {
				t.Fatalf("%s request %d: %d, want %d", tc.path, i+1, res.StatusCode, want)
			}
		}
		seen := up.last(t).Header
		if tc.path == "/api/x" && (seen.Get("Authorization") != "Bearer "+good || seen.Get("Cookie") != "") {
			t.Errorf("%s: upstream got Authorization %q, Cookie %q", tc.path, seen.Get("Authorization"), seen.Get("Cookie"))
		}
		if tc.path == "/legacy/x" && seen.Get("Cookie") != "olp_auth="+good {
			t.Errorf("%s: upstream got Cookie %q, want only the verified olp_auth", tc.path, seen.Get("Cookie"))
		}
	}
	a := signHS256(t, testSecret, jwt.MapClaims{"sub": "u-a", "exp": exp})
	b := signHS256(t, testSecret, jwt.MapClaims{"sub": "u-b", "exp": exp})
	calls := up.calls()
	for _, hd := range [][]string{
		{"Cookie: olp_auth=" + a + "; olp_auth=" + b},
		{"Cookie: olp_auth=" + a, "Cookie: olp_auth=" + b},
	} {
		if res, body := rawGet(t, h, "/legacy/x", hd...); res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "Credenciais") {
			t.Errorf("%q: %d %q, want the 400 problem", hd, res.StatusCode, body)
		}
	}
	if res, body := rawGet(t, h, "/legacy/x", "Authorization: Bearer "+a, "Cookie: olp_auth="+b); res.StatusCode != http.StatusBadRequest {
		t.Errorf("header and cookie of two users: %d %q, want 400", res.StatusCode, body)
	}
	if up.calls() != calls {
		t.Errorf("refused requests reached the upstream")
	}
}
