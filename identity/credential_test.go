package identity

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/olp-edu/borda/cookies"
)

// tokenOfSize signs an HS256 token for user whose length is exactly n
// bytes (padded with a claim), n ≥ 200.
func tokenOfSize(t *testing.T, user string, n int) string {
	t.Helper()
	exp := time.Now().Add(time.Hour).Unix()
	pad := 0
	for range 8 {
		tok := sign(t, jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"sub": user, "exp": exp, "pad": strings.Repeat("p", pad)}, "")
		if len(tok) == n {
			return tok
		}
		pad += (n - len(tok)) * 3 / 4 // base64: 4 characters per 3 bytes
		if (n-len(tok))*3%4 != 0 && len(tok) < n {
			pad++
		}
	}
	for d := -3; d <= 3; d++ {
		tok := sign(t, jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"sub": user, "exp": exp, "pad": strings.Repeat("p", pad+d)}, "")
		if len(tok) == n {
			return tok
		}
	}
	t.Fatalf("no token of %d bytes", n)
	return ""
}

// A valid token over cookies.MaxTokenBytes (12 KiB here, and one byte over) is
// what the limiter cannot read: in the cookie form it must not reach the
// upstream either (as Bearer or as the cookie), and in the header form
// cookies.BearerTooLarge tells the gateway to refuse it. At exactly the bound
// the limiter and the upstream both get it.
func TestTokenOverTheBoundIsNeitherVerifiedNorForwarded(t *testing.T) {
	t.Parallel()
	v := newHS256Verifier(t)
	asCookie := []cookies.Forward{{Cookie: "olp_auth"}}
	for _, n := range []int{12 << 10, cookies.MaxTokenBytes + 1} {
		big := tokenOfSize(t, "u-big", n)
		if _, ok := v.Verify(big); ok {
			t.Errorf("%d bytes: verified", n)
		}
		h := http.Header{"Cookie": {"olp_auth=" + big + "; _ga=1"}}
		if _, ok := v.FromRequest(h, portalForward()); ok {
			t.Errorf("%d bytes: cookie verified", n)
		}
		out := h.Clone()
		applyRequest(out, portalForward())
		if out.Get("Authorization") != "" || out.Get("Cookie") != "_ga=1" {
			t.Errorf("%d bytes, as authorization: upstream got Authorization %d bytes, Cookie %q", n, len(out.Get("Authorization")), out.Get("Cookie"))
		}
		out = h.Clone()
		applyRequest(out, asCookie)
		if out.Get("Cookie") != "_ga=1" {
			t.Errorf("%d bytes, as cookie: upstream got Cookie of %d bytes", n, len(out.Get("Cookie")))
		}
		if !cookies.BearerTooLarge(http.Header{"Authorization": {"Bearer " + big}}) {
			t.Errorf("%d bytes: Bearer header not reported too large", n)
		}
		if !cookies.BearerTooLarge(http.Header{"Authorization": {"bearer\t" + big}}) {
			t.Errorf("%d bytes: tab-separated Bearer header not reported too large", n)
		}
	}
	exact := tokenOfSize(t, "u-exact", cookies.MaxTokenBytes)
	h := http.Header{"Cookie": {"olp_auth=" + exact}}
	if id, ok := v.FromRequest(h, portalForward()); !ok || id.UserID != "u-exact" {
		t.Errorf("token of exactly cookies.MaxTokenBytes: %+v %v", id, ok)
	}
	applyRequest(h, portalForward())
	if h.Get("Authorization") != "Bearer "+exact {
		t.Error("token of exactly cookies.MaxTokenBytes not forwarded as Bearer")
	}
	if cookies.BearerTooLarge(http.Header{"Authorization": {"Bearer " + exact}}) {
		t.Error("token of exactly cookies.MaxTokenBytes reported too large")
	}
	if cookies.BearerTooLarge(http.Header{"Authorization": {"Basic " + strings.Repeat("a", 12<<10)}}) {
		t.Error("a large Basic credential is not a Bearer token")
	}
	if cookies.BearerTooLarge(http.Header{"Authorization": {"Bearer " + strings.Repeat("a", 12<<10)}, "Connection": {"Authorization"}}) {
		t.Error("an Authorization named in Connection is never forwarded")
	}
}

// A route that turns another olp_* cookie into the Bearer token: identity
// must be the token the upstream gets, not the olp_auth cookie.
func TestIdentityIsTheCookieTheRouteTurnsIntoTheBearerToken(t *testing.T) {
	t.Parallel()
	v := newHS256Verifier(t)
	exp := time.Now().Add(time.Hour).Unix()
	a := sign(t, jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"sub": "u-auth", "exp": exp}, "")
	b := sign(t, jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"sub": "u-sess", "exp": exp}, "")
	fw := []cookies.Forward{{Cookie: "olp_sess", AsAuthorization: true}}
	h := http.Header{"Cookie": {"olp_auth=" + a + "; olp_sess=" + b}}
	id, ok := v.FromRequest(h, fw)
	applyRequest(h, fw)
	if h.Get("Authorization") != "Bearer "+b {
		t.Fatalf("upstream Authorization %q, want olp_sess's token", h.Get("Authorization"))
	}
	if !ok || id.UserID != "u-sess" {
		t.Errorf("identity %+v %v, want u-sess (the upstream's credential)", id, ok)
	}
}

