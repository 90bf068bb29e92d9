package cookies

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The invariant of Resolve and ApplyRequest (docs/edge.md, Identity: "One
// credential per request"): whatever credential any common parser reads
// from the request the upstream receives is exactly the token the limiter
// verified (Resolved.Token), in every form the gateway forwards; two
// different candidates are refused (ErrConflict) or reduced to the one
// that verifies, never split.

// upstreamCredentials returns every credential a common server-side parser
// reads from the outbound header h: the Authorization Bearer token (any
// scheme case, any whitespace), and the olp_auth cookie as Go net/http
// (first valid), Python's SimpleCookie (whitespace also ends a pair, last
// wins), Django (';' only, last wins), Rack 2 and RFC 2965 parsers (',' also
// separates, first wins), Node's cookie package (first, percent-decoded),
// PHP (names decoded, values url-decoded, first wins) and ASP.NET Core
// (names case-insensitive) read it.
func upstreamCredentials(h http.Header) []string {
	var out []string
	auth := h.Get("Authorization")
	// What a JWT library tries to parse: three non-empty segments.
	// A segment with a byte outside both base64 alphabets decodes in no
	// JWT library ("0.0.!", found by FuzzResolve), so it is no credential.
	shaped := func(v string) bool {
		return strings.Count(v, ".") == 2 && !strings.Contains(v, "..") && !strings.HasPrefix(v, ".") && !strings.HasSuffix(v, ".") &&
			strings.Trim(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/=.") == "" &&
			!strings.ContainsFunc(v, func(r rune) bool {
				return !strings.ContainsRune("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/=.", r)
			})
	}
	if f := strings.Fields(auth); len(f) >= 2 && strings.EqualFold(f[0], "bearer") {
		out = append(out, strings.Trim(f[1], `",`))
	} else if len(f) >= 2 && shaped(strings.Trim(f[1], `",`)) {
		// Django REST framework's "JWT <token>", "Token <token>" and any
		// other scheme whose credentials are a JWS (attack pass A03).
		out = append(out, strings.Trim(f[1], `",`))
	} else if len(f) == 1 && shaped(f[0]) {
		// passport-jwt's fromHeader and hand-written middlewares: the raw
		// value, no scheme.
		out = append(out, f[0])
	}
	if f := strings.Fields(auth); len(f) >= 2 {
		// A parser taking the last word ("scheme ... token").
		if last := strings.Trim(f[len(f)-1], `",`); shaped(last) {
			out = append(out, last)
		}
	}
	if f := strings.Fields(auth); len(f) == 2 && strings.EqualFold(f[0], "basic") {
		// Token-as-password upstreams (GitHub style): the decoded user
		// name or password, base64 read as leniently as Node's Buffer.
		w := strings.NewReplacer("-", "+", "_", "/").Replace(strings.TrimRight(f[1], "="))
		if b, err := base64.RawStdEncoding.DecodeString(w); err == nil {
			u, pw, _ := strings.Cut(string(b), ":")
			for _, v := range []string{u, pw} {
				if shaped(v) {
					out = append(out, v)
				}
			}
		}
	}
	if _, v, ok := strings.Cut(auth, "token="); ok {
		// Rails' authenticate_with_http_token: Token token="<token>".
		v, _, _ = strings.Cut(strings.TrimPrefix(v, `"`), `"`)
		if v, _, _ = strings.Cut(v, ","); shaped(v) {
			out = append(out, v)
		}
	}
	line := strings.Join(h["Cookie"], "; ")
	if line == "" {
		return out
	}
	// Go net/http.
	if c, err := (&http.Request{Header: http.Header{"Cookie": {line}}}).Cookie(AuthCookie); err == nil && c.Value != "" {
		out = append(out, c.Value)
	}
	split := func(seps string, last, decodeName, decodeValue, fold bool) {
		val := ""
		for piece := range strings.FieldsFuncSeq(line, func(r rune) bool { return strings.ContainsRune(seps, r) }) {
			n, v, ok := strings.Cut(piece, "=")
			if !ok {
				continue
			}
			n, v = strings.TrimSpace(n), strings.Trim(strings.TrimSpace(v), `"`)
			if decodeName {
				if d, ok := frameworkCookieName(n); ok {
					n = d
				}
			}
			if decodeValue {
				if d, err := url.QueryUnescape(v); err == nil {
					v = d
				}
			}
			if n == AuthCookie || (fold && strings.EqualFold(n, AuthCookie)) {
				if val == "" || last {
					val = v
				}
			}
		}
		if val != "" {
			out = append(out, val)
		}
	}
	split("; \t", true, false, false, false) // SimpleCookie
	split(";", true, false, false, false)    // Django
	split(";,", false, false, false, false)  // Rack 2, RFC 2965
	split(";", false, false, true, false)    // Node cookie (decodeURIComponent)
	split(";", false, true, true, false)     // PHP
	split(";", false, false, false, true)    // ASP.NET Core
	return out
}

// checkOneCredential resolves h on forward with verify, applies the result
// to the header the upstream gets (Connection-named headers removed, as
// ReverseProxy does) and fails when a parser reads a credential other than
// the resolved token, or none while the token is said to be forwarded.
func checkOneCredential(t *testing.T, h http.Header, forward []Forward, verify func(string) bool) (Resolved, error) {
	t.Helper()
	r, err := Resolve(h, forward, verify)
	if err != nil {
		return r, err
	}
	out := h.Clone()
	for _, line := range out["Connection"] {
		for tok := range strings.SplitSeq(line, ",") {
			if tok = strings.TrimSpace(tok); tok != "" {
				delete(out, http.CanonicalHeaderKey(tok))
			}
		}
	}
	ApplyRequest(out, forward, r)
	got := upstreamCredentials(out)
	for _, c := range got {
		if c != r.Token {
			t.Fatalf("split credential: the limiter reads %q, an upstream parser reads %q\nrequest %q\nupstream %q", r.Token, c, h, out)
		}
	}
	if r.Forwarded() && len(got) == 0 {
		t.Fatalf("resolved %+v as forwarded, the upstream reads none: %q", r, out)
	}
	if !r.Forwarded() && len(got) > 0 {
		t.Fatalf("resolved %+v as not forwarded, the upstream reads %q", r, got)
	}
	return r, nil
}

// verifiesOK stands in for the verifier: tokens starting "ok" verify.
func verifiesOK(tok string) bool { return strings.HasPrefix(tok, "ok") }

const (
	jwtA = "okA.eyJzdWIiOiJhIn0.c2ln" // verifies (verifiesOK)
	jwtB = "okB.eyJzdWIiOiJiIn0.c2ln" // verifies, another user
	bad  = "bad.eyJzdWIiOiJ4In0.c2ln" // does not verify
)

// A JWT under an Authorization scheme other than Bearer ("JWT", "Token",
// any case) was counted anonymous by the limiter while the upstream took
// it as the user's (attack pass A03). It is a candidate like a Bearer
// token: the limiter's identity when it is the only one, reduced or
// refused beside another, and never a split; Basic credentials and
// non-JWS values stay the client's own business.
func TestResolveReadsAJWTUnderAnyAuthorizationScheme(t *testing.T) {
	t.Parallel()
	asCookie := []Forward{{Cookie: AuthCookie}}
	// "" is no scheme at all: the bare token as the header's value, which
	// a framework taking the raw header (or stripping "Bearer " only when
	// present) reads as the user's token.
	for _, scheme := range []string{"JWT", "jwt", "Token", "JWS", "Custom-Scheme", ""} {
		spell := func(sep, tok string) string {
			if scheme == "" {
				return tok
			}
			return scheme + sep + tok
		}
		for _, tc := range []struct {
			name     string
			auth     string
			cookie   string
			forward  []Forward
			token    string
			conflict bool
		}{
			{"alone", spell(" ", jwtA), "", portalForward(), jwtA, false},
			{"alone, extra spaces", spell("   ", jwtA) + " ", "", portalForward(), jwtA, false},
			{"alone, tab", spell("\t", jwtA), "", portalForward(), jwtA, false},
			{"a decoy cookie beside it", spell(" ", jwtA), "olp_auth=" + bad, asCookie, jwtA, false},
			{"the verified cookie beside a decoy header", spell(" ", bad), "olp_auth=" + jwtA, asCookie, jwtA, false},
			{"two users", spell(" ", jwtA), "olp_auth=" + jwtB, asCookie, "", true},
			{"not a JWS", spell(" ", "abc"), "", portalForward(), "", false},
		} {
			h := http.Header{"Authorization": {tc.auth}}
			if tc.cookie != "" {
				h["Cookie"] = []string{tc.cookie}
			}
			if AuthorizationNonCanonical(h) {
				t.Errorf("%s %s: %q refused as non-canonical", scheme, tc.name, tc.auth)
			}
			r, err := checkOneCredential(t, h, tc.forward, verifiesOK)
			if tc.conflict {
				if err == nil {
					t.Errorf("%s %s: resolved %+v, want ErrConflict", scheme, tc.name, r)
				}
				continue
			}
			if err != nil || r.Token != tc.token {
				t.Errorf("%s %s: token %q err %v, want %q", scheme, tc.name, r.Token, err, tc.token)
			}
		}
	}
	if r, err := Resolve(http.Header{"Authorization": {"Basic dXNlcjpwYXNz"}}, portalForward(), verifiesOK); err != nil || r.Token != "" {
		t.Errorf("Basic credentials resolved to %+v, %v", r, err)
	}
}

// The spellings common parsers accept, each on a route turning olp_auth
// into the Bearer token (default) and on one forwarding it as a cookie.
func TestResolveGivesTheUpstreamExactlyTheLimitersCredential(t *testing.T) {
	t.Parallel()
	asCookie := []Forward{{Cookie: AuthCookie}, {Cookie: "olp_mural"}}
	type want struct {
		token    string // "" anonymous
		conflict bool
	}
	tests := []struct {
		name     string
		cookies  []string
		auth     string
		conn     string
		bearer   want // portalForward
		asCookie want
	}{
		{name: "issue 22: non-canonical decoy then valid", cookies: []string{"olp_auth=eyJhbGciOiJIUzI1NiJ9=.e30.x; olp_auth=" + jwtA},
			bearer: want{token: jwtA}, asCookie: want{token: jwtA}},
		{name: "decoy then valid (Django, SimpleCookie read the last)", cookies: []string{"olp_auth=decoy; olp_auth=" + jwtA},
			bearer: want{token: jwtA}, asCookie: want{token: jwtA}},
		{name: "valid then decoy", cookies: []string{"olp_auth=" + jwtA + "; olp_auth=decoy"},
			bearer: want{token: jwtA}, asCookie: want{token: jwtA}},
		{name: "two that do not verify", cookies: []string{"olp_auth=" + bad + "; olp_auth=decoy"},
			bearer: want{conflict: true}, asCookie: want{conflict: true}},
		{name: "two users", cookies: []string{"olp_auth=" + jwtA + "; olp_auth=" + jwtB},
			bearer: want{conflict: true}, asCookie: want{conflict: true}},
		{name: "the same twice", cookies: []string{"olp_auth=" + jwtA + "; olp_auth=" + jwtA},
			bearer: want{token: jwtA}, asCookie: want{token: jwtA}},
		{name: "quoted and bare, same token", cookies: []string{`olp_auth="` + jwtA + `"; olp_auth=` + jwtA},
			bearer: want{token: jwtA}, asCookie: want{token: jwtA}},
		{name: "quoted decoy", cookies: []string{`olp_auth="decoy"; olp_auth=` + jwtA},
			bearer: want{token: jwtA}, asCookie: want{token: jwtA}},
		{name: "empty value", cookies: []string{"olp_auth=; olp_auth=" + jwtA},
			bearer: want{token: jwtA}, asCookie: want{token: jwtA}},
		{name: "whitespace around =", cookies: []string{"olp_auth = decoy ;olp_auth=\t" + jwtA},
			bearer: want{token: jwtA}, asCookie: want{token: jwtA}},
		{name: "split over two Cookie lines", cookies: []string{"olp_auth=decoy", "a=1; olp_auth=" + jwtA},
			bearer: want{token: jwtA}, asCookie: want{token: jwtA}},
		{name: "case variant of the name", cookies: []string{"OLP_AUTH=" + jwtB + "; olp_auth=" + jwtA},
			bearer: want{token: jwtA}, asCookie: want{token: jwtA}},
		{name: "__Host- and PHP-decoded names", cookies: []string{"__Host-olp_auth=" + jwtB + "; olp%5Fauth=" + jwtB + "; olp.auth=" + jwtB + "; olp_auth=" + jwtA},
			bearer: want{token: jwtA}, asCookie: want{token: jwtA}},
		{name: "SimpleCookie whitespace smuggling", cookies: []string{"theme=dark olp_auth=" + jwtB + "; olp_auth=" + jwtA},
			bearer: want{token: jwtA}, asCookie: want{token: jwtA}},
		{name: "RFC 2965 comma smuggling", cookies: []string{"theme=dark, olp_auth=" + jwtB},
			bearer: want{}, asCookie: want{}},
		{name: "percent-encoded value (Node, PHP decode it)", cookies: []string{"olp_auth=%6FkA.eyJzdWIiOiJhIn0.c2ln"},
			bearer: want{token: "%6FkA.eyJzdWIiOiJhIn0.c2ln"}, asCookie: want{}},
		{name: "plus in value (PHP reads a space)", cookies: []string{"olp_auth=ok+x"},
			bearer: want{token: "ok+x"}, asCookie: want{}},
		{name: "header and cookie agree", auth: "Bearer " + jwtA, cookies: []string{"olp_auth=" + jwtA},
			bearer: want{token: jwtA}, asCookie: want{token: jwtA}},
		{name: "header wins where the cookie is not forwarded; differs where it is", auth: "Bearer " + jwtA, cookies: []string{"olp_auth=" + jwtB},
			bearer: want{token: jwtA}, asCookie: want{conflict: true}},
		{name: "lower-case bearer, tab", auth: "bearer\t" + jwtA, cookies: []string{"olp_auth=decoy"},
			bearer: want{token: jwtA}, asCookie: want{token: jwtA}},
		{name: "BEARER header that does not verify, cookie that does", auth: "BEARER " + bad, cookies: []string{"olp_auth=" + jwtA},
			bearer: want{token: bad}, asCookie: want{token: jwtA}},
		{name: "Basic header and the cookie", auth: "Basic eDp5", cookies: []string{"olp_auth=" + jwtA},
			bearer: want{}, asCookie: want{token: jwtA}},
		{name: "Connection-named Authorization", auth: "Bearer " + jwtB, conn: "Authorization", cookies: []string{"olp_auth=" + jwtA},
			bearer: want{token: jwtA}, asCookie: want{token: jwtA}},
		{name: "Connection-named Cookie", auth: "Bearer " + jwtA, conn: "Cookie", cookies: []string{"olp_auth=" + jwtB},
			bearer: want{token: jwtA}, asCookie: want{token: jwtA}},
	}
	for _, tc := range tests {
		for _, side := range []struct {
			name string
			fw   []Forward
			want want
		}{{"as authorization", portalForward(), tc.bearer}, {"as cookie", asCookie, tc.asCookie}} {
			t.Run(tc.name+"/"+side.name, func(t *testing.T) {
				h := http.Header{}
				if len(tc.cookies) > 0 {
					h["Cookie"] = tc.cookies
				}
				if tc.auth != "" {
					h.Set("Authorization", tc.auth)
				}
				if tc.conn != "" {
					h.Set("Connection", tc.conn)
				}
				r, err := checkOneCredential(t, h, side.fw, verifiesOK)
				if (err != nil) != side.want.conflict {
					t.Fatalf("conflict %v (%v), want %v", err != nil, err, side.want.conflict)
				}
				if err == nil && r.Token != side.want.token {
					t.Fatalf("token %q, want %q", r.Token, side.want.token)
				}
			})
		}
	}
}

// Where the route forwards no session cookie at all, the olp_auth cookie
// is read for the limiter only; ambiguity there is anonymous, not refused
// (nothing reaches the upstream to split).
func TestResolveOnARouteThatForwardsNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ cookie, want string }{
		{"olp_auth=" + jwtA, jwtA},
		{"olp_auth=decoy; olp_auth=" + jwtA, jwtA},
		{"olp_auth=" + jwtA + "; olp_auth=" + jwtB, ""},
	} {
		r, err := checkOneCredential(t, http.Header{"Cookie": {tc.cookie}}, []Forward{}, verifiesOK)
		if err != nil || r.Token != tc.want || r.Forwarded() {
			t.Errorf("%q: %+v %v, want token %q, not forwarded", tc.cookie, r, err, tc.want)
		}
	}
}

