package gateway

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/olp-edu/borda/cookies"
	"github.com/olp-edu/borda/ratelimit"
)

// bodyUpstream is a recording upstream that also keeps every body it read.
func bodyUpstream(t *testing.T) (*recordingUpstream, func() []string) {
	var mu sync.Mutex
	var bodies []string
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	})
	return up, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), bodies...)
	}
}

// rawSend sends one raw request (head lines without the final CRLF, then
// body with a Content-Length) and returns the response and its body.
func rawSend(t *testing.T, h *harness, method, target, body string, headers ...string) (*http.Response, string) {
	t.Helper()
	raw := method + " " + target + " HTTP/1.1\r\nHost: portal.example.org\r\nConnection: close\r\n"
	for _, hd := range headers {
		raw += hd + "\r\n"
	}
	if body != "" {
		raw += fmt.Sprintf("Content-Length: %d\r\n", len(body))
	}
	res, _, br := rawRequest(t, h.front.Listener.Addr().String(), raw+"\r\n"+body)
	b, _ := io.ReadAll(br)
	res.Body.Close()
	return res, string(b)
}

func formHarness(t *testing.T, up string, rules ...ratelimit.Rule) *harness {
	if rules == nil {
		rules = []ratelimit.Rule{{Name: "peruser", Scope: ratelimit.ScopeUser, Limit: 2, Window: time.Minute, Routes: []string{"api"}}}
	}
	return newHarness(t, routes(under(testRoute(t, "api", up), "/api")), withVerifier(t), withLimiter(realLimiter(t, rules...)))
}

// A token in an RFC 6750 §2.2 form body (access_token=… in an
// application/x-www-form-urlencoded POST) reached the upstream while the
// limiter counted the request as anonymous, so a user skipped every
// per-user limit (fresh attack pass 2 A10). Now it is the limiter's
// identity, in every media-type spelling an upstream parses as a form,
// every key spelling of the query token and every method with a body,
// and the upstream gets the body byte for byte.
func TestFormBodyTokenIsTheLimitersIdentity(t *testing.T) {
	t.Parallel()
	up, bodies := bodyUpstream(t)
	h := formHarness(t, up.URL)
	exp := time.Now().Add(time.Hour).Unix()
	type spelling struct {
		method, ctype, body string
	}
	var cases []spelling
	for _, ct := range []string{
		"Content-Type: application/x-www-form-urlencoded",
		"Content-Type: Application/X-WWW-Form-Urlencoded; charset=UTF-8",
		"Content-Type: application/x-www-form-urlencoded;charset=utf-8",
		"Content-Type:  application/x-www-form-urlencoded ; charset=\"utf-8\"",
		"Content-Type: application/x-www-form-urlencoded, text/plain", // PHP and Rack read up to ','
		"Content-Type: application/x-www-form-urlencoded garbage",     // PHP reads up to ' '
		"", // a POST without Content-Type: Rack 2 parses it as a form
	} {
		cases = append(cases, spelling{"POST", ct, "access_token=%s"})
	}
	for _, body := range []string{
		"a=1&access_token=%s&b=2", "x=1;access_token=%s", "access.token=%s", "access_token%%00x=%s",
		"ACCESS_TOKEN=%s", "access_token[]=%s", "%%5Baccess_token%%5D=%s", "access_token=&access_token=%s",
	} {
		cases = append(cases, spelling{"POST", "Content-Type: application/x-www-form-urlencoded", body})
	}
	for _, m := range []string{"PUT", "PATCH", "DELETE"} {
		cases = append(cases, spelling{m, "Content-Type: application/x-www-form-urlencoded", "access_token=%s"})
	}
	for i, c := range cases {
		tok := signHS256(t, testSecret, jwt.MapClaims{"sub": fmt.Sprintf("form-user-%d", i), "exp": exp})
		body := fmt.Sprintf(c.body, tok)
		var hdrs []string
		if c.ctype != "" {
			hdrs = append(hdrs, c.ctype)
		}
		for n, want := range []int{200, 200, 429} {
			res, _ := rawSend(t, h, c.method, "/api/x", body, hdrs...)
			if res.StatusCode != want {
				t.Fatalf("%s %q %q request %d: %d, want %d", c.method, c.ctype, c.body, n+1, res.StatusCode, want)
			}
		}
		if got := bodies(); got[len(got)-1] != body {
			t.Fatalf("%s %q: the upstream got body %q, want %q", c.method, c.ctype, got[len(got)-1], body)
		}
	}
}

