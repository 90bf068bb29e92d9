package cookies

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
)

// AuthCookie is the cookie holding the portal's access token.
const AuthCookie = "olp_auth"

// ErrConflict is Resolve's error for a request that carries two different
// candidate credentials and no single one of them verifies: the limiter
// and the upstream could read different ones, so the gateway refuses it
// (docs/edge.md, Identity: "One credential per request").
var ErrConflict = errors.New("cookies: the request carries two different credentials")

// MaxCandidates is the most distinct candidate credentials Resolve weighs
// in one request: the Bearer header, a current olp_auth, and stale
// olp_auth cookies of another Domain or Path fit. Each candidate beyond
// the first may cost a signature verification (RS256 or ES256 with a
// JWKS: tens of microseconds each), so a request with more is refused
// (ErrTooManyCredentials) before any is verified (fresh attack pass 2
// A66: 120 olp_auth cookies cost about 7 ms of CPU per request).
const MaxCandidates = 4

// ErrTooManyCredentials is Resolve's error for a request with more than
// MaxCandidates distinct candidate credentials; nothing was verified. It
// wraps ErrConflict.
var ErrTooManyCredentials = fmt.Errorf("%w: more than %d candidates", ErrConflict, MaxCandidates)

// Resolved is the one credential of a request, as Resolve decided it: the
// token the limiter's identity is read from (Token), and the forms in which
// ApplyRequest hands exactly that token to the upstream.
type Resolved struct {
	// Token is the credential the identity verifier reads; "" when the
	// request has none (anonymous).
	Token string
	// Bearer is the token the upstream receives as "Authorization: Bearer"
	// (the client's own header or an olp_* cookie the route lists
	// AsAuthorization); "" when it receives no Bearer token from the
	// gateway (a non-Bearer Authorization of the client, such as Basic,
	// passes untouched).
	Bearer string
	// Cookie is the value the upstream receives as the olp_auth cookie on a
	// route that forwards olp_auth as a cookie; "" when none.
	Cookie string
	// Scheme is the token the client sent under an Authorization scheme
	// other than Bearer ("JWT <token>", "Token <token>": Django REST
	// framework's and other frameworks' spellings), when that token is a
	// JWS: the upstream receives the client's header as it came, so the
	// limiter keys on it too (attack pass A03: a JWT under "JWT" was
	// counted anonymous while the upstream took it as the user's). ""
	// otherwise.
	Scheme string
	// dropBearer removes the client's Bearer Authorization header: it held
	// a candidate that lost to the verified one.
	dropBearer bool
}

// Forwarded reports whether the upstream receives Token in some form (false
// for a token read from an olp_auth cookie the route does not forward,
// which the limiter may still key on).
func (r Resolved) Forwarded() bool { return r.Bearer != "" || r.Cookie != "" || r.Scheme != "" }

// Resolve returns the single credential of the request header h on a route
// with cookie policy forward, the one place where the limiter's identity and
// the upstream's credential are decided (ApplyRequest writes the decision,
// package identity verifies it).
//
// The candidates are every value the upstream would receive as a credential:
// the client's Authorization: Bearer token; without an Authorization header,
// the olp_* cookies forward lists AsAuthorization; and the olp_auth cookie
// when forward lists it as a cookie. A value counts only when a strict
// parser and a lenient one read the same token from it (usableToken: token
// characters, canonical base64url for a JWS, and for the cookie form nothing
// a framework would decode, such as '%' or '+'); unusable values are never
// forwarded. Equal values are one candidate. Then:
//
//   - no candidate: the olp_auth cookie, when the route does not forward it
//     at all, is read for the limiter only (Forwarded false); two different
//     such values give the one that verifies, else none;
//   - one candidate: it;
//   - several: the single one verify accepts (the others are removed before
//     the upstream: "reduced to the verified one"); none or more than one
//     verified: ErrConflict;
//   - more than MaxCandidates: ErrTooManyCredentials before any is
//     verified (more than MaxCandidates olp_auth cookies the route does not
//     forward: anonymous, none verified).
//
// verify may be nil (no verifier: nothing verifies). Headers a Connection
// line names are ignored, as ReverseProxy never forwards them. h is not
// modified.
func Resolve(h http.Header, forward []Forward, verify func(token string) bool) (Resolved, error) {
	h = forwardedView(h)
	var cands candidates
	var r Resolved
	hasAuth := false
	schemeTok := ""
	if auth := h.Get("Authorization"); auth != "" {
		hasAuth = true
		if tok, ok := bearerToken(auth); ok && usableToken(tok, false) {
			cands.add(tok)
			r.Bearer = tok
		} else if tok, ok := schemeJWS(auth); ok {
			cands.add(tok)
			schemeTok = tok
		} else if tok, ok, _ := basicJWS(auth); ok {
			cands.add(tok)
			schemeTok = tok
		}
	}
	var unforwarded candidates
	var bearerCookies candidates // in header order: the first becomes the Bearer token
	var authCookies candidates
	eachOwnedCookie(h, func(name, value string) {
		fw, listed := lookup(forward, name)
		switch {
		case !listed:
			if name == AuthCookie && usableToken(value, false) {
				unforwarded.add(value)
			}
		case fw.AsAuthorization:
			if !hasAuth && usableToken(value, false) {
				bearerCookies.add(value)
				cands.add(value)
			}
		case name == AuthCookie:
			if usableToken(value, true) {
				authCookies.add(value)
				cands.add(value)
			}
		}
	})
	if len(cands) > MaxCandidates {
		return Resolved{}, ErrTooManyCredentials
	}
	var chosen string
	switch len(cands) {
	case 0:
		if len(unforwarded) == 0 || len(unforwarded) > MaxCandidates {
			return Resolved{}, nil // more: anonymous, none verified (nothing reaches the upstream)
		}
		tok, err := unforwarded.pick(verify)
		if err != nil {
			return Resolved{}, nil // nothing reaches the upstream: anonymous, not refused
		}
		return Resolved{Token: tok}, nil
	case 1:
		chosen = cands[0]
	default:
		tok, err := cands.pick(verify)
		if err != nil {
			return Resolved{}, err
		}
		chosen = tok
	}
	r.Token = chosen
	switch {
	case r.Bearer == chosen:
	case r.Bearer != "":
		r.Bearer, r.dropBearer = "", true
	case bearerCookies.has(chosen):
		r.Bearer = chosen
	}
	if authCookies.has(chosen) {
		r.Cookie = chosen
	}
	switch {
	case schemeTok == chosen:
		r.Scheme = chosen
	case schemeTok != "":
		r.dropBearer = true // the client's header held a candidate that lost
	}
	return r, nil
}