// FuzzResolve generates requests (two Cookie lines, an Authorization, a
// Connection) on three cookie policies and checks the invariant with every
// parser of upstreamCredentials. Seed corpus: testdata/fuzz/FuzzResolve.
func FuzzResolve(f *testing.F) {
	f.Add("olp_auth=eyJhbGciOiJIUzI1NiJ9=.e30.x; olp_auth="+jwtA, "", "", "", uint8(0))
	f.Add("olp_auth=decoy; olp_auth="+jwtA, "", "", "", uint8(1))
	f.Add("theme=x olp_auth="+jwtB, "olp_auth="+jwtA, "", "", uint8(1))
	f.Add("a=1, olp_auth=x", "", "Bearer "+jwtA, "", uint8(1))
	f.Add("olp_auth="+jwtB, "", "Bearer "+jwtA, "Authorization", uint8(0))
	f.Add("olp_auth="+jwtB, "", "Basic "+base64.StdEncoding.EncodeToString([]byte("x:"+jwtA)), "", uint8(1))
	f.Add("", "", "Basic "+base64.RawURLEncoding.EncodeToString([]byte(jwtA+":"+jwtB)), "", uint8(2))
	f.Fuzz(func(t *testing.T, c1, c2, auth, conn string, policy uint8) {
		for _, v := range []string{c1, c2, auth, conn} {
			if !reachableFieldValue(v) {
				return // net/http's server refuses the request (400) before any handler
			}
		}
		h := http.Header{}
		for _, c := range []string{c1, c2} {
			if c != "" {
				h["Cookie"] = append(h["Cookie"], c)
			}
		}
		if auth != "" {
			h["Authorization"] = []string{auth}
		}
		if conn != "" {
			h["Connection"] = []string{conn}
		}
		fw := [][]Forward{portalForward(), {{Cookie: AuthCookie}}, {}}[int(policy)%3]
		if BearerTooLarge(h) || AuthorizationNonCanonical(h) {
			return // refused by the gateway before Resolve
		}
		_, _ = checkOneCredential(t, h, fw, verifiesOK)
	})
}

