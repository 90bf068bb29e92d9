package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// pathPolicyHarness: /api strips onto up/v2 (its upstream base) with
// the escaped-slash policy apiSlashes, /full goes to up/v2 whole, /login
// and a catch-all go to other; the top-level policy is top.
func pathPolicyHarness(t *testing.T, top, apiSlashes SlashPolicy) (*harness, *recordingUpstream, *recordingUpstream) {
	t.Helper()
	up, other := newRecordingUpstream(t, nil), newRecordingUpstream(t, nil)
	api := under(testRoute(t, "api", up.URL+"/v2"), "/api")
	api.StripPrefix, api.EscapedSlashes = true, apiSlashes
	return newHarness(t, Options{EscapedSlashes: top, Routes: []Route{
		api,
		under(testRoute(t, "apifull", up.URL+"/v2"), "/full"),
		under(testRoute(t, "login", other.URL), "/login"),
		testRoute(t, "rest", other.URL),
	}}), up, other
}

// rawGet sends "GET target" exactly as given on one connection.
func rawGet(t *testing.T, h *harness, target string, headers ...string) (*http.Response, string) {
	t.Helper()
	raw := "GET " + target + " HTTP/1.1\r\nHost: portal.example.org\r\nConnection: close\r\n"
	for _, hd := range headers {
		raw += hd + "\r\n"
	}
	res, _, br := rawRequest(t, h.front.Listener.Addr().String(), raw+"\r\n")
	body, _ := io.ReadAll(br)
	res.Body.Close()
	return res, string(body)
}

// walkOutPaths are spellings of "leave /api (and {up}/v2) for /admin or
// /login" through an upstream that decodes before resolving dot
// segments, strips ;params (Tomcat) or decodes twice (IIS).
var walkOutPaths = []string{
	"/api/..%2fadmin", "/api/..%2Fadmin", "/api/x%2f..%2f..%2fadmin", "/api/..%5cadmin",
	"/api/..%5Cadmin", `/api/..\admin`, `/api\..\..\admin`, "/api/%2e%2e%2fadmin", "/api/.%2E%2Fadmin",
	"/api/..%252fadmin", "/api/..%255cadmin", "/api/%252e%252e/admin", "/api/..;/admin",
	"/api/..;x=1/admin", "/api/%2e%2e;/admin", "/api/.;/x", "/api/..%3b/admin", "/api/a%00/../admin",
	"/api%2f..%2flogin", "/full/..%2fadmin", "/full/..;/admin", "/api/..%2fadmin{",
}

// A request path that walks out of a route's prefix and upstream base
// once an upstream decodes %2F or %5C, reads '\' as '/', strips ;params
// or decodes twice is refused with 400 by default and reaches no
// upstream (it reached {up} as /v2/..%2fadmin, nginx's /admin).
func TestEscapedSlashWalkOutIsRefusedByDefault(t *testing.T) {
	t.Parallel()
	h, up, other := pathPolicyHarness(t, SlashesReject, SlashesDefault)
	for _, p := range walkOutPaths {
		res, body := rawGet(t, h, p)
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", p, res.StatusCode)
			continue
		}
		var pr problem
		if err := json.Unmarshal([]byte(body), &pr); err != nil || pr.Title != "Endereço inválido" || pr.RequestID == "" {
			t.Errorf("%s: body %q is not the PT-BR problem", p, body)
		}
		if res.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: content type %q", p, res.Header.Get("Content-Type"))
		}
	}
	if up.calls()+other.calls() != 0 {
		t.Errorf("upstreams called %d+%d times", up.calls(), other.calls())
	}
	if h.limiter.calls() != 0 {
		t.Errorf("limiter asked %d times for refused paths", h.limiter.calls())
	}
	// Plain paths, real dot segments and other escapes still pass.
	for p, want := range map[string]string{
		"/api/a%20b": "/v2/a%20b", "/api/x/../y": "/v2/y", "/api/a;jsessionid=1": "/v2/a;jsessionid=1",
		"/api/100%25": "/v2/100%25", "/api/%2e%2e/api/z": "/v2/z",
	} {
		if res, _ := rawGet(t, h, p); res.StatusCode != 200 {
			t.Errorf("%s: status %d", p, res.StatusCode)
		} else if got := up.last(t).RequestURI; got != want {
			t.Errorf("%s: upstream got %q, want %q", p, got, want)
		}
	}
}

