package e2e

// Hostile inputs against cookies and verified identity (docs/edge.md,
// Cookies and Identity): a credential the rate limiter cannot read must
// not reach the upstream, an upstream may only set the portal cookies its
// route forwards, and a key removed from the JWKS stops verifying within
// auth.jwks_refresh.

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const identitySecret = "e2e-identity-secret-0123456789abcdef"

// identityLimited is the top-level YAML of a user rule that blocks a
// verified user's second request: a 429 proves the limiter saw the token,
// a 200 after the first that it did not. The window is under a minute so
// its key carries no minute stamp (docs/rate-limiting.md) and a test that
// crosses a minute boundary keeps its count.
const identityLimited = `rate_limits:
  rules:
    - name: peruser
      scope: user
      algorithm: fixed_window
      limit: 1
      window: 50s
      mode: enforce
`

// identityToken signs an HS256 token for user, padded with a claim to at
// least size bytes.
func identityToken(t *testing.T, user string, size int) string {
	t.Helper()
	claims := jwt.MapClaims{"sub": user, "exp": time.Now().Add(time.Hour).Unix()}
	if size > 0 {
		claims["pad"] = strings.Repeat("p", size*3/4)
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(identitySecret))
	if err != nil {
		t.Fatal(err)
	}
	if len(s) < size {
		t.Fatalf("token of %d bytes, want at least %d", len(s), size)
	}
	return s
}

// identityGet sends GET /x with the given header lines on a raw
// connection and returns the status.
func identityGet(t *testing.T, base string, headers ...string) (int, http.Header, string) {
	t.Helper()
	raw := "GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n" + strings.Join(headers, "\r\n")
	if len(headers) > 0 {
		raw += "\r\n"
	}
	resp, body, err := rawExchange(t, base, raw+"\r\n", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, body
}

// A valid 12 KiB token was anonymous to the limiter (Verify stopped at
// 8 KiB) but forwarded (the cookie filter allowed 16 KiB, the header any
// size), so a user escaped per-user limits with a padded token the
// upstream accepted. Now: the header form is answered 431 without
// reaching the upstream, the cookie form is removed before the upstream,
// and a token under the bound is limited as the user it is.
func TestHostileTwelveKiBTokenIsNeverForwardedUnseenByTheLimiter(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "    rate_limits: [peruser]\n", identityLimited), "AUTH_JWT_SECRET="+identitySecret)
	big := identityToken(t, "u-big", 12<<10)

	for range 2 {
		status, h, body := identityGet(t, p.public, "Authorization: Bearer "+big)
		if status != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("12 KiB Bearer header: %d, want 431", status)
		}
		if !strings.Contains(body, "8 KiB") || h.Get("Content-Language") != "pt-BR" {
			t.Errorf("431 body %q (Content-Language %q), want the PT-BR problem", body, h.Get("Content-Language"))
		}
	}
	for range 2 {
		if status, _, _ := identityGet(t, p.public, "Cookie: olp_auth="+big+"; _ga=1"); status != 200 {
			t.Errorf("12 KiB olp_auth cookie: %d, want 200 (the cookie is removed, the request anonymous)", status)
		}
	}
	for _, r := range up.requests() {
		if len(r.Header.Get("Authorization")) > 0 || strings.Contains(r.Header.Get("Cookie"), "olp_auth") {
			t.Errorf("upstream got a credential the limiter did not see: Authorization %d bytes, Cookie %d bytes",
				len(r.Header.Get("Authorization")), len(r.Header.Get("Cookie")))
		}
	}
	if n := len(up.requests()); n != 2 {
		t.Errorf("upstream got %d requests, want 2 (the cookie ones)", n)
	}

	small := identityToken(t, "u-small", 0)
	if status, _, _ := identityGet(t, p.public, "Cookie: olp_auth="+small); status != 200 {
		t.Fatalf("first request of u-small: %d", status)
	}
	if status, _, _ := identityGet(t, p.public, "Authorization: Bearer "+small); status != http.StatusTooManyRequests {
		t.Errorf("second request of u-small: %d, want 429 (the limiter sees the user)", status)
	}
}