// A request with 120 olp_auth cookies, each a JWS with a bad signature,
// cost one signature verification per distinct value (about 7 ms of CPU
// per request with RS256) and was answered 400 (fresh attack pass 2
// A66). Resolve now weighs at most MaxCandidates distinct candidates:
// more are refused (ErrTooManyCredentials, which is an ErrConflict)
// before verify is called once; up to MaxCandidates, verify is called at
// most once per candidate. On a route that does not forward olp_auth,
// more than MaxCandidates values are anonymous, none verified.
func TestResolveRefusesMoreCandidatesThanItVerifies(t *testing.T) {
	jws := func(i int) string {
		return "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0." + base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("bad-signature-%03d", i)))
	}
	cookieLine := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = AuthCookie + "=" + jws(i)
		}
		return strings.Join(parts, "; ")
	}
	asCookie := []Forward{{Cookie: AuthCookie}}
	asBearer := []Forward{{Cookie: "olp_a", AsAuthorization: true}, {Cookie: "olp_b", AsAuthorization: true}, {Cookie: AuthCookie}}
	for _, tc := range []struct {
		name    string
		h       http.Header
		forward []Forward
		tooMany bool
		maxCall int
	}{
		{"5 olp_auth cookies", http.Header{"Cookie": {cookieLine(5)}}, asCookie, true, 0},
		{"120 olp_auth cookies", http.Header{"Cookie": {cookieLine(120)}}, asCookie, true, 0},
		{"120 on two lines", http.Header{"Cookie": {cookieLine(60), cookieLine(120)}}, asCookie, true, 0},
		{"Bearer and 4 cookies", http.Header{"Authorization": {"Bearer " + jws(99)}, "Cookie": {cookieLine(4)}}, asCookie, true, 0},
		{"4 olp_auth cookies", http.Header{"Cookie": {cookieLine(4)}}, asCookie, false, 4},
		{"Bearer and 3 cookies", http.Header{"Authorization": {"Bearer " + jws(99)}, "Cookie": {cookieLine(3)}}, asCookie, false, 4},
		{"5 equal values are one", http.Header{"Cookie": {cookieLine(1) + "; " + cookieLine(1) + "; " + cookieLine(1) + "; " + cookieLine(1) + "; " + cookieLine(1)}}, asCookie, false, 0},
		{"cookies as Bearer and as cookie", http.Header{"Cookie": {"olp_a=" + jws(50) + "; olp_b=" + jws(51) + "; " + cookieLine(3)}}, asBearer, true, 0},
		{"120 unforwarded", http.Header{"Cookie": {cookieLine(120)}}, nil, false, 0},
		{"4 unforwarded", http.Header{"Cookie": {cookieLine(4)}}, nil, false, 4},
	} {
		calls := 0
		_, err := Resolve(tc.h, tc.forward, func(string) bool { calls++; return false })
		if got := errors.Is(err, ErrTooManyCredentials); got != tc.tooMany {
			t.Errorf("%s: ErrTooManyCredentials %v (err %v), want %v", tc.name, got, err, tc.tooMany)
		}
		if tc.tooMany && !errors.Is(err, ErrConflict) {
			t.Errorf("%s: %v is no ErrConflict", tc.name, err)
		}
		if calls > tc.maxCall {
			t.Errorf("%s: verify called %d times, want at most %d", tc.name, calls, tc.maxCall)
		}
	}
}