// A form-body token is one more candidate credential: one that differs
// from the Authorization header's, the cookie's or the query's, or two
// differing ones in the body, are refused 400 like any two credentials
// for one slot; the same token twice passes.
func TestFormBodyTokenBesideAnotherCredentialIsRefused(t *testing.T) {
	t.Parallel()
	up, _ := bodyUpstream(t)
	h := formHarness(t, up.URL)
	exp := time.Now().Add(time.Hour).Unix()
	a := signHS256(t, testSecret, jwt.MapClaims{"sub": "form-a", "exp": exp})
	b := signHS256(t, testSecret, jwt.MapClaims{"sub": "form-b", "exp": exp})
	form := "Content-Type: application/x-www-form-urlencoded"
	for _, tc := range []struct {
		target, body string
		headers      []string
	}{
		{"/api/x", "access_token=" + a, []string{form, "Authorization: Bearer " + b}},
		{"/api/x", "access_token=" + a + "&access_token=" + b, []string{form}},
		{"/api/x", "access_token=" + a + ";access.token=" + b, []string{form}},
		{"/api/x?access_token=" + b, "access_token=" + a, []string{form}},
		{"/api/x?access_token=not-a-jwt", "access_token=" + a, []string{form}},
		{"/api/x", "access_token=" + a, []string{form, "Authorization: Bearer not-a-jwt"}},
	} {
		if res, body := rawSend(t, h, "POST", tc.target, tc.body, tc.headers...); res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "Credenciais") {
			t.Errorf("%s %q %q: %d %q, want the 400 problem", tc.target, tc.body, tc.headers, res.StatusCode, body)
		}
	}
	for _, tc := range []struct {
		target  string
		headers []string
	}{
		{"/api/x", []string{form, "Authorization: Bearer " + a}},
		{"/api/x?access_token=" + a, []string{form}},
	} {
		if res, _ := rawSend(t, h, "POST", tc.target, "access_token="+a, tc.headers...); res.StatusCode != http.StatusOK {
			t.Errorf("the same token twice (%s %q): %d, want 200", tc.target, tc.headers, res.StatusCode)
		}
	}
}

// The form body is read only up to MaxFormTokenBody, and only when it
// matters: a larger form is refused 413 before anything is forwarded (by
// its Content-Length, or once a chunked body passes the bound), a
// compressed one 415; a body that is not a form, or a route with no user
// or escola rule, is never read by the gateway.
func TestFormBodyReadIsBoundedAndOnlyWhereAUserRuleApplies(t *testing.T) {
	t.Parallel()
	up, bodies := bodyUpstream(t)
	h := formHarness(t, up.URL)
	form := "Content-Type: application/x-www-form-urlencoded"
	big := "access_token=x&pad=" + strings.Repeat("a", MaxFormTokenBody)
	if res, body := rawSend(t, h, "POST", "/api/x", big, form); res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(body, "Formulário grande demais") {
		t.Errorf("a %d-byte form: %d %q, want the 413 problem", len(big), res.StatusCode, body)
	}
	chunked := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(big), big)
	res, _, br := rawRequest(t, h.front.Listener.Addr().String(),
		"POST /api/x HTTP/1.1\r\nHost: a\r\n"+form+"\r\nTransfer-Encoding: chunked\r\n\r\n"+chunked)
	_, _ = io.ReadAll(br)
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a chunked %d-byte form: %d, want 413", len(big), res.StatusCode)
	}
	for _, enc := range []string{"gzip", "deflate", "br", "identity, gzip"} {
		if res, _ := rawSend(t, h, "POST", "/api/x", "access_token=x", form, "Content-Encoding: "+enc); res.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("Content-Encoding %s: %d, want 415", enc, res.StatusCode)
		}
	}
	if up.calls() != 0 {
		t.Fatalf("a refused form reached the upstream %d times", up.calls())
	}
	exact := "pad=" + strings.Repeat("a", MaxFormTokenBody-4)
	if res, _ := rawSend(t, h, "POST", "/api/x", exact, form); res.StatusCode != http.StatusOK || bodies()[0] != exact {
		t.Errorf("a form of exactly %d bytes: %d, want 200 and the body forwarded", MaxFormTokenBody, res.StatusCode)
	}
	// Not a form: never read, so never counted (and any size passes).
	exp := time.Now().Add(time.Hour).Unix()
	for i, ct := range []string{"Content-Type: application/json", "Content-Type: multipart/form-data; boundary=x",
		"Content-Type: text/plain", "Content-Type: application/x-www-form-urlencodedx"} {
		tok := signHS256(t, testSecret, jwt.MapClaims{"sub": fmt.Sprintf("not-form-%d", i), "exp": exp})
		for range 3 {
			if res, _ := rawSend(t, h, "POST", "/api/x", "access_token="+tok, ct); res.StatusCode != http.StatusOK {
				t.Errorf("%s: %d, want 200 (not a form: not read)", ct, res.StatusCode)
			}
		}
	}
	if res, _ := rawSend(t, h, "POST", "/api/x", big, "Content-Type: application/octet-stream"); res.StatusCode != http.StatusOK {
		t.Errorf("a large non-form body: %d, want 200", res.StatusCode)
	}
	// A route with only an IP rule: a large form passes, unread.
	ipOnly := formHarness(t, up.URL, ratelimit.Rule{Name: "burst", Scope: ratelimit.ScopeIP, Limit: 100, Window: time.Minute, Routes: []string{"api"}})
	if res, _ := rawSend(t, ipOnly, "POST", "/api/x", big, form); res.StatusCode != http.StatusOK {
		t.Errorf("a large form on a route without a user rule: %d, want 200", res.StatusCode)
	}
}

