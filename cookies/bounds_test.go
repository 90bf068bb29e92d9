package cookies

import (
	"net/http"
	"strings"
	"testing"
)

// The byte-level bounds of the credential parsers, each at its edge (found
// by mutation testing: these boundaries lived).
func TestCredentialParsersAtTheirBounds(t *testing.T) {
	t.Parallel()
	atMax := strings.Repeat("a", MaxTokenBytes)
	if !validBearer(atMax) || validBearer(atMax+"a") {
		t.Errorf("validBearer: %d bytes must pass, %d must not", MaxTokenBytes, MaxTokenBytes+1)
	}
	for _, v := range []string{"a b", "a\tb", "a\x1fb", "a\x7fb", "a,b", "a;b", `a"b`, `a\b`, "a\u00e9"} {
		if validBearer(v) {
			t.Errorf("validBearer(%q) accepted a separator or a non-visible byte", v)
		}
	}
	if !validBearer("!#$%&'()*+-./:<=>?@[]^_`{|}~") {
		t.Error("validBearer refused visible ASCII that is not a separator")
	}

	h := func(v string) http.Header { return http.Header{"Authorization": {v}} }
	if !BearerTooLarge(h("Bearer " + atMax + "a")) {
		t.Error("a Bearer token one byte past MaxTokenBytes is not too large")
	}
	if BearerTooLarge(h("Bearer " + atMax)) {
		t.Error("a Bearer token of exactly MaxTokenBytes is too large")
	}
	if BearerTooLarge(h("JWT " + atMax + "a")) {
		t.Error("a long credential under another scheme was judged as a Bearer token")
	}

	// token68: every allowed class at its edges, then '=' padding only at the end.
	for _, v := range []string{"0", "9", "a", "z", "A", "Z", "-", ".", "_", "~", "+", "/", "09azAZ-._~+/==", "a="} {
		if !token68(v) {
			t.Errorf("token68(%q) = false", v)
		}
	}
	for _, v := range []string{"", "=", "a=b", "a b", "a,", "/:", "@", "`", "[", "{"} {
		if token68(v) {
			t.Errorf("token68(%q) = true", v)
		}
	}

	// A JOSE header is a JSON object of more than one byte: "ew" is "{" alone.
	if looksLikeJOSEHeader("ew") || !looksLikeJOSEHeader("e30") {
		t.Error(`looksLikeJOSEHeader: "{" alone is no object, "{}" is`)
	}
}

// PHP and Rack decode %XX in cookie names: every hex digit class, both
// cases, decodes to its byte.
func TestFrameworkCookieNameDecodesEveryHexDigit(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"%6Flp_auth": "olp_auth", "%6flp_auth": "olp_auth", "olp%5fauth": "olp_auth", "%4F%4C%50_auth": "OLP_auth",
		"%30%39%41%46%61%66": "09AFaf", "olp+auth": "olp_auth", "olp.auth": "olp_auth", "olp[auth": "olp_auth",
		"%6": "%6", "%zz": "%zz", "%6G": "%6G",
	} {
		if got, _ := frameworkCookieName(in); got != want {
			t.Errorf("frameworkCookieName(%q) = %q, want %q", in, got, want)
		}
	}
	if !hasOwnedPrefix("__Host-olp_x") || hasOwnedPrefix("__Host-") || hasOwnedPrefix("__Host-ol") {
		t.Error("hasOwnedPrefix at the __Host- prefix's edge")
	}
}

// jwsShaped reads every base64 character of either alphabet, and padding,
// as part of a segment; anything else ends the shape.
func TestJWSShapeAcceptsEveryBase64Character(t *testing.T) {
	t.Parallel()
	for _, c := range []string{"0", "9", "a", "z", "A", "Z", "-", "_", "+", "/", "="} {
		if w := "x" + c + ".y.z"; !jwsShaped(w) {
			t.Errorf("jwsShaped(%q) = false", w)
		}
	}
	for _, w := range []string{"x!.y.z", "x.y", "x.y.z.w", ".y.z", "x..z", "x.y.", "x y.z.w", "x.y.z\x00"} {
		if jwsShaped(w) {
			t.Errorf("jwsShaped(%q) = true", w)
		}
	}
}
