// Package egress holds what every HTTP client of Borda's shares: the
// bound on a response's head and a transport that applies it. Every
// outbound call (upstreams, the legacy endpoint, Upstash REST, JWKS, deny
// feeds, the health probe, `borda limits probe`) reads another server's
// response head; Go's default lets one hold 10 MB (a hostile third-party
// upstream pinned 600 MB-1.1 GB with 60 responses: fresh attack pass
// A050). TestEveryOutboundClientBoundsResponseHeads keeps every client
// of the module on it.
package egress

import (
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// MaxResponseHeaderBytes bounds the status line and headers of every
// response Borda reads from another server: 64 KiB, as a request's head
// (docs/security.md, "Resources charged before work"); Envoy's
// max_response_headers_kb is 60. A larger head fails the exchange (the
// gateway answers 502).
const MaxResponseHeaderBytes = 64 << 10

// Transport returns a clone of http.DefaultTransport (environment proxy,
// HTTP/2, connection pools) with MaxResponseHeaderBytes set.
func Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxResponseHeaderBytes = MaxResponseHeaderBytes
	return t
}

// NoRedirect is the CheckRedirect of every Borda client: the 3xx is
// returned as the answer, so a server cannot send the call to another
// address (an internal one) or from https to http. Every client of the
// module sets it (TestEveryOutboundClientFollowsNoRedirect): the legacy
// endpoint, the management API, the limits probe, JWKS, deny-list feeds,
// Upstash REST, the health probe.
func NoRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Client is an http.Client over rt (nil: Transport()) that follows no
// redirect (NoRedirect), each call bounded by timeout (0: by the caller's
// context alone).
func Client(rt http.RoundTripper, timeout time.Duration) *http.Client {
	if rt == nil {
		rt = Transport()
	}
	return &http.Client{Transport: rt, Timeout: timeout, CheckRedirect: NoRedirect}
}

// RedirectError is the error for an answer that redirects (a 3xx status),
// which no Borda client follows: "status 302, a redirect to
// feeds.example.net: Borda follows no redirect; configure the final
// address". It names the Location's host only (its path or query may
// carry a token). Nil for any other status.
func RedirectError(resp *http.Response) error {
	if resp.StatusCode < 300 || resp.StatusCode > 399 {
		return nil
	}
	to := "no address"
	if loc := resp.Header.Get("Location"); loc != "" {
		to = "an address that is not a URL"
		if u, err := url.Parse(loc); err == nil {
			to = "the same host"
			if u.Host != "" {
				to = printableHost(u.Host)
			}
		}
	}
	return fmt.Errorf("status %d, a redirect to %s: Borda follows no redirect; configure the final address", resp.StatusCode, to)
}

// printableHost is host when it holds printable ASCII only, else a
// placeholder: a hostile Location must not put bidi controls or escapes
// into a log line or the operator page.
func printableHost(host string) string {
	for i := 0; i < len(host); i++ {
		if host[i] <= ' ' || host[i] >= 0x7f {
			return "a host that is not printable ASCII"
		}
	}
	return host
}
