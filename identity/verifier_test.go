package identity

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const secret = "test-secret-for-hs256-0123456789"

func authConfig() Options {
	return Options{UserClaim: "sub", EscolaClaim: "app_metadata.escola_id", Leeway: 30 * time.Second, Secret: []byte(secret)}
}

// newHS256Verifier returns the Verifier of authConfig, closed at the end
// of the test.
func newHS256Verifier(t testing.TB) *Verifier {
	t.Helper()
	v, err := NewVerifier(context.Background(), authConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Stop(context.Background()) })
	return v
}

func sign(t testing.TB, m jwt.SigningMethod, key any, claims jwt.MapClaims, kid string) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestVerifyHS256(t *testing.T) {
	t.Parallel()
	v := newHS256Verifier(t)
	now := time.Now()
	key := []byte(secret)
	tests := []struct {
		name   string
		token  string
		want   Identity
		wantOK bool
	}{
		{"string claims", sign(t, jwt.SigningMethodHS256, key, jwt.MapClaims{"sub": "u1", "exp": now.Add(time.Hour).Unix(), "app_metadata": map[string]any{"escola_id": "e9"}}, ""),
			Identity{"u1", "e9"}, true},
		{"numeric escola", sign(t, jwt.SigningMethodHS256, key, jwt.MapClaims{"sub": "u1", "app_metadata": map[string]any{"escola_id": 12345678901}}, ""),
			Identity{"u1", "12345678901"}, true},
		{"no escola", sign(t, jwt.SigningMethodHS256, key, jwt.MapClaims{"sub": "u1"}, ""), Identity{"u1", ""}, true},
		{"expired within leeway", sign(t, jwt.SigningMethodHS256, key, jwt.MapClaims{"sub": "u1", "exp": now.Add(-10 * time.Second).Unix()}, ""), Identity{"u1", ""}, true},
		{"expired", sign(t, jwt.SigningMethodHS256, key, jwt.MapClaims{"sub": "u1", "exp": now.Add(-time.Minute).Unix()}, ""), Identity{}, false},
		{"not yet valid", sign(t, jwt.SigningMethodHS256, key, jwt.MapClaims{"sub": "u1", "nbf": now.Add(time.Minute).Unix()}, ""), Identity{}, false},
		{"wrong secret", sign(t, jwt.SigningMethodHS256, []byte("other"), jwt.MapClaims{"sub": "u1"}, ""), Identity{}, false},
		{"HS512 not accepted", sign(t, jwt.SigningMethodHS512, key, jwt.MapClaims{"sub": "u1"}, ""), Identity{}, false},
		{"alg none", sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.MapClaims{"sub": "u1"}, ""), Identity{}, false},
		{"no user claim", sign(t, jwt.SigningMethodHS256, key, jwt.MapClaims{"app_metadata": map[string]any{"escola_id": "e"}}, ""), Identity{}, false},
		{"object user claim", sign(t, jwt.SigningMethodHS256, key, jwt.MapClaims{"sub": map[string]any{"x": 1}}, ""), Identity{}, false},
		{"garbage", "not.a.jwt", Identity{}, false},
		{"empty", "", Identity{}, false},
	}
	for _, tc := range tests {
		got, ok := v.Verify(tc.token)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("%s: Verify = %+v %v, want %+v %v", tc.name, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestFromRequestPrecedence(t *testing.T) {
	t.Parallel()
	v, _ := NewVerifier(context.Background(), authConfig(), nil)
	good := sign(t, jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"sub": "cookie-user"}, "")
	header := sign(t, jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"sub": "header-user"}, "")
	h := http.Header{"Cookie": {"x=1; olp_auth=" + good}}
	if id, ok := v.FromRequest(h, portalForward()); !ok || id.UserID != "cookie-user" {
		t.Errorf("cookie: %+v %v", id, ok)
	}
	h.Set("Authorization", "bearer "+header)
	if id, ok := v.FromRequest(h, portalForward()); !ok || id.UserID != "header-user" {
		t.Errorf("Authorization wins (it is what the upstream sees): %+v %v", id, ok)
	}
	h.Set("Authorization", "Basic dXNlcjpwYXNz")
	if _, ok := v.FromRequest(h, portalForward()); ok {
		t.Error("Basic credentials verified as a JWT")
	}
	var nilV *Verifier
	if _, ok := nilV.FromRequest(h, portalForward()); ok {
		t.Error("nil verifier verified something")
	}
	if v, err := NewVerifier(context.Background(), Options{}, nil); v != nil || err != nil {
		t.Errorf("no secret, no JWKS: %v %v, want nil nil", v, err)
	}
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func TestVerifyJWKS(t *testing.T) {
	t.Parallel()
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	pad := func(n *big.Int) []byte { b := make([]byte, 32); return n.FillBytes(b) }
	jwks := fmt.Sprintf(`{"keys":[
{"kty":"RSA","kid":"r1","alg":"RS256","use":"sig","n":%q,"e":"AQAB"},
{"kty":"EC","kid":"e1","alg":"ES256","use":"sig","crv":"P-256","x":%q,"y":%q}]}`,
		b64(rsaKey.N.Bytes()), b64(pad(ecKey.X)), b64(pad(ecKey.Y)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(jwks))
	}))
	defer srv.Close()
	cfg := authConfig()
	cfg.Secret = nil
	cfg.JWKSURL, cfg.JWKSRefresh = srv.URL, time.Hour
	v, err := NewVerifier(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Stop(context.Background())
	claims := jwt.MapClaims{"sub": "u7", "app_metadata": map[string]any{"escola_id": "3"}, "exp": time.Now().Add(time.Hour).Unix()}
	if id, ok := v.Verify(sign(t, jwt.SigningMethodRS256, rsaKey, claims, "r1")); !ok || id != (Identity{"u7", "3"}) {
		t.Errorf("RS256: %+v %v", id, ok)
	}
	if id, ok := v.Verify(sign(t, jwt.SigningMethodES256, ecKey, claims, "e1")); !ok || id.UserID != "u7" {
		t.Errorf("ES256: %+v %v", id, ok)
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	if _, ok := v.Verify(sign(t, jwt.SigningMethodRS256, other, claims, "unknown-kid")); ok {
		t.Error("unknown kid verified")
	}
	if _, ok := v.Verify(sign(t, jwt.SigningMethodHS256, []byte("x"), claims, "r1")); ok {
		t.Error("HS256 accepted without a secret")
	}
	if _, ok := v.Verify(sign(t, jwt.SigningMethodRS256, other, claims, "r1")); ok {
		t.Error("RS256 signed by another key verified under kid r1")
	}
}

func FuzzVerify(f *testing.F) {
	f.Add(sign(f, jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"sub": "u1", "app_metadata": map[string]any{"escola_id": 1}}, ""))
	f.Add("eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.")
	f.Add("a.b.c")
	f.Add("")
	v, err := NewVerifier(context.Background(), authConfig(), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, token string) {
		id, ok := v.Verify(token)
		if ok != (id.UserID != "") {
			t.Fatalf("ok=%v with identity %+v", ok, id)
		}
		if ok {
			// Only tokens signed with the secret verify: re-verify the
			// signature independently.
			if _, err := jwt.Parse(token, func(*jwt.Token) (any, error) { return []byte(secret), nil },
				jwt.WithValidMethods([]string{"HS256"}), jwt.WithLeeway(time.Minute)); err != nil {
				t.Fatalf("verified a token jwt.Parse rejects: %v", err)
			}
		}
		_, _ = v.FromRequest(http.Header{"Cookie": {"olp_auth=" + token}, "Authorization": {token}}, portalForward())
	})
}

