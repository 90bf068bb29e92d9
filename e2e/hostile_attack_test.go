package e2e

// Attacks of a reviewer who read only the docs (docs/edge.md,
// docs/webhooks.md, docs/configuration.md) and tried to break their
// promises against the real binary. Each test is named after what the
// attack tries and fails on the code before its fix.

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// attackDoubleEncodedWalkOuts are spellings of /api/../admin whose second
// decoding pass gets its hex digits from escapes of the first: "%25%32%65"
// is "%2e" after one pass and "." after two, as "%252e" is. A
// twice-decoding upstream resolves each of these to /admin, outside the
// route's prefix and its upstream base path /v1 (docs/edge.md, "Escaped
// slashes and other spellings of ..").
var attackDoubleEncodedWalkOuts = []string{
	"/api/%25%32%65%25%32%65/admin",              // %2e%2e
	"/api/%25%32%45%25%32%45/admin",              // %2E%2E
	"/api/%252%65%252%65/admin",                  // only the second digit escaped
	"/api/%25%32e%25%32e/admin",                  // only the first
	"/api/..%25%32%66admin",                      // ..%2f
	"/api/..%25%35%63admin",                      // ..%5c
	"/api/x%25%32%66..%25%32%66..%25%32%66admin", // x%2f..%2f..%2f
	"/full/%25%32%65%25%32%65/admin",             // through a route that keeps the prefix
	"/api/%25%32%35%32%65%25%32%35%32%65/admin",  // %252e after one pass: three decodings
	"/api/a%25%30%30/../admin",                   // %00 after one pass
}

// GET /api/%25%32%65%25%32%65/admin reached the api upstream as
// /v1/%25%32%65%25%32%65/admin, which an upstream decoding twice reads as
// /v1/../admin = /admin: the double-encoding check only knew "%25" followed
// by two literal hex digits (%252e). Every spelling is now the 400 problem
// "codificação dupla" and no upstream sees it.
func TestHostileAttackDoubleEncodingWithEscapedHexDigitsIsRefused(t *testing.T) {
	api, admin := recordingUpstream(t), recordingUpstream(t)
	p := startServe(t, pathServe(api.URL, admin.URL, ""))
	for _, target := range attackDoubleEncodedWalkOuts {
		resp, body := pathGet(t, p.public, target)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "codificação dupla") {
			t.Errorf("%s: got %d %q, want the 400 problem \"codificação dupla\"", target, resp.StatusCode, body)
		}
	}
	for _, r := range append(api.requests(), admin.requests()...) {
		t.Errorf("an upstream saw %q", r.RequestURI)
	}
	// An escaped percent before an ordinary escaped character still passes
	// as sent ("%25%34%31" is "%41" after one pass: a letter, not a
	// separator or a dot).
	resp, _ := pathGet(t, p.public, "/api/a%25%34%31")
	if got := api.requests(); resp.StatusCode != 200 || len(got) != 1 || got[0].RequestURI != "/v1/a%25%34%31" {
		t.Fatalf("/api/a%%25%%34%%31: %d, upstream saw %+v", resp.StatusCode, got)
	}
}

// attackWebhookToken is a valid 32-byte webhook token of the attack tests.
const attackWebhookToken = "attacktoken0123456789abcdef01234"

// A provider that puts the URL token one segment off
// (/webhooks/whatsapp/instancia-1/t/TOKEN, /webhooks/whatsapp/T/TOKEN, the
// path form twice) is refused with 401, and the access log printed the
// path with the valid token in it: only "/t/{token}" right after the
// source path was redacted. docs/webhooks.md §2 promises tokens are never
// logged; every segment after a "t" segment is now "[redacted]".
func TestHostileAttackWebhookTokenInTheWrongPlaceIsNotLogged(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "", "webhook:\n  path: /webhooks/whatsapp\n"),
		"WEBHOOK_TOKENS="+attackWebhookToken)
	const body = `{"instance":"i","event":"e","data":{"key":{"id":"A1"}}}`
	for _, target := range []string{
		"/webhooks/whatsapp/instancia-1/t/" + attackWebhookToken + "/messages-upsert",
		"/webhooks/whatsapp/T/" + attackWebhookToken,
		"/webhooks/whatsapp/t/wrong/t/" + attackWebhookToken,
		"/webhooks/whatsapp/x/t//" + attackWebhookToken,
	} {
		raw := "POST " + target + " HTTP/1.1\r\nHost: gw.example.org\r\nContent-Type: application/json\r\n" +
			"Content-Length: " + strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n" + body
		resp, got, err := rawExchange(t, p.public, raw, 10*time.Second)
		if err != nil {
			t.Fatalf("POST %s: %v", target, err)
		}
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST %s: %d %q, want 401", target, resp.StatusCode, got)
		}
	}
	p.stop(t) // SIGTERM writes every pending log line
	logs := p.logs.String()
	if n := strings.Count(logs, `"route":"webhook"`); n < 4 {
		t.Fatalf("%d webhook access log lines, want 4:\n%s", n, logs)
	}
	if strings.Contains(logs, attackWebhookToken) {
		t.Fatalf("the webhook token is in the logs:\n%s", logs)
	}
}

