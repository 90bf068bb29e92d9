package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/olp-edu/borda/cookies"
	"github.com/olp-edu/borda/internal/egress"
)

// errUpstreamTimeout is the cancel cause of a route timeout.
var errUpstreamTimeout = errors.New("upstream timeout")

// upstreamDialer dials upstreams: 5 s to connect, TCP keep-alive every
// 30 s.
func upstreamDialer() *net.Dialer {
	return &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
}

// newTransport returns the shared upstream transport: keep-alive
// connection pools sized for a gateway (1024 idle connections, 256 per
// upstream host, 90 s idle), 5 s dial and TLS handshake timeouts, TCP
// keep-alive every 30 s, HTTP/2 to TLS upstreams that offer it (WebSocket
// upgrades stay on HTTP/1.1), no environment proxy and no transparent
// compression (the client's Accept-Encoding decides). The per-route
// timeout bounds the wait for response headers; bodies and upgraded
// connections are not bounded (streams and WebSockets).
func newTransport() *http.Transport {
	d := upstreamDialer()
	return &http.Transport{
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		// A hostile upstream's 9 MB head was buffered and relayed whole
		// (fresh attack pass A050): past 64 KiB the exchange fails, 502.
		MaxResponseHeaderBytes: egress.MaxResponseHeaderBytes,
	}
}

// routeProxy is one route's reverse proxy.
type routeProxy struct {
	s  *Server
	rt *route
	rp *httputil.ReverseProxy
}

func (s *Server) newRouteProxy(rt *route, transport http.RoundTripper, pool httputil.BufferPool) *routeProxy {
	p := &routeProxy{s: s, rt: rt}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      transport,
		FlushInterval:  0,
		BufferPool:     pool,
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.errorHandler,
		ErrorLog:       s.errorLog,
	}
	return p
}

// ServeHTTP proxies one request, bounding the wait for the upstream's
// response headers by the route timeout (504 when it passes) and the wait
// for the client's body by server.body_timeout and body_min_rate (408).
func (p *routeProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ex := exchangeFrom(r.Context())
	if p.s.looped(r.Header) {
		writeProblem(w, problemLoop, ex.id)
		return
	}
	if answerMaxForwards(w, r, ex.id) {
		return
	}
	if ex.w.body != nil {
		ex.body.arm(p.s.bodyTimeout, p.s.bodyMinRate)
	}
	// The request's context is the exchange's (observe): the route timer
	// cancels it with errUpstreamTimeout, and it ends with the request.
	if p.rt.timeout > 0 {
		ex.timer = armRouteTimer(ex, p.rt.timeout)
	}
	defer ex.stopTimer()
	if ex.w.body != nil {
		// The transport does not return before its body read does: when
		// the exchange ends (route timeout, client gone, shutdown), stop
		// waiting for the client's body.
		defer context.AfterFunc(r.Context(), ex.body.stop)()
	}
	// Until the upstream's answer arrives, a relayed 1xx's headers go on
	// a map of their own (writer.go, relaying).
	ex.w.relaying = true
	ex.w.relayPolicy = p.dropEdgeOwned
	defer ex.w.endRelay()
	defer ex.w.armSend() // the server's last flush gets its own send_timeout
	p.rp.ServeHTTP(w, r)
}

