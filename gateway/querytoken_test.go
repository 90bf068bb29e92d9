package gateway

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/olp-edu/borda/ratelimit"
)

// A token in the query (RFC 6750 §2.3, ?access_token=…) reached the
// upstream while the limiter counted the request as anonymous, so a user
// skipped every per-user limit (fresh attack pass A51). Now the query
// token is the limiter's identity when no other credential is present,
// in every spelling the query parsers read, and one that differs from the
// header's (or from another query token) is refused.
func TestQueryTokenIsTheLimitersIdentityOrRefused(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, routes(under(testRoute(t, "api", up.URL), "/api")), withVerifier(t),
		withLimiter(realLimiter(t, ratelimit.Rule{Name: "peruser", Scope: ratelimit.ScopeUser, Limit: 2, Window: time.Minute, Routes: []string{"api"}})))
	exp := time.Now().Add(time.Hour).Unix()
	for i, spell := range []func(tok string) string{
		func(tok string) string { return "/api/x?access_token=" + tok },
		func(tok string) string { return "/api/x?a=1&access_token=" + url.QueryEscape(tok) + "&b=2" },
		func(tok string) string { return "/api/x?access_token=" + tok + "&access_token=" + tok },
		func(tok string) string { return "/api/x?access_token=&access_token=" + tok },
		func(tok string) string { return "/api/x?access%5Ftoken=" + tok },
		func(tok string) string { return "/api/x?%61ccess_token=" + tok },
		// PHP's, Rack's and ASP.NET's readings of the name (A49)
		func(tok string) string { return "/api/x?access.token=" + tok },
		func(tok string) string { return "/api/x?access+token=" + tok },
		func(tok string) string { return "/api/x?access%20token=" + tok },
		func(tok string) string { return "/api/x?access[token=" + tok },
		func(tok string) string { return "/api/x?%20access_token=" + tok },
		func(tok string) string { return "/api/x?access_token[]=" + tok },
		func(tok string) string { return "/api/x?access_token%5B0%5D=" + tok },
		func(tok string) string { return "/api/x?ACCESS_TOKEN=" + tok },
	} {
		tok := signHS256(t, testSecret, jwt.MapClaims{"sub": "q-user-" + string(rune('a'+i)), "exp": exp})
		for n, want := range []int{200, 200, 429} {
			if res, _ := rawGet(t, h, spell(tok)); res.StatusCode != want {
				t.Fatalf("spelling %d request %d (%s): %d, want %d", i, n+1, spell("T"), res.StatusCode, want)
			}
		}
	}
	a := signHS256(t, testSecret, jwt.MapClaims{"sub": "q-a", "exp": exp})
	b := signHS256(t, testSecret, jwt.MapClaims{"sub": "q-b", "exp": exp})
	for _, tc := range []struct {
		path    string
		headers []string
	}{
		{"/api/x?access_token=" + a, []string{"Authorization: Bearer " + b}},
		{"/api/x?access_token=" + a + "&access_token=" + b, nil},
	} {
		if res, body := rawGet(t, h, tc.path, tc.headers...); res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "Credenciais") {
			t.Errorf("%s %q: %d %q, want the 400 problem", tc.path, tc.headers, res.StatusCode, body)
		}
	}
	if res, _ := rawGet(t, h, "/api/x?access_token="+a, "Authorization: Bearer "+a); res.StatusCode != http.StatusOK {
		t.Errorf("the same token in the header and the query: %d, want 200", res.StatusCode)
	}
}

// queryTokenValues decodes every pair as url.ParseQuery (what Go, Rack and
// Express upstreams read) does, over every spelling of key and value.
func TestQueryValuesReadsWhatParseQueryReads(t *testing.T) {
	for _, raw := range []string{
		"access_token=a", "x=1&access_token=a&y=2", "access%5Ftoken=a", "%61ccess_token=a%2Bb",
		"access_token=a+b", "access+token=a", "access_token=a&access_token=b", "access_token",
		"access_token=%zz&access_token=ok", "%zz=1&access_token=a", "access_token=&x", "",
		"access.token=a&ACCESS_TOKEN=b", "access_token[]=a%20b",
	} {
		q, _ := url.ParseQuery(raw)
		var want []string
		for k, vs := range q {
			if isQueryTokenKey(k) {
				want = append(want, vs...)
			}
		}
		got := queryTokenValues(raw)
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(want, got) {
			t.Errorf("%q: queryTokenValues %q, ParseQuery %q", raw, got, want)
		}
	}
}

// TestQueryTokenKeysEveryModelledParserReadsAsAccessToken: "access.token",
// "access token", "access[token", " access_token" are $_GET['access_token']
// to PHP (names mangled: leading spaces dropped, ' ' '.' and an unmatched
// '[' become '_'), "access_token[]" and "access_token[0]" an array whose
// first element PHP, Rack and qs hand on, and ASP.NET reads names without
// case; each skipped the per-user limits as an anonymous request (fresh
// attack pass A49). The expectations are the parsers' documented rules,
// written out by hand.
func TestQueryTokenKeysEveryModelledParserReadsAsAccessToken(t *testing.T) {
	for key, want := range map[string]bool{
		"access_token": true, "access.token": true, "access token": true, "access[token": true,
		" access_token": true, "  access.token": true, "access_token[]": true, "access_token[0]": true,
		"access_token[a][b]": true, "ACCESS_TOKEN": true, "Access_Token": true, "access.TOKEN[]": true,
		"access_tokens": false, "xaccess_token": false, "access_toke": false, "access-token": false,
		"access_token ": false, "accesstoken": false, "token": false, "access__token": false,
		"access]token": false, "": false,
	} {
		if got := isQueryTokenKey(key); got != want {
			t.Errorf("isQueryTokenKey(%q) = %v, want %v", key, got, want)
		}
	}
	// The precheck never hides a candidate.
	for _, raw := range []string{"access.token=x", "ACCESS_TOKEN=x", "a=1&access+TOKEN=x", "access%5Btoken=x", "ToKeN"} {
		if !mayHoldQueryToken(raw) {
			t.Errorf("mayHoldQueryToken(%q) = false", raw)
		}
	}
	if mayHoldQueryToken("page=2&sort=name") {
		t.Error("mayHoldQueryToken of a query without token or escape = true")
	}
}
