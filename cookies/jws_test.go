package cookies

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
)

func TestNonCanonicalJWSIsRefusedInEverySpelling(t *testing.T) {
	const canonical = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1In0.c2lnbmF0dXJlLWJ5dGVz"
	bad := map[string]string{
		"padding":        canonical + "=",
		"padded header":  "eyJhbGciOiJIUzI1NiJ9=.eyJzdWIiOiJ1In0.c2lnbmF0dXJlLWJ5dGVz",
		"header bits":    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1In1.c2lnbmF0dXJlLWJ5dGVz",
		"std alphabet +": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1In0.c2ln+mF0dXJlLWJ5dGVz",
		"std alphabet /": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1In0.c2ln/mF0dXJlLWJ5dGVz",
		"empty segment":  "eyJhbGciOiJIUzI1NiJ9..c2lnbmF0dXJlLWJ5dGVz",
		"junk":           "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1In0.c2ln!mF0",
	}
	// 32 bytes are 43 characters: the last carries two unused bits, and
	// setting one spells the same bytes for a lenient decoder.
	sig := base64.RawURLEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	flipped := sig[:len(sig)-1] + string(alphabet[strings.IndexByte(alphabet, sig[len(sig)-1])|1])
	if NonCanonicalJWS("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1In0." + sig) {
		t.Fatal("canonical 32-byte signature refused")
	}
	bad["unused bits"] = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1In0." + flipped
	for name, tok := range bad {
		if !NonCanonicalJWS(tok) {
			t.Errorf("%s: %q accepted", name, tok)
		}
	}
	for _, tok := range []string{canonical, "opaque-token", "a.b", "one.two.three.four", "a.b.c", "tok.en.jwt"} {
		if NonCanonicalJWS(tok) {
			t.Errorf("%q refused; only three-segment JWS shapes are judged", tok)
		}
	}
	h := http.Header{"Authorization": {"Bearer " + bad["padding"]}}
	if !BearerNonCanonical(h) {
		t.Error("BearerNonCanonical missed a padded Bearer token")
	}
	if BearerNonCanonical(http.Header{"Authorization": {"Basic " + bad["padding"]}}) {
		t.Error("BearerNonCanonical judged a Basic credential")
	}
}

func TestCookieWithANonCanonicalJWSIsNotTurnedIntoABearerToken(t *testing.T) {
	h := http.Header{"Cookie": {"olp_auth=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1In0.c2lnbmF0dXJlLWJ5dGVz="}}
	applyRequest(h, portalForward())
	if a := h.Get("Authorization"); a != "" {
		t.Errorf("Authorization %q set from a non-canonical token", a)
	}
}

func TestBearerThatIsNotOneToken68IsRefused(t *testing.T) {
	const jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1In0.c2lnbmF0dXJlLWJ5dGVz"
	for _, v := range []string{
		"Bearer anon, Bearer " + jwt, // a list: a lenient upstream may take the second
		"Bearer " + jwt + ",x",
		"Bearer " + jwt + " " + jwt,
		"Bearer a=b",
		"Bearer ;" + jwt,
		"Bearer " + jwt + "\"",
	} {
		if !BearerNonCanonical(http.Header{"Authorization": {v}}) {
			t.Errorf("%q accepted", v)
		}
	}
	for _, v := range []string{"Bearer " + jwt, "Bearer opaque-token_1.2~3+4/5==", "bearer\t" + jwt + "  ", "Basic dXNlcjpwYXNz"} {
		if BearerNonCanonical(http.Header{"Authorization": {v}}) {
			t.Errorf("%q refused", v)
		}
	}
}