// identityCookieSetter is an upstream answering every request with the
// given Set-Cookie lines.
func identityCookieSetter(t *testing.T, lines []string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Set-Cookie"] = lines
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// An upstream behind a route that does not forward olp_auth (a
// third-party, `forward: []`) tried to set or clear the portal's session
// in every form a browser would accept: case variants, __Host-/__Secure-,
// clearing with Max-Age=0 or a past Expires, a nameless cookie sent back
// as olp_auth=..., several Set-Cookie lines. None may reach the browser;
// its own cookies still do, in order. The portal's own route may still
// set olp_auth (hardened).
func TestHostileNonForwardingUpstreamSetsThePortalSessionCookie(t *testing.T) {
	attacks := []string{
		"olp_auth=attacker; Path=/; Domain=example.org",
		"OLP_AUTH=attacker; Path=/",
		"olp_auth=; Max-Age=0; Path=/",
		"olp_auth=; Expires=Thu, 01 Jan 1970 00:00:00 GMT; Path=/",
		"__Host-olp_auth=attacker; Secure; Path=/",
		"__Secure-OLP_auth=attacker; Secure; Path=/",
		"=olp_auth=attacker; Path=/",
		"olp_mural=attacker",
	}
	lines := append([]string{"tp_session=1; Path=/"}, attacks...)
	lines = append(lines, "tp_pref=2")
	third := identityCookieSetter(t, lines)
	portal := identityCookieSetter(t, []string{"olp_auth=fresh; Path=/; SameSite=None", "OLP_AUTH=x"})
	p := startServe(t, minimalServe(third, "    cookies: {forward: []}\n", `  - name: portal
    path_prefix: /portal
    upstream: "`+portal+`"
`))

	resp, _, err := rawExchange(t, p.public, "GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Values("Set-Cookie"); !slices.Equal(got, []string{"tp_session=1; Path=/", "tp_pref=2"}) {
		t.Errorf("third-party Set-Cookie reached the browser as %q, want only its own two cookies", got)
	}
	resp, _, err = rawExchange(t, p.public, "GET /portal HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Values("Set-Cookie"); !slices.Equal(got, []string{"olp_auth=fresh; Path=/; Secure; HttpOnly; SameSite=Lax"}) {
		t.Errorf("portal Set-Cookie %q, want its olp_auth hardened and OLP_AUTH removed", got)
	}
}

// identityJWKS is a stand-in JWKS endpoint whose RSA keys a test changes.
type identityJWKS struct {
	*httptest.Server
	mu   sync.Mutex
	keys map[string]*rsa.PrivateKey
	// answer, when set, answers in place of the key set (a hostile key
	// server); fetches counts the requests.
	answer  func(http.ResponseWriter, *http.Request)
	fetches atomic.Int64
}

func newIdentityJWKS(t *testing.T) *identityJWKS {
	t.Helper()
	j := &identityJWKS{keys: map[string]*rsa.PrivateKey{}}
	j.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		j.fetches.Add(1)
		j.mu.Lock()
		if answer := j.answer; answer != nil {
			j.mu.Unlock()
			answer(w, r)
			return
		}
		var parts []string
		for kid, k := range j.keys {
			parts = append(parts, fmt.Sprintf(`{"kty":"RSA","kid":%q,"alg":"RS256","use":"sig","n":%q,"e":"AQAB"}`,
				kid, base64.RawURLEncoding.EncodeToString(k.N.Bytes())))
		}
		j.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"keys":[%s]}`, strings.Join(parts, ","))
	}))
	t.Cleanup(j.Close)
	return j
}

// set publishes k under kid, or removes kid when k is nil.
func (j *identityJWKS) set(kid string, k *rsa.PrivateKey) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if k == nil {
		delete(j.keys, kid)
		return
	}
	j.keys[kid] = k
}

func identityRSAToken(t *testing.T, k *rsa.PrivateKey, kid, user string) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"sub": user, "exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = kid
	s, err := tok.SignedString(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func identityRSAKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// identityUntil sends the request every 100 ms until it answers want, for
// at most limit; it returns whether it did.
func identityUntil(t *testing.T, base, header string, want int, limit time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if status, _, _ := identityGet(t, base, header); status == want {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// A key removed from the JWKS kept verifying for up to 6 minutes (5-minute
// refresh plus the verified cache's minute) while the docs promised a
// minute. With auth.jwks_refresh 1s, a token of the removed key must turn
// anonymous (its user limit no longer applies) within a few seconds.
func TestHostileKeyRemovedFromJWKSStopsVerifying(t *testing.T) {
	jwks := newIdentityJWKS(t)
	k1 := identityRSAKey(t)
	jwks.set("k1", k1)
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "    rate_limits: [peruser]\n",
		identityLimited+"auth:\n  jwks_url: \""+jwks.URL+"\"\n  jwks_refresh: 1s\n"))
	auth := "Authorization: Bearer " + identityRSAToken(t, k1, "k1", "u-rotated")
	if status, _, _ := identityGet(t, p.public, auth); status != 200 {
		t.Fatalf("first request: %d", status)
	}
	if status, _, _ := identityGet(t, p.public, auth); status != http.StatusTooManyRequests {
		t.Fatalf("second request: %d, want 429 (the token verifies)", status)
	}
	jwks.set("k1", nil)
	if !identityUntil(t, p.public, auth, 200, 15*time.Second) {
		t.Error("a token of the key removed from the JWKS still verifies 15 s later (jwks_refresh 1s)")
	}
}

// Fresh attack pass 21 through the real binary: a key server answering a
// 64 MiB document (A14: 400 MB grew the gateway to 1.75 GB at every
// refresh), a redirect to an internal address (A13: followed at every
// refresh), or a 200 without "keys" (A46: every token turned anonymous).
// Each leaves the last key set in use: the user's token still verifies
// (its per-user limit still refuses), the redirect's target is never
// fetched, and the gateway stays up.
func TestHostileJWKSServerCannotWipeTheKeySetOrFloodTheGateway(t *testing.T) {
	jwks := newIdentityJWKS(t)
	k1 := identityRSAKey(t)
	jwks.set("k1", k1)
	var internal atomic.Int64
	inner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { internal.Add(1) }))
	t.Cleanup(inner.Close)
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "    rate_limits: [peruser]\n",
		identityLimited+"auth:\n  jwks_url: \""+jwks.URL+"\"\n  jwks_refresh: 1s\n"))
	auth := "Authorization: Bearer " + identityRSAToken(t, k1, "k1", "u-kept")
	if status, _, _ := identityGet(t, p.public, auth); status != 200 {
		t.Fatalf("first request: %d", status)
	}
	answers := map[string]func(http.ResponseWriter, *http.Request){
		"64 MiB": func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, `{"keys":[{"kty":"RSA","kid":"`)
			chunk := strings.Repeat("A", 64<<10)
			for range 1024 {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
			}
			_, _ = io.WriteString(w, `"}]}`)
		},
		"redirect": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, inner.URL+"/internal", http.StatusFound)
		},
		"no keys": func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, `{"error":"maintenance"}`) },
	}
	for name, answer := range answers {
		jwks.mu.Lock()
		jwks.answer = answer
		jwks.mu.Unlock()
		from := jwks.fetches.Load()
		eventually(t, 20*time.Second, name+": two refreshes", func() bool { return jwks.fetches.Load() >= from+2 })
		if status, _, _ := identityGet(t, p.public, auth); status != http.StatusTooManyRequests {
			t.Errorf("%s: the user's second request answered %d, want 429 (its token verifies with the last keys)", name, status)
		}
	}
	if n := internal.Load(); n != 0 {
		t.Errorf("the redirect's internal target was fetched %d times, want never", n)
	}
	// Fresh attack pass 22 E2: the failed refresh says where the redirect
	// pointed (its host), not only "invalid HTTP status code: 302".
	if host := strings.TrimPrefix(inner.URL, "http://"); !strings.Contains(p.logs.String(), "a redirect to "+host) {
		t.Errorf("no log line names the redirect's host %s", host)
	}
}