// rewrite builds the outbound request. It runs after ReverseProxy removed
// the hop-by-hop headers (every header named in any Connection line
// included) and the client's Forwarded and X-Forwarded-* headers, so
// nothing set here can be removed by the client.
func (p *routeProxy) rewrite(pr *httputil.ProxyRequest) {
	ex := exchangeFrom(pr.In.Context())
	rt, in, out := p.rt, pr.In, pr.Out

	rest := ex.rest
	if !rt.stripPrefix {
		rest = in.URL.EscapedPath()
	}
	joined := joinPath(rt.Upstream.EscapedPath(), rest)
	out.URL.Scheme = rt.Upstream.Scheme
	out.URL.Host = rt.Upstream.Host
	out.URL.RawPath = joined
	if decoded, err := url.PathUnescape(joined); err == nil {
		out.URL.Path = decoded
	} else {
		out.URL.Path, out.URL.RawPath = joined, ""
	}
	switch uq := rt.Upstream.RawQuery; {
	case uq == "":
	case out.URL.RawQuery == "":
		out.URL.RawQuery = uq
	default:
		out.URL.RawQuery = uq + "&" + out.URL.RawQuery
	}
	if rt.preserveHost {
		out.Host = in.Host
	} else {
		out.Host = ""
	}

	h := out.Header
	// HTTP2-Settings belongs to an h2c upgrade only (RFC 7540 §3.2.1),
	// which is never tunnelled; a client that leaves it out of Connection
	// would otherwise hand it to the upstream.
	delete(h, "Http2-Settings")
	// httpoxy (CVE-2016-5385 and kin): a CGI/FastCGI upstream exposes a
	// Proxy header as HTTP_PROXY, which its outbound HTTP clients may
	// take as their proxy. No client's Proxy is forwarded, from any peer
	// (nginx's and Apache's httpoxy advice; attack pass A51).
	delete(h, "Proxy")
	if _, ok := h["Upgrade"]; ok && !rt.allowsUpgrade(in.Header) {
		// ReverseProxy re-added Connection: Upgrade and the Upgrade the
		// client asked for; without them the upstream sees a plain
		// request, and a 101 it sends anyway is refused (502) rather than
		// tunnelled, because ReverseProxy compares it with this request.
		delete(h, "Upgrade")
		delete(h, "Connection")
	}
	dropClientHeaders(h, !p.s.keepUnderscores, !ex.trusted)
	p.s.setForwarded(h, in, ex)
	decrementMaxForwards(h, in.Method)
	if vias := h["Via"]; len(vias) == 0 && len(p.s.viaLine11) == 1 && in.ProtoMajor == 1 && in.ProtoMinor == 1 {
		h["Via"] = p.s.viaLine11 // shared, read-only; cap 1, so an append copies
	} else {
		h["Via"] = append(vias, p.s.viaEntry(in))
	}
	if ids := h["X-Request-Id"]; len(ids) != 1 || ids[0] != ex.id {
		// The client's own (kept when sane) came with the clone; anything
		// else is replaced by the exchange's id.
		h["X-Request-Id"] = ex.idVals[:]
	}
	// A request's trailers never reach the upstream: they would arrive
	// after every header policy above ran (an upstream that merges
	// trailers into its headers, as Apache's mod_headers did before
	// CVE-2013-5704, then read the client's X-Forwarded-For,
	// Authorization or olp_auth cookie as headers: fresh attack pass 19
	// A51). No request of the portal or the webhooks needs one; nginx
	// drops them too. The body is forwarded as it came.
	out.Trailer = nil
	delete(h, "Trailer")
	delete(h, wouldBlockKey) // a client's copy never reaches the upstream
	if ex.verdict.WouldBlock() {
		h[wouldBlockKey] = []string{"true"}
	}
	cookies.ApplyRequest(h, rt.forward, ex.credential)
	if !rt.session {
		p.s.dropPortalCredential(out, ex)
	}
}

// dropClientHeaders removes, in one pass over the outgoing headers, what
// the upstream must not get from the client:
//
//   - underscores: every header whose name contains "_"
//     (headers_with_underscores: drop): an upstream behind CGI-style
//     naming would read X_Forwarded_For as X-Forwarded-For and X_Real_IP
//     as X-Real-IP, past the gateway's own values;
//   - untrusted: from a peer that is not a trusted proxy, every
//     X-Forwarded-* and clientClaimHeaders header (setForwarded);
//   - from every peer, the gateway's own namespace, X-Borda-* (any case,
//     '_' for '-'): the forwarder names the source of an event it
//     delivers in X-Borda-Source and a replay in X-Borda-Replay, so a
//     client's copy would speak for Borda to an upstream (fresh attack
//     pass 19 A58).
func dropClientHeaders(h http.Header, underscores, untrusted bool) {
	for k := range h {
		if (underscores && strings.IndexByte(k, '_') >= 0) || (untrusted && (isXForwarded(k) || isClientClaimHeader(k))) || isOwnHeader(k) {
			delete(h, k)
		}
	}
}

// ownPrefix is the gateway's header namespace, in lower case.
const ownPrefix = "x-borda-"

