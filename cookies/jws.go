package cookies

import (
	"encoding/base64"
	"net/http"
	"strings"
)

// NonCanonicalJWS reports whether token is a JWS compact serialization
// (three dot-separated segments, the first a JSON object however it is
// spelled) but a segment is not the
// canonical unpadded base64url of its bytes (RFC 7515 §2, RFC 4648 §5):
// "=" padding, "+" or "/", or trailing bits that a strict decoder refuses.
// The verifier refuses such a token, so the rate limiter sees the request
// as anonymous; a lenient upstream library may still accept it as the
// user's credential. The gateway therefore never forwards one
// (docs/edge.md, Identity): the Authorization form is answered 401, the
// cookie form is not turned into a Bearer token.
func NonCanonicalJWS(token string) bool {
	if strings.Count(token, ".") != 2 || !looksLikeJOSEHeader(token[:strings.IndexByte(token, '.')]) {
		return false // an opaque token with dots is not judged
	}
	for seg := range strings.SplitSeq(token, ".") {
		if seg == "" {
			return true
		}
		b, err := base64.RawURLEncoding.Strict().DecodeString(seg)
		if err != nil || base64.RawURLEncoding.EncodeToString(b) != seg {
			return true
		}
	}
	return false
}

// looksLikeJOSEHeader reports whether seg, decoded as leniently as any
// JWT library would (padding, either alphabet, trailing bits), is a JSON
// object: the token is then a JWS, whatever its spelling.
func looksLikeJOSEHeader(seg string) bool {
	seg = strings.NewReplacer("+", "-", "/", "_").Replace(strings.TrimRight(seg, "="))
	b, err := base64.RawURLEncoding.DecodeString(seg)
	return err == nil && len(b) > 1 && b[0] == '{'
}

// AuthorizationNonCanonical reports whether the request's Authorization
// header, as the upstream would receive it, carries a credential the
// verifier cannot read as one token while an upstream might:
//
//   - under Bearer: a value that is not RFC 6750 token68 syntax (a comma
//     list "a, Bearer b", spaces inside, other separators), or a JWS that
//     NonCanonicalJWS refuses;
//   - under Basic: a user name and a password that are two different
//     JWS-shaped values, or one that is not canonical (basicJWS);
//   - under any other scheme, or none: a JWS-shaped word (three dot
//     separated base64 segments, see jwsShaped) that is not the value's one
//     credential as schemeJWS reads it ("JWT a b", `Token token="a"`,
//     "a,b", a non-canonical JWS): upstream parsers take the first word,
//     the last, the raw value or a parameter, so no reading is safe.
//
// Works without a Verifier. Basic, Digest and other credentials without a
// JWS-shaped word are not judged.
func AuthorizationNonCanonical(h http.Header) bool {
	auth := forwardedView(h).Get("Authorization")
	if token, ok := bearerToken(auth); ok {
		return !token68(token) || NonCanonicalJWS(token)
	}
	if _, ok := schemeJWS(auth); ok {
		return false
	}
	if _, _, hidden := basicJWS(auth); hidden {
		return true // a Basic user or password holding no one usable JWS
	}
	for w := range strings.FieldsFuncSeq(auth, credentialSeparator) {
		if jwsShaped(w) {
			return true
		}
	}
	return false
}

// credentialSeparator is every character an Authorization parser splits
// on: whitespace as any modelled reader takes it (isReaderSpace: latin-1
// NBSP and NEL, Unicode spaces; fresh attack pass 7 N01), list commas,
// ";", ":" (a Java reader's startsWith("Bearer") then substring(7) reads
// "Bearer:<JWT>", pass 7 N03) and quotes. "=" is not one: it may pad a segment, and jwsShaped
// reads a word holding "token=" as shaped too. A credential is ASCII, so
// any other character from 0x80 on (a byte that is not UTF-8 reads as
// utf8.RuneError) separates words too.
func credentialSeparator(r rune) bool {
	return r >= 0x80 || isReaderSpace(r) || strings.ContainsRune(",;:\"'", r)
}

// jwsShaped reports whether w is three non-empty dot-separated segments
// of base64 characters (either alphabet, '=' padding anywhere): what a
// JWT library would try to parse, whatever its header says.
func jwsShaped(w string) bool {
	if strings.Count(w, ".") != 2 {
		return false
	}
	for seg := range strings.SplitSeq(w, ".") {
		if seg == "" || strings.IndexFunc(seg, func(r rune) bool {
			return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_' || r == '+' || r == '/' || r == '=')
		}) >= 0 {
			return false
		}
	}
	return true
}

// token68 reports whether v is RFC 9110 §11.2 token68 (the b64token of
// RFC 6750 §2.1): 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" )
// *"=".
func token68(v string) bool {
	i := 0
	for ; i < len(v); i++ {
		c := v[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/') {
			break
		}
	}
	if i == 0 {
		return false
	}
	for ; i < len(v); i++ {
		if v[i] != '=' {
			return false
		}
	}
	return true
}