// A token of a key the issuer just published (kid not in the key set the
// gateway holds) stayed anonymous until the next refresh (5 minutes). Now
// its first request starts a fetch, and the user is limited right after,
// long before the hourly refresh configured here.
func TestHostileTokenOfANewlyPublishedKeyIsNotAnonymousUntilTheNextRefresh(t *testing.T) {
	jwks := newIdentityJWKS(t)
	jwks.set("k1", identityRSAKey(t))
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "    rate_limits: [peruser]\n",
		identityLimited+"auth:\n  jwks_url: \""+jwks.URL+"\"\n  jwks_refresh: 1h\n"))
	k2 := identityRSAKey(t)
	jwks.set("k2", k2)
	auth := "Authorization: Bearer " + identityRSAToken(t, k2, "k2", "u-new-key")
	if !identityUntil(t, p.public, auth, http.StatusTooManyRequests, 15*time.Second) {
		t.Error("the token of the newly published key never verified (its user was never limited)")
	}
}

// An upstream behind a non-forwarding route sent olp_auth on a 103 Early
// Hints: ReverseProxy relays a 1xx's headers without ModifyResponse, so
// the Set-Cookie policy never saw them. No Set-Cookie may leave on a 1xx.
func TestHostileEarlyHintsCarryThePortalSessionCookie(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload; as=style")
		w.Header().Add("Set-Cookie", "olp_auth=attacker; Path=/")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Set-Cookie")
		w.Header().Del("Link")
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	p := startServe(t, minimalServe(srv.URL, "    cookies: {forward: []}\n", ""))
	resp, _, err := rawExchange(t, p.public, "GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusEarlyHints {
		t.Fatalf("first response %d, want the relayed 103", resp.StatusCode)
	}
	if resp.Header.Get("Link") == "" {
		t.Error("103 lost its Link header")
	}
	if got := resp.Header.Values("Set-Cookie"); len(got) != 0 {
		t.Errorf("103 carried Set-Cookie %q past the route's policy", got)
	}
}