// schemeJWS returns the credentials of an Authorization value under a
// scheme other than Bearer, or under no scheme at all, when they are one
// usable JWS (three base64url parts): what a framework reading
// "JWT <token>", "Token <token>" or the bare header value takes as the
// user's token. Basic and Digest credentials are no JWS.
func schemeJWS(auth string) (string, bool) {
	tok := strings.Trim(auth, " \t")
	if i := strings.IndexAny(tok, " \t"); i >= 0 {
		if strings.EqualFold(tok[:i], "Bearer") || strings.Count(tok[:i], ".") == 2 {
			return "", false // a JWS in the scheme's place: no scheme, several words
		}
		tok = strings.Trim(tok[i:], " \t")
	}
	if !jwsShaped(tok) || strings.ContainsAny(tok, "+/=") || !usableToken(tok, false) {
		return "", false
	}
	return tok, true
}

// basicJWS reads the credentials of an Authorization: Basic value as the
// upstreams that take a token as the Basic password (GitHub-style
// "x:<token>") or user name ("<token>:x-oauth-basic") read them: the
// base64 word decoded leniently (padding optional, either alphabet: Node's
// Buffer, PHP's base64_decode), split at the first ':'. ok is true when
// exactly one JWS-shaped value is there (user and password may repeat
// it) and it is usable (canonical base64url): the candidate (fresh attack
// pass 2 A11: a JWT as the Basic password was anonymous to the limiter).
// hidden is true when a JWS-shaped value is there but no one usable
// token: two different ones, or a non-canonical spelling
// (AuthorizationNonCanonical refuses it).
func basicJWS(auth string) (tok string, ok, hidden bool) {
	auth = strings.Trim(auth, " \t")
	i := strings.IndexAny(auth, " \t")
	if i < 0 || !strings.EqualFold(auth[:i], "Basic") {
		return "", false, false
	}
	word := strings.TrimRight(strings.Trim(auth[i:], " \t"), "=")
	word = strings.NewReplacer("-", "+", "_", "/").Replace(word)
	b, err := base64.RawStdEncoding.DecodeString(word)
	if err != nil {
		// Not one strict base64 word, yet PHP and Node's Buffer decode it
		// skipping what is not base64, and passport-http takes the first
		// word: a JWT they would read there is hidden (fresh attack pass 6
		// C02-C05, C18: "Basic eDph!YmMu...", a space, '=' inside, a word after).
		return "", false, lenientBasicHidesJWS(auth[i:])
	}
	user, pass, _ := strings.Cut(string(b), ":")
	for _, v := range []string{user, pass} {
		if !jwsShaped(v) {
			continue
		}
		switch {
		case tok == "":
			tok = v
		case v != tok:
			return "", false, true
		}
	}
	if tok == "" {
		return "", false, false
	}
	if strings.ContainsAny(tok, "+/=") || !usableToken(tok, false) {
		return "", false, true
	}
	return tok, true, false
}

// candidates are distinct credential values in the order they came.
type candidates []string

func (c *candidates) add(v string) {
	if !c.has(v) {
		*c = append(*c, v)
	}
}

func (c candidates) has(v string) bool {
	for _, x := range c {
		if x == v {
			return true
		}
	}
	return false
}

