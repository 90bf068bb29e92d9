package cookies

import (
	"net/http"
	"strings"
	"testing"
)

func TestApplyRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		cookies   []string
		auth      string
		forward   []Forward
		wantCook  string
		wantAuth  string
		noCookies bool
	}{
		{name: "default: olp_auth becomes bearer, olp_mural stays", cookies: []string{"olp_auth=abc.def.ghi; olp_mural=m1; theme=dark"},
			forward: portalForward(), wantCook: "olp_mural=m1; theme=dark", wantAuth: "Bearer abc.def.ghi"},
		{name: "own Authorization wins, olp_auth not sent", cookies: []string{"olp_auth=abc; x=1"}, auth: "Bearer mine",
			forward: portalForward(), wantCook: "x=1", wantAuth: "Bearer mine"},
		{name: "unlisted olp cookies removed, case-insensitive prefix", cookies: []string{"olp_secret=s; OLP_AUTH=z; a=b"},
			forward: portalForward(), wantCook: "a=b"},
		{name: "third party: nothing of the portal", cookies: []string{"olp_auth=abc; olp_mural=m"},
			forward: []Forward{}, noCookies: true},
		{name: "HTTP/2 split lines merged", cookies: []string{"a=1", "olp_mural=m", "b=2"},
			forward: portalForward(), wantCook: "a=1; olp_mural=m; b=2"},
		{name: "malformed pairs pass byte for byte", cookies: []string{`weird; =nothing; q="quoted value"; ;;`},
			forward: portalForward(), wantCook: `weird; =nothing; q="quoted value"`},
		{name: "quoted olp_auth unquoted", cookies: []string{`olp_auth="tok"`}, forward: portalForward(), noCookies: true, wantAuth: "Bearer tok"},
		{name: "olp_auth with a space is not a token", cookies: []string{`olp_auth="a b"`}, forward: portalForward(), noCookies: true},
		{name: "two different olp_auth, nothing verifies: no credential", cookies: []string{"olp_auth=one; olp_auth=two"}, forward: portalForward(), noCookies: true},
		{name: "the same olp_auth twice is one", cookies: []string{"olp_auth=one; olp_auth=one"}, forward: portalForward(), noCookies: true, wantAuth: "Bearer one"},
		{name: "forward as cookie when configured", cookies: []string{"olp_auth=abc"}, forward: []Forward{{Cookie: "olp_auth"}}, wantCook: "olp_auth=abc"},
		{name: "untouched single line", cookies: []string{"a=1;b=2"}, forward: portalForward(), wantCook: "a=1;b=2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{"Cookie": tc.cookies}
			if tc.auth != "" {
				h.Set("Authorization", tc.auth)
			}
			applyRequest(h, tc.forward)
			if _, ok := h["Cookie"]; ok == tc.noCookies {
				t.Errorf("Cookie present = %v, want %v (%q)", ok, !tc.noCookies, h["Cookie"])
			}
			if !tc.noCookies && strings.Join(h["Cookie"], "|") != tc.wantCook {
				t.Errorf("Cookie = %q, want %q", h["Cookie"], tc.wantCook)
			}
			if got := h.Get("Authorization"); got != tc.wantAuth {
				t.Errorf("Authorization = %q, want %q", got, tc.wantAuth)
			}
		})
	}
}

