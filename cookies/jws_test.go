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
	if !AuthorizationNonCanonical(h) {
		t.Error("AuthorizationNonCanonical missed a padded Bearer token")
	}
	if AuthorizationNonCanonical(http.Header{"Authorization": {"Basic dXNlcjpwYXNz"}}) {
		t.Error("AuthorizationNonCanonical judged a Basic credential")
	}
	if !AuthorizationNonCanonical(http.Header{"Authorization": {"Basic " + bad["padding"]}}) {
		t.Error("a padded JWS under Basic (no Basic credential has dots) was not judged")
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
		if !AuthorizationNonCanonical(http.Header{"Authorization": {v}}) {
			t.Errorf("%q accepted", v)
		}
	}
	for _, v := range []string{"Bearer " + jwt, "Bearer opaque-token_1.2~3+4/5==", "bearer\t" + jwt + "  ", "Basic dXNlcjpwYXNz"} {
		if AuthorizationNonCanonical(http.Header{"Authorization": {v}}) {
			t.Errorf("%q refused", v)
		}
	}
}

// A JWT hidden in an Authorization value under another scheme, or none,
// that is not its one credential: the limiter read no user while parsers
// that take the first word, the last word, the raw value or Rails'
// token="..." parameter read one (the no-scheme and list members of
// attack pass A03's class, found by mutation testing). Every scheme ×
// every spelling is refused (the gateway answers 401); the one-token
// forms and credentials without a JWS are not.
func TestAuthorizationHidingAJWTUnderAnySchemeIsRefused(t *testing.T) {
	const jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1In0.c2lnbmF0dXJlLWJ5dGVz"
	const other = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ2In0.c2lnbmF0dXJlLWJ5dGVz"
	for _, scheme := range []string{"JWT", "Token", "token", "Custom-Scheme", "Digest", "Basic", ""} {
		lead := scheme + " "
		if scheme == "" {
			lead = ""
		}
		for _, creds := range []string{
			jwt + " " + other,
			jwt + "," + other,
			"x anon " + jwt,
			jwt + " anon",
			`"` + jwt + `"`,
			`token="` + jwt + `"`,
			`token=` + jwt,
			`realm="x", token="` + jwt + `"`,
			jwt + ";",
			jwt + "=",
			"eyJhbGciOiJIUzI1NiJ9=.eyJzdWIiOiJ1In0.c2lnbmF0dXJlLWJ5dGVz",
			"eyJhbGciOiJIUzI1NiJ9..c2lnbmF0dXJlLWJ5dGVz " + jwt,
			jwt + " " + jwt,
		} {
			v := lead + creds
			if !AuthorizationNonCanonical(http.Header{"Authorization": {v}}) {
				t.Errorf("%q accepted", v)
			}
		}
		if scheme == "Basic" || scheme == "Digest" {
			continue
		}
		for _, v := range []string{lead + jwt, lead + jwt + " ", lead + "\t" + jwt} {
			if AuthorizationNonCanonical(http.Header{"Authorization": {v}}) {
				t.Errorf("%q refused: one canonical JWS is the credential", v)
			}
		}
	}
	for _, v := range []string{"Basic dXNlcjpwYXNz", `Digest username="u", realm="r", nonce="n", uri="/", response="abc"`,
		"Token opaque-token", "ApiKey a.b", "ApiKey one.two.three.four"} {
		if AuthorizationNonCanonical(http.Header{"Authorization": {v}}) {
			t.Errorf("%q refused; it holds no JWS", v)
		}
	}
}

// A Basic value that is not one strict base64 word, yet decodes the ways
// PHP's base64_decode, Node's Buffer and passport-http read it into a user
// or password that is a JWT, was forwarded as is and counted anonymous
// (fresh attack pass 6 C02-C05, C18): it is refused like any hidden JWS.
func TestBasicValueHidingAJWTFromTheStrictDecoderIsRefused(t *testing.T) {
	t.Parallel()
	const jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1In0.c2lnbmF0dXJlLWJ5dGVz"
	b64 := base64.StdEncoding.EncodeToString([]byte("x:" + jwt))
	for _, v := range []string{
		b64[:4] + "!" + b64[4:], b64[:4] + " " + b64[4:], b64[:4] + "\t" + b64[4:], b64[:4] + "=" + b64[4:],
		b64 + " junk", b64 + ",", "!" + b64, b64[:4] + "*" + b64[4:] + "*",
	} {
		if !AuthorizationNonCanonical(http.Header{"Authorization": {"Basic " + v}}) {
			t.Errorf("Basic %.20q... accepted", v)
		}
	}
	plain := base64.StdEncoding.EncodeToString([]byte("user:pass"))
	for _, v := range []string{plain, plain + " junk", plain[:4] + "!" + plain[4:]} {
		if AuthorizationNonCanonical(http.Header{"Authorization": {"Basic " + v}}) {
			t.Errorf("Basic %q refused: it holds no JWT", v)
		}
	}
}
