package gateway

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/olp-edu/borda/cookies"
	"github.com/olp-edu/borda/ratelimit"
)

// tokenEncodings are spellings of tok that every query and form parser
// (PHP, Rack, Django, Express, Go's url.ParseQuery) decodes back to it:
// as is, each "." as "%2E" or "%2e" (fresh attack pass 9 U01-U03: the
// filter counted dots before decoding), every byte percent-encoded, and
// one dot escaped.
func tokenEncodings(tok string) []string {
	all := func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			b.WriteString("%" + strings.ToUpper(string("0123456789abcdef"[s[i]>>4])+string("0123456789abcdef"[s[i]&15])))
		}
		return b.String()
	}
	return []string{
		tok,
		strings.ReplaceAll(tok, ".", "%2E"),
		strings.ReplaceAll(tok, ".", "%2e"),
		strings.Replace(tok, ".", "%2E", 1),
		all(tok),
	}
}

// decodesTo reports whether raw, a query or a form, decoded as a whole
// or pair by pair (keys and values), holds tok.
func decodesTo(raw, tok string) bool {
	if d, err := url.QueryUnescape(raw); err == nil && strings.Contains(d, tok) {
		return true
	}
	for _, pair := range strings.FieldsFunc(raw, func(r rune) bool { return r == '&' || r == ';' }) {
		if d, err := url.QueryUnescape(pair); err == nil && strings.Contains(d, tok) {
			return true
		}
	}
	return strings.Contains(raw, tok)
}

// TestUntrustedRouteNeverReceivesThePortalsTokenInAnyEncoding: the
// portal's verified token reaches a route that forwards no session in no
// spelling a parser decodes back to it, in no place: a query value under
// any key, a key without "=" (U07: "?<token>", the whole QUERY_STRING to
// PHP), a key with a value, a form body's value or key, and a Referer
// whose query or path holds it (U04: the request's own JWS-shaped decoys
// spent the verification budget the Referer depended on).
func TestUntrustedRouteNeverReceivesThePortalsTokenInAnyEncoding(t *testing.T) {
	t.Parallel()
	up, bodies := bodyUpstream(t)
	mapas := under(testRoute(t, "mapas", up.URL), "/mapas")
	mapas.Cookies.Forward = []cookies.Forward{}
	rules := []ratelimit.Rule{{Name: "peruser", Scope: ratelimit.ScopeUser, Limit: 1000, Window: time.Minute, Routes: []string{"mapas"}}}
	h := newHarness(t, routes(mapas), withVerifier(t), withLimiter(realLimiter(t, rules...)))
	tok := signHS256(t, testSecret, jwt.MapClaims{"sub": "u-u01", "exp": time.Now().Add(time.Hour).Unix()})
	decoys := "a=aa.bb.cc&b=aa.bb.cd&c=aa.bb.ce&d=aa.bb.cf&e=aa.bb.cg"
	n := 0
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format, args...)
		if n++; n > 20 {
			t.FailNow()
		}
	}
	for _, enc := range tokenEncodings(tok) {
		for _, q := range []string{"jwt=" + enc, enc, enc + "=1", "z=1&" + enc, "x=Bearer%20" + enc, decoys + "&jwt=" + enc} {
			if res, body := rawGet(t, h, "/mapas/t?"+q); res.StatusCode != 200 {
				fail("?%s: %d %s", q, res.StatusCode, body)
				continue
			}
			if got := up.last(t).RequestURI; decodesTo(got, tok) {
				fail("?%s reached the third party as %q", q, got)
			}
		}
		for _, form := range []string{"jwt=" + enc, enc, enc + "=1", "z=1&tok=" + enc} {
			res, _ := rawSend(t, h, "POST", "/mapas/f", form, "Content-Type: application/x-www-form-urlencoded")
			if res.StatusCode != 200 {
				fail("form %q: %d", form, res.StatusCode)
				continue
			}
			if got := bodies(); decodesTo(got[len(got)-1], tok) {
				fail("form %q reached the third party as %q", form, got[len(got)-1])
			}
		}
		for _, ref := range []string{
			"https://portal.example.org/app?access_token=" + enc,
			"https://portal.example.org/app/" + enc + "/x",
			"https://portal.example.org/app?x=1&" + enc,
		} {
			for _, target := range []string{"/mapas/pixel", "/mapas/pixel?" + decoys} {
				if res, body := rawGet(t, h, target, "Referer: "+ref); res.StatusCode != 200 {
					fail("Referer %q: %d %s", ref, res.StatusCode, body)
					continue
				}
				if got := up.last(t).Header.Get("Referer"); decodesTo(got, tok) || got != "https://portal.example.org/" {
					fail("Referer %q on %s reached the third party as %q, want its origin", ref, target, got)
				}
			}
		}
	}
	// Controls: what holds no JWS passes byte for byte.
	for _, q := range []string{"z=1", "a=%2E&b=c", "v=1.2"} {
		if res, _ := rawGet(t, h, "/mapas/t?"+q); res.StatusCode != 200 || up.last(t).RequestURI != "/mapas/t?"+q {
			t.Errorf("?%s changed on its way: %q", q, up.last(t).RequestURI)
		}
	}
	if res, _ := rawGet(t, h, "/mapas/pixel", "Referer: https://portal.example.org/app?x=1"); res.StatusCode != 200 ||
		up.last(t).Header.Get("Referer") != "https://portal.example.org/app?x=1" {
		t.Errorf("a Referer without a JWS was changed: %q", up.last(t).Header.Get("Referer"))
	}
}