// Under escaped_slashes: unescape the decoded path is what is routed,
// limited and forwarded: /api/..%2flogin is the login route's /login, not
// the api upstream's /v2/../login.
func TestEscapedSlashUnescapeRoutesTheDecodedPath(t *testing.T) {
	t.Parallel()
	h, up, other := pathPolicyHarness(t, SlashesUnescape, SlashesDefault)
	for _, p := range []string{"/api/..%2flogin", `/api/..\login`, "/api%2F..%5Clogin", "/x/..%2F..%2flogin"} {
		before := h.limiter.calls()
		if res, _ := rawGet(t, h, p); res.StatusCode != 200 {
			t.Errorf("%s: status %d", p, res.StatusCode)
			continue
		}
		if got := other.last(t).RequestURI; got != "/login" {
			t.Errorf("%s: login upstream got %q, want /login", p, got)
		}
		h.limiter.mu.Lock()
		route := h.limiter.subjects[before].Route
		h.limiter.mu.Unlock()
		if route != "login" {
			t.Errorf("%s: limited under route %q, want login", p, route)
		}
	}
	if res, _ := rawGet(t, h, "/api/a%2Fb"); res.StatusCode != 200 || up.last(t).RequestURI != "/v2/a/b" {
		t.Errorf("/api/a%%2Fb: status %d, upstream got %q, want /v2/a/b", res.StatusCode, up.last(t).RequestURI)
	}
	for _, p := range []string{"/api/..%252flogin", "/api/..;/login", "/api/a%00"} {
		if res, _ := rawGet(t, h, p); res.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400 under unescape too", p, res.StatusCode)
		}
	}
}

// A route with escaped_slashes: keep forwards %2F as sent (and a raw '\'
// as %5C) but still refuses a dot segment hidden behind one; the other
// routes keep the top-level reject.
func TestEscapedSlashKeepRefusesHiddenDotSegments(t *testing.T) {
	t.Parallel()
	h, up, other := pathPolicyHarness(t, SlashesReject, SlashesKeep)
	for p, want := range map[string]string{
		"/api/projects/group%2Fname": "/v2/projects/group%2Fname",
		`/api/a\b`:                   "/v2/a%5Cb",
		"/api/a%5cb{":                "/v2/a%5cb%7B",
	} {
		if res, _ := rawGet(t, h, p); res.StatusCode != 200 {
			t.Errorf("%s: status %d", p, res.StatusCode)
		} else if got := up.last(t).RequestURI; got != want {
			t.Errorf("%s: upstream got %q, want %q", p, got, want)
		}
	}
	calls := up.calls()
	for _, p := range walkOutPaths {
		if strings.HasPrefix(p, "/full") || strings.HasPrefix(p, "/api%2f") {
			continue
		}
		if res, _ := rawGet(t, h, p); res.StatusCode != http.StatusBadRequest {
			t.Errorf("keep %s: status %d, want 400", p, res.StatusCode)
		}
	}
	if res, _ := rawGet(t, h, "/full/a%2Fb"); res.StatusCode != http.StatusBadRequest {
		t.Errorf("/full/a%%2Fb on a reject route: status %d, want 400", res.StatusCode)
	}
	if up.calls() != calls || other.calls() != 0 {
		t.Errorf("refused paths reached an upstream: %d→%d, other %d", calls, up.calls(), other.calls())
	}
}