// Authorization: Bearer<TAB>token is a Bearer token to many upstreams;
// identity must read it too instead of leaving the request anonymous.
func TestBearerSchemeSeparatedByTabIsVerified(t *testing.T) {
	t.Parallel()
	v := newHS256Verifier(t)
	tok := sign(t, jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"sub": "u-tab", "exp": time.Now().Add(time.Hour).Unix()}, "")
	for _, auth := range []string{"Bearer\t" + tok, "Bearer \t " + tok, "BEARER  " + tok} {
		if id, ok := v.FromRequest(http.Header{"Authorization": {auth}}, portalForward()); !ok || id.UserID != "u-tab" {
			t.Errorf("%q: %+v %v", auth[:10], id, ok)
		}
	}
	for _, auth := range []string{"Bearer", "Bearer ", "Bearer\t", "Bearer" + tok} {
		if _, ok := v.FromRequest(http.Header{"Authorization": {auth}}, portalForward()); ok {
			t.Errorf("%q verified", auth)
		}
	}
	// A JWT under any other scheme ("Bearerx", "JWT", "Token") is read too:
	// an upstream that takes it as the user's must not see a user the
	// limiter counted as anonymous (attack pass A03).
	for _, auth := range []string{"Bearerx " + tok, "JWT " + tok, "token\t" + tok} {
		if id, ok := v.FromRequest(http.Header{"Authorization": {auth}}, portalForward()); !ok || id.UserID != "u-tab" {
			t.Errorf("%q: %+v %v, want u-tab", auth, id, ok)
		}
	}
}

// The registered claims docs/edge.md lists: exp (required with
// auth.require_exp), nbf, iat (not in the future) with the leeway, iss
// and aud when configured.
func TestRegisteredClaimsChecked(t *testing.T) {
	t.Parallel()
	now := time.Now()
	at := func(d time.Duration) int64 { return now.Add(d).Unix() }
	cfg := authConfig()
	cfg.RequireExp = true
	cfg.Issuer = "https://auth.example.org"
	cfg.Audience = "authenticated"
	v, err := NewVerifier(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Stop(context.Background()) })
	base := func(extra jwt.MapClaims) jwt.MapClaims {
		c := jwt.MapClaims{"sub": "u1", "exp": at(time.Hour), "iss": cfg.Issuer, "aud": cfg.Audience}
		for k, x := range extra {
			if x == nil {
				delete(c, k)
			} else {
				c[k] = x
			}
		}
		return c
	}
	tests := []struct {
		name   string
		claims jwt.MapClaims
		ok     bool
	}{
		{"all good", base(nil), true},
		{"no exp while required", base(jwt.MapClaims{"exp": nil}), false},
		{"exp as a string", base(jwt.MapClaims{"exp": "tomorrow"}), false},
		{"iat in the past", base(jwt.MapClaims{"iat": at(-time.Hour)}), true},
		{"iat in the future within leeway", base(jwt.MapClaims{"iat": at(10 * time.Second)}), true},
		{"iat in the future beyond leeway", base(jwt.MapClaims{"iat": at(time.Hour)}), false},
		{"nbf in the future beyond leeway", base(jwt.MapClaims{"nbf": at(time.Hour)}), false},
		{"no iss", base(jwt.MapClaims{"iss": nil}), false},
		{"other iss", base(jwt.MapClaims{"iss": "https://evil.example"}), false},
		{"no aud", base(jwt.MapClaims{"aud": nil}), false},
		{"aud list containing ours", base(jwt.MapClaims{"aud": []string{"x", "authenticated"}}), true},
		{"other aud", base(jwt.MapClaims{"aud": "service_role"}), false},
	}
	for _, tc := range tests {
		_, ok := v.Verify(sign(t, jwt.SigningMethodHS256, []byte(secret), tc.claims, ""))
		if ok != tc.ok {
			t.Errorf("%s: verified %v, want %v", tc.name, ok, tc.ok)
		}
	}
	cfg.RequireExp = false
	lax, _ := NewVerifier(context.Background(), cfg, nil)
	t.Cleanup(func() { _ = lax.Stop(context.Background()) })
	if _, ok := lax.Verify(sign(t, jwt.SigningMethodHS256, []byte(secret), base(jwt.MapClaims{"exp": nil}), "")); !ok {
		t.Error("require_exp false: a token without exp did not verify")
	}
}