// A valid token spelled so that only a lenient decoder reads it ("="
// padding, "+" or "/" for "-" or "_", a last character whose unused bits
// are set) was refused by the verifier, so the limiter counted the
// request as anonymous, and forwarded as the user's credential to an
// upstream whose JWT library accepts it: per-user limits dodged. Now the
// header form is 401 without reaching the upstream and the cookie form
// is not turned into a Bearer token; the canonical token is limited as
// its user.
func TestHostileNonCanonicalTokenIsNeverForwardedUnseenByTheLimiter(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "    rate_limits: [peruser]\n", identityLimited), "AUTH_JWT_SECRET="+identitySecret)
	tok := identityToken(t, "u-lenient", 0)
	head, sig, _ := strings.Cut(tok[strings.Index(tok, ".")+1:], ".")
	header := tok[:strings.Index(tok, ".")]
	flipped := []byte(sig)
	// HS256 signatures are 32 bytes: 43 characters, the last one carries
	// two unused bits; setting one is a different string, the same bytes
	// to a lenient decoder.
	last := strings.IndexByte(identityB64URL, flipped[len(flipped)-1])
	flipped[len(flipped)-1] = identityB64URL[last|1]
	spellings := map[string]string{
		"padding":       tok + "=",
		"header padded": header + "=." + head + "." + sig,
		"unused bits":   header + "." + head + "." + string(flipped),
		"empty payload": header + ".." + sig,
		"list":          "anon, Bearer " + tok,
	}
	if strings.ContainsAny(sig, "-_") {
		spellings["std alphabet"] = header + "." + head + "." + strings.NewReplacer("-", "+", "_", "/").Replace(sig)
	}
	for name, bad := range spellings {
		if bad == tok {
			continue
		}
		if status, _, body := identityGet(t, p.public, "Authorization: Bearer "+bad); status != http.StatusUnauthorized || !strings.Contains(body, "base64url") {
			t.Errorf("%s, Bearer header: %d %q, want the 401 problem", name, status, body)
		}
		if status, _, _ := identityGet(t, p.public, "Cookie: olp_auth="+bad); status != 200 {
			t.Errorf("%s, olp_auth cookie: %d, want 200 (anonymous, no credential forwarded)", name, status)
		}
	}
	for _, r := range up.requests() {
		if a := r.Header.Get("Authorization"); a != "" || strings.Contains(r.Header.Get("Cookie"), "olp_auth") {
			t.Errorf("upstream got a credential the limiter did not see: Authorization %q", a)
		}
	}
	if status, _, _ := identityGet(t, p.public, "Authorization: Bearer "+tok); status != 200 {
		t.Fatalf("first canonical request: %d", status)
	}
	if status, _, _ := identityGet(t, p.public, "Cookie: olp_auth="+tok); status != http.StatusTooManyRequests {
		t.Errorf("second canonical request: %d, want 429 (the limiter sees the user)", status)
	}
}