// isOwnHeader reports whether the header name k is in the gateway's
// namespace (ownPrefix), in any case and with '_' for '-'.
func isOwnHeader(k string) bool {
	return len(k) >= len(ownPrefix) && headerNameIs(k[:len(ownPrefix)], ownPrefix)
}

// setForwarded replaces the client-IP headers with the gateway's view
// (docs/edge.md, "Client IP"). From an untrusted peer nothing the client sent is kept
// (no X-Forwarded-* at all, nor the configured client-IP header, nor any
// of clientClaimHeaders: dropClientHeaders removed those first);
// from a trusted proxy its X-Forwarded-Proto and X-Forwarded-Host are
// believed, and the client IP comes from its headers (clientIP).
func (s *Server) setForwarded(h http.Header, in *http.Request, ex *exchange) {
	ip := ex.clientStr // set by observe, which every request passes
	proto := "http"
	if in.TLS != nil {
		proto = "https"
	}
	host := in.Host
	if ex.trusted {
		if v := in.Header.Get("X-Forwarded-Proto"); v == "http" || v == "https" {
			proto = v
		}
		if v := in.Header.Get("X-Forwarded-Host"); v != "" && len(in.Header["X-Forwarded-Host"]) == 1 {
			host = v
		}
	} else {
		// ReverseProxy drops only X-Forwarded-For, -Host and -Proto; an
		// untrusted client's -Prefix, -Port, -Ssl... and claim headers
		// went in rewrite (dropClientHeaders: frameworks build redirects
		// from them).
		if s.ip.header != "" && s.ip.header != "X-Real-Ip" {
			delete(h, s.ip.header) // e.g. a spoofed CF-Connecting-IP
		}
	}
	vals := ex.conn.forwarded(ex, ip, host, proto)[:]
	h["X-Forwarded-For"] = vals[0:1:1]
	h["X-Real-Ip"] = vals[1:2:2]
	h["X-Forwarded-Proto"] = vals[2:3:3]
	h["X-Forwarded-Host"] = vals[3:4:4]
	h["Forwarded"] = vals[4:5:5]
}

// isXForwarded reports whether the header name k starts with
// "X-Forwarded-", in any case and with '_' for '-' (CGI-style servers map
// X_Forwarded_Prefix to the same variable as X-Forwarded-Prefix).
func isXForwarded(k string) bool {
	const p = "x-forwarded-"
	if len(k) < len(p) {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := k[i] | 0x20 // ASCII lower case; '-' and '_' stay apart
		if c != p[i] && !(p[i] == '-' && k[i] == '_') {
			return false
		}
	}
	return true
}

// The forwarded-identity family: request headers, besides Forwarded and
// X-Forwarded-* (isXForwarded), that CDNs, load balancers, platforms,
// authenticating proxies and frameworks use to tell an upstream who the
// client is, what certificate it showed, or which URL it asked for. An
// upstream trusts them because its proxy is supposed to set or remove
// them, so from a peer that is not a trusted proxy every member is
// removed, in any case and with '_' for '-' (isClientClaimHeader); from a
// trusted proxy they pass (it may be the CDN or the authenticating proxy
// that set them). The family is documented member by member in
// docs/edge.md ("The forwarded-identity family"), which
// TestForwardedIdentityFamilyIsDocumented keeps in step with these lists.

