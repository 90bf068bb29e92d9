package cookies

import (
	"net/http"
	"strings"
)

// AuthCookie is the cookie holding the portal's access token.
const AuthCookie = "olp_auth"

// Credential returns the token the upstream of a route with cookie policy
// forward will see as the request's credential: the Authorization: Bearer
// token when the request has Authorization (false when that header is not
// a Bearer token), else the cookie ApplyRequest turns into the Bearer
// token (the first olp_* cookie forward lists AsAuthorization with a
// usable value), else the olp_auth cookie. A header the client names in
// Connection is not forwarded (RFC 9110 §7.6.1), so it is ignored here
// too: otherwise `Connection: Authorization` with a non-Bearer
// Authorization would hide the olp_auth cookie the upstream gets as its
// Bearer token. The identity verifier verifies exactly this token.
func Credential(h http.Header, forward []Forward) (string, bool) {
	h = forwardedView(h)
	if auth := h.Get("Authorization"); auth != "" {
		return bearerToken(auth)
	}
	if token, ok := bearerCookie(h, forward); ok {
		return token, true
	}
	return cookieToken(h, AuthCookie)
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

// forwardedView returns h without the Authorization and Cookie headers a
// Connection header names (they are hop-by-hop and never forwarded); h
// itself is not modified.
func forwardedView(h http.Header) http.Header {
	if len(h["Connection"]) > 0 && (connectionNames(h, "Authorization") || connectionNames(h, "Cookie")) {
		h = h.Clone()
		for _, name := range []string{"Authorization", "Cookie"} {
			if connectionNames(h, name) {
				delete(h, name)
			}
		}
	}
	return h
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

// connectionNames reports whether any Connection line of h names the
// header name (case-insensitively), as the hop-by-hop removal of
// net/http/httputil.ReverseProxy reads them.
func connectionNames(h http.Header, name string) bool {
	for _, line := range h["Connection"] {
		for tok := range strings.SplitSeq(line, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), name) {
				return true
			}
		}
	}
	return false
}