const identityB64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// Issue 22 item 1, as reported: `olp_auth=<non-canonical decoy>;
// olp_auth=<valid JWT>` on a route forwarding olp_auth as Authorization gave
// 8 × 200 under a per-user limit of 5 (the limiter verified the decoy and
// counted the request as anonymous, the upstream got the second as its
// Bearer token); `olp_auth=decoy; olp_auth=<jwt>` did the same on a route
// forwarding the cookie, against upstreams that read the last value. Now
// both are limited as the user, the upstream gets exactly the verified
// token, and two tokens of different users are refused 400.
func TestHostileDecoyAuthCookieSplitsTheLimiterFromTheUpstream(t *testing.T) {
	const five = `rate_limits:
  rules:
    - {name: peruser, scope: user, algorithm: fixed_window, limit: 5, window: 50s, mode: enforce}
`
	for _, tc := range []struct{ name, route, decoy string }{
		{"as authorization", "", "eyJhbGciOiJIUzI1NiJ9=.e30.x"},
		{"as cookie", "    cookies: {forward: [{cookie: olp_auth}]}\n", "decoy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := recordingUpstream(t)
			p := startServe(t, minimalServe(up.URL, "    rate_limits: [peruser]\n"+tc.route, five), "AUTH_JWT_SECRET="+identitySecret)
			tok := identityToken(t, "u-decoy-"+strings.ReplaceAll(tc.name, " ", "-"), 0)
			var got []int
			for range 8 {
				status, _, _ := identityGet(t, p.public, "Cookie: olp_auth="+tc.decoy+"; olp_auth="+tok)
				got = append(got, status)
			}
			if !slices.Equal(got, []int{200, 200, 200, 200, 200, 429, 429, 429}) {
				t.Errorf("statuses %v, want 5 × 200 then 429", got)
			}
			for _, r := range up.requests() {
				cred := r.Header.Get("Authorization")
				if tc.route != "" {
					cred = r.Header.Get("Cookie")
				}
				if !strings.HasSuffix(cred, tok) || strings.Contains(cred, tc.decoy) {
					t.Errorf("upstream credential %q, want exactly the verified token", cred)
				}
			}
			other := identityToken(t, "u-other", 0)
			if status, h, body := identityGet(t, p.public, "Cookie: olp_auth="+other+"; olp_auth="+tok); status != http.StatusBadRequest ||
				!strings.Contains(body, "Credenciais") || h.Get("Content-Language") != "pt-BR" {
				t.Errorf("two users' tokens: %d %q, want the PT-BR 400 problem", status, body)
			}
		})
	}
}

// A JWT under an Authorization scheme other than Bearer ("JWT <token>",
// Django REST framework's spelling) was counted anonymous by the limiter
// while the upstream took it as the user's: a per-user limit of 5 let
// every request through (attack pass A03). Now the limiter keys on it, in
// every scheme case, and the per-user limit holds.
func TestHostileJWTUnderAnotherSchemeSkipsTheUserLimit(t *testing.T) {
	const five = `rate_limits:
  rules:
    - {name: peruser, scope: user, algorithm: fixed_window, limit: 5, window: 50s, mode: enforce}
`
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "    rate_limits: [peruser]\n", five), "AUTH_JWT_SECRET="+identitySecret)
	// "" is the bare token as the header's value (no scheme), found by
	// mutation testing: counted anonymous, read by raw-header parsers.
	for _, scheme := range []string{"JWT", "token", "Jwt", ""} {
		tok := identityToken(t, "u-scheme-"+scheme, 0)
		value := scheme + " " + tok
		if scheme == "" {
			value = tok
		}
		var got []int
		for range 7 {
			status, _, _ := identityGet(t, p.public, "Authorization: "+value)
			got = append(got, status)
		}
		if !slices.Equal(got, []int{200, 200, 200, 200, 200, 429, 429}) {
			t.Errorf("%s scheme: statuses %v, want 5 × 200 then 429", scheme, got)
		}
	}
}

