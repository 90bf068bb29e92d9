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

// BearerNonCanonical reports whether the request's Authorization header,
// as the upstream would receive it, carries a Bearer credential the
// verifier cannot read as one token while an upstream might: a value that
// is not RFC 6750 token68 syntax (a comma list "a, Bearer b", spaces
// inside, other separators), or a JWS that NonCanonicalJWS refuses. Works
// without a Verifier.
func BearerNonCanonical(h http.Header) bool {
	token, ok := bearerToken(forwardedView(h).Get("Authorization"))
	return ok && (!token68(token) || NonCanonicalJWS(token))
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