// TestHostileWebhookTokenGluedToOtherCharactersIsNotLogged (fresh attack
// pass 8, L02): a provider or a careless operator that glues the token to
// other characters in a path segment ("/webhooks/whatsapp/xTOKEN",
// "token=TOKEN", "TOKEN.json") gets 401 or 404, and the access log printed
// the segment whole: it is no configured token, and the gateway holds
// only the tokens' digests. Under a source's path every segment that is
// neither a token marker nor an event name is now "[redacted]".
//
// Fresh attack pass 10, A09: a token of letters and '-' only, glued to
// letters, read as an event name and was printed; an event-name segment
// is now printed only when shorter than every token.
func TestHostileWebhookTokenGluedToOtherCharactersIsNotLogged(t *testing.T) {
	const lettersToken = "attacktoken-letters-only-abcdefg"
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "", "webhook:\n  path: /webhooks/whatsapp\n"),
		"WEBHOOK_TOKENS="+attackWebhookToken+","+lettersToken)
	const body = `{"instance":"i","event":"e","data":{"key":{"id":"A1"}}}`
	targets := []string{
		"/webhooks/whatsapp/x" + attackWebhookToken,
		"/webhooks/whatsapp/token=" + attackWebhookToken,
		"/webhooks/whatsapp/" + attackWebhookToken + ".json",
		"/webhooks/whatsapp/messages-upsert/" + attackWebhookToken + ",1",
		"/webhooks/whatsapp;v=1/t" + attackWebhookToken,
		"/webhooks/whatsapp/x" + lettersToken,
		"/webhooks/whatsapp/" + lettersToken + ".json",
		"/webhooks/whatsapp/messages-upsert-" + lettersToken,
		"/webhooks/whatsapp/Attacktoken-letters-only-abcdefg",
	}
	for _, target := range targets {
		raw := "POST " + target + " HTTP/1.1\r\nHost: gw.example.org\r\nContent-Type: application/json\r\n" +
			"Content-Length: " + strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n" + body
		resp, got, err := rawExchange(t, p.public, raw, 10*time.Second)
		if err != nil {
			t.Fatalf("POST %s: %v", target, err)
		}
		if resp.StatusCode == http.StatusOK {
			t.Errorf("POST %s: 200 %q, want a refusal", target, got)
		}
	}
	p.stop(t) // SIGTERM writes every pending log line
	logs := p.logs.String()
	if n := strings.Count(logs, `"route":"webhook"`); n < len(targets) {
		t.Fatalf("%d webhook access log lines, want %d:\n%s", n, len(targets), logs)
	}
	if strings.Contains(logs, attackWebhookToken) || strings.Contains(strings.ToLower(logs), lettersToken) {
		t.Fatalf("the webhook token is in the logs:\n%s", logs)
	}
}

// attackCookieSpellings are names a browser stores and sends back as they
// are, and that PHP ($_COOKIE) or Rack read as olp_auth: escapes decoded,
// '+' a space, ' ', '.' and '[' as '_'.
var attackCookieSpellings = []string{"olp%5Fauth", "olp.auth", "olp+auth", "olp[auth", "%6Flp_auth", "__Host-olp.auth"}

