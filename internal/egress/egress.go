// Package egress holds what every HTTP client of Borda's shares: the
// bound on a response's head and a transport that applies it. Every
// outbound call (upstreams, the legacy endpoint, Upstash REST, JWKS, deny
// feeds, the health probe, `borda limits probe`) reads another server's
// response head; Go's default lets one hold 10 MB (a hostile third-party
// upstream pinned 600 MB-1.1 GB with 60 responses: fresh attack pass
// A050). TestEveryOutboundClientBoundsResponseHeads keeps every client
// of the module on it.
package egress

import "net/http"

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

// NoRedirect is the CheckRedirect of Borda's clients that must not follow
// a redirect (the legacy endpoint, the management API, the limits probe,
// JWKS): the 3xx is returned as the answer, so a server cannot send the
// call to another address (an internal one) or from https to http.
func NoRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
