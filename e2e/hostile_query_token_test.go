package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestHostileQueryTokenSpellingsPHPReadsSkipTheUserLimit (attack pass
// A49): ?access.token=, ?access+token=, ?access%20token=, ?access[token=,
// ?%20access_token= and ?access_token[]= are $_GET['access_token'] to a
// PHP upstream, but the limiter counted them as anonymous. Through the
// real binary: every spelling is the user's identity (its second request
// is 429), like ?access_token=.
func TestHostileQueryTokenSpellingsPHPReadsSkipTheUserLimit(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "    rate_limits: [peruser]\n", identityLimited), "AUTH_JWT_SECRET="+identitySecret)
	for i, key := range []string{"access_token", "access.token", "access+token", "access%20token", "access%2Etoken",
		"access[token", "%20access_token", "access_token[]", "access_token[0]"} {
		tok := identityToken(t, "u-php-"+string(rune('a'+i)), 0)
		codes := []int{}
		for range 2 {
			resp, _, err := rawExchange(t, p.public, "GET /x?"+key+"="+tok+" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			codes = append(codes, resp.StatusCode)
		}
		if codes[0] != 200 || codes[1] != http.StatusTooManyRequests {
			t.Errorf("?%s=<token>: %v, want [200 429] (the user's limit)", key, codes)
		}
	}
}

// TestHostilePortalTokenReachesAThirdPartyRoute (attack pass A93): a
// route that hands its upstream no session (cookies.forward: []) still
// handed it the portal's session token when the client sent it as
// Authorization: Bearer or ?access_token= (SPAs attach it to every
// same-origin request). Through the real binary: a token that verifies
// as the portal's never reaches that upstream in any form; the third
// party's own credential (one that does not verify) still passes.
func TestHostilePortalTokenReachesAThirdPartyRoute(t *testing.T) {
	up, p := startThirdPartyRoute(t)
	tok := identityToken(t, "u-third", 0)
	for _, req := range []string{
		"GET /third/dump HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer " + tok + "\r\n",
		"GET /third/dump HTTP/1.1\r\nHost: a\r\nAuthorization: bearer " + tok + "\r\n",
		"GET /third/dump?access_token=" + tok + "&x=1 HTTP/1.1\r\nHost: a\r\n",
		"GET /third/dump?access.token=" + tok + " HTTP/1.1\r\nHost: a\r\n",
		"GET /third/dump?access_token%5B%5D=" + tok + " HTTP/1.1\r\nHost: a\r\n",
	} {
		resp, _, err := rawExchange(t, p.public, req+"Connection: close\r\n\r\n", 10*time.Second)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%q: %v %v", req, resp, err)
		}
	}
	seen := up.requests()
	if len(seen) != 5 {
		t.Fatalf("upstream saw %d requests, want 5", len(seen))
	}
	for _, r := range seen {
		if strings.Contains(r.Header.Get("Authorization"), tok) || strings.Contains(r.RequestURI, tok) {
			t.Errorf("the third party got the portal's token: Authorization %q, query %q", r.Header.Get("Authorization"), r.RequestURI)
		}
	}
	if !strings.Contains(seen[2].RequestURI, "x=1") {
		t.Errorf("the other query parameters went too: %q", seen[2].RequestURI)
	}
	// The third party's own credential does not verify as the portal's: it passes.
	resp, _, err := rawExchange(t, p.public, "GET /third/own?access_token=third-party-key HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer third-party-key\r\nConnection: close\r\n\r\n", 10*time.Second)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	last := up.requests()[5]
	if last.Header.Get("Authorization") != "Bearer third-party-key" || !strings.Contains(last.RequestURI, "third-party-key") {
		t.Errorf("the third party's own credential was removed: %q %q", last.Header.Get("Authorization"), last.RequestURI)
	}
}

// TestHostileQueryTokenSpellingsPHPAndRack2ReadSkipTheUserLimit (fresh
// attack pass 2, A61): "?access_token%00x=" (PHP ends a name at NUL),
// "?x=1;access_token=" and "?access_token=…;x=1" (Rack 2 splits on ';'),
// "?[access_token]=" (Rack 2 drops leading brackets) reached the upstream
// as the user's token while the limiter counted them anonymous. Through
// the real binary: each is the user's identity (its second request 429).
func TestHostileQueryTokenSpellingsPHPAndRack2ReadSkipTheUserLimit(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "    rate_limits: [peruser]\n", identityLimited), "AUTH_JWT_SECRET="+identitySecret)
	for i, spell := range []string{"access_token%%00x=%s", "access_token%%00=%s", "x=1;access_token=%s", "access_token=%s;x=1",
		"x=1;%%20access_token=%s", "%%5Baccess_token%%5D=%s", "access_token%%5D=%s", "access_token%%00%%zz=%s"} {
		tok := identityToken(t, "u-rack-"+string(rune('a'+i)), 0)
		q := fmt.Sprintf(spell, tok)
		codes := []int{}
		for range 2 {
			resp, _, err := rawExchange(t, p.public, "GET /x?"+q+" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			codes = append(codes, resp.StatusCode)
		}
		if codes[0] != 200 || codes[1] != http.StatusTooManyRequests {
			t.Errorf("?%s: %v, want [200 429] (the user's limit)", fmt.Sprintf(spell, "T"), codes)
		}
	}
}