// A third-party upstream behind `cookies: {forward: []}` answered
// Set-Cookie: olp%5Fauth=<its token> (or olp.auth, olp+auth...): the
// policy read the name byte for byte, not as the portal's olp_ cookie, and
// let it through, so the browser sent it to the portal's upstream, where a
// PHP or Rack framework reads it as olp_auth: the session fixation
// docs/edge.md says a third-party upstream cannot do. They are removed now,
// and a browser cookie spelled so does not reach the third party.
func TestHostileAttackThirdPartyCannotSetPortalCookieUnderADecodedSpelling(t *testing.T) {
	var (
		mu         sync.Mutex
		seenCookie []string
	)
	third := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seenCookie = append(seenCookie, r.Header.Get("Cookie"))
		mu.Unlock()
		for _, name := range attackCookieSpellings {
			w.Header().Add("Set-Cookie", name+"=fixated; Path=/")
		}
		w.Header().Add("Set-Cookie", "tiles=1; Path=/")
		_, _ = w.Write([]byte("tile"))
	}))
	t.Cleanup(third.Close)
	p := startServe(t, minimalServe(third.URL, "    cookies: {forward: []}\n", ""))
	raw := "GET /tiles/1 HTTP/1.1\r\nHost: portal.example.org\r\nConnection: close\r\n" +
		"Cookie: olp%5Fauth=victim; olp.auth=victim; _ga=1\r\n\r\n"
	resp, body, err := rawExchange(t, p.public, raw, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || body != "tile" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if got := resp.Header.Values("Set-Cookie"); len(got) != 1 || got[0] != "tiles=1; Path=/" {
		t.Errorf("Set-Cookie reaching the browser = %q, want only tiles=1", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seenCookie) != 1 || seenCookie[0] != "_ga=1" {
		t.Errorf("the third party got Cookie %q, want only _ga=1", seenCookie)
	}
}

// attackParamsServe has /api (limited to one request a minute per IP)
// and a catch-all route to the same upstream, as a portal whose API and
// front end are one servlet application: Tomcat and Jetty strip ";x"
// from a segment before routing, so /api;x/login is their /api/login.
func attackParamsServe(up string) string {
	return `environment: development
listen: "{LISTEN}"
admin_listen: "{ADMIN}"
redis:
  url: ""
amqp:
  url: "amqp://guest:guest@127.0.0.1:1/"
telemetry:
  enabled: false
rate_limits:
  rules:
    - {name: loginonce, scope: ip, limit: 1, window: 1m, routes: [api]}
routes:
  - name: api
    path_prefix: /api
    upstream: "` + up + `"
  - name: site
    upstream: "` + up + `"
`
}

// GET /api;x/login missed the /api route (its one-a-minute limit) and
// went to the catch-all, which a servlet upstream serves as /api/login:
// path parameters let a client choose the route, and so the limits, CORS
// and cookie policy. A segment's ";params" no longer keep it from
// matching the prefix.
func TestHostileAttackPathParametersCannotDodgeTheRouteOfThePrefix(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, attackParamsServe(up.URL))
	if resp, _ := pathGet(t, p.public, "/api/login"); resp.StatusCode != 200 {
		t.Fatalf("/api/login: %d", resp.StatusCode)
	}
	for _, target := range []string{"/api;x/login", "/api;jsessionid=1/login", "/api%3bx/login", "/api%3B/login"} {
		if resp, _ := pathGet(t, p.public, target); resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("%s: %d, want 429 from the api route's limit", target, resp.StatusCode)
		}
	}
	// Under the prefix a parameter is the upstream's business, and a
	// segment that only starts like the prefix is not under it.
	if resp, _ := pathGet(t, p.public, "/apix;y/z"); resp.StatusCode != 200 {
		t.Errorf("/apix;y/z: %d, want 200 from the site route", resp.StatusCode)
	}
	if got := up.requests(); len(got) != 2 || got[1].RequestURI != "/apix;y/z" {
		t.Errorf("upstream saw %+v, want /api/login and /apix;y/z", got)
	}
}