// pick returns the one candidate verify accepts, or ErrConflict.
func (c candidates) pick(verify func(string) bool) (string, error) {
	if verify == nil {
		return "", ErrConflict
	}
	found := ""
	for _, v := range c {
		if verify(v) {
			if found != "" {
				return "", ErrConflict
			}
			found = v
		}
	}
	if found == "" {
		return "", ErrConflict
	}
	return found, nil
}

// eachOwnedCookie calls fn with the name and the unquoted, trimmed value of
// every olp_* pair (IsOwned) of h's Cookie lines, in order.
func eachOwnedCookie(h http.Header, fn func(name, value string)) {
	for _, line := range h["Cookie"] {
		for part := range strings.SplitSeq(line, ";") {
			n, v, _ := strings.Cut(strings.TrimSpace(part), "=")
			n = strings.TrimSpace(n)
			if IsOwned(n) {
				fn(n, unquote(strings.TrimSpace(v)))
			}
		}
	}
}

// usableToken reports whether v is a credential every common parser reads
// as the same token: validBearer, not a non-canonical JWS, and, for the
// cookie form (asCookie), none of the characters frameworks decode in a
// cookie value ('%' escapes in PHP, Rack and Node's cookie package, '+' as
// a space in PHP).
func usableToken(v string, asCookie bool) bool {
	if !validBearer(v) || NonCanonicalJWS(v) {
		return false
	}
	return !asCookie || !strings.ContainsAny(v, "%+")
}

// BearerTooLarge reports whether the request's Authorization header, as
// the upstream would receive it, carries a Bearer token longer than
// MaxTokenBytes. The gateway answers such a request 431 instead of
// forwarding a credential the verifier refuses to read (docs/edge.md,
// Identity).
func BearerTooLarge(h http.Header) bool {
	auth := forwardedView(h).Get("Authorization")
	if len(auth) <= MaxTokenBytes {
		return false
	}
	token, ok := bearerToken(auth)
	return ok && len(token) > MaxTokenBytes
}

// forwardedView is ForwardedHeader: the identity read from the headers
// the upstream receives.
func forwardedView(h http.Header) http.Header { return ForwardedHeader(h) }

// ForwardedHeader returns h as net/http/httputil.ReverseProxy forwards it
// as far as the client's Connection header goes: every header a
// Connection line names removed, read exactly as ReverseProxy reads them
// (members split on ',', trimmed of SP, HTAB, CR and LF by
// textproto.TrimString, matched by their canonical MIME key as
// http.Header.Del does: any case; "Content-Type\v" or a Unicode look-alike
// such as "Coo\u212aie" names nothing). Any identity decision that reads
// Authorization, Cookie, Content-Type or Content-Encoding reads this view
// (fresh attack pass 3 C13: "Connection: Content-Type" hid a text/plain
// line from the upstream, which then parsed the body as a form). h itself
// is not modified; it is returned as is when Connection names none of its
// headers.
func ForwardedHeader(h http.Header) http.Header {
	var out http.Header
	for _, line := range h["Connection"] {
		for tok := range strings.SplitSeq(line, ",") {
			if tok = textproto.TrimString(tok); tok == "" {
				continue
			}
			k := textproto.CanonicalMIMEHeaderKey(tok)
			if _, ok := h[k]; !ok {
				continue
			}
			if out == nil {
				out = h.Clone()
			}
			delete(out, k)
		}
	}
	if out == nil {
		return h
	}
	return out
}

// bearerToken returns the token of an Authorization value with the
// Bearer scheme (any case), separated from it by spaces or tabs (RFC 9110
// §11.4 allows one or more SP; servers commonly accept HTAB too, so
// identity does as well), without surrounding whitespace.
func bearerToken(auth string) (string, bool) {
	i := strings.IndexAny(auth, " \t")
	if i < 0 || !strings.EqualFold(auth[:i], "Bearer") {
		return "", false
	}
	token := strings.Trim(auth[i:], " \t")
	return token, token != ""
}

// lenientBasicHidesJWS reports whether Basic credentials that are not one
// strict base64 word decode, the lenient ways upstream parsers read them
// (every base64 character of the value kept, as PHP's base64_decode and
// Node's Buffer do; or the first word's), into a user or password that is
// JWS-shaped.
func lenientBasicHidesJWS(creds string) bool {
	creds = strings.Trim(creds, " \t")
	first, _, _ := strings.Cut(creds, " ")
	first, _, _ = strings.Cut(first, "\t")
	for _, v := range []string{creds, first} {
		var b strings.Builder
		for _, r := range v {
			switch {
			case 'A' <= r && r <= 'Z', 'a' <= r && r <= 'z', '0' <= r && r <= '9', r == '+', r == '/':
				b.WriteRune(r)
			case r == '-':
				b.WriteByte('+')
			case r == '_':
				b.WriteByte('/')
			}
		}
		word := b.String()
		if len(word)%4 == 1 {
			word = word[:len(word)-1]
		}
		dec, err := base64.RawStdEncoding.DecodeString(word)
		if err != nil {
			continue
		}
		user, pass, _ := strings.Cut(string(dec), ":")
		if jwsShaped(user) || jwsShaped(pass) {
			return true
		}
	}
	return false
}