// TestHostileJWTHiddenAmongWordsOfAnAuthorizationValue: a valid JWT among
// several words or quoted in an Authorization value under a non-Bearer
// scheme or none ("JWT anon <jwt>", `Token token="<jwt>"`, "<jwt> <jwt>")
// was counted anonymous while parsers taking the last word, Rails'
// token= parameter or the second word read the user. Every spelling is
// answered 401 before the limiter and the upstream; the upstream sees none.
func TestHostileJWTHiddenAmongWordsOfAnAuthorizationValue(t *testing.T) {
	const five = `rate_limits:
  rules:
    - {name: peruser, scope: user, algorithm: fixed_window, limit: 5, window: 50s, mode: enforce}
`
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "    rate_limits: [peruser]\n", five), "AUTH_JWT_SECRET="+identitySecret)
	tok := identityToken(t, "u-hidden", 0)
	for _, v := range []string{
		"JWT anon " + tok, "Token " + tok + " " + tok, `Token token="` + tok + `"`, "Token token=" + tok,
		tok + " " + tok, "x " + tok + "," + tok, `JWT "` + tok + `"`, "Basic " + tok + ";",
	} {
		status, _, _ := identityGet(t, p.public, "Authorization: "+v)
		if status != 401 {
			t.Errorf("Authorization: %.40q...: status %d, want 401", v, status)
		}
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("the upstream received %d of the hidden-JWT requests", n)
	}
}

// TestHostileCritHeaderTokenCountsAsTheUser (fresh attack pass 2, A40): an
// HS256 token whose header lists an unknown extension in "crit" verified
// and was counted as the user, though RFC 7515 §4.1.11 says reject it.
// Through the real binary: it is anonymous (no per-user 429 on its second
// request), the same claims without crit are the user's ([200 429]).
func TestHostileCritHeaderTokenCountsAsTheUser(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "    rate_limits: [peruser]\n", identityLimited), "AUTH_JWT_SECRET="+identitySecret)
	signed := func(user string, crit bool) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": user, "exp": time.Now().Add(time.Hour).Unix()})
		if crit {
			tok.Header["crit"] = []string{"exp2"}
			tok.Header["exp2"] = 1
		}
		s, err := tok.SignedString([]byte(identitySecret))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		tok  string
		want string
	}{{signed("u-crit", true), "[200 200]"}, {signed("u-nocrit", false), "[200 429]"}} {
		var codes []int
		for range 2 {
			resp, _, err := rawExchange(t, p.public, "GET /x HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer "+tc.tok+"\r\nConnection: close\r\n\r\n", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			codes = append(codes, resp.StatusCode)
		}
		if fmt.Sprint(codes) != tc.want {
			t.Errorf("%s: %v, want %s", tc.tok[:20], codes, tc.want)
		}
	}
}

// TestHostileJWTAsTheBasicPasswordSkipsTheUserLimit (fresh attack pass 2,
// A11): Authorization: Basic base64("x:<jwt>") was anonymous to the
// limiter while an upstream taking a token as the Basic password read it
// as the user's. Through the real binary: it is the user's identity (the
// second request 429), and the header reaches the upstream as sent.
func TestHostileJWTAsTheBasicPasswordSkipsTheUserLimit(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "    rate_limits: [peruser]\n", identityLimited), "AUTH_JWT_SECRET="+identitySecret)
	for i, cred := range []string{"x:%s", "%s:x-oauth-basic"} {
		auth := "Basic " + base64.StdEncoding.EncodeToString(fmt.Appendf(nil, cred, identityToken(t, fmt.Sprintf("u-basic-%d", i), 0)))
		var codes []int
		for range 2 {
			resp, _, err := rawExchange(t, p.public, "GET /x HTTP/1.1\r\nHost: a\r\nAuthorization: "+auth+"\r\nConnection: close\r\n\r\n", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			codes = append(codes, resp.StatusCode)
		}
		if fmt.Sprint(codes) != "[200 429]" {
			t.Errorf("Basic %q: %v, want [200 429]", cred, codes)
		}
		if seen := up.requests(); seen[len(seen)-1].Header.Get("Authorization") != auth {
			t.Errorf("Basic %q: the upstream got %q", cred, seen[len(seen)-1].Header.Get("Authorization"))
		}
	}
}