// clientClaimHeaders are the family's exact names, in lower case.
var clientClaimHeaders = []string{
	// Client IP claims (nginx realip, CDNs: Alibaba's Ali-Cdn-Real-Ip and
	// ChinaCache's Cdn-Src-Ip; cloud load balancers; WebLogic's
	// Proxy-Client-IP that Java getClientIp helpers read).
	"x-real-ip", "x-client-ip", "true-client-ip", "x-true-client-ip", "x-cluster-client-ip",
	"x-originating-ip", "client-ip", "x-forwarded", "forwarded-for", "fastly-client-ip",
	"fastly-ssl", "fastly-client", "fly-client-ip", "proxy-client-ip", "cdn-src-ip",
	"ali-cdn-real-ip",
	// URL and method overrides (IIS, Symfony, Laravel read them in place
	// of the request line): a path the route table never saw.
	"x-rewrite-url", "x-http-method-override", "x-http-method", "x-method-override",
	// Scheme and host overrides (Tornado xheaders, Werkzeug, Microsoft
	// Front-End-Https, X-Is-Https, a CGI-style Https: on): "https" or a host
	// the client typed, believed for redirects and secure cookies.
	"x-scheme", "x-url-scheme", "front-end-https", "x-host", "x-is-https", "https",
	// Client certificate a TLS-terminating proxy verified (RFC 9440
	// Client-Cert, nginx/HAProxy conventions).
	"client-cert", "client-cert-chain", "x-client-cert", "x-client-cert-chain", "x-client-dn",
	"x-client-s-dn", "x-client-i-dn", "x-client-verify", "x-client-serial", "x-client-fingerprint",
	// Identity an authenticating proxy vouches for (Apache/CGI REMOTE_USER,
	// Authelia and Caddy forward_auth Remote-*, Squid, Kong, oauth2-proxy's
	// GAP-Auth, Cloud Endpoints).
	"remote-user", "remote-groups", "remote-group", "remote-name", "remote-email",
	"x-user", "x-email", "x-proxyuser-ip", "x-auth-user", "x-auth-email",
	"x-user-id", "x-user-email", "x-user-name", "x-user-groups", "x-user-roles",
	"x-jwt-payload", "x-token-subject", "x-credential-identifier", "x-credential-username", "x-anonymous-consumer", "x-userinfo",
	"gap-auth", "x-endpoint-api-userinfo",
	// The portal's own identity fields under header names (usuario_id,
	// escola_id, the telemetry's and the limiter's subjects): Borda never
	// sets them, so a client's is a claim an upstream might believe (fresh
	// attack pass 25 P16).
	"x-usuario-id", "x-escola-id",
	// Sendfile control (Rack::Sendfile, Rails, Django-sendfile, lighttpd,
	// nginx X-Accel-*): a client's X-Sendfile-Type: X-Accel-Redirect with
	// an X-Accel-Mapping made Rack answer with a redirect, to a path the
	// client chose, that an nginx behind the gateway followed into its
	// internal locations (CVE-2025-61780; fresh attack pass 15 X02).
	"x-sendfile-type", "x-accel-mapping", "x-sendfile", "x-lighttpd-send-file", "x-accel-redirect",
}

// clientClaimPrefixes are the family's name prefixes, in lower case:
// every header whose name starts with one is a member. Each belongs to a
// platform or proxy that sets (and strips) its own headers: a client
// cannot speak as it.
var clientClaimPrefixes = []string{
	// Cloudflare (CF-Connecting-IP, CF-Connecting-IPv6, CF-Visitor,
	// CF-IPCountry, Cf-Access-Authenticated-User-Email,
	// Cf-Access-Jwt-Assertion, ...), Fly.io, Vercel, Netlify, CloudFront,
	// Akamai, Azure Front Door (X-Azure-ClientIP, X-Azure-FDID).
	"cf-", "fly-forwarded-", "x-vercel-", "x-nf-", "cloudfront-", "akamai-", "x-akamai-", "x-azure-",
	// Every X-Original-* (X-Original-URL, -URI, -Host, -Method,
	// -Forwarded-For: nginx auth_request and IIS ARR) and X-ARR-* (IIS
	// ARR: X-ARR-SSL, X-ARR-ClientCert).
	"x-original-", "x-arr-",
	// Envoy's internal headers (Envoy itself strips x-envoy-* from
	// untrusted peers); WebLogic's proxy plugin (WL-Proxy-Client-IP,
	// WL-Proxy-SSL: the request is taken for HTTPS, WL-Proxy-Client-Cert:
	// the request authenticates as that certificate); Sucuri's WAF
	// (X-Sucuri-ClientIP, X-Sucuri-Country) and Imperva's (Incap-*);
	// Next.js's internal X-Middleware-* and X-Invoke-* (X-Middleware-Subrequest
	// skipped its middleware: CVE-2025-29927).
	"x-envoy-", "wl-proxy-", "x-sucuri-", "incap-", "x-middleware-", "x-invoke-",
	// Client-certificate details (X-SSL-Client-*, nginx ingress's
	// Ssl-Client-*; Traefik's and Envoy's are X-Forwarded-*).
	"x-ssl-", "ssl-client-",
	// Authenticating proxies and platforms: oauth2-proxy X-Auth-Request-*,
	// X-Authenticated-* (Kong, Apigee), Envoy jwt_authn's X-Jwt-Claim-*,
	// Pomerium, Vouch, authentik, Kong X-Consumer-*, Grafana's
	// X-WEBAUTH-*, Kubernetes' X-Remote-User/-Group/-Extra-*, Tailscale
	// Serve's Tailscale-User-*, AWS ALB (X-Amzn-Oidc-*, X-Amzn-Mtls-*),
	// Google IAP and App Engine (X-Goog-Authenticated-User-*,
	// X-Goog-Iap-Jwt-Assertion, X-AppEngine-User-Email, X-Appengine-Cron),
	// Cloud Tasks, GCP API Gateway, Azure App Service Easy Auth
	// (X-MS-Client-Principal*, X-MS-Token-*).
	"x-auth-request-", "x-authenticated-", "x-jwt-claim-", "x-tailscale-", "x-pomerium-", "x-vouch-", "x-authentik-", "x-consumer-", "x-webauth-",
	"x-remote-", "tailscale-", "x-amzn-oidc-", "x-amzn-mtls-", "x-goog-authenticated-user-",
	"x-goog-iap-", "x-appengine-", "x-cloudtasks-", "x-apigateway-", "x-ms-client-principal",
	"x-ms-token-",
}