// Fresh attack pass 7 X01: on a route that hands its upstream no session
// (forward: []) and where a per-user rule applies (so the gateway reads
// a form body's access_token as a candidate), the portal's token posted
// in the body reached the third party byte for byte. Through the real
// binary: every body pair holding it is removed, the rest kept.
func TestHostilePortalTokenInAFormBodyReachesAThirdPartyRoute(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe("http://127.0.0.1:1", "", `  - name: third
    path_prefix: /third
    upstream: "`+up.URL+`"
    cookies: {forward: []}
  - name: thirdip
    path_prefix: /thirdip
    upstream: "`+up.URL+`"
    cookies: {forward: []}
rate_limits:
  rules:
    - {name: peruser, scope: user, algorithm: fixed_window, limit: 100, window: 50s, mode: enforce, routes: [third]}
    - {name: perip, scope: ip, algorithm: fixed_window, limit: 100, window: 50s, mode: enforce, routes: [thirdip]}
`), "AUTH_JWT_SECRET="+identitySecret)
	tok := identityToken(t, "u-third-form", 0)
	// /thirdip has per-IP rules only (fresh attack pass 8 B01: the form
	// was not read there, and the token went through).
	for _, target := range []string{"/third/form", "/thirdip/form"} {
		for _, body := range []string{"access_token=" + tok + "&x=1", "x=1&access.token=" + tok, "x=1&ACCESS_TOKEN=" + tok} {
			req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: a\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", target, len(body), body)
			resp, _, err := rawExchange(t, p.public, req, 10*time.Second)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s %q: %v %v", target, body, resp, err)
			}
			seen := up.requests()
			if got := seen[len(seen)-1].Body; strings.Contains(got, tok) || got != "x=1" {
				t.Errorf("%s %q: the third party got body %q, want \"x=1\"", target, body, got)
			}
		}
	}
}

// Fresh attack pass 8 Q01: the portal's verified JWT under a query key
// that is no access_token spelling ("?token=", "?jwt=", "?auth=Bearer
// <t>", "?access_token=Bearer <t>") reached a route that forwards no
// session, with no other credential in the request. Through the real
// binary: every pair whose value holds a JWS that verifies is removed,
// whatever its key.
func TestHostilePortalTokenUnderAnyQueryKeyReachesAThirdPartyRoute(t *testing.T) {
	up, p := startThirdPartyRoute(t)
	tok := identityToken(t, "u-third-anykey", 0)
	for _, q := range []string{"token=" + tok + "&x=1", "x=1&jwt=" + tok, "x=1&auth=Bearer%20" + tok, "access_token=Bearer%20" + tok + "&x=1"} {
		req := "GET /third/q?" + q + " HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
		resp, _, err := rawExchange(t, p.public, req, 10*time.Second)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%q: %v %v", q, resp, err)
		}
		seen := up.requests()
		if got := seen[len(seen)-1].RequestURI; strings.Contains(got, tok) || !strings.HasSuffix(got, "?x=1") {
			t.Errorf("%q: the third party got %q, want /third/q?x=1", q, got)
		}
	}
}

// TestHostilePortalTokenEncodedOrAsAKeyReachesAThirdPartyRoute (fresh
// attack pass 9, U01-U04, U07) on the real binary: the portal's token
// with its dots written %2E (every parser decodes it back), as a bare
// query key ("?<token>", PHP's QUERY_STRING), after five JWS-shaped decoys
// that spent the verification budget, and in a Referer behind such
// decoys: none reaches the third party.
func TestHostilePortalTokenEncodedOrAsAKeyReachesAThirdPartyRoute(t *testing.T) {
	up, p := startThirdPartyRoute(t)
	tok := identityToken(t, "u-third-encoded", 0)
	enc := strings.ReplaceAll(tok, ".", "%2E")
	decoys := "a=aa.bb.cc&b=aa.bb.cd&c=aa.bb.ce&d=aa.bb.cf&e=aa.bb.cg"
	leaks := func(s string) bool {
		d, err := url.QueryUnescape(s)
		return strings.Contains(s, tok) || (err == nil && strings.Contains(d, tok))
	}
	for _, c := range []struct{ query, referer string }{
		{"jwt=" + enc + "&x=1", ""},
		{tok + "&x=1", ""},
		{enc + "&x=1", ""},
		{decoys + "&jwt=" + tok + "&x=1", ""},
		{"x=1", "http://portal.example.org/app?access_token=" + enc},
		{decoys + "&x=1", "http://portal.example.org/app?access_token=" + tok},
	} {
		req := "GET /third/q?" + c.query + " HTTP/1.1\r\nHost: a\r\nConnection: close\r\n"
		if c.referer != "" {
			req += "Referer: " + c.referer + "\r\n"
		}
		resp, _, err := rawExchange(t, p.public, req+"\r\n", 10*time.Second)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%q: %v %v", c.query, resp, err)
		}
		seen := up.requests()
		last := seen[len(seen)-1]
		if got := last.RequestURI; leaks(got) || !strings.HasSuffix(got, "x=1") {
			t.Errorf("%q: the third party got %q", c.query, got)
		}
		if got := last.Header.Get("Referer"); leaks(got) {
			t.Errorf("Referer %q reached the third party as %q", c.referer, got)
		}
	}
}

// startThirdPartyRoute starts `borda serve` with the portal's JWT secret
// and a route /third that forwards no session (cookies.forward: []) to a
// recording upstream.
func startThirdPartyRoute(t *testing.T) (*recorder, *process) {
	t.Helper()
	up := recordingUpstream(t)
	p := startServe(t, minimalServe("http://127.0.0.1:1", "", `  - name: third
    path_prefix: /third
    upstream: "`+up.URL+`"
    cookies: {forward: []}
`), "AUTH_JWT_SECRET="+identitySecret)
	return up, p
}
