package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// A client sent `Authorization: Basic x`, `Connection: Authorization` and
// its own olp_auth cookie: identity was read from the Authorization header
// (not Bearer → anonymous, so the user limit was skipped) while
// ReverseProxy dropped that header as hop-by-hop and the upstream got the
// olp_auth cookie as its Bearer token. The user rule must key on the token
// the upstream actually sees.
func TestConnectionNominatedAuthorizationCannotEvadeUserLimit(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	cfg := parseConfig(t, `
routes:
  - name: api
    upstream: "{up}"
    rate_limits: [api]
rate_limits:
  rules:
    - {name: api, scope: user, limit: 2, window: 1m}
`, map[string]string{"AUTH_JWT_SECRET": testSecret}, map[string]string{"up": up.URL})
	h := newHarness(t, cfg, withLimiter(realLimiter(t, cfg)))
	good := signHS256(t, testSecret, jwt.MapClaims{"sub": "u-evader", "exp": time.Now().Add(time.Hour).Unix()})
	for i, want := range []int{200, 200, 429} {
		req := h.newRequest(t, http.MethodGet, "", "/")
		req.Header.Set("Authorization", "Basic eDp5")
		req.Header.Set("Connection", "Authorization")
		req.AddCookie(&http.Cookie{Name: "olp_auth", Value: good})
		rr := h.serve(req, fmt.Sprintf("198.51.100.%d:1", i+1))
		if rr.Code != want {
			t.Fatalf("request %d: status %d, want %d", i+1, rr.Code, want)
		}
		if i == 0 {
			if got := up.last(t).Header.Get("Authorization"); got != "Bearer "+good {
				t.Fatalf("upstream Authorization = %q, want the olp_auth token", got)
			}
		}
	}
}

// "/api/../login" matched the /api route (its rate limits and cookie
// policy) and reached the upstream unresolved, where "/v2/../login" is
// /login: outside the route's upstream base, and past the stricter route
// the gateway has for /login. Dot segments (also as %2e) are resolved
// before routing, and the upstream gets the resolved path.
func TestDotSegmentsCannotEscapeRouteNorUpstreamBase(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	login := newRecordingUpstream(t, nil)
	cfg := parseConfig(t, `
routes:
  - name: api
    hosts: ["portal.example.net"]
    path_prefix: /api
    strip_prefix: true
    upstream: "{up}/v2/"
  - name: login
    hosts: ["portal.example.net"]
    path_prefix: /login
    upstream: "{login}"
`, nil, map[string]string{"up": up.URL, "login": login.URL})
	h := newHarness(t, cfg)
	tests := []struct{ path, want string }{
		{"/api/x/../y", "/v2/y"},
		{"/api/./y/.", "/v2/y/"},
		{"/api/%2E/y/%2e%2E/z", "/v2/z"},
		{"/api/a.b/..c", "/v2/a.b/..c"},
	}
	for _, tc := range tests {
		req := h.newRequest(t, http.MethodGet, "portal.example.net", tc.path)
		req.URL.Opaque = tc.path
		if res := h.do(t, req); res.StatusCode != 200 {
			t.Errorf("%s: status %d", tc.path, res.StatusCode)
			continue
		}
		if got := up.last(t).RequestURI; got != tc.want {
			t.Errorf("%s: upstream got %q, want %q", tc.path, got, tc.want)
		}
	}
	for _, p := range []string{"/api/../login", "/api/%2e%2e/login", "/api/x/../../login", "/../../login"} {
		req := h.newRequest(t, http.MethodGet, "portal.example.net", p)
		req.URL.Opaque = p
		if res := h.do(t, req); res.StatusCode != 200 {
			t.Errorf("%s: status %d", p, res.StatusCode)
			continue
		}
		if got := login.last(t).RequestURI; got != "/login" {
			t.Errorf("%s: login upstream got %q, want /login", p, got)
		}
	}
	if up.calls() != len(tests) {
		t.Errorf("api upstream called %d times, want %d (no escaped path)", up.calls(), len(tests))
	}
}

// `GET //api/login` missed the /api route (and its rate limits) for the
// catch-all, and an upstream that merges slashes served /api/login.
func TestDoubleSlashCannotEscapeRouteLimits(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, parseConfig(t, `
routes:
  - {name: api, path_prefix: /api, upstream: "{up}"}
  - {name: rest, path_prefix: /, upstream: "{up}"}
`, nil, map[string]string{"up": up.URL}))
	res := h.do(t, h.newRequest(t, http.MethodGet, "", "//api//login"))
	res.Body.Close()
	if got := up.last(t).RequestURI; got != "/api/login" {
		t.Errorf("upstream path %q, want /api/login", got)
	}
	if h.requests("api", "200", "GET") != 1 {
		t.Errorf("//api//login was not served by the api route")
	}
}