// isClientClaimHeader reports whether the header name k is a member of
// the forwarded-identity family (clientClaimHeaders or a name starting
// with one of clientClaimPrefixes), in any case and with '_' for '-'.
func isClientClaimHeader(k string) bool {
	if k == "" {
		return false
	}
	for _, p := range claimPrefixesByFirst[lowerASCII(k[0])] {
		if len(k) >= len(p) && headerNameIs(k[:len(p)], p) {
			return true
		}
	}
	if len(k) >= len(claimHeadersByLen) {
		return false
	}
	for _, name := range claimHeadersByLen[len(k)] {
		if headerNameIs(k, name) {
			return true
		}
	}
	return false
}

// lowerASCII is c in ASCII lower case.
func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// claimPrefixesByFirst is clientClaimPrefixes by first byte, so a header
// name is compared only with the prefixes it could start with.
var claimPrefixesByFirst = func() (t [256][]string) {
	for _, p := range clientClaimPrefixes {
		t[p[0]] = append(t[p[0]], p)
	}
	return t
}()

// claimHeadersByLen is clientClaimHeaders by name length, so a header
// name is compared only with the names it could be.
var claimHeadersByLen = func() (t [64][]string) {
	for _, name := range clientClaimHeaders {
		t[len(name)] = append(t[len(name)], name)
	}
	return t
}()

// headerNameIs compares the header name k with the lower-case name,
// ASCII case-insensitively and with '_' standing for '-'.
func headerNameIs(k, name string) bool {
	if len(k) != len(name) {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c == '_' {
			c = '-'
		} else if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != name[i] {
			return false
		}
	}
	return true
}

// allowsUpgrade reports whether the request's Upgrade is one the route
// tunnels: exactly one Upgrade line holding one token, case-insensitively
// in the route's upgrades (routes[].upgrades, "websocket" by default). A list such as
// "websocket, h2c" is not: the upstream picks from it.
func (rt *route) allowsUpgrade(in http.Header) bool {
	vs := in["Upgrade"]
	if len(vs) != 1 {
		return false
	}
	v := strings.TrimSpace(vs[0])
	for _, u := range rt.upgrades {
		if strings.EqualFold(v, u) {
			return true
		}
	}
	return false
}

// forwardedMemo holds the forwarding header values of one (client IP,
// host, proto): X-Forwarded-For, X-Real-Ip, X-Forwarded-Proto,
// X-Forwarded-Host and Forwarded. They are shared by the requests that
// have the same three, read-only: each header gets a slice capped at one
// element, so an append by a later hook copies instead of overwriting its
// neighbour or another request's value.
type forwardedMemo struct {
	ip, host, proto string
	vals            [5]string
}