// A careless operator writes a route's host as a URL or with its port
// (hosts: ["https://portal.example.org"], ["portal.example.org:443"]):
// `borda config check` said valid and the route never matched, so its
// requests fell through to another route (a catch-all with another cookie
// policy) or a 404. Each is now a problem naming the field, exit 2.
func TestHostileAttackRouteHostWithSchemeOrPortIsRefused(t *testing.T) {
	for _, host := range []string{"https://portal.example.org", "portal.example.org:443", "portal.example.org/api", "*.example.org:8080"} {
		path := secretsWriteConfig(t, "environment: development\nroutes:\n  - {name: a, upstream: \"http://127.0.0.1:1\", hosts: [\""+host+"\"]}\n")
		out, code := secretsRun(t, cleanEnv(), "config", "check", "--config", path)
		if code != 2 || !strings.Contains(out, "routes[0].hosts[0]") {
			t.Errorf("hosts [%q]: exit %d, want 2 naming routes[0].hosts[0]:\n%s", host, code, out)
		}
	}
	path := secretsWriteConfig(t, "environment: development\nroutes:\n  - {name: a, upstream: \"http://127.0.0.1:1\", hosts: [\"Portal.Example.org.\", \"*.example.org\", \"::1\"]}\n")
	if out, code := secretsRun(t, cleanEnv(), "config", "check", "--config", path); code != 0 {
		t.Errorf("valid hosts: exit %d:\n%s", code, out)
	}
}

// A careless operator points a route at the gateway itself (here its own
// listener; in production a load balancer or DNS name in front of it):
// one request became an endless chain of requests through the gateway,
// each holding a connection, until file descriptors ran out. Now the
// second pass carries the process's own Via entry and is answered 508.
// The route's IP limit (the gateway's own address, 20 a minute) bounds the
// chain on code without the check, so this test fails there with a 429
// instead of exhausting the machine.
func TestHostileAttackRouteLoopingBackToTheGatewayIsCut(t *testing.T) {
	p := startServe(t, `environment: development
listen: "{LISTEN}"
admin_listen: "{ADMIN}"
redis:
  url: ""
amqp:
  url: "amqp://guest:guest@127.0.0.1:1/"
telemetry:
  enabled: false
rate_limits:
  rules:
    - {name: hops, scope: ip, limit: 20, window: 1m, routes: [loop]}
routes:
  - name: loop
    upstream: "http://{LISTEN}"
    timeout: 5s
`)
	resp, body := pathGet(t, p.public, "/x", "Via: 1.1 proxy-do-cliente")
	if resp.StatusCode != http.StatusLoopDetected || !strings.Contains(body, "Laço de encaminhamento") {
		t.Fatalf("got %d %q, want the 508 problem", resp.StatusCode, body)
	}
	m := secretsGet(t, p.admin+"/metrics")
	if !strings.Contains(m, `borda_http_requests_total{code="508",method="GET",route="loop"} 2`) {
		t.Fatalf("want two passes, the inner one refused:\n%s", grepLines(m, "borda_http_requests_total"))
	}
}

// Fresh attack pass 7 K02: a third-party upstream answered
// "Set-Cookie: <0xA0>olp_auth=evil" (and "x=1<0xA0>olp_auth=evil2",
// "y=1<0x85>olp_auth=evil3"): the policy passed them, Chromium stored
// them and sent them back byte for byte, and Django's parse_cookie
// (str.strip takes latin-1 NBSP and NEL) reads olp_auth. Through the
// real binary: every such line is removed.
func TestHostileThirdPartySetsPortalCookieBehindLatin1Whitespace(t *testing.T) {
	third := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, line := range []string{"\xa0olp_auth=evil; Path=/", "x=1\xa0olp_auth=evil2; Path=/", "y=1\x85olp_auth=evil3; Path=/", "\xc2\xa0olp_mural=evil4; Path=/"} {
			w.Header().Add("Set-Cookie", line)
		}
		w.Header().Add("Set-Cookie", "tiles=1; Path=/")
		_, _ = w.Write([]byte("tile"))
	}))
	t.Cleanup(third.Close)
	p := startServe(t, minimalServe(third.URL, "    cookies: {forward: []}\n", ""))
	resp, body, err := rawExchange(t, p.public, "GET /tiles/1 HTTP/1.1\r\nHost: portal.example.org\r\nConnection: close\r\n\r\n", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || body != "tile" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if got := resp.Header.Values("Set-Cookie"); len(got) != 1 || got[0] != "tiles=1; Path=/" {
		t.Errorf("Set-Cookie reaching the browser = %q, want only tiles=1", got)
	}
}
