package main

import (
	"slices"
	"testing"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/cookies"
)

func TestCookieForwardMapsARoutesList(t *testing.T) {
	t.Parallel()
	if got := cookieForward(nil); len(got) != 2 || !got[0].AsAuthorization || got[1].Cookie != "olp_mural" {
		t.Errorf("nil → %+v, want the default", got)
	}
	if got := cookieForward([]configs.CookieForward{}); got == nil || len(got) != 0 {
		t.Errorf("empty → %+v, want empty non-nil", got)
	}
	got := cookieForward([]configs.CookieForward{{Cookie: "olp_x", As: "authorization"}, {Cookie: "olp_y"}})
	if len(got) != 2 || !got[0].AsAuthorization || got[1].AsAuthorization {
		t.Errorf("got %+v", got)
	}
}

// cookies declares the default policy itself; it is the configuration's
// documented default.
func TestCookiesDefaultForwardIsTheConfigurationsDefault(t *testing.T) {
	t.Parallel()
	var fromConfig []cookies.Forward
	for _, f := range configs.DefaultCookieForward() {
		fromConfig = append(fromConfig, cookies.Forward{Cookie: f.Cookie, AsAuthorization: f.As == "authorization"})
	}
	if !slices.Equal(fromConfig, cookies.DefaultForward()) {
		t.Errorf("configs default %+v, cookies default %+v", fromConfig, cookies.DefaultForward())
	}
}