// A verified token is served from the cache: its signature is not checked
// again (here the secret changes under it) until the cache's minute ends.
// TestNewVerifierRefusesAJWKSURLWithoutRefresh: the refresh interval has
// one default, the configuration's (auth.jwks_refresh); a verifier built
// by hand with a JWKS URL and no interval is refused, not given a second.
func TestNewVerifierRefusesAJWKSURLWithoutRefresh(t *testing.T) {
	t.Parallel()
	cfg := authConfig()
	cfg.JWKSURL = "http://127.0.0.1:1/jwks.json"
	if v, err := NewVerifier(context.Background(), cfg, nil); err == nil {
		_ = v.Stop(context.Background())
		t.Fatal("NewVerifier with a JWKS URL and JWKSRefresh 0: no error")
	}
}

func TestVerifiedTokenIsCachedForAtMostAMinute(t *testing.T) {
	t.Parallel()
	v := newHS256Verifier(t)
	now := time.Now()
	v.now = func() time.Time { return now }
	tok := sign(t, jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"sub": "u1", "exp": now.Add(time.Hour).Unix()}, "")
	if _, ok := v.Verify(tok); !ok {
		t.Fatal("first Verify failed")
	}
	v.secret = []byte("rotated")
	if id, ok := v.Verify(tok); !ok || id.UserID != "u1" {
		t.Fatalf("cached Verify = %+v %v, want u1 from the cache", id, ok)
	}
	now = now.Add(verifiedCacheTTL + time.Second)
	if _, ok := v.Verify(tok); ok {
		t.Fatal("Verify after the cache's minute still accepted a token the new secret does not verify")
	}
}

