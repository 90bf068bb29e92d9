package cookies

import (
	"net/http"
	"strings"
	"testing"
)

// readerSpaces is every character a modelled upstream reader takes as
// whitespace and Go's net/http lets through a header value: latin-1
// NBSP and NEL as raw bytes (Python's WSGI, Node and Java read headers as
// latin-1; Python's str.split/strip and JavaScript's trim take them),
// their UTF-8 spellings and other Unicode spaces (a UTF-8 reader), the
// BOM (JavaScript's trim), and the ASCII controls Python takes (net/http
// refuses those at the listener; identity refuses them too).
var readerSpaces = []string{"\xa0", "\x85", "\xa0\xa0", "\xc2\xa0", "\xc2\x85", "\xe2\x80\x83", "\xe2\x80\xaf", "\xe3\x80\x80", "\xe2\x80\xa8", "\xef\xbb\xbf", "\v", "\f", "\x1c", "\x1f"}

// Fresh attack pass 7 N01: "Bearer<0xA0><JWT>" was anonymous to the
// limiter and forwarded as is; flask-jwt-extended reads it as the user
// (s.split() takes NBSP as whitespace). A JWS beside any reader's
// whitespace, or after "Bearer:" (a Java reader's substring(7)), is
// refused, whatever the scheme.
func TestAuthorizationSplitByAnyReadersWhitespaceIsRefused(t *testing.T) {
	t.Parallel()
	const jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1In0.c2lnbmF0dXJlLWJ5dGVz"
	for _, sp := range readerSpaces {
		for _, v := range []string{"Bearer" + sp + jwt, sp + "Bearer" + sp + jwt, "Bearer " + sp + jwt, "JWT" + sp + jwt, "Token" + sp + jwt, jwt + sp, sp + jwt, "Bearer" + sp + sp + jwt} {
			if !AuthorizationNonCanonical(http.Header{"Authorization": {v}}) {
				if tok, ok := bearerToken(v); !ok || tok != jwt {
					t.Errorf("%q accepted without being read as the Bearer token", v)
				}
			}
		}
	}
	// Refused, or the JWS is the candidate the limiter counts (a scheme
	// "Bearer:" followed by a space is a scheme like "JWT").
	for _, v := range []string{"Bearer:" + jwt, "Bearer: " + jwt, "JWT:" + jwt} {
		if tok, ok := schemeJWS(v); !AuthorizationNonCanonical(http.Header{"Authorization": {v}}) && (!ok || tok != jwt) {
			t.Errorf("%q accepted and not counted", v)
		}
	}
}

// Fresh attack pass 7 N02: "Cookie: a=1;<0xA0>olp_auth=<JWT>" on a route
// forwarding olp_auth as a cookie was anonymous to the limiter and reached
// the upstream, where Django's parse_cookie strips the NBSP and reads
// olp_auth. A name any reader reads as an olp_* cookie once its
// whitespace is trimmed is owned, and the pair never reaches the upstream
// unless it is the resolved credential.
func TestCookieNameBesideAnyReadersWhitespaceIsOwned(t *testing.T) {
	t.Parallel()
	const jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1In0.c2lnbmF0dXJlLWJ5dGVz"
	forward := []Forward{{Cookie: AuthCookie}}
	for _, sp := range readerSpaces {
		for _, line := range []string{"a=1;" + sp + "olp_auth=" + jwt, sp + "olp_auth=" + jwt, "a=1; olp_auth" + sp + "=" + jwt, "a=1;" + sp + "OLP_AUTH=" + jwt, "a=1;" + sp + "olp_mural=x"} {
			h := http.Header{"Cookie": {line}}
			r, err := Resolve(h, forward, func(string) bool { return false })
			if err != nil {
				continue // refused: nothing reaches the upstream
			}
			ApplyRequest(h, forward, r)
			for _, got := range h["Cookie"] {
				for part := range strings.SplitSeq(got, ";") {
					name, _, _ := strings.Cut(part, "=")
					if hasOwnedPrefix(trimReaderSpace(name)) && r.Cookie == "" {
						t.Errorf("Cookie %q reached the upstream as %q (a reader reads %q as an olp_* cookie)", line, got, name)
					}
				}
			}
		}
	}
	for _, name := range []string{"olp_auth", "\xa0olp_auth", "olp_auth\x85", "\xc2\xa0olp_auth", "\xef\xbb\xbfolp_auth"} {
		if !IsOwned(name) {
			t.Errorf("IsOwned(%q) = false", name)
		}
	}
	for _, name := range []string{"x\xa0olp_auth", "sessionid", "\xa0sessionid"} {
		if IsOwned(name) {
			t.Errorf("IsOwned(%q) = true", name)
		}
	}
}

// Fresh attack pass 7 K02: an upstream's "Set-Cookie: <0xA0>olp_auth=evil"
// and "x=1<0xA0>olp_auth=evil2" passed on every route; Chromium stored
// them and sent them back byte for byte, and Django reads the first as
// olp_auth. Every reader's whitespace before or between names is seen
// through: such a line is removed.
func TestSetCookieHidingAnOwnedNameBehindAnyReadersWhitespaceIsRemoved(t *testing.T) {
	t.Parallel()
	for _, sp := range readerSpaces {
		for _, line := range []string{sp + "olp_auth=evil; Path=/", "x=1" + sp + "olp_auth=evil; Path=/", "x=1;" + sp + "olp_auth=evil", sp + "OLP_AUTH=evil", "x=1" + sp + "olp_mural=evil"} {
			// A route that lists no olp_* cookie: removed.
			h := http.Header{"Set-Cookie": {line}}
			ApplySetCookie(h, ResponsePolicy{Forward: []Forward{}})
			if got := h["Set-Cookie"]; len(got) != 0 {
				t.Errorf("Set-Cookie %q passed as %q", line, got)
			}
			// A route that lists olp_auth: removed, or passed as the
			// canonical olp_auth line the policy hardens.
			h = http.Header{"Set-Cookie": {line}}
			ApplySetCookie(h, ResponsePolicy{Forward: []Forward{{Cookie: AuthCookie}}})
			for _, got := range h["Set-Cookie"] {
				if !strings.HasPrefix(got, "olp_auth=") || !strings.Contains(got, "SameSite=Lax") {
					t.Errorf("Set-Cookie %q passed as %q on a route listing olp_auth", line, got)
				}
			}
		}
	}
	h := http.Header{"Set-Cookie": {"sessionid=abc; Path=/"}}
	ApplySetCookie(h, ResponsePolicy{Forward: []Forward{{Cookie: AuthCookie}}})
	if len(h["Set-Cookie"]) != 1 {
		t.Error("a cookie of another name was removed")
	}
}
