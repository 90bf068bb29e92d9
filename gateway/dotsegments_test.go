package gateway

import (
	"net/http"
	"strings"
	"testing"
)

// "/api/../login" matched the /api route (its rate limits and cookie
// policy) and reached the upstream unresolved, where "/v2/../login" is
// /login: outside the route's upstream base, and past the stricter route
// the gateway has for /login. Dot segments (also as %2e) are resolved
// before routing, and the upstream gets the resolved path.
func TestDotSegmentsCannotEscapeRouteNorUpstreamBase(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	login := newRecordingUpstream(t, nil)
	api := onHosts(under(testRoute(t, "api", up.URL+"/v2/"), "/api"), "portal.example.net")
	api.StripPrefix = true
	h := newHarness(t, routes(api, onHosts(under(testRoute(t, "login", login.URL), "/login"), "portal.example.net")))
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
	h := newHarness(t, routes(under(testRoute(t, "api", up.URL), "/api"), under(testRoute(t, "rest", up.URL), "/")))
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

// A webhook path reached through dot segments is served as the webhook,
// so its logs and telemetry must carry the resolved, redacted path.
func TestDotSegmentWebhookPathTokenNeverReachesLogs(t *testing.T) {
	t.Parallel()
	wh := &fakeWebhook{}
	h := newHarness(t, Options{}, func(d *Deps) { d.Webhook = wh })
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