// A cached token is refused once its exp plus the leeway has passed, even
// within the cache's minute.
func TestCachedTokenEndsAtItsExpiry(t *testing.T) {
	t.Parallel()
	v := newHS256Verifier(t) // leeway 30 s
	start := time.Now().Truncate(time.Second)
	now := start
	v.now = func() time.Time { return now }
	tok := sign(t, jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"sub": "u1", "exp": start.Add(20 * time.Second).Unix()}, "")
	if _, ok := v.Verify(tok); !ok {
		t.Fatal("first Verify failed")
	}
	now = start.Add(49 * time.Second)
	if _, ok := v.Verify(tok); !ok {
		t.Fatal("Verify within exp + leeway refused")
	}
	now = start.Add(51 * time.Second)
	if _, ok := v.Verify(tok); ok {
		t.Fatal("Verify past exp + leeway accepted")
	}
}

// TestTokenWithoutThreeSegmentsIsAnonymous: a credential that is not a
// compact JWS (an opaque session id in olp_auth, a JWE's five segments)
// is refused before any parsing, as the parser would refuse it.
func TestTokenWithoutThreeSegmentsIsAnonymous(t *testing.T) {
	t.Parallel()
	v := newHS256Verifier(t)
	tok := sign(t, jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"sub": "u1", "exp": time.Now().Add(time.Hour).Unix()}, "")
	if _, ok := v.Verify(tok); !ok {
		t.Fatal("a valid token was refused")
	}
	for _, bad := range []string{"abc", "a.b", tok + ".x", tok + ".x.y", strings.Replace(tok, ".", "", 1)} {
		if id, ok := v.Verify(bad); ok || id != (Identity{}) {
			t.Errorf("Verify(%q) = %+v, %v; want anonymous", bad, id, ok)
		}
	}
}

// BenchmarkVerifyOpaqueToken is a credential that is no JWT (the
// in-process chain bench sends olp_auth=abc): it must cost no parse.
func BenchmarkVerifyOpaqueToken(b *testing.B) {
	v := newHS256Verifier(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := v.Verify("abc"); ok {
			b.Fatal("verified")
		}
	}
}

func BenchmarkVerifyHS256(b *testing.B) {
	v := newHS256Verifier(b)
	claims := func(i int) jwt.MapClaims {
		return jwt.MapClaims{"sub": fmt.Sprint("u", i), "exp": time.Now().Add(time.Hour).Unix(), "app_metadata": map[string]any{"escola_id": "e9"}}
	}
	b.Run("cached", func(b *testing.B) {
		tok := sign(b, jwt.SigningMethodHS256, []byte(secret), claims(0), "")
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := v.Verify(tok); !ok {
				b.Fatal("not verified")
			}
		}
	})
	b.Run("first-time", func(b *testing.B) {
		toks := make([]string, 4096)
		for i := range toks {
			toks[i] = sign(b, jwt.SigningMethodHS256, []byte(secret), claims(i+1), "")
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			v.cache.lru.Purge() // every call verifies
			if _, ok := v.Verify(toks[i%len(toks)]); !ok {
				b.Fatal("not verified")
			}
			i++
		}
	})
}

// A token whose header carries "crit" verified and counted as the user
// (fresh attack pass 2 A40), though RFC 7515 §4.1.11 requires a recipient
// to reject a JWS whose crit names an extension it does not understand;
// the verifier understands none, so every crit form is refused, HS256
// and RS256 alike, and a token without crit still verifies.
func TestVerifyRefusesATokenWithACritHeader(t *testing.T) {
	t.Parallel()
	v := newHS256Verifier(t)
	claims := jwt.MapClaims{"sub": "u-crit", "exp": time.Now().Add(time.Hour).Unix()}
	for _, crit := range []any{[]string{"exp2"}, []string{"b64"}, []string{}, "exp2", nil, []string{"alg"}} {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
		tok.Header["crit"] = crit
		tok.Header["exp2"] = 1
		s, err := tok.SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		if id, ok := v.Verify(s); ok {
			t.Errorf("crit %#v: verified as %+v, want refused", crit, id)
		}
	}
	if _, ok := v.Verify(sign(t, jwt.SigningMethodHS256, []byte(secret), claims, "")); !ok {
		t.Error("the same token without crit did not verify")
	}
}
