package gateway

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/olp-edu/borda/cookies"
)

// untrustedOptions has third-party routes (no cookie forwarded) and the
// portal's own route (the session forwarded) on one host, the latter with
// a CORS policy.
func untrustedOptions(t *testing.T, up string) Options {
	thirdParty := func(name, prefix, sandbox string) Route {
		rt := onHosts(under(testRoute(t, name, up), prefix), "portal.example.org")
		rt.Cookies.Forward, rt.Sandbox = []cookies.Forward{}, sandbox
		return rt
	}
	portal := onHosts(testRoute(t, "portal", up), "portal.example.org")
	portal.CORS = &CORSPolicy{AllowedOrigins: []string{"https://app.example.org", "*"}}
	return routes(
		thirdParty("mapas", "/mapas", ""),
		thirdParty("mapas_scripts", "/scripts", "allow-scripts allow-popups"),
		thirdParty("mapas_off", "/raw", "off"),
		portal,
	)
}

// A third-party route on the portal's host served HTML whose script used
// the user's session, cleared the site's cookies (Clear-Site-Data) and
// set olp_auth in a comma-joined Set-Cookie. Its responses are now
// sandboxed (per-route setting honoured), lose Clear-Site-Data and
// Service-Worker-Allowed, and keep only their own cookies; the portal's
// route is left alone.
func TestUntrustedRouteResponsesCannotActAsThePortal(t *testing.T) {
	t.Parallel()
	evil := []string{"x=1, olp_auth=evil", "y=2,OLP_AUTH=evil; Path=/", "z=3 olp_auth=evil", " olp_auth=evil", "\tOLP_AUTH=evil",
		"__Host-olp_auth=evil; Secure; Path=/", "=olp_auth=evil", "w=4; Path=/, olp_mural=evil", "own=1; Path=/"}
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Set-Cookie"] = evil
		w.Header().Set("Clear-Site-Data", `"cookies", "storage"`)
		w.Header().Set("Service-Worker-Allowed", "/")
		w.Header().Set("Content-Security-Policy", "default-src 'self'")
		w.Header().Add("WWW-Authenticate", `Basic realm="Portal da Escola"`)
		w.Header().Add("WWW-Authenticate", `Digest realm="x", nonce="n"`)
		// Origin-wide policies (fresh attack pass 11, A24).
		w.Header().Set("NEL", `{"report_to":"x","max_age":31536000,"include_subdomains":true,"success_fraction":1.0}`)
		w.Header().Set("Report-To", `{"group":"x","max_age":31536000,"endpoints":[{"url":"https://collector.example/r"}]}`)
		w.Header().Set("Alt-Svc", `h2="collector.example:443"; ma=2592000`)
		w.Header().Set("Strict-Transport-Security", "max-age=63072000; includeSubDomains")
		w.Header().Set("Set-Login", "logged-out")
		w.Header().Set("Origin-Agent-Cluster", "?0")
		w.Header().Set("Accept-CH", "Sec-CH-UA-Full-Version-List, Sec-CH-UA-Model")
		w.Header().Set("Critical-CH", "Sec-CH-UA-Model")
		// Browser features under the reserved Sec- prefix (fresh attack
		// pass 12, A06: Device Bound Session Credentials).
		w.Header().Set("Sec-Session-Registration", `(ES256);path="/dbsc/start";challenge="c"`)
		w.Header().Set("Sec-Session-Challenge", `"c"`)
		w.Header()["sec-future-feature"] = []string{"1"}
		// The handshake's names on an answer that is no handshake (fresh
		// attack pass 13, A01).
		w.Header().Set("Sec-WebSocket-Accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
		w.Header().Set("Sec-WebSocket-Session-Registration", "(ES256)")
		_, _ = w.Write([]byte("<script>fetch('/api')</script>"))
	})
	h := newHarness(t, untrustedOptions(t, up.URL))
	for _, tc := range []struct {
		path string
		csp  []string
	}{
		{"/mapas/x", []string{"default-src 'self'", "sandbox"}},
		{"/scripts/x", []string{"default-src 'self'", "sandbox allow-scripts allow-popups"}},
		{"/raw/x", []string{"default-src 'self'"}},
	} {
		res, _ := rawGet(t, h, tc.path)
		if got := res.Header.Values("Content-Security-Policy"); !slices.Equal(got, tc.csp) {
			t.Errorf("%s: Content-Security-Policy %q, want %q", tc.path, got, tc.csp)
		}
		// Named here, not read from the code's list, so a name dropped
		// from it fails.
		for _, k := range []string{"Clear-Site-Data", "Service-Worker-Allowed", "WWW-Authenticate", "NEL", "Report-To",
			"Alt-Svc", "Strict-Transport-Security", "Set-Login", "Origin-Agent-Cluster", "Accept-CH", "Critical-CH",
			"Sec-Session-Registration", "Sec-Session-Challenge", "sec-future-feature", "Sec-WebSocket-Accept",
			"Sec-WebSocket-Session-Registration"} {
			if v := res.Header.Get(k); v != "" {
				t.Errorf("%s: %s %q reached the browser", tc.path, k, v)
			}
		}
		// Confined to the route's own path (attack pass A81).
		prefix := tc.path[:strings.LastIndexByte(tc.path, '/')]
		if got := res.Header.Values("Set-Cookie"); !slices.Equal(got, []string{"own=1; Path=" + prefix}) {
			t.Errorf("%s: Set-Cookie %q, want only own=1 confined to %s", tc.path, got, prefix)
		}
	}
	res, _ := rawGet(t, h, "/portal")
	if got := res.Header.Values("Content-Security-Policy"); !slices.Equal(got, []string{"default-src 'self'"}) {
		t.Errorf("portal route: Content-Security-Policy %q, want the upstream's only", got)
	}
	if res.Header.Get("Clear-Site-Data") == "" {
		t.Error("portal route lost its Clear-Site-Data (its logout)")
	}
	if len(res.Header.Values("WWW-Authenticate")) != 2 {
		t.Error("portal route lost its WWW-Authenticate challenges")
	}
}