func TestRemoveDotSegments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
		changed  bool
	}{
		{"/a/b", "/a/b", false},
		{"/a.b/c..d/...", "/a.b/c..d/...", false},
		{"/a/./b", "/a/b", true},
		{"/a/b/..", "/a/", true},
		{"/a/b/../", "/a/", true},
		{"/..", "/", true},
		{"/../..", "/", true},
		{"/a/%2e%2E/b", "/b", true},
		{"/a/.%2e/b", "/b", true},
		{"/a/%2e", "/a/", true},
		{"/a/%2F../b", "/a/%2F../b", false},
		{"/a//../b", "/b", true},
		{"//api/login", "/api/login", true},
		{"/a//b/", "/a/b/", true},
		{"//", "/", true},
		{"/a/", "/a/", false},
	}
	for _, tc := range tests {
		got, changed := removeDotSegments(tc.in)
		if got != tc.want || changed != tc.changed {
			t.Errorf("removeDotSegments(%q) = %q %v, want %q %v", tc.in, got, changed, tc.want, tc.changed)
		}
	}
}

// `Cookie: olp_auth=; olp_auth=<valid JWT>`: identity read the first
// olp_auth (empty: anonymous, user limit skipped) while the cookie filter
// skipped the unusable first value and sent the second to the upstream as
// its Bearer token. Both must pick the same cookie.
func TestDuplicateAuthCookieCannotEvadeUserLimit(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	cfg := parseConfig(t, `
routes:
  - name: api
    upstream: "{up}"
    rate_limits: [api]
rate_limits:
  rules:
    - {name: api, scope: user, limit: 2, window: 1m}
`, map[string]string{"AUTH_JWT_SECRET": testSecret}, map[string]string{"up": up.URL})
	h := newHarness(t, cfg, withLimiter(realLimiter(t, cfg)))
	good := signHS256(t, testSecret, jwt.MapClaims{"sub": "u-dup", "exp": time.Now().Add(time.Hour).Unix()})
	for _, first := range []string{"", "a,b", `"x y"`} {
		up := up
		for i := range 3 {
			req := h.newRequest(t, http.MethodGet, "", "/")
			req.Header.Set("Cookie", "olp_auth="+first+"; olp_auth="+good)
			rr := h.serve(req, fmt.Sprintf("198.51.100.%d:1", i+1))
			if i == 0 && rr.Code == 200 {
				if got := up.last(t).Header.Get("Authorization"); got != "Bearer "+good {
					t.Fatalf("first=%q: upstream Authorization = %q, want the valid olp_auth", first, got)
				}
			}
			if i == 2 && rr.Code != http.StatusTooManyRequests {
				t.Fatalf("first=%q: request 3 of user u-dup: status %d, want 429", first, rr.Code)
			}
		}
	}
}

// ReverseProxy's Rewrite drops only X-Forwarded-For, -Host and -Proto: an
// untrusted client's X-Forwarded-Prefix, -Port, -Server or -Ssl reached
// the upstream, where frameworks (Spring's ForwardedHeaderFilter, ASP.NET
// UsePathBase, Express trust proxy) build redirects and links from them.
// design.md §3: client X-Forwarded-* are dropped unless the peer is trusted.
func TestUntrustedClientXForwardedStarNeverReachesUpstream(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	cfg := parseConfig(t, `
trusted_proxies: ["10.0.0.0/8"]
routes:
  - name: api
    upstream: "{up}"
`, nil, map[string]string{"up": up.URL})
	h := newHarness(t, cfg)
	spoofed := []string{"X-Forwarded-Prefix", "X-Forwarded-Port", "X-Forwarded-Server", "X-Forwarded-Ssl", "X-Forwarded-Scheme", "X_Forwarded_Prefix"}
	req := h.newRequest(t, http.MethodGet, "", "/")
	for _, k := range spoofed {
		req.Header[k] = []string{"evil"}
	}
	if rr := h.serve(req, "203.0.113.9:5555"); rr.Code != 200 {
		t.Fatalf("status %d", rr.Code)
	}
	got := up.last(t).Header
	for k, v := range got {
		if strings.HasPrefix(strings.ToLower(strings.ReplaceAll(k, "_", "-")), "x-forwarded-") && k != "X-Forwarded-For" &&
			k != "X-Forwarded-Host" && k != "X-Forwarded-Proto" {
			t.Errorf("untrusted client's %s reached the upstream: %q", k, v)
		}
	}
	// From a trusted proxy they are believed and pass.
	req = h.newRequest(t, http.MethodGet, "", "/")
	req.Header.Set("X-Forwarded-Prefix", "/portal")
	if rr := h.serve(req, "10.0.0.1:80"); rr.Code != 200 {
		t.Fatalf("status %d", rr.Code)
	}
	if v := up.last(t).Header.Get("X-Forwarded-Prefix"); v != "/portal" {
		t.Errorf("trusted proxy's X-Forwarded-Prefix = %q, want /portal", v)
	}
}