// On a route whose limiter keys no identity the gateway never reads the
// form body before the limiter decides: a blocked form POST with
// Expect: 100-continue never gets its 100 (the body stays unread).
func TestFormBodyNotReadWithoutAnIdentityRule(t *testing.T) {
	t.Parallel()
	for _, keys := range []bool{false, true} {
		up := newRecordingUpstream(t, nil)
		h := newHarness(t, routes(testRoute(t, "api", up.URL)))
		h.limiter.decide = func(ratelimitSubject) ratelimitVerdict { return blockVerdict() }
		h.limiter.identity = keys
		probe := &onceProbe{}
		req := h.newRequest(t, http.MethodPost, "", "/upload")
		req.Body = io.NopCloser(probe)
		req.ContentLength = 1
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Expect", "100-continue")
		client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: 5 * time.Second}}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusTooManyRequests {
			t.Errorf("identity rule %v: %d, want 429", keys, res.StatusCode)
		}
		if probe.read.Load() != keys {
			t.Errorf("identity rule %v: body read %v", keys, probe.read.Load())
		}
	}
}

// onceProbe is a one-byte body that reports whether it was read.
type onceProbe struct {
	read atomic.Bool
}

func (b *onceProbe) Read(p []byte) (int, error) {
	if b.read.Swap(true) {
		return 0, io.EOF
	}
	return copy(p, "x"), io.EOF
}

// The gateway's own read of a form body is bounded as the transport's is:
// a body that stalls is answered 408 at the route timeout (or at
// body_timeout), never waited on for ever before the limiter.
func TestStalledFormBodyIsCutLikeAnUpload(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	for _, tc := range []struct {
		routeTimeout, bodyTimeout time.Duration
	}{{100 * time.Millisecond, 10 * time.Second}, {10 * time.Second, 100 * time.Millisecond}} {
		rt := under(testRoute(t, "api", up.URL), "/api")
		rt.Upstream.Timeout = tc.routeTimeout
		h := newHarness(t, Options{BodyTimeout: tc.bodyTimeout, BodyMinRate: 500, Routes: []Route{rt}}, withVerifier(t),
			withLimiter(realLimiter(t, ratelimit.Rule{Name: "peruser", Scope: ratelimit.ScopeUser, Limit: 2, Window: time.Minute, Routes: []string{"api"}})))
		res, _, _ := rawRequest(t, h.front.Listener.Addr().String(),
			"POST /api/x HTTP/1.1\r\nHost: a\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 10\r\n\r\nac")
		res.Body.Close()
		if res.StatusCode != http.StatusRequestTimeout {
			t.Errorf("route timeout %v, body_timeout %v: %d, want 408", tc.routeTimeout, tc.bodyTimeout, res.StatusCode)
		}
	}
	if up.calls() != 0 {
		t.Errorf("a stalled form reached the upstream")
	}
}