// A page on another origin opened a WebSocket to a route that turns the
// olp_auth cookie into the Bearer token, and read the replies as the user
// (cross-site WebSocket hijacking). Refused 403 unless the Origin is the
// request's own or an exact CORS allowed origin; no Origin (not a
// browser) passes; an untrusted route forwards no session and is not
// checked.
func TestUpgradeFromAForeignOriginOnASessionRouteIsRefused(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, untrustedOptions(t, up.URL))
	ws := []string{"Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Cookie: olp_auth=a.b.c"}
	for _, tc := range []struct {
		path, origin string
		want         int
	}{
		{"/ws", "https://evil.example", http.StatusForbidden},
		{"/ws", "null", http.StatusForbidden},
		{"/ws", "http://portal.example.org.evil.example", http.StatusForbidden},
		{"/ws", "https://portal.example.org", http.StatusForbidden}, // the request came over plain HTTP
		{"/ws", "http://portal.example.org", http.StatusOK},
		{"/ws", "http://PORTAL.example.org:80", http.StatusOK},
		{"/ws", "https://app.example.org", http.StatusOK},
		{"/ws", "", http.StatusOK},
		{"/mapas/ws", "https://evil.example", http.StatusOK},
	} {
		headers := ws
		if tc.origin != "" {
			headers = append(slices.Clone(ws), "Origin: "+tc.origin)
		}
		res, body := rawGet(t, h, tc.path, headers...)
		if res.StatusCode != tc.want {
			t.Errorf("%s from %q: %d, want %d", tc.path, tc.origin, res.StatusCode, tc.want)
		}
		if tc.want == http.StatusForbidden && (!strings.Contains(body, "Origem") || res.Header.Get("Content-Language") != "pt-BR") {
			t.Errorf("%s from %q: body %q, want the PT-BR problem", tc.path, tc.origin, body)
		}
	}
}