func TestScanPathFindsEveryEscapedSlashSpelling(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p       string
		slashes bool
		fault   pathFault
	}{
		{"/a/b", false, pathOK},
		{"/a%2fb", true, pathOK}, {"/a%2Fb", true, pathOK}, {"/a%5cb", true, pathOK}, {"/a%5Cb", true, pathOK},
		{`/a\b`, true, pathOK},
		{"/a%00", false, pathControl}, {"/a%0a", false, pathControl}, {"/a%7F", false, pathControl},
		{"/a\x01", false, pathControl},
		{"/a%252f", false, pathDoubleEncoded}, {"/a%252E", false, pathDoubleEncoded},
		{"/a%255C", false, pathDoubleEncoded}, {"/a%2525", false, pathDoubleEncoded}, {"/a%2500", false, pathDoubleEncoded},
		{"/a%2541", false, pathOK}, {"/100%25", false, pathOK}, {"/a%2", false, pathOK},
		// The control range's edges after a second decoding: 0x1f and 0x7f
		// are refused, a space (0x20) and '~' (0x7e) are a name's.
		{"/a%251F", false, pathDoubleEncoded}, {"/a%2520b", false, pathOK}, {"/a%257e", false, pathOK},
		// The second pass's hex digits escaped themselves: one decoding
		// makes "%2f", "%2e", "%5c", "%25", "%00" of them all the same.
		{"/a%25%32%66", false, pathDoubleEncoded}, {"/a%25%32%65", false, pathDoubleEncoded},
		{"/a%252%65", false, pathDoubleEncoded}, {"/a%25%32E", false, pathDoubleEncoded},
		{"/a%25%35%63", false, pathDoubleEncoded}, {"/a%25%32%35", false, pathDoubleEncoded},
		{"/a%25%30%30", false, pathDoubleEncoded}, {"/a%25%37%46", false, pathDoubleEncoded},
		{"/a%25%34%31", false, pathOK}, {"/a%25%34", false, pathOK}, {"/a%25%3", false, pathOK},
	} {
		slashes, fault := scanPath(tc.p)
		if slashes != tc.slashes || fault != tc.fault {
			t.Errorf("scanPath(%q) = %v %v, want %v %v", tc.p, slashes, fault, tc.slashes, tc.fault)
		}
	}
	for _, tc := range []struct {
		p     string
		split bool
		want  bool
	}{
		{"/a/b", true, false}, {"/a/..;/b", false, true}, {"/a/.;x", false, true}, {"/a/%2E%2e%3Bx/b", false, true},
		{"/..;/b", false, true}, {"/.;x", false, true}, {"/%2e%2E;x/b", false, true}, // the first segment
		{"/a/..%2fb", false, false}, {"/a/..%2fb", true, true}, {"/a%5C..", true, true}, {`/a\..\b`, true, true},
		{"/a/b..;x", false, false}, {"/a;x/b", false, false}, {"/a/...;/b", false, false},
	} {
		if got := hasHiddenDotSegment(tc.p, tc.split); got != tc.want {
			t.Errorf("hasHiddenDotSegment(%q, %v) = %v, want %v", tc.p, tc.split, got, tc.want)
		}
	}
}

// hostileUpstreamView is how the laxest upstream of docs/edge.md reads
// an escaped path: '\' and every %2F/%5C are '/', ";params" are cut from
// each segment, and the path is decoded once more after that.
func hostileUpstreamView(p string) []string {
	p = unescapeSlashes(p)
	var segs []string
	for _, seg := range strings.Split(p, "/") {
		seg = beforeParams(seg)
		if d, err := url.PathUnescape(seg); err == nil {
			seg = d
		}
		segs = append(segs, seg)
	}
	return segs
}

// FuzzCleanPathLeavesNoDotSegmentForAnyUpstream: whatever the policy, a
// path cleanPath lets through holds no segment that the laxest upstream
// resolves as "." or "..", so it can never leave the route's prefix or
// its upstream's base path.
func FuzzCleanPathLeavesNoDotSegmentForAnyUpstream(f *testing.F) {
	for _, p := range walkOutPaths {
		f.Add(p)
	}
	f.Add("/api/a%2Fb")
	f.Add("/a/%2e%2E/b")
	f.Fuzz(func(t *testing.T, target string) {
		u, err := url.ParseRequestURI(target)
		if err != nil || !strings.HasPrefix(target, "/") {
			return
		}
		for _, action := range []slashAction{slashReject, slashUnescape, slashKeep} {
			s := &Server{escapedSlashes: action}
			uc := *u
			path, _, fault := s.cleanPath(&uc)
			if fault != pathOK {
				continue
			}
			for _, seg := range hostileUpstreamView(path) {
				if seg == "." || seg == ".." {
					t.Fatalf("%q under %d → %q: an upstream resolves a %q segment", target, action, path, seg)
				}
			}
			if uc.EscapedPath() != path {
				t.Fatalf("%q under %d: URL escapes as %q, routed %q", target, action, uc.EscapedPath(), path)
			}
		}
	})
}

// TestEscapeRawBytesEncodesWhatAPathMayNotHoldRaw: every byte outside
// RFC 3986's pchar, '/' and '%' is percent-encoded (upper-case hex), the
// rest kept as sent, short paths included.
func TestEscapeRawBytesEncodesWhatAPathMayNotHoldRaw(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]string{
		"/":                 "/",
		"/a/b-c_d.e~f":      "/a/b-c_d.e~f",
		"/%41%2f":           "/%41%2f",
		"/{":                "/%7B",
		`/a\b`:              "/a%5Cb",
		"/a b":              "/a%20b",
		"/\"x\"":            "/%22x%22",
		"/\u00e9":           "/%C3%A9",
		"/a:b@c!$&'()*+,;=": "/a:b@c!$&'()*+,;=",
		"/a^`|<>":           "/a%5E%60%7C%3C%3E",
	} {
		if got := escapeRawBytes(p); got != want {
			t.Errorf("escapeRawBytes(%q) = %q, want %q", p, got, want)
		}
	}
}