// forwarded returns the forwarding header values for ip, host and proto:
// the connection's last ones when they match (the requests of one
// keep-alive connection usually do), else new ones, remembered for the
// next request. m may be nil (no connection memo): new values each time.
func (m *peerMemo) forwarded(ex *exchange, ip, host, proto string) *[5]string {
	if m != nil {
		if f := m.fwd.Load(); f != nil && f.ip == ip && f.host == host && f.proto == proto {
			return &f.vals
		}
	}
	f := &forwardedMemo{ip: ip, host: host, proto: proto}
	f.vals = [5]string{ip, ip, proto, host, forwardedValue(ex, ip, host, proto)}
	if m != nil {
		m.fwd.Store(f)
	}
	return &f.vals
}

// forwardedValue renders RFC 7239 Forwarded: for=...;host="...";proto=...
// ip is the client's address as text ("unknown" when there is none). One
// allocation: the value is built in a buffer sized for it.
func forwardedValue(ex *exchange, ip, host, proto string) string {
	var b strings.Builder
	b.Grow(len(`for="[]";host="";proto=`) + len(ip) + 2*len(host) + len(proto))
	b.WriteString("for=")
	if ex.client.Is6() {
		b.WriteString(`"[`)
		b.WriteString(ip)
		b.WriteString(`]"`)
	} else {
		b.WriteString(ip)
	}
	b.WriteString(";host=")
	writeQuotedForwarded(&b, host)
	b.WriteString(";proto=")
	b.WriteString(proto)
	return b.String()
}

// writeQuotedForwarded writes s as an RFC 7239 quoted-string: '"' and
// '\\' escaped, control characters dropped.
func writeQuotedForwarded(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			b.WriteByte('\\')
		} else if c < 0x20 || c == 0x7f {
			continue
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
}

// modifyResponse stops the route timer (headers arrived in time), drops
// upstream headers the edge owns (request id, would-block mark, CORS on
// CORS routes) and applies the route's Set-Cookie policy.
func (p *routeProxy) modifyResponse(res *http.Response) error {
	ex := exchangeFrom(res.Request.Context())
	ex.w.endRelay() // the final answer's headers go on the response (writer.go)
	if ex.stopTimer() {
		return errUpstreamTimeout
	}
	ex.served = true // the upstream answered this path (telemetry.Event.Served)
	h := res.Header
	p.s.addResponseVia(res)
	p.dropEdgeOwned(h, res.StatusCode)
	p.rt.applyUntrustedPolicy(h, res.StatusCode)
	if len(h["Set-Cookie"]) > 0 {
		if removed := cookies.ApplySetCookie(h, p.rt.setCookie); len(removed) > 0 {
			p.s.log.WarnContext(res.Request.Context(), "upstream Set-Cookie for a portal cookie the route does not forward was removed",
				"route", p.rt.Name, "cookies", removed, "request_id", ex.id)
		}
	}
	if !p.rt.session {
		// After the olp_* policy, which reads the lines as sent.
		confineSetCookie(h, p.rt.cookiePath)
	}
	policeTrailers(res)
	return nil
}

// dropEdgeOwned removes from an upstream response's headers h (final or
// 1xx) what the edge owns or the route's policy forbids: the request id
// and would-block mark (the edge's), the CORS headers on a CORS route, and
// on a route that does not forward the session untrustedResponseHeaders
// (Clear-Site-Data, Service-Worker-Allowed). One policy for every
// response the upstream sends through the gateway: a 103 Early Hints
// carried Clear-Site-Data past it (issue 22 A54). Set-Cookie2 (RFC 2965,
// obsoleted by RFC 6265) is dropped on every route in any spelling
// (dropSetCookie2): no current browser reads it, and a client library that
// still does would store an olp_* cookie the Set-Cookie policy never saw
// (fresh attack pass A58).
func (p *routeProxy) dropEdgeOwned(h http.Header, status int) {
	delete(h, "X-Request-Id")
	delete(h, wouldBlockKey)
	dropSetCookie2(h)
	if p.rt.varyOrigin {
		for _, k := range corsResponseHeaders {
			delete(h, k)
		}
	}
	if !p.rt.session {
		dropUntrustedResponseHeaders(h, status)
	}
}