// The form decision is made on the request the upstream receives (fresh
// attack pass 3 C13, C14): a Content-Type line a Connection header names
// is hop-by-hop, ReverseProxy drops it and a Rack 2 upstream parses the
// POST without Content-Type as a form; an empty or whitespace-only
// Content-Type is absent to Rack 2 as well. Every Connection spelling
// (any case, in a list, on its own line, padded) × every hidden or blank
// Content-Type counts the body's token as the user (200, 200, 429), and
// the upstream indeed gets no Content-Type, or a blank one; a Connection
// that names another header leaves a text/plain body anonymous.
func TestFormTokenBehindAHopByHopOrBlankContentType(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var ctypes [][]string
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		mu.Lock()
		ctypes = append(ctypes, r.Header["Content-Type"])
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	})
	lastCType := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return ctypes[len(ctypes)-1]
	}
	h := formHarness(t, up.URL)
	exp := time.Now().Add(time.Hour).Unix()
	n := 0
	counted := func(name string, headers ...string) {
		t.Helper()
		n++
		body := "access_token=" + signHS256(t, testSecret, jwt.MapClaims{"sub": fmt.Sprintf("hop-user-%d", n), "exp": exp})
		for i, want := range []int{200, 200, 429} {
			if res, _ := rawSend(t, h, "POST", "/api/x", body, headers...); res.StatusCode != want {
				t.Fatalf("%s %q request %d: %d, want %d", name, headers, i+1, res.StatusCode, want)
			}
		}
		for _, v := range lastCType() {
			if strings.TrimSpace(v) != "" {
				t.Fatalf("%s %q: the upstream got Content-Type %q, which the test models as hidden or blank", name, headers, v)
			}
		}
	}
	connections := [][]string{
		{"Connection: Content-Type"},
		{"Connection: content-type"},
		{"Connection: CONTENT-TYPE"},
		{"Connection: close, Content-Type"},
		{"Connection: Content-Type, close"},
		{"Connection: keep-alive,content-type"},
		{"Connection: ,, Content-Type ,"},
		{"Connection: close,\tContent-Type\t,x"},
		{"Connection: close", "Connection: Content-Type"},
	}
	for _, conn := range connections {
		for _, ct := range []string{
			"Content-Type: text/plain",
			"Content-Type: application/json",
			"Content-Type: multipart/form-data; boundary=x",
		} {
			counted("hidden", append(append([]string(nil), conn...), ct)...)
		}
	}
	for _, ct := range []string{"Content-Type:", "Content-Type: ", "Content-Type:\t", "Content-Type: \t ", "Content-Type:\t", "Content-Type:"} {
		counted("blank", ct)
	}
	counted("absent")
	counted("two blank lines", "Content-Type:", "Content-Type: ")
	// Control: a Connection that names another header, or a look-alike
	// ReverseProxy does not match, leaves text/plain with the upstream.
	for _, conn := range []string{"Connection: Content-Typo", "Connection: Content_Type", "Connection: ContentType", "Connection: Content-Type;x"} {
		body := "access_token=" + signHS256(t, testSecret, jwt.MapClaims{"sub": "hop-control", "exp": exp})
		for i := range 3 {
			if res, _ := rawSend(t, h, "POST", "/api/x", body, conn, "Content-Type: text/plain"); res.StatusCode != http.StatusOK {
				t.Fatalf("%q request %d: %d, want 200 (text/plain reaches the upstream: not a form)", conn, i+1, res.StatusCode)
			}
		}
		if got := lastCType(); len(got) != 1 || got[0] != "text/plain" {
			t.Fatalf("%q: the upstream got Content-Type %q, want text/plain", conn, got)
		}
	}
}