// TestUntrustedRouteNeverReceivesThePortalsVerifiedCredential: a route
// that "hands its upstream no session" (forward: []) still received the
// portal's session token when the client sent it itself, as a Bearer (an
// SPA that adds it to every same-origin request) or a query token (a
// WebSocket client), so the third party could call /api as the user
// (fresh attack pass A93). A credential that verifies as the portal's is
// removed in every form; one that does not (the third party's own key)
// passes, and so do the request's other query pairs, byte for byte.
func TestUntrustedRouteNeverReceivesThePortalsVerifiedCredential(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	mapas := under(testRoute(t, "mapas", up.URL), "/mapas")
	mapas.Cookies.Forward = []cookies.Forward{}
	h := newHarness(t, routes(mapas, under(testRoute(t, "api", up.URL), "/api")), withVerifier(t))
	tok := signHS256(t, testSecret, jwt.MapClaims{"sub": "u-a93", "exp": time.Now().Add(time.Hour).Unix()})
	for _, c := range []struct {
		target, header    string
		wantURI, wantAuth string
	}{
		{"/mapas/t", "Authorization: Bearer " + tok, "/mapas/t", ""},
		{"/mapas/t", "authorization: bearer " + tok, "/mapas/t", ""},
		{"/mapas/t?access_token=" + tok + "&z=1", "", "/mapas/t?z=1", ""},
		{"/mapas/t?a=%2F&access.token=" + tok, "", "/mapas/t?a=%2F", ""},
		{"/mapas/t?ACCESS_TOKEN=" + tok + "&access_token[]=" + tok, "", "/mapas/t", ""},
		{"/mapas/t?access_token=" + tok, "Authorization: Bearer " + tok, "/mapas/t", ""},
		// Any key, no other credential (fresh attack pass 8 Q01).
		{"/mapas/t?token=" + tok + "&z=1", "", "/mapas/t?z=1", ""},
		{"/mapas/t?z=1&auth=Bearer%20" + tok, "", "/mapas/t?z=1", ""},
		{"/mapas/t?jwt=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.bm90LXZlcmlmaWVk", "", "/mapas/t?jwt=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.bm90LXZlcmlmaWVk", ""},
		{"/mapas/t", "Authorization: Bearer third-party-key", "/mapas/t", "Bearer third-party-key"},
		{"/mapas/t?access_token=third-party-key", "", "/mapas/t?access_token=third-party-key", ""},
		{"/mapas/t", "Authorization: Basic dTpw", "/mapas/t", "Basic dTpw"},
		// The portal's token in the query beside the client's own Basic
		// credential: the token goes, the Basic stays (mutation testing).
		{"/mapas/t?access_token=" + tok, "Authorization: Basic dTpw", "/mapas/t", "Basic dTpw"},
		// a route that forwards the session keeps it
		{"/api/t?access_token=" + tok, "", "/api/t?access_token=" + tok, ""},
		{"/api/t", "Authorization: Bearer " + tok, "/api/t", "Bearer " + tok},
	} {
		var headers []string
		if c.header != "" {
			headers = append(headers, c.header)
		}
		if res, body := rawGet(t, h, c.target, headers...); res.StatusCode != 200 {
			t.Errorf("%s %q: %d %s", c.target, c.header, res.StatusCode, body)
			continue
		}
		got := up.last(t)
		if got.RequestURI != c.wantURI || got.Header.Get("Authorization") != c.wantAuth {
			t.Errorf("%s %q: upstream got %q, Authorization %q; want %q, %q", c.target, c.header, got.RequestURI, got.Header.Get("Authorization"), c.wantURI, c.wantAuth)
		}
	}
}

// TestUntrustedSetCookieIsConfinedToTheRoute (attack pass A81): every
// spelling of Path and Domain a browser reads is replaced by the route's
// own Path, so a third-party route cannot plant or fix cookies for the
// portal's paths.
func TestUntrustedSetCookieIsConfinedToTheRoute(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"bomb=AAAA; Path=/; Max-Age=31536000":       "bomb=AAAA; Max-Age=31536000; Path=/third",
		"csrftoken=FIXED; path=/; Domain=127.0.0.1": "csrftoken=FIXED; Path=/third",
		"a=1;PATH=/;domain=.example.com;Secure":     "a=1;Secure; Path=/third",
		"a=1; Path = / ; HttpOnly":                  "a=1; HttpOnly; Path=/third",
		"a=1":                                       "a=1; Path=/third",
		"a=1; Path=/third/deeper":                   "a=1; Path=/third",
	} {
		h := http.Header{"Set-Cookie": {in}}
		confineSetCookie(h, "/third")
		if got := h.Get("Set-Cookie"); got != want {
			t.Errorf("%q confined to %q, want %q", in, got, want)
		}
	}
	h := http.Header{"Set-Cookie": {"a=1; Path=/"}}
	confineSetCookie(h, "")
	if len(h["Set-Cookie"]) != 0 {
		t.Error("an unusable route path kept a Set-Cookie")
	}
	for prefix, want := range map[string]string{"/third": "/third", "/": "/", "/a b": "/a%20b", "/a;b": "", "/ação": "/a%C3%A7%C3%A3o",
		"/a!b": "/a%21b", "/~user": "/~user", "/a,b": "", "": "/"} { // the printable range's edges
		if got := cookiePathFor(prefix); got != want {
			t.Errorf("cookiePathFor(%q) = %q, want %q", prefix, got, want)
		}
	}
}

// Fresh attack pass 8 Q02: a portal page opened with ?access_token=
// sends its full URL as the Referer of a same-origin subrequest; a route
// that forwards no session got the token there. Such a Referer is cut to
// its origin; another Referer passes as sent.
func TestUntrustedRouteNeverReceivesThePortalsTokenInTheReferer(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	mapas := under(testRoute(t, "mapas", up.URL), "/mapas")
	mapas.Cookies.Forward = []cookies.Forward{}
	h := newHarness(t, routes(mapas), withVerifier(t))
	tok := signHS256(t, testSecret, jwt.MapClaims{"sub": "u-q02", "exp": time.Now().Add(time.Hour).Unix()})
	for ref, want := range map[string]string{
		"https://portal.example.org/api/relatorio?access_token=" + tok: "https://portal.example.org/",
		"https://portal.example.org/r?x=1&token=Bearer%20" + tok:       "https://portal.example.org/",
		"https://portal.example.org/r?x=1":                             "https://portal.example.org/r?x=1",
	} {
		if res, body := rawGet(t, h, "/mapas/t", "Referer: "+ref); res.StatusCode != 200 {
			t.Fatalf("%q: %d %s", ref, res.StatusCode, body)
		}
		if got := up.last(t).Header.Get("Referer"); got != want {
			t.Errorf("Referer %q reached the third party as %q, want %q", ref, got, want)
		}
	}
}