// dropSetCookie2 removes every Set-Cookie2 field of h, in any letter
// case and with '_' for '-' (a name the transport did not canonicalize).
func dropSetCookie2(h http.Header) {
	for k := range h {
		if len(k) == len("Set-Cookie2") && strings.EqualFold(strings.ReplaceAll(k, "_", "-"), "Set-Cookie2") {
			delete(h, k)
		}
	}
}

var corsResponseHeaders = []string{
	"Access-Control-Allow-Origin", "Access-Control-Allow-Credentials",
	"Access-Control-Expose-Headers", "Access-Control-Allow-Methods",
	"Access-Control-Allow-Headers", "Access-Control-Max-Age",
}

// errorHandler maps a failed exchange to the client's answer. The
// client's own faults come first and are never the upstream's
// (borda_client_errors_total, logged at info): a request body that broke
// its framing → 400, one that stalled or trickled → 408 (also when the
// route timeout passes while the transport is waiting on the client's
// body), a client that went away → nothing sent, 499. Then the upstream's
// (borda_upstream_errors_total, logged at warn): the route timeout or a
// network timeout → 504, any other failure → 502. Bodies are PT-BR
// problem details; with an unfinished body the connection is closed.
func (p *routeProxy) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	ctx := r.Context()
	ex := exchangeFrom(ctx)
	ex.w.endRelay() // the answer's headers go on the response (writer.go)
	routeTimeout := errors.Is(context.Cause(ctx), errUpstreamTimeout) || errors.Is(err, errUpstreamTimeout)
	var bodyKind string
	if ex.w.body != nil {
		var waiting bool
		bodyKind, waiting = ex.body.failure()
		if bodyKind == "" && routeTimeout && waiting {
			bodyKind = clientBodyTimeout // the upstream was waiting for the client's body
		}
	}
	switch bodyKind {
	case bodyGone:
		ex.clientGone = true
		p.s.log.DebugContext(ctx, "client went away while sending its body", "route", p.rt.Name, "request_id", ex.id)
		return
	case clientBodyTimeout, clientMalformedBody:
		p.s.metrics.client.WithLabelValues(p.rt.Name, bodyKind).Inc()
		p.s.log.InfoContext(ctx, "request body refused", "route", p.rt.Name, "kind", bodyKind,
			"request_id", ex.id, "error", err.Error())
		if ex.w.wroteHeader {
			return
		}
		if bodyKind == clientBodyTimeout {
			writeProblem(w, problemRequestTimeout, ex.id)
		} else {
			writeProblem(w, problemMalformedBody, ex.id)
		}
		return
	}
	var kind string
	switch {
	case routeTimeout:
		kind = kindTimeout
	case ctx.Err() != nil:
		ex.clientGone = true
		p.s.log.DebugContext(ctx, "client went away before the upstream answered",
			"route", p.rt.Name, "request_id", ex.id)
		return
	case isTimeout(err):
		kind = kindTimeout
	case isUnreachable(err):
		kind = kindUnreachable
	default:
		kind = kindProtocol
	}
	p.s.metrics.upstream.WithLabelValues(p.rt.Name, kind).Inc()
	p.s.log.WarnContext(ctx, "upstream exchange failed", "route", p.rt.Name, "kind", kind,
		"request_id", ex.id, "error", err.Error())
	if ex.w.wroteHeader {
		return // headers already went out; nothing sensible to add
	}
	if kind == kindTimeout {
		writeProblem(w, problemGatewayTimeout, ex.id)
		return
	}
	writeProblem(w, problemBadGateway, ex.id)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func isUnreachable(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return (errors.As(err, &op) && op.Op == "dial") || errors.As(err, &dns)
}

// copyBufferSize is the size of the proxies' copy buffers (bytes).
const copyBufferSize = 32 << 10

// bufferPool recycles the 32 KiB copy buffers of every route's proxy. It
// pools array pointers, so Put stores what Get handed out without
// allocating a new slice header each time.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[copyBufferSize]byte); ok {
		return v[:]
	}
	return new([copyBufferSize]byte)[:]
}

// Put keeps buf when it is one of the pool's buffers (full length).
func (b *bufferPool) Put(buf []byte) {
	if len(buf) == copyBufferSize {
		b.p.Put((*[copyBufferSize]byte)(buf))
	}
}
