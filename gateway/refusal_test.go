package gateway

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/olp-edu/borda/ratelimit"
)

// A request refused for its credentials was answered before the limit
// layer, so one address could send 120 olp_auth tokens per request for
// ever: every answer 400, never 429, each costing up to 120 signature
// verifications (fresh attack pass 2 A66). Now more than
// cookies.MaxCandidates distinct candidates are refused 400 ("Credenciais
// demais") before any verification, and every credential refusal (too
// many, ambiguous, malformed, oversized, a form the gateway cannot read)
// is charged to the route's ip rule as an anonymous request: once the
// rule's budget is spent, the answer is its 429.
func TestCredentialRefusalsAreChargedToThePerIPRule(t *testing.T) {
	t.Parallel()
	exp := time.Now().Add(time.Hour).Unix()
	a := signHS256(t, testSecret, jwt.MapClaims{"sub": "ref-a", "exp": exp})
	b := signHS256(t, testSecret, jwt.MapClaims{"sub": "ref-b", "exp": exp})
	var many []string
	for i := range 120 {
		many = append(many, "olp_auth=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0."+base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "bad-%03d", i)))
	}
	form := "Content-Type: application/x-www-form-urlencoded"
	for _, tc := range []struct {
		name, method, target, body string
		headers                    []string
		first                      int
		title                      string
	}{
		{"120 olp_auth cookies", "GET", "/api/x", "", []string{"Cookie: " + strings.Join(many, "; ")}, 400, "Credenciais demais"},
		{"5 olp_auth cookies", "GET", "/api/x", "", []string{"Cookie: " + strings.Join(many[:5], "; ")}, 400, "Credenciais demais"},
		{"two users' cookies", "GET", "/api/x", "", []string{"Cookie: olp_auth=" + a + "; olp_auth=" + b}, 400, "Credenciais ambíguas"},
		{"Bearer and a different query token", "GET", "/api/x?access_token=" + b, "", []string{"Authorization: Bearer " + a}, 400, "Credenciais ambíguas"},
		{"two form tokens", "POST", "/api/x", "access_token=" + a + "&access_token=" + b, []string{form}, 400, "Credenciais ambíguas"},
		{"a JWT hidden among words", "GET", "/api/x", "", []string{"Authorization: Basic x " + a}, 401, "Credencial malformada"},
		{"an oversized Bearer", "GET", "/api/x", "", []string{"Authorization: Bearer " + strings.Repeat("a", 9000)}, 431, "Credencial grande demais"},
		{"a compressed form", "POST", "/api/x", "access_token=x", []string{form, "Content-Encoding: gzip"}, 415, "codificação"},
	} {
		up := newRecordingUpstream(t, nil)
		h := newHarness(t, routes(under(testRoute(t, "api", up.URL), "/api")), withVerifier(t), withLimiter(realLimiter(t,
			ratelimit.Rule{Name: "burst", Scope: ratelimit.ScopeIP, Limit: 3, Window: time.Minute, Routes: []string{"api"}},
			ratelimit.Rule{Name: "peruser", Scope: ratelimit.ScopeUser, Limit: 100, Window: time.Minute, Routes: []string{"api"}})))
		var got []int
		for range 5 {
			res, body := rawSend(t, h, tc.method, tc.target, tc.body, tc.headers...)
			got = append(got, res.StatusCode)
			if res.StatusCode == tc.first && !strings.Contains(body, tc.title) {
				t.Errorf("%s: body %q, want %q", tc.name, body, tc.title)
			}
		}
		if want := []int{tc.first, tc.first, tc.first, 429, 429}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v, want %v (refusals charged to the ip rule)", tc.name, got, want)
		}
		if up.calls() != 0 {
			t.Errorf("%s: a refused request reached the upstream", tc.name)
		}
	}
}

// Without a limiter a refusal is just the refusal.
func TestCredentialRefusalWithoutALimiter(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, routes(under(testRoute(t, "api", up.URL), "/api")), withVerifier(t), func(d *Deps) { d.Limiter = nil })
	for range 3 {
		if res, _ := rawSend(t, h, "GET", "/api/x", "", "Authorization: Bearer a, Bearer b"); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("%d, want 401", res.StatusCode)
		}
	}
}

// BenchmarkRefuse120AuthCookies is the cost of one request with 120
// olp_auth cookies, each a JWS with a bad signature (fresh attack pass 2
// A66), on an HS256 verifier: refused before any verification.
func BenchmarkRefuse120AuthCookies(b *testing.B) {
	up := newRecordingUpstream(b, nil)
	h := newHarness(b, routes(under(testRoute(b, "api", up.URL), "/api")), withVerifier(b))
	var many []string
	for i := range 120 {
		tok := signHS256(b, testSecret, jwt.MapClaims{"sub": "bench", "n": i})
		many = append(many, "olp_auth="+tok[:len(tok)-4]+"AAAA")
	}
	line := strings.Join(many, "; ")
	b.ReportAllocs()
	for b.Loop() {
		req := h.newRequest(b, http.MethodGet, "", "/api/x")
		req.Header.Set("Cookie", line)
		if rr := h.serve(req, "203.0.113.9:1"); rr.Code != http.StatusBadRequest {
			b.Fatalf("%d", rr.Code)
		}
	}
}
