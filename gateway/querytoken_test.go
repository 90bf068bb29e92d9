package gateway

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
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
	cfg := parseConfig(t, `
routes:
  - {name: api, path_prefix: /api, upstream: "{up}", rate_limits: [peruser]}
rate_limits:
  rules:
    - {name: peruser, scope: user, limit: 2, window: 1m}
`, map[string]string{"AUTH_JWT_SECRET": testSecret}, map[string]string{"up": up.URL})
	h := newHarness(t, cfg, withLimiter(realLimiter(t, cfg)))
	exp := time.Now().Add(time.Hour).Unix()
	for i, spell := range []func(tok string) string{
		func(tok string) string { return "/api/x?access_token=" + tok },
		func(tok string) string { return "/api/x?a=1&access_token=" + url.QueryEscape(tok) + "&b=2" },
		func(tok string) string { return "/api/x?access_token=" + tok + "&access_token=" + tok },
		func(tok string) string { return "/api/x?access_token=&access_token=" + tok },
		func(tok string) string { return "/api/x?access%5Ftoken=" + tok },
		func(tok string) string { return "/api/x?%61ccess_token=" + tok },
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

// queryValues reads the parameter as url.ParseQuery (what Go, Rack and
// Express upstreams read) does, over every spelling of key and value.
func TestQueryValuesReadsWhatParseQueryReads(t *testing.T) {
	for _, raw := range []string{
		"access_token=a", "x=1&access_token=a&y=2", "access%5Ftoken=a", "%61ccess_token=a%2Bb",
		"access_token=a+b", "access+token=a", "access_token=a&access_token=b", "access_token",
		"access_token=%zz&access_token=ok", "%zz=1&access_token=a", "access_token=&x", "",
	} {
		q, _ := url.ParseQuery(raw)
		var want []string
		for k, vs := range q {
			if k == queryTokenParam || phpQueryKey(k) == queryTokenParam {
				want = append(want, vs...)
			}
		}
		got := queryValues(raw, queryTokenParam)
		slices.Sort(want)
		got = slices.Sorted(slices.Values(got))
		if strings.Join(want, "\x00") != strings.Join(got, "\x00") || len(want) != len(got) {
			t.Errorf("%q: queryValues %q, ParseQuery %q", raw, got, want)
		}
	}
}

// TestQueryTokenSpellingsPHPReadsAsAccessToken (attack pass A49): the
// names PHP's query parser (so Laravel, Symfony) turns into
// $_GET['access_token'], written from PHP's documented rules ('.', ' '
// and an unmatched '[' become '_', leading spaces go, "name[]" is an
// array), each read as the token; names PHP keeps apart are not.
func TestQueryTokenSpellingsPHPReadsAsAccessToken(t *testing.T) {
	for raw, want := range map[string]bool{
		"access_token=T": true, "access.token=T": true, "access+token=T": true, "access%20token=T": true,
		"access%2Etoken=T": true, "access[token=T": true, "%20access_token=T": true, "+access_token=T": true,
		"access_token[]=T": true, "access_token[0]=T": true, "access_token%5B%5D=T": true,
		"accesstoken=T": false, "access-token=T": false, "xaccess_token=T": false, "access_token_=T": false,
		"access_tokens=T": false, "Access_token=T": false, "access_token.=T": false,
	} {
		got := queryValues(raw, queryTokenParam)
		if (len(got) == 1 && got[0] == "T") != want {
			t.Errorf("%q: read as %q, want access_token %v", raw, got, want)
		}
		if stripped := stripQueryToken("a=1&"+raw+"&b=2", queryTokenParam); (stripped == "a=1&b=2") != want {
			t.Errorf("%q: stripped to %q", raw, stripped)
		}
	}
}
