package configs

import (
	"strings"
	"testing"
)

// A route that has no cookies key receives the portal session (the
// default forward list). When the routes reach more than one upstream
// origin, each such route is warned about, naming its upstream (fresh
// attack pass 6 K01: a third-party route added without `cookies:` got
// every user's olp_auth as a Bearer token, and nothing said so). Routes
// that write their cookies.forward, even the default list, are not.
func TestSessionByDefaultIsWarnedWhenRoutesReachSeveralUpstreams(t *testing.T) {
	t.Parallel()
	none := func(string) (string, bool) { return "", false }
	tests := []struct {
		name, routes string
		want         []string // route indexes warned about, as "routes[i].cookies"
	}{
		{"one route", `[{name: a, upstream: "http://127.0.0.1:1"}]`, nil},
		{"two routes, one upstream", `[{name: a, upstream: "http://127.0.0.1:1"}, {name: b, path_prefix: /b, upstream: "http://127.0.0.1:1/b"}]`, nil},
		{"host case only", `[{name: a, upstream: "http://Portal:1"}, {name: b, path_prefix: /b, upstream: "http://portal:1"}]`, nil},
		{"a third party without cookies", `[{name: a, upstream: "http://127.0.0.1:1", cookies: {forward: [{cookie: olp_auth, as: authorization}]}}, {name: b, path_prefix: /b, upstream: "https://stats.example.net"}]`, []string{"routes[1].cookies"}},
		{"both without cookies", `[{name: a, upstream: "http://127.0.0.1:1"}, {name: b, path_prefix: /b, upstream: "https://stats.example.net"}]`, []string{"routes[0].cookies", "routes[1].cookies"}},
		{"another port is another upstream", `[{name: a, upstream: "http://127.0.0.1:1"}, {name: b, path_prefix: /b, upstream: "http://127.0.0.1:2", cookies: {forward: []}}]`, []string{"routes[0].cookies"}},
		{"another scheme is another upstream", `[{name: a, upstream: "http://portal:443"}, {name: b, path_prefix: /b, upstream: "https://portal:443", cookies: {forward: []}}]`, []string{"routes[0].cookies"}},
		{"every route explicit", `[{name: a, upstream: "http://127.0.0.1:1", cookies: {forward: [{cookie: olp_auth, as: authorization}, {cookie: olp_mural}]}}, {name: b, path_prefix: /b, upstream: "https://stats.example.net", cookies: {forward: []}}]`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte("environment: development\nroutes: "+tc.routes+"\n"), none)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range cfg.Warnings {
				if path, _, ok := strings.Cut(w, ": "); ok && strings.HasSuffix(path, ".cookies") {
					got = append(got, path)
					if !strings.Contains(w, "hands the portal session to") || !strings.Contains(w, "cookies.forward") {
						t.Errorf("warning does not say what happens and what to write: %s", w)
					}
				}
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("warned about %v, want %v (warnings: %q)", got, tc.want, cfg.Warnings)
			}
		})
	}
}