func TestApplySetCookie(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   []string
		p    ResponsePolicy
		want []string
	}{
		{"several lines stay several, only Domain rewritten",
			[]string{"sid=abc; Path=/; Domain=internal; HttpOnly", "logout=x; Max-Age=0; Path=/"},
			ResponsePolicy{Domain: "portal.example.org"},
			[]string{"sid=abc; Path=/; Domain=portal.example.org; HttpOnly", "logout=x; Max-Age=0; Path=/"}},
		{"olp cookies hardened", []string{"olp_auth=t; Path=/; SameSite=None; secure"}, ResponsePolicy{Forward: portalForward()},
			[]string{"olp_auth=t; Path=/; Secure; HttpOnly; SameSite=Lax"}},
		{"configured SameSite", []string{"olp_mural=m"}, ResponsePolicy{SameSite: "strict", Forward: portalForward()},
			[]string{"olp_mural=m; Secure; HttpOnly; SameSite=Strict"}},
		{"host-only cookies stay host-only", []string{"a=1; Path=/"}, ResponsePolicy{Domain: "x.org"}, []string{"a=1; Path=/"}},
		{"malformed kept byte for byte", []string{"=;;; ", "no-equals", `q="v"; Expires=garbage`}, ResponsePolicy{},
			[]string{"=;;; ", "no-equals", `q="v"; Expires=garbage`}},
		{"value with equals signs kept", []string{"olp_auth=a=b==; Path=/"}, ResponsePolicy{Forward: portalForward()},
			[]string{"olp_auth=a=b==; Path=/; Secure; HttpOnly; SameSite=Lax"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{"Set-Cookie": append([]string(nil), tc.in...)}
			ApplySetCookie(h, tc.p)
			if strings.Join(h["Set-Cookie"], "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(h["Set-Cookie"], "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func FuzzApplyRequest(f *testing.F) {
	for _, s := range []string{"olp_auth=abc; olp_mural=m; a=b", `olp_auth="x y"`, ";;=;", "OLP_Auth=1", "olp_auth=\x00\x7f"} {
		f.Add(s, "")
		f.Add(s, "Bearer mine")
	}
	f.Fuzz(func(t *testing.T, cookie, auth string) {
		h := http.Header{"Cookie": {cookie}}
		if auth != "" {
			h.Set("Authorization", auth)
		}
		applyRequest(h, portalForward())
		for _, line := range h["Cookie"] {
			for part := range strings.SplitSeq(line, ";") {
				name, _, _ := strings.Cut(strings.TrimSpace(part), "=")
				name = strings.TrimSpace(name)
				if IsOwned(name) && name != "olp_mural" {
					t.Fatalf("olp cookie %q forwarded from %q", name, cookie)
				}
			}
		}
		got := h.Get("Authorization")
		if tok, ok := bearerToken(auth); ok && got != "Bearer "+tok && got != "" {
			t.Fatalf("own Bearer %q became %q", auth, got)
		} else if !ok && auth != "" && got != auth {
			t.Fatalf("own Authorization %q replaced by %q", auth, got)
		}
		if auth == "" && got != "" && !validBearer(strings.TrimPrefix(got, "Bearer ")) {
			t.Fatalf("invalid Authorization %q", got)
		}
	})
}

func FuzzApplySetCookie(f *testing.F) {
	for _, s := range []string{"sid=abc; Path=/; Domain=x; HttpOnly", "olp_auth=t; SameSite=None", "=;;", "olp_x", "a=b; domain"} {
		f.Add(s, "portal.example.org")
	}
	f.Fuzz(func(t *testing.T, line, domain string) {
		h := http.Header{"Set-Cookie": {line, "second=2"}}
		removed := ApplySetCookie(h, ResponsePolicy{Domain: domain, Forward: portalForward()})
		got := h["Set-Cookie"]
		if len(removed) == 1 {
			if !IsOwned(removed[0]) || len(got) != 1 || got[0] != "second=2" {
				t.Fatalf("removed %q, kept %q", removed, got)
			}
			return
		}
		if len(removed) != 0 || len(got) != 2 || got[1] != "second=2" {
			t.Fatalf("lines changed: %q (removed %q)", got, removed)
		}
		if name, _ := setCookieName(line); IsOwned(name) {
			if !strings.HasSuffix(got[0], "; Secure; HttpOnly; SameSite=Lax") {
				t.Fatalf("olp cookie not hardened: %q", got[0])
			}
		}
	})
}

// applyRequest is the gateway's request rewrite without a verifier: the
// one credential (Resolve) written by ApplyRequest; a conflict forwards no
// credential.
func applyRequest(h http.Header, fw []Forward) {
	r, _ := Resolve(h, fw, nil)
	ApplyRequest(h, fw, r)
}

// portalForward is the policy of the portal's own routes (the
// configuration's default, configs.DefaultCookieForward): olp_auth as
// Authorization: Bearer, olp_mural as the cookie it is.
func portalForward() []Forward {
	return []Forward{{Cookie: AuthCookie, AsAuthorization: true}, {Cookie: "olp_mural"}}
}