// A webhook path reached through dot segments is served as the webhook,
// so its logs and telemetry must carry the resolved, redacted path.
func TestDotSegmentWebhookPathTokenNeverReachesLogs(t *testing.T) {
	t.Parallel()
	wh := &fakeWebhook{}
	h := newHarness(t, parseConfig(t, "", nil, nil), func(d *Deps) { d.Webhook = wh })
	p := "/x/../webhooks/whatsapp/t/SECRET-PATH-TOKEN"
	req := h.newRequest(t, http.MethodPost, "", p)
	req.URL.Opaque = p
	h.do(t, req)
	if wh.calls.Load() != 1 {
		t.Fatalf("webhook calls = %d, want 1", wh.calls.Load())
	}
	if logs := h.logs.String(); strings.Contains(logs, "SECRET") {
		t.Errorf("access log carries the token:\n%s", logs)
	}
	for _, e := range h.rec.all() {
		if strings.Contains(e.Path, "SECRET") {
			t.Errorf("telemetry event path %q carries the token", e.Path)
		}
	}
}

// FuzzRemoveDotSegments: the result starts with "/", has no dot segment
// left, and resolving it again changes nothing.
func FuzzRemoveDotSegments(f *testing.F) {
	for _, s := range []string{"/a/../b", "/%2e%2E/x", "/a/./b/.", "/..", "/a//..//b", "/a%2F../b", "/.../x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if p == "" || p[0] != '/' {
			return
		}
		got, changed := removeDotSegments(p)
		if !changed {
			if got != p {
				t.Fatalf("unchanged %q returned %q", p, got)
			}
			return
		}
		if got == "" || got[0] != '/' {
			t.Fatalf("%q → %q: not absolute", p, got)
		}
		if again, ch := removeDotSegments(got); ch || again != got {
			t.Fatalf("%q → %q → %q: not idempotent", p, got, again)
		}
	})
}

// CGI-style upstreams (PHP-FPM, Rack, WSGI) read X_Real_IP as X-Real-IP:
// a client's X_Real_IP, X_Forwarded_For or X_Request_Id reached the
// upstream beside the gateway's own values and could stand in for them
// (nginx drops such headers by default; Envoy has
// headers_with_underscores_action). headers_with_underscores: allow
// keeps them, for an upstream that needs one.
func TestUnderscoreSpelledHeadersNeverReachTheUpstream(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"", "drop", "allow"} {
		t.Run("mode="+mode, func(t *testing.T) {
			up := newRecordingUpstream(t, nil)
			yaml := "routes:\n  - name: api\n    upstream: \"{up}\"\n"
			if mode != "" {
				yaml = "headers_with_underscores: " + mode + "\n" + yaml
			}
			h := newHarness(t, parseConfig(t, yaml, nil, map[string]string{"up": up.URL}))
			req := h.newRequest(t, http.MethodGet, "", "/")
			for _, k := range []string{"X_Real_IP", "X_Forwarded_For", "X_Request_Id", "Legacy_Token"} {
				req.Header[k] = []string{"evil"}
			}
			req.Header.Set("X-Kept", "yes")
			if rr := h.serve(req, "203.0.113.9:5555"); rr.Code != 200 {
				t.Fatalf("status %d", rr.Code)
			}
			got := up.last(t).Header
			if got.Get("X-Kept") != "yes" {
				t.Errorf("an ordinary header was dropped: %v", got)
			}
			var underscored []string
			for k := range got {
				if strings.Contains(k, "_") {
					underscored = append(underscored, k)
				}
			}
			if mode == "allow" {
				if got.Get("Legacy_Token") != "evil" {
					t.Errorf("headers_with_underscores: allow dropped Legacy_Token: %v", got)
				}
				return
			}
			if len(underscored) > 0 {
				t.Errorf("headers with underscores reached the upstream: %v", underscored)
			}
			if v := got.Get("X-Real-Ip"); v != "203.0.113.9" {
				t.Errorf("X-Real-Ip = %q, want the gateway's 203.0.113.9", v)
			}
		})
	}
}