// A Content-Encoding line a Connection header names never reaches the
// upstream either, which then reads the body as sent: the gateway reads
// it as a form too (not 415), and a gzip line that does reach the
// upstream is still 415.
func TestFormTokenBehindAHopByHopContentEncoding(t *testing.T) {
	t.Parallel()
	up, _ := bodyUpstream(t)
	h := formHarness(t, up.URL)
	tok := signHS256(t, testSecret, jwt.MapClaims{"sub": "hop-coding", "exp": time.Now().Add(time.Hour).Unix()})
	form := "Content-Type: application/x-www-form-urlencoded"
	for i, want := range []int{200, 200, 429} {
		if res, _ := rawSend(t, h, "POST", "/api/x", "access_token="+tok, form, "Content-Encoding: gzip", "Connection: content-encoding"); res.StatusCode != want {
			t.Fatalf("hidden Content-Encoding request %d: %d, want %d", i+1, res.StatusCode, want)
		}
	}
	if res, _ := rawSend(t, h, "POST", "/api/x", "access_token="+tok, form, "Content-Encoding: gzip", "Connection: Content-Type-X"); res.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("forwarded Content-Encoding: %d, want 415", res.StatusCode)
	}
}

// formEncoded on the blank spellings: absent and blank are a form for a
// POST only.
func TestFormEncodedBlankContentTypeIsAbsent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lines  []string
		method string
		want   bool
	}{
		{nil, "POST", true}, {[]string{""}, "POST", true}, {[]string{" \t"}, "POST", true}, {[]string{"", ""}, "POST", true},
		{[]string{""}, "PUT", false}, {nil, "PATCH", false},
		{[]string{"text/plain"}, "POST", false}, {[]string{"", "text/plain"}, "POST", false},
		{[]string{";charset=utf-8"}, "POST", false}, {[]string{"*/*"}, "POST", false},
		{[]string{"", "application/x-www-form-urlencoded"}, "PUT", true},
		// Spellings of the form type: mime.ParseMediaType's (any case,
		// parameters, Unicode space around it: the ingress's parser) and
		// PHP's and Rack's (the text before ';', ',' or whitespace).
		{[]string{"Application/X-WWW-Form-Urlencoded; charset=utf-8"}, "PUT", true},
		{[]string{"application/x-www-form-urlencoded "}, "PUT", true},
		{[]string{"application/x-www-form-urlencoded, text/plain"}, "PUT", true},
		{[]string{"	application/x-www-form-urlencoded;"}, "PUT", true},
		{[]string{"text/plain", "application/x-www-form-urlencoded"}, "PUT", true},
		{[]string{"application/json"}, "POST", false}, {[]string{"text/plain"}, "PUT", false},
		{[]string{"application/x-www-form-urlencodedx"}, "POST", false},
		{[]string{"multipart/form-data; boundary=x"}, "POST", false},
	} {
		h := http.Header{}
		if tc.lines != nil {
			h["Content-Type"] = tc.lines
		}
		if got := formEncoded(tc.method, h); got != tc.want {
			t.Errorf("formEncoded(%s, %q) = %v, want %v", tc.method, tc.lines, got, tc.want)
		}
	}
}

