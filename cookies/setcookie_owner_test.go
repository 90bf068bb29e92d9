package cookies

import (
	"net/http"
	"slices"
	"testing"
)

// portalCookieSetters are Set-Cookie lines that would set or clear the
// portal's olp_auth in a browser, in every spelling a browser treats as
// that cookie or sends back as one the gateway reads as the portal's.
var portalCookieSetters = []string{
	"olp_auth=stolen; Path=/",
	"OLP_AUTH=stolen; Path=/",
	"Olp_Auth=stolen",
	" olp_auth =stolen",
	"olp_auth=; Max-Age=0; Path=/",
	"olp_auth=; Expires=Thu, 01 Jan 1970 00:00:00 GMT; Path=/",
	"__Host-olp_auth=stolen; Secure; Path=/",
	"__host-olp_auth=stolen; Secure; Path=/",
	"__Secure-olp_auth=stolen; Secure",
	"__SECURE-OLP_AUTH=stolen; Secure",
	"=olp_auth=stolen; Path=/", // nameless: the browser sends "olp_auth=stolen"
	"olp_auth",                 // nameless without '=': sent back as "olp_auth"
}

// An upstream of a route that does not forward olp_auth must not set or
// clear it: every spelling is removed, the other lines stay, in order.
func TestUpstreamOfANonForwardingRouteCannotSetOrClearThePortalCookie(t *testing.T) {
	t.Parallel()
	policies := map[string][]Forward{
		"forward: []":          []Forward{},
		"forward: [olp_mural]": []Forward{{Cookie: "olp_mural"}},
	}
	for pname, fw := range policies {
		for _, line := range portalCookieSetters {
			h := http.Header{"Set-Cookie": {"a=1", line, "b=2; Path=/"}}
			removed := ApplySetCookie(h, ResponsePolicy{Forward: fw})
			if got := h["Set-Cookie"]; !slices.Equal(got, []string{"a=1", "b=2; Path=/"}) {
				t.Errorf("%s, %q: Set-Cookie left %q", pname, line, got)
			}
			if len(removed) != 1 {
				t.Errorf("%s, %q: removed %q, want the one line", pname, line, removed)
			}
		}
	}
}

// On a route that forwards olp_auth, only the exact name may be set (and
// is hardened); case variants, prefixed and nameless forms are other
// cookies in the browser and are still removed.
func TestForwardingRouteMaySetOnlyTheExactCookiesItForwards(t *testing.T) {
	t.Parallel()
	p := ResponsePolicy{Forward: portalForward()}
	for _, line := range []string{"olp_auth=new; Path=/", "olp_auth=; Max-Age=0; Path=/", "olp_mural=m"} {
		h := http.Header{"Set-Cookie": {line}}
		if removed := ApplySetCookie(h, p); len(removed) != 0 || len(h["Set-Cookie"]) != 1 {
			t.Errorf("%q: removed %q, kept %q", line, removed, h["Set-Cookie"])
		}
	}
	others := []string{"OLP_AUTH=stolen", "Olp_Auth=stolen", "__Host-olp_auth=stolen; Secure; Path=/",
		"__secure-olp_auth=x; Secure", "=olp_auth=stolen; Path=/", "olp_auth", "= olp_auth=x"}
	for _, line := range others {
		h := http.Header{"Set-Cookie": {line}}
		if removed := ApplySetCookie(h, p); len(removed) != 1 || h["Set-Cookie"] != nil {
			t.Errorf("%q: removed %q, kept %q", line, removed, h["Set-Cookie"])
		}
	}
	h := http.Header{"Set-Cookie": {"olp_tema=escuro", "olp_auth=t"}}
	if removed := ApplySetCookie(h, p); !slices.Equal(removed, []string{"olp_tema"}) || !slices.Equal(h["Set-Cookie"], []string{"olp_auth=t; Secure; HttpOnly; SameSite=Lax"}) {
		t.Errorf("unlisted olp_tema: removed %q, kept %q", removed, h["Set-Cookie"])
	}
}

// The prefixed forms are the portal's on the request side too: a
// third-party route does not get __Host-olp_auth.
func TestPrefixedPortalCookieIsNotForwardedToAThirdParty(t *testing.T) {
	t.Parallel()
	h := http.Header{"Cookie": {"__Host-olp_auth=tok; __secure-OLP_x=1; _ga=1"}}
	applyRequest(h, []Forward{})
	if got := h.Get("Cookie"); got != "_ga=1" {
		t.Errorf("Cookie = %q, want only _ga=1", got)
	}
	for _, name := range []string{"olp_auth", "OLP_x", "__Host-olp_auth", "__secure-olp_a", "__Host-OLP_"} {
		if !IsOwned(name) {
			t.Errorf("IsOwned(%q) = false", name)
		}
	}
	for _, name := range []string{"olp", "__Host-", "__Host-x_olp_", "___Host-olp_auth", "x__Secure-olp_a"} {
		if IsOwned(name) {
			t.Errorf("IsOwned(%q) = true", name)
		}
	}
}

// A third-party upstream (forward: []) could set "olp%5Fauth", "olp.auth"
// or "olp+auth": the browser keeps each under that name and sends it to
// the portal's upstream too, where PHP (and Rack, for the escapes) reads
// it as olp_auth, a fixated session. These spellings are the portal's
// cookies now: removed from a route that does not list them, on both
// sides.
func TestFrameworkDecodedSpellingOfAPortalCookieIsOwned(t *testing.T) {
	t.Parallel()
	spellings := []string{"olp%5Fauth", "olp%5fauth", "olp.auth", "olp+auth", "olp auth", "olp[auth", "%6Flp_auth",
		"olp%2Eauth", "__Host-olp.auth", "__Host%2Dolp_auth", "OLP%5FAUTH"}
	for _, name := range spellings {
		if !IsOwned(name) {
			t.Errorf("IsOwned(%q) = false", name)
		}
	}
	for _, name := range []string{"olp", "olpauth", "olp-auth", "olp%5", "olp%zz_auth", "x.olp_auth", "_ga", "a%20b"} {
		if IsOwned(name) {
			t.Errorf("IsOwned(%q) = true", name)
		}
	}
	h := http.Header{}
	for _, name := range spellings {
		h.Add("Set-Cookie", name+"=evil; Path=/")
	}
	h.Add("Set-Cookie", "tiles=1")
	removed := ApplySetCookie(h, ResponsePolicy{Forward: []Forward{}})
	if len(removed) != len(spellings) || len(h["Set-Cookie"]) != 1 || h.Get("Set-Cookie") != "tiles=1" {
		t.Errorf("removed %q, kept %q", removed, h["Set-Cookie"])
	}
	r := http.Header{"Cookie": {"olp%5Fauth=a; olp.auth=b; olp+auth=c; _ga=1"}}
	applyRequest(r, []Forward{})
	if got := r.Get("Cookie"); got != "_ga=1" {
		t.Errorf("Cookie = %q, want only _ga=1", got)
	}
}
