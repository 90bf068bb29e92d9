package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHostileFormBodyTokenSkipsTheUserLimit (fresh attack pass 2, A10): an
// RFC 6750 §2.2 form body, access_token=<jwt> in an
// application/x-www-form-urlencoded POST, reached the upstream as the
// user's credential while the limiter counted the request anonymous (12
// × 200 on a 10/min user rule). Through the real binary: in several
// media-type and key spellings the body token is the user's identity (the
// second request is 429), the upstream gets the body unchanged, a body
// token beside a different Bearer is refused 400, and a form over 64 KiB
// is refused 413.
func TestHostileFormBodyTokenSkipsTheUserLimit(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "    rate_limits: [peruser]\n", identityLimited), "AUTH_JWT_SECRET="+identitySecret)
	post := func(head, body string) *http.Response {
		t.Helper()
		resp, _, err := rawExchange(t, p.public, fmt.Sprintf("POST /x HTTP/1.1\r\nHost: a\r\n%sContent-Length: %d\r\nConnection: close\r\n\r\n%s", head, len(body), body), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for i, tc := range []struct{ ctype, body string }{
		{"application/x-www-form-urlencoded", "access_token=%s"},
		{"application/x-www-form-urlencoded; charset=UTF-8", "note=oi&access_token=%s"},
		{"APPLICATION/X-WWW-FORM-URLENCODED", "x=1;access_token=%s"},
		{"application/x-www-form-urlencoded", "access.token=%s"},
		{"", "access_token=%s"},
	} {
		tok := identityToken(t, fmt.Sprintf("u-form-%d", i), 0)
		body := fmt.Sprintf(tc.body, tok)
		head := ""
		if tc.ctype != "" {
			head = "Content-Type: " + tc.ctype + "\r\n"
		}
		codes := []int{post(head, body).StatusCode, post(head, body).StatusCode}
		if codes[0] != 200 || codes[1] != http.StatusTooManyRequests {
			t.Errorf("%q %q: %v, want [200 429] (the user's limit)", tc.ctype, tc.body, codes)
		}
		seen := up.requests()
		if last := seen[len(seen)-1]; last.Body != body {
			t.Errorf("%q: the upstream got body %q, want it unchanged", tc.body, last.Body)
		}
	}
	a, b := identityToken(t, "u-form-a", 0), identityToken(t, "u-form-b", 0)
	if resp := post("Content-Type: application/x-www-form-urlencoded\r\nAuthorization: Bearer "+a+"\r\n", "access_token="+b); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a body token beside a different Bearer: %d, want 400", resp.StatusCode)
	}
	big := "pad=" + strings.Repeat("a", 64<<10)
	if resp := post("Content-Type: application/x-www-form-urlencoded\r\n", big); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a %d-byte form: %d, want 413", len(big), resp.StatusCode)
	}
}

// TestHostileManyAuthCookiesAreVerifiedAndSkipTheIPLimit (fresh attack
// pass 2, A66): 120 olp_auth cookies with bad signatures cost one
// signature verification each (about 7 ms of CPU per request with
// RS256) and were answered 400 before the per-IP rule counted them, so
// one address could repeat it for ever. Through the real binary: the
// request is refused "Credenciais demais" before any verification, and
// the refusals spend the address's burst budget (3 here): the 4th is 429.
func TestHostileManyAuthCookiesAreVerifiedAndSkipTheIPLimit(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "    rate_limits: [burst, peruser]\n", identityLimited+`    - name: burst
      scope: ip
      algorithm: fixed_window
      limit: 3
      window: 50s
      mode: enforce
`), "AUTH_JWT_SECRET="+identitySecret)
	var cookies []string
	for i := range 120 {
		tok := identityToken(t, "u-many", 0)
		cookies = append(cookies, "olp_auth="+tok[:len(tok)-4]+fmt.Sprintf("%03dA", i))
	}
	var codes []int
	for range 5 {
		resp, body, err := rawExchange(t, p.public, "GET /x HTTP/1.1\r\nHost: a\r\nCookie: "+strings.Join(cookies, "; ")+"\r\nConnection: close\r\n\r\n", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, resp.StatusCode)
		if resp.StatusCode == 400 && !strings.Contains(body, "Credenciais demais") {
			t.Errorf("400 body %q, want the too-many-credentials problem", body)
		}
	}
	if fmt.Sprint(codes) != "[400 400 400 429 429]" {
		t.Errorf("120 olp_auth cookies, 5 times from one address: %v, want [400 400 400 429 429]", codes)
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("the upstream saw %d requests", n)
	}
}

// TestHostileFormTokenBehindAHopByHopContentType (fresh attack pass 3,
// C13, C14): "Connection: close, Content-Type" hid a text/plain line
// from the upstream (ReverseProxy drops the headers Connection names),
// and an empty Content-Type is absent to Rack 2: both upstreams received
// a POST they parse as a form, access_token=<jwt> in it, while the
// limiter counted it anonymous (7 × 200 on a 5/min user rule). Through
// the real binary, for each spelling, 7 requests: 5 × 200 then 429, and
// the upstream got no (or a blank) Content-Type.
func TestHostileFormTokenBehindAHopByHopContentType(t *testing.T) {
	up := recordingUpstream(t)
	rules := strings.Replace(identityLimited, "limit: 1\n", "limit: 5\n", 1)
	p := startServe(t, minimalServe(up.URL, "    rate_limits: [peruser]\n", rules), "AUTH_JWT_SECRET="+identitySecret)
	for i, head := range []string{
		"Connection: close, Content-Type\r\nContent-Type: text/plain\r\n",
		"Connection: close\r\nConnection: content-type\r\nContent-Type: application/json\r\n",
		"Connection: close,CONTENT-TYPE\r\nContent-Type: text/plain\r\n",
		"Connection: close\r\nContent-Type: \r\n",
		"Connection: close\r\nContent-Type:\t\r\n",
	} {
		body := "access_token=" + identityToken(t, fmt.Sprintf("u-hop-%d", i), 0)
		var codes []int
		for range 7 {
			resp, _, err := rawExchange(t, p.public, fmt.Sprintf("POST /x HTTP/1.1\r\nHost: a\r\n%sContent-Length: %d\r\n\r\n%s", head, len(body), body), 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			codes = append(codes, resp.StatusCode)
		}
		if fmt.Sprint(codes) != "[200 200 200 200 200 429 429]" {
			t.Errorf("%q: %v, want 5 × 200 then 429 (the user's limit)", head, codes)
		}
		seen := up.requests()
		last := seen[len(seen)-1]
		if ct := strings.TrimSpace(last.Header.Get("Content-Type")); ct != "" || last.Body != body {
			t.Errorf("%q: the upstream got Content-Type %q, body %q; the test models a blank Content-Type and the body unchanged", head, ct, last.Body)
		}
	}
}
