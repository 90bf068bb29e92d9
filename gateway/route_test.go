package gateway

import (
	"net/url"
	"strings"
	"testing"
)

func TestRouterPrecedence(t *testing.T) {
	t.Parallel()
	mk := func(name, prefix string, hosts ...string) *route {
		return &route{Name: name, Prefix: normalizePrefix(prefix), Hosts: hosts, Upstream: &url.URL{}}
	}
	rt := newRouter([]*route{
		mk("any-root", "/"),
		mk("any-api", "/api/"),
		mk("wild", "/", "*.example.org"),
		mk("wild-deep", "/", "*.b.example.org"),
		mk("exact-api", "/api", "portal.example.org"),
		mk("exact-api-v2", "/api/v2", "portal.example.org"),
		mk("first", "/dup", "dup.example.org"),
		mk("second", "/dup", "dup.example.org"),
	})
	tests := []struct {
		host, path, want, rest string
	}{
		{"portal.example.org", "/api/v2/x", "exact-api-v2", "/x"},
		{"PORTAL.example.org.:8443", "/api/v1", "exact-api", "/v1"},
		{"portal.example.org", "/api", "exact-api", ""},
		{"portal.example.org", "/apix", "wild", "/apix"},             // exact tier has no match: falls to wildcard
		{"portal.example.org", "/api%2Fv2/x", "wild", "/api%2Fv2/x"}, // %2F is not a segment boundary
		{"portal.example.org", "/ap%69/v2", "exact-api-v2", ""},
		{"a.b.example.org", "/", "wild-deep", "/"},
		{"b.example.org", "/", "wild", "/"},
		{"example.org", "/api/z", "any-api", "/z"},
		{"example.org", "/z", "any-root", "/z"},
		{"[2001:db8::1]:80", "/", "any-root", "/"},
		{"dup.example.org", "/dup/1", "first", "/1"},
	}
	for _, tc := range tests {
		r, rest := rt.match(tc.host, tc.path)
		if r == nil || r.Name != tc.want || rest != tc.rest {
			name := "<nil>"
			if r != nil {
				name = r.Name
			}
			t.Errorf("match(%q, %q) = %s %q, want %s %q", tc.host, tc.path, name, rest, tc.want, tc.rest)
		}
	}
	if r, _ := newRouter([]*route{mk("only", "/x", "h")}).match("h", "/y"); r != nil {
		t.Errorf("no route should match, got %s", r.Name)
	}
}

func TestJoinPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ base, rest, want string }{
		{"/a", "/b%2fc", "/a/b%2fc"},
		{"/a/", "/x", "/a/x"},
		{"/a/", "", "/a/"},
		{"", "", "/"},
		{"", "/x", "/x"},
		{"/", "/x", "/x"},
		{"/a", "x", "/a/x"},
		{"/a", "//x", "/a//x"}, // the client's own double slash is kept
	} {
		if got := joinPath(tc.base, tc.rest); got != tc.want {
			t.Errorf("joinPath(%q, %q) = %q, want %q", tc.base, tc.rest, got, tc.want)
		}
	}
}

func FuzzMatchPrefix(f *testing.F) {
	for _, s := range []string{"/api", "/api/x", "/ap%69", "/api%2Fx", "/api%", "/api%zz", "%2f"} {
		f.Add(s, "/api")
	}
	f.Fuzz(func(t *testing.T, p, prefix string) {
		if prefix == "" || prefix[0] != '/' {
			return
		}
		prefix = normalizePrefix(prefix)
		rest, ok := matchPrefix(p, prefix)
		if !ok {
			return
		}
		if rest != "" && rest[0] != '/' && prefix != "/" {
			t.Fatalf("rest %q does not start a segment", rest)
		}
		if len(rest) > len(p) || p[len(p)-len(rest):] != rest {
			t.Fatalf("rest %q is not a suffix of %q", rest, p)
		}
		if j := joinPath("/base", rest); strings.HasPrefix(j, "/base//") && !strings.HasPrefix(rest, "//") {
			t.Fatalf("joinPath made // at the seam: %q", j)
		}
	})
}

// /api;x/login reached a catch-all route (its limits, CORS and cookie
// policy) while Tomcat and Jetty strip ";x" and serve it as /api/login:
// path parameters of a segment the prefix spans are skipped now.
func TestMatchPrefixSkipsPathParametersOfPrefixSegments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p, prefix, rest string
		ok              bool
	}{
		{"/api;x/login", "/api", "/login", true},
		{"/api;jsessionid=1", "/api", "", true},
		{"/api%3bx/login", "/api", "/login", true},
		{"/api%3Bx/login", "/api", "/login", true},
		{"/api;x/v2;y/z", "/api/v2", "/z", true},
		{"/api;x/v2", "/api/v2", "", true},
		{"/api/x;y", "/api", "/x;y", true}, // after the prefix: the upstream's
		{"/apix;y/z", "/api", "", false},
		{"/ap;i/z", "/api", "", false},
		{"/api;x%2Fadmin", "/api", "", true}, // one segment: the path policy refuses %2F
		{"/api;/v2/z", "/api/v2", "/z", true},
		{"/api%3/z", "/api", "", false},
		{"/api%3", "/api", "", false},    // a truncated escape where a parameter could start
		{"/api%3", "/api/v2", "", false}, // …and inside the prefix
		{"/api%", "/api/v2", "", false},
	} {
		rest, ok := matchPrefix(tc.p, tc.prefix)
		if ok != tc.ok || rest != tc.rest {
			t.Errorf("matchPrefix(%q, %q) = %q %v, want %q %v", tc.p, tc.prefix, rest, ok, tc.rest, tc.ok)
		}
	}
}

// TestNormalizeHostStripsThePortOfEveryHostForm: the routing key of a Host
// is its name in lower case without port or trailing dot: bracketed IPv6
// literals lose their brackets, a bare IPv6 address (several colons, no
// brackets) is kept whole, and a lone port leaves no name.
func TestNormalizeHostStripsThePortOfEveryHostForm(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"API.Example.org.:8443": "api.example.org",
		"api.example.org":       "api.example.org",
		"api.example.org.":      "api.example.org",
		"[::1]:80":              "::1",
		"[2001:DB8::1]":         "2001:db8::1",
		"2001:db8::1":           "2001:db8::1",
		"127.0.0.1:8080":        "127.0.0.1",
		":80":                   "",
		"":                      "",
	} {
		if got := normalizeHost(in); got != want {
			t.Errorf("normalizeHost(%q) = %q, want %q", in, got, want)
		}
	}
}