// TestHostileMalformedBasicHidingAJWTSkipsTheUserLimit (fresh attack pass 6
// C02-C05, C18): a Basic value spoiled for the strict decoder ('!', a
// space, '=' inside, a word after) that PHP and Node's Buffer still
// decode to x:<jwt> passed unlimited. It is 401 and the upstream gets none.
func TestHostileMalformedBasicHidingAJWTSkipsTheUserLimit(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "    rate_limits: [peruser]\n", identityLimited), "AUTH_JWT_SECRET="+identitySecret)
	b64 := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "x:%s", identityToken(t, "u-basic-spoiled", 0)))
	for _, v := range []string{b64[:4] + "!" + b64[4:], b64[:4] + " " + b64[4:], b64[:4] + "=" + b64[4:], b64 + " junk"} {
		resp, _, err := rawExchange(t, p.public, "GET /x HTTP/1.1\r\nHost: a\r\nAuthorization: Basic "+v+"\r\nConnection: close\r\n\r\n", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 401 {
			t.Errorf("Basic %.12q...: %d, want 401", v, resp.StatusCode)
		}
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("the upstream received %d of them", n)
	}
}

// Fresh attack pass 7 N01/N02: Python's str.split/strip (and
// JavaScript's trim) take latin-1 NBSP (0xA0) and NEL (0x85) as
// whitespace, and Go's net/http lets those bytes through a header value.
// "Authorization: Bearer<0xA0><JWT>" was anonymous to the limiter and
// read as the user by flask-jwt-extended; "Cookie: a=1;<0xA0>olp_auth=<JWT>"
// on a route forwarding olp_auth as a cookie was anonymous and reached
// the upstream, where Django's parse_cookie reads olp_auth. Through the
// real binary: the Authorization spellings are 401 and never reach the
// upstream; the cookie pair never reaches it either.
func TestHostileJWTBesideLatin1WhitespaceSkipsTheUserLimit(t *testing.T) {
	const five = `rate_limits:
  rules:
    - {name: peruser, scope: user, algorithm: fixed_window, limit: 5, window: 50s, mode: enforce}
`
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "    rate_limits: [peruser]\n    cookies: {forward: [{cookie: olp_auth}]}\n", five), "AUTH_JWT_SECRET="+identitySecret)
	tok := identityToken(t, "u-nbsp", 0)
	for _, sp := range []string{"\xa0", "\x85", "\xa0\xa0", "\xc2\xa0"} {
		for _, v := range []string{"Bearer" + sp + tok, "JWT" + sp + tok} {
			if status, _, _ := identityGet(t, p.public, "Authorization: "+v); status != 401 {
				t.Errorf("Authorization: %q + JWT: status %d, want 401", strings.TrimSuffix(v, tok), status)
			}
		}
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("the upstream received %d of the Authorization spellings", n)
	}
	// Each cookie spelling, with a user of its own, 7 times: the token
	// either never reaches the upstream, or it is the credential the
	// limiter counted (5 × 200 then 429: UTF-8 NBSP, which Go trims too).
	for i, sp := range []string{"\xa0", "\x85", "\xc2\xa0"} {
		for j, pattern := range []string{"a=1;%solp_auth=%s", "%solp_auth=%s"} {
			tok := identityToken(t, fmt.Sprintf("u-nbsp-cookie-%d-%d", i, j), 0)
			line := fmt.Sprintf(pattern, sp, tok)
			var statuses []int
			reached := false
			for range 7 {
				before := len(up.requests())
				status, _, _ := identityGet(t, p.public, "Cookie: "+line)
				statuses = append(statuses, status)
				if reqs := up.requests(); len(reqs) > before && strings.Contains(reqs[len(reqs)-1].Header.Get("Cookie"), tok) {
					reached = true
				}
			}
			if reached && !slices.Equal(statuses, []int{200, 200, 200, 200, 200, 429, 429}) {
				t.Errorf("Cookie %q reached the upstream uncounted: statuses %v", line, statuses)
			}
		}
	}
}