// Every Sec- response header of a route that forwards no session is
// removed, except the four WebSocket handshake headers (RFC 6455 §11.3) on
// a 101: a table of names (the handshake's in several letter cases, names
// under the Sec-WebSocket- prefix that are no handshake header, other Sec-
// features) against the statuses an upstream answers with (fresh attack
// pass 13, A01: the prefix Sec-WebSocket- passed on a 200).
func TestUntrustedSecHeadersStayOnlyAsTheHandshakesOn101(t *testing.T) {
	handshake := []string{"Sec-WebSocket-Accept", "Sec-Websocket-Protocol", "sec-websocket-extensions", "SEC-WEBSOCKET-VERSION"}
	other := []string{"Sec-WebSocket-Session-Registration", "Sec-WebSocket-Key", "Sec-WebSocket-Accept-X", "Sec-WebSocketAccept",
		"Sec-Session-Registration", "Sec-Fetch-Site", "sec-future-feature", "Sec-"}
	for _, status := range []int{100, 101, 103, 200, 204, 400, 426, 500} {
		h := http.Header{"Content-Type": {"text/html"}}
		for _, k := range append(append([]string{}, handshake...), other...) {
			h[k] = []string{"v"}
		}
		dropUntrustedResponseHeaders(h, status)
		for _, k := range handshake {
			if _, kept := h[k]; kept != (status == http.StatusSwitchingProtocols) {
				t.Errorf("status %d: handshake header %s kept=%v, want kept only on 101", status, k, kept)
			}
		}
		for _, k := range other {
			if _, kept := h[k]; kept {
				t.Errorf("status %d: %s reached the browser", status, k)
			}
		}
		if h.Get("Content-Type") != "text/html" {
			t.Errorf("status %d: Content-Type removed", status)
		}
	}
}

// TestUntrustedRouteVerifiesAtMostFourValuesAndDropsTheRest: a request to
// a route that forwards no session pays for at most maxVerifiedValues
// signature checks; a JWS-shaped value past them is dropped unverified
// (it could be the portal's token), the ones checked and not verifying
// pass.
func TestUntrustedRouteVerifiesAtMostFourValuesAndDropsTheRest(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	mapas := under(testRoute(t, "mapas", up.URL), "/mapas")
	mapas.Cookies.Forward = []cookies.Forward{}
	h := newHarness(t, routes(mapas), withVerifier(t))
	var q []string
	for i := range maxVerifiedValues + 1 {
		q = append(q, fmt.Sprintf("k%d=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.bm90LXZlcmlmaWVk%d", i, i))
	}
	if res, body := rawGet(t, h, "/mapas/t?"+strings.Join(q, "&")); res.StatusCode != 200 {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	want := "/mapas/t?" + strings.Join(q[:maxVerifiedValues], "&")
	if got := up.last(t).RequestURI; got != want {
		t.Fatalf("upstream got %q, want the %d values checked (not verifying) and no more: %q", got, maxVerifiedValues, want)
	}
}

// TestJWSWordsAreEveryThreePartBase64URLWord: a JWS-shaped word is three
// non-empty parts of base64url characters (A-Z, a-z, 0-9, '-', '_', each
// range's edges included) joined by two dots, found in keys and values,
// decoded (%2E is a dot), once each.
func TestJWSWordsAreEveryThreePartBase64URLWord(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string][]string{
		"t=az.AZ.09":                     {"az.AZ.09"},
		"t=A-_.Z_-.a9":                   {"A-_.Z_-.a9"},
		"AAA.BBB.CCC=1":                  {"AAA.BBB.CCC"},
		"t=x%2Ey%2ez":                    {"x.y.z"},
		"a=Bearer%20hh.ii.jj&b=hh.ii.jj": {"hh.ii.jj"},
		"t=a..b":                         nil,
		"t=.a.b":                         nil,
		"t=a.b.":                         nil,
		"t=a.b":                          nil,
		"t=a.b.c.d":                      nil,
	} {
		if got := jwsWords(raw); !slices.Equal(got, want) {
			t.Errorf("jwsWords(%q) = %q, want %q", raw, got, want)
		}
	}
}