// Fresh attack pass 7 X01: a form body posting the portal's token
// (access_token=<JWT>) to a route that hands its upstream no session
// (forward: []) reached the third party byte for byte, while the Bearer,
// query and cookie forms were removed (A93). Every form-body pair holding
// the verified token is removed, in every key spelling and framing
// (Content-Length or chunked), the other pairs kept byte for byte and the
// length set; a pair holding another value (the third party's own key)
// passes.
func TestUntrustedRouteNeverReceivesThePortalsTokenInAFormBody(t *testing.T) {
	t.Parallel()
	up, bodies := bodyUpstream(t)
	mapas := under(testRoute(t, "mapas", up.URL), "/mapas")
	mapas.Cookies.Forward = []cookies.Forward{}
	rules := []ratelimit.Rule{{Name: "peruser", Scope: ratelimit.ScopeUser, Limit: 100, Window: time.Minute, Routes: []string{"mapas"}}}
	h := newHarness(t, routes(mapas), withVerifier(t), withLimiter(realLimiter(t, rules...)))
	tok := signHS256(t, testSecret, jwt.MapClaims{"sub": "u-x01", "exp": time.Now().Add(time.Hour).Unix()})
	form := "Content-Type: application/x-www-form-urlencoded"
	for _, c := range []struct{ body, want string }{
		{"access_token=" + tok, ""},
		{"a=1&access_token=" + tok + "&b=%2F", "a=1&b=%2F"},
		{"a=1&ACCESS_TOKEN=" + tok, "a=1"},
		{"access.token=" + tok + "&z=9", "z=9"},
		{"access_token%5B%5D=" + tok + "&z=9", "z=9"},
		{"x=1;access_token=" + tok, "x=1"},
		{"access_token=third-party-key&z=9", "access_token=third-party-key&z=9"},
	} {
		res, _ := rawSend(t, h, "POST", "/mapas/f", c.body, form)
		if res.StatusCode != 200 {
			t.Fatalf("%q: %d", c.body, res.StatusCode)
		}
		if got := bodies(); got[len(got)-1] != c.want {
			t.Errorf("%q: the third party got body %q, want %q", c.body, got[len(got)-1], c.want)
		}
		if got := up.last(t); got.Header.Get("Content-Length") != "" && got.Header.Get("Content-Length") != fmt.Sprint(len(c.want)) {
			t.Errorf("%q: Content-Length %q for a body of %d", c.body, got.Header.Get("Content-Length"), len(c.want))
		}
	}
	// Chunked: the rewritten body goes with its length.
	body := "a=1&access_token=" + tok
	raw := "POST /mapas/f HTTP/1.1\r\nHost: portal.example.org\r\nConnection: close\r\n" + form + "\r\nTransfer-Encoding: chunked\r\n\r\n" +
		fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	res, _, br := rawRequest(t, h.front.Listener.Addr().String(), raw)
	_, _ = io.ReadAll(br)
	res.Body.Close()
	if got := bodies(); res.StatusCode != 200 || got[len(got)-1] != "a=1" {
		t.Errorf("chunked: %d, the third party got %q, want \"a=1\"", res.StatusCode, got[len(got)-1])
	}
}

// Fresh attack pass 8 B01: on a route that forwards no session and has
// per-IP rules only (no user or escola rule, so the form was never read),
// "access_token=<portal JWT>" still reached the third party. Such a route
// reads a form body to take the portal's token out of it; the third
// party's own key passes, with the portal's Bearer beside it too (no
// conflict is refused there).
func TestUntrustedRouteWithoutIdentityRulesNeverReceivesThePortalsFormToken(t *testing.T) {
	t.Parallel()
	up, bodies := bodyUpstream(t)
	tp := under(testRoute(t, "tp", up.URL), "/tp")
	tp.Cookies.Forward = []cookies.Forward{}
	rules := []ratelimit.Rule{{Name: "perip", Scope: ratelimit.ScopeIP, Limit: 1000, Window: time.Minute, Routes: []string{"tp"}}}
	h := newHarness(t, routes(tp), withVerifier(t), withLimiter(realLimiter(t, rules...)))
	tok := signHS256(t, testSecret, jwt.MapClaims{"sub": "u-b01", "exp": time.Now().Add(time.Hour).Unix()})
	form := "Content-Type: application/x-www-form-urlencoded"
	for _, c := range []struct {
		body, want string
		headers    []string
	}{
		{"a=1&access_token=" + tok, "a=1", nil},
		{"access%2Etoken=" + tok + "&z=9", "z=9", nil},
		{"a=1&access_token=" + tok, "a=1", []string{"Authorization: Bearer " + tok}},
		{"access_token=third-party-key&z=9", "access_token=third-party-key&z=9", []string{"Authorization: Bearer " + tok}},
		{"access_token=third-party-key", "access_token=third-party-key", nil},
	} {
		res, _ := rawSend(t, h, "POST", "/tp/f", c.body, append([]string{form}, c.headers...)...)
		if res.StatusCode != 200 {
			t.Fatalf("%q: %d", c.body, res.StatusCode)
		}
		if got := bodies(); got[len(got)-1] != c.want {
			t.Errorf("%q %q: the third party got body %q, want %q", c.body, c.headers, got[len(got)-1], c.want)
		}
	}
	// No Content-Type (Rack 2 parses a POST body as a form).
	res, _ := rawSend(t, h, "POST", "/tp/f", "a=1&access_token="+tok)
	if got := bodies(); res.StatusCode != 200 || got[len(got)-1] != "a=1" {
		t.Errorf("no Content-Type: %d, the third party got %q", res.StatusCode, got[len(got)-1])
	}
}
