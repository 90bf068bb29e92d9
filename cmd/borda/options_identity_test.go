package main

import (
	"slices"
	"testing"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/cookies"
)

func TestCookieForwardMapsARoutesList(t *testing.T) {
	t.Parallel()
	if got := cookieForward(nil); len(got) != 0 {
		t.Errorf("nil → %+v, want none", got)
	}
	if got := cookieForward([]configs.CookieForward{}); got == nil || len(got) != 0 {
		t.Errorf("empty → %+v, want empty non-nil", got)
	}
	got := cookieForward([]configs.CookieForward{{Cookie: "olp_x", As: "authorization"}, {Cookie: "olp_y"}})
	if len(got) != 2 || !got[0].AsAuthorization || got[1].AsAuthorization {
		t.Errorf("got %+v", got)
	}
}

// TestRouteWithoutCookiesKeyForwardsThePortalSession: the default cookie
// policy has one home, configs.DefaultCookieForward; a route without the
// key reaches the gateway with olp_auth as its Bearer and olp_mural as a
// cookie.
func TestRouteWithoutCookiesKeyForwardsThePortalSession(t *testing.T) {
	t.Parallel()
	cfg, err := configs.Parse([]byte("routes: [{name: portal, upstream: \"http://127.0.0.1:1\"}]"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	opts, err := gatewayOptions(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []cookies.Forward{{Cookie: cookies.AuthCookie, AsAuthorization: true}, {Cookie: "olp_mural"}}
	if got := opts.Routes[0].Cookies.Forward; !slices.Equal(got, want) {
		t.Errorf("Forward = %+v, want %+v", got, want)
	}
}