// A JWT as the password of Authorization: Basic (GitHub-style token as
// password) or as its user name was anonymous to the limiter while an
// upstream that takes tokens that way read it as the user's (fresh attack
// pass 2 A11). Now the one JWS in the decoded Basic credentials is a
// candidate, however the base64 is spelled (padded or not, either
// alphabet, any scheme case); two different JWS, or a non-canonical one,
// are refused (AuthorizationNonCanonical); Basic without a JWS is not judged.
func TestResolveReadsAJWTAsTheBasicPasswordOrUser(t *testing.T) {
	const jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1MSJ9.c2lnbmF0dXJl"
	const other = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1MiJ9.c2lnbmF0dXJl"
	std := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	raw := func(s string) string { return base64.RawStdEncoding.EncodeToString([]byte(s)) }
	url := func(s string) string { return base64.URLEncoding.EncodeToString([]byte(s)) }
	for _, auth := range []string{
		"Basic " + std("x:"+jwt), "basic " + std("x:"+jwt), "BASIC  " + std("x:"+jwt), "Basic " + raw("x:"+jwt),
		"Basic " + url("x:"+jwt), "Basic " + std(jwt+":x-oauth-basic"), "Basic " + std(jwt+":"), "Basic " + std(":"+jwt),
		"Basic " + std(jwt+":"+jwt), "Basic\t" + std("user:"+jwt),
	} {
		h := http.Header{"Authorization": {auth}}
		if AuthorizationNonCanonical(h) {
			t.Errorf("%q: refused as non-canonical", auth)
		}
		r, err := Resolve(h, nil, nil)
		if err != nil || r.Token != jwt || !r.Forwarded() {
			t.Errorf("%q: Resolve = %+v %v, want the JWT as the forwarded candidate", auth, r, err)
		}
		// Beside a different olp_auth cookie turned into Bearer: two candidates.
		h.Set("Cookie", "olp_auth="+other)
		if _, err := Resolve(h, []Forward{{Cookie: AuthCookie}}, nil); !errors.Is(err, ErrConflict) {
			t.Errorf("%q beside another olp_auth: %v, want ErrConflict", auth, err)
		}
	}
	for _, auth := range []string{
		"Basic " + std(jwt+":"+other), "Basic " + std("x:"+strings.Replace(jwt, "c2ln", "c2l+", 1)),
		"Basic " + std("x:"+jwt+"=="),
	} {
		if !AuthorizationNonCanonical(http.Header{"Authorization": {auth}}) {
			t.Errorf("%q: not refused", auth)
		}
	}
	for _, auth := range []string{"Basic " + std("alice:secret"), "Basic " + std("a.b:c"), "Basic !!!", "Basic " + std("x:a.b.c d")} {
		h := http.Header{"Authorization": {auth}}
		if AuthorizationNonCanonical(h) {
			t.Errorf("%q: refused", auth)
		}
		if r, err := Resolve(h, nil, nil); err != nil || r.Token != "" {
			t.Errorf("%q: Resolve = %+v %v, want no candidate", auth, r, err)
		}
	}
}

// reachableFieldValue reports whether v can arrive as a header value
// through net/http's server, which refuses a request whose field value
// holds a control byte other than HTAB (RFC 9110 §5.5; httpguts
// ValidHeaderFieldValue), such as the form feed in "Bearer\f<token>"
// that strings.Fields would split on, and which never starts or ends with
// whitespace (net/textproto trims it: " Bearer x"), both found by
// FuzzResolve.
func reachableFieldValue(v string) bool {
	if strings.Trim(v, " \t") != v {
		return false // net/textproto trims a value's surrounding whitespace
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
