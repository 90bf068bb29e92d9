package gateway

import (
	"io"
	"net/http"
	"strings"
)

// Response trailers arrive after the body (chunked HTTP/1.1, HTTP/2), when
// the response-header policy (modifyResponse) has long run, and
// httputil.ReverseProxy relays them as they came. A trailer named like a
// field the gateway polices carried it past the policy: Set-Cookie and
// Clear-Site-Data from a route that does not forward the session (attack
// pass A02). Browsers ignore such trailers, but HTTP libraries and
// proxies that merge trailers into the header section do not, and RFC
// 9110 §6.5.1 forbids them in trailers anyway. So on every route a
// trailer that is hop-by-hop, framing, routing, authentication, cookie,
// site-data, caching, security-policy or one of the gateway's own fields
// is dropped, announced or not; the rest (grpc-status, Server-Timing,
// Content-Digest, application fields) pass.

// forbiddenTrailers are the dropped trailer names, lower case;
// forbiddenTrailerPrefixes the dropped name prefixes.
var (
	forbiddenTrailers = map[string]bool{
		// Framing and message control (RFC 9110 §6.5.1, RFC 9112).
		"content-length": true, "content-encoding": true, "content-type": true, "content-range": true,
		"transfer-encoding": true, "trailer": true, "te": true, "connection": true, "keep-alive": true,
		"proxy-connection": true, "upgrade": true, "host": true, "via": true,
		// Routing, caching and response control.
		"location": true, "refresh": true, "content-location": true, "alt-svc": true, "date": true,
		"age": true, "expires": true, "cache-control": true, "pragma": true, "vary": true, "retry-after": true,
		"etag": true, "last-modified": true, "link": true,
		// Authentication.
		"www-authenticate": true, "authorization": true, "proxy-authenticate": true, "proxy-authorization": true,
		"authentication-info": true, "proxy-authentication-info": true,
		// Cookies and site data.
		"set-cookie": true, "set-cookie2": true, "clear-site-data": true, "service-worker-allowed": true,
		// Security policy.
		"content-security-policy": true, "content-security-policy-report-only": true,
		"strict-transport-security": true, "x-frame-options": true, "x-content-type-options": true,
		"referrer-policy": true, "permissions-policy": true, "content-disposition": true,
		// The gateway's own.
		"x-request-id": true, "ratelimit": true, "ratelimit-policy": true,
	}
	forbiddenTrailerPrefixes = []string{"access-control-", "cross-origin-", "x-ratelimit-", "proxy-"}
)

// forbiddenTrailer reports whether a trailer named k is dropped (any case;
// '_' spellings too, as a header of that name would be dropped).
func forbiddenTrailer(k string) bool {
	k = strings.ReplaceAll(strings.ToLower(k), "_", "-")
	if forbiddenTrailers[k] || k == strings.ToLower(wouldBlockKey) {
		return true
	}
	for _, p := range forbiddenTrailerPrefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// dropForbiddenTrailers removes the forbidden names from t.
func dropForbiddenTrailers(t http.Header) {
	for k := range t {
		if forbiddenTrailer(k) {
			delete(t, k)
		}
	}
}

// policeTrailers applies the trailer policy to res: the announced names
// now (ReverseProxy announces res.Trailer's keys before the body), and
// every trailer that arrives when its body ends (the transport fills
// res.Trailer at EOF, before ReverseProxy copies it). Only a response
// whose length is unknown can carry trailers.
func policeTrailers(res *http.Response) {
	if res.ContentLength != -1 || res.Body == nil || res.Body == http.NoBody || res.StatusCode == http.StatusSwitchingProtocols {
		return // 101: the body is the upgraded connection ReverseProxy takes over
	}
	dropForbiddenTrailers(res.Trailer)
	res.Body = &trailerPolicedBody{ReadCloser: res.Body, res: res}
}

// trailerPolicedBody drops forbidden trailers from res when its body
// ends.
type trailerPolicedBody struct {
	io.ReadCloser
	res *http.Response
}

func (b *trailerPolicedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && len(b.res.Trailer) > 0 {
		dropForbiddenTrailers(b.res.Trailer)
	}
	return n, err
}
