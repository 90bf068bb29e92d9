package identity

import (
	"context"
	"net/http"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/olp-edu/borda/cookies"
)

// Headers named in Connection never reach the upstream, so identity must
// not be read from them: the token the upstream sees decides.
func TestFromRequestIgnoresConnectionNominatedHeaders(t *testing.T) {
	t.Parallel()
	v, _ := NewVerifier(context.Background(), authConfig(), nil)
	cookie := sign(t, jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"sub": "cookie-user"}, "")
	header := sign(t, jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"sub": "header-user"}, "")

	h := http.Header{"Cookie": {"olp_auth=" + cookie}, "Authorization": {"Basic eDp5"}, "Connection": {"close", "keep-alive, authorization"}}
	if id, ok := v.FromRequest(h, portalForward()); !ok || id.UserID != "cookie-user" {
		t.Errorf("Authorization named in Connection: %+v %v, want the cookie's user", id, ok)
	}
	if h.Get("Authorization") == "" {
		t.Error("FromRequest modified the request headers")
	}
	h = http.Header{"Cookie": {"olp_auth=" + cookie}, "Authorization": {"Bearer " + header}, "Connection": {"Cookie"}}
	if id, ok := v.FromRequest(h, portalForward()); !ok || id.UserID != "header-user" {
		t.Errorf("Cookie named in Connection: %+v %v, want the header's user", id, ok)
	}
	delete(h, "Authorization")
	if id, ok := v.FromRequest(h, portalForward()); ok {
		t.Errorf("identity %+v from a cookie the upstream never gets", id)
	}
}

// Identity verifies the olp_auth value cookies.ApplyRequest sends upstream as the
// Bearer token, not an unusable earlier duplicate.
func TestFromRequestVerifiesTheAuthCookieTheUpstreamGets(t *testing.T) {
	t.Parallel()
	v, _ := NewVerifier(context.Background(), authConfig(), nil)
	good := sign(t, jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"sub": "u-dup"}, "")
	for _, first := range []string{"", "a,b", `"x y"`, `"`} {
		h := http.Header{"Cookie": {"olp_auth=" + first + "; olp_auth=" + good}}
		id, ok := v.FromRequest(h, portalForward())
		out := h.Clone()
		applyRequest(out, portalForward())
		if out.Get("Authorization") != "Bearer "+good {
			t.Fatalf("first=%q: upstream Authorization %q", first, out.Get("Authorization"))
		}
		if !ok || id.UserID != "u-dup" {
			t.Errorf("first=%q: identity %+v %v, want the token the upstream gets", first, id, ok)
		}
	}
}

// applyRequest is the gateway's request rewrite without a verifier: the
// one credential (cookies.Resolve) written by cookies.ApplyRequest; a
// conflict forwards no credential.
func applyRequest(h http.Header, fw []cookies.Forward) {
	r, _ := cookies.Resolve(h, fw, nil)
	cookies.ApplyRequest(h, fw, r)
}

// portalForward is the cookie policy of the portal's own routes (the
// configuration's default): olp_auth as Authorization: Bearer, olp_mural
// as the cookie it is.
func portalForward() []cookies.Forward {
	return []cookies.Forward{{Cookie: cookies.AuthCookie, AsAuthorization: true}, {Cookie: "olp_mural"}}
}
