package gateway

import (
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// forwardedIdentityFamily is a hand-written table of members of the
// untrusted forwarded-identity family (issue 22 items 5 and A30): scheme
// and host overrides, authenticating-proxy identity, platform and CDN
// client claims, client-certificate details, Envoy's internal headers.
// It is written from the platforms' own documentation, not from the
// lists in proxy.go, so a member dropped from those fails here.
var forwardedIdentityFamily = []string{
	"X-Scheme", "X-Url-Scheme", "Front-End-Https", "X-Host", "X-ProxyUser-Ip", "Remote-User",
	"X-Remote-User", "X-Envoy-External-Address", "X-Envoy-Internal", "X-Envoy-Original-Path",
	"X-Envoy-Decorator-Operation", "X-Original-Host", "X-Original-Uri", "X-Http-Method-Override",
	"X-Auth-Request-User", "X-Auth-Request-Email", "X-Goog-Authenticated-User-Email",
	"X-Ms-Client-Principal-Name", "X-Amzn-Oidc-Identity", "X-Webauth-User", "X-Forwarded-Protocol",
	"Cf-Visitor", "X-Ssl-Client-Verify", "Ssl-Client-Cert", "X-Arr-Ssl", "X-Client-Cert",
	// A30: platform identity headers.
	"Fly-Client-IP", "Fly-Forwarded-Port", "Fly-Forwarded-Proto", "Fly-Forwarded-Ssl",
	"Cf-Access-Authenticated-User-Email", "Cf-Access-Jwt-Assertion", "Cf-Connecting-Ip",
	"Cf-Connecting-Ipv6", "Cf-Ipcountry", "True-Client-IP", "X-Pomerium-Jwt-Assertion",
	"X-Pomerium-Claim-Email", "X-Vercel-Forwarded-For", "X-Vercel-Ip-Country", "X-Client-Dn",
	"X-Client-Verify", "X-SSL-Client-Cert", "X-SSL-Client-S-DN", "X-Forwarded-Client-Cert",
	"Ssl-Client-Subject-Dn", "X-Amzn-Oidc-Data", "X-Amzn-Oidc-Accesstoken", "X-Amzn-Mtls-Clientcert",
	"X-Goog-Authenticated-User-Id", "X-Goog-Iap-Jwt-Assertion", "X-Appengine-User-Email",
	"X-Appengine-Cron", "X-MS-Client-Principal", "X-MS-Client-Principal-Id", "X-MS-Token-Aad-Id-Token",
	"Tailscale-User-Login", "Tailscale-User-Name", "Tailscale-User-Profile-Pic",
	"X-Auth-Request-Groups", "X-Auth-Request-Preferred-Username", "X-Auth-Request-Access-Token",
	"X-Forwarded-User", "X-Forwarded-Email", "X-Forwarded-Groups", "X-Forwarded-Preferred-Username",
	"X-Forwarded-Access-Token", "Gap-Auth", "X-Remote-Group", "X-Remote-Extra-Scopes",
	"X-WEBAUTH-EMAIL", "X-WEBAUTH-ROLE", "X-Webauth-Groups", "Remote-Groups", "Remote-Email",
	"X-Authentik-Username", "X-Vouch-User", "X-Consumer-Username", "X-Consumer-Id",
	"X-Credential-Identifier", "X-Userinfo", "X-Azure-Fdid", "X-Azure-ClientIP",
	"CloudFront-Viewer-Address", "X-Nf-Client-Connection-Ip", "Akamai-Origin-Hop",
	"X-Original-Url", "X-Original-Forwarded-For", "X-Rewrite-Url", "Client-Cert", "Client-Cert-Chain",
	"Fastly-Client-IP", "X-Cluster-Client-Ip", "X-Real-Ip", "X-Client-Ip",
	// Attack pass A01.
	"X-Consumer-Username", "X-Credential-Identifier", "X-Jwt-Payload", "X-Tailscale-User-Login",
	"X-Authenticated-Email", "X-Remote-Email", "X-Auth-Email", "X-Token-Subject", "X-User-Id", "X-Usuario-Id", "X_Escola_Id",
	"X-Client-S-Dn", "Proxy-Client-IP", "WL-Proxy-Client-IP", "X-Original-Remote-Addr", "X-Original-Proto",
	"X-Is-Https", "Https", "X-Jwt-Claim-Sub",
	// Fresh attack pass A003 (WebLogic's plugin, WAF and CDN client IPs,
	// Next.js internals).
	"WL-Proxy-SSL", "WL-Proxy-Client-Cert", "WL-Proxy-Client-Keysize", "Incap-Client-IP", "X-Sucuri-ClientIP",
	"X-Sucuri-Country", "Cdn-Src-Ip", "Ali-Cdn-Real-Ip", "X-Middleware-Subrequest", "X-Middleware-Rewrite", "X-Invoke-Path",
}

// familyMembers is every member the gateway's lists name (each exact name
// and one member of each prefix), after the hand-written table.
func familyMembers() []string {
	all := append([]string{}, forwardedIdentityFamily...)
	for _, name := range clientClaimHeaders {
		all = append(all, http.CanonicalHeaderKey(name))
	}
	for _, p := range clientClaimPrefixes {
		all = append(all, http.CanonicalHeaderKey(strings.TrimSuffix(p, "-")+"-Probe"))
	}
	return all
}

// spellings are the forms common parsers read as the same header: as
// written, lower case, upper case, CGI-style underscores.
func spellings(name string) []string {
	return []string{name, strings.ToLower(name), strings.ToUpper(name), strings.ReplaceAll(name, "-", "_"),
		strings.ReplaceAll(strings.ToLower(name), "-", "_")}
}

// TestUntrustedForwardedIdentityFamilyNeverReachesTheUpstream: Tornado
// with xheaders=True took a client's X-Scheme: https; every member of the
// family, in every spelling, is removed from an untrusted peer's request
// (with headers_with_underscores: allow too, so the '_' spellings are
// matched by name, not only by the underscore rule), and kept from a
// trusted proxy.
func TestUntrustedForwardedIdentityFamilyNeverReachesTheUpstream(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, Options{
		KeepUnderscoreHeaders: true,
		TrustedProxies:        []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		Routes:                []Route{testRoute(t, "api", up.URL)},
	})
	for _, name := range familyMembers() {
		for _, k := range spellings(name) {
			req := h.newRequest(t, http.MethodGet, "", "/")
			req.Header[k] = []string{"https"}
			req.Header.Set("X-Kept", "yes")
			if rr := h.serve(req, "203.0.113.9:5555"); rr.Code != 200 {
				t.Fatalf("%s: status %d", k, rr.Code)
			}
			got := up.last(t).Header
			for gk, vs := range got {
				if headerNameIs(gk, strings.ToLower(name)) && slices.Contains(vs, "https") {
					t.Errorf("untrusted client's %q reached the upstream as %s: %q", k, gk, vs)
				}
			}
			if got.Get("X-Kept") != "yes" {
				t.Fatalf("an ordinary header was dropped along with %q", k)
			}
		}
		req := h.newRequest(t, http.MethodGet, "", "/")
		req.Header.Set(name, "https")
		if rr := h.serve(req, "10.0.0.1:80"); rr.Code != 200 {
			t.Fatalf("status %d", rr.Code)
		}
		if v := up.last(t).Header.Get(name); v != "https" && !isTrustedRewrite(name) {
			t.Errorf("trusted proxy's %s = %q, want it kept", name, v)
		}
	}
	for _, k := range []string{"X-Hostname", "X-Schemes", "X-User-Agent-Hint", "Remote-Users-Count", "X-Envoyy"} {
		if isClientClaimHeader(k) {
			t.Errorf("%q is not of the family but is removed", k)
		}
	}
}

// TestHeaderNamedInConnectionIsHopByHop: a header the client names in
// Connection is removed before forwarding (RFC 9110 §7.6.1), in any case
// and in any of several Connection lines, and naming the gateway's own
// headers there removes nothing the gateway sets.
func TestHeaderNamedInConnectionIsHopByHop(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, routes(testRoute(t, "api", up.URL)))
	for _, conn := range [][]string{{"X-Secret"}, {"x-secret"}, {"keep-alive, X-SECRET"}, {"close", "X-Secret"},
		{"X-Secret, X-Forwarded-For, X-Real-Ip, Via, X-Request-Id"}} {
		req := h.newRequest(t, http.MethodGet, "", "/")
		req.Header["Connection"] = conn
		req.Header.Set("X-Secret", "hop")
		if rr := h.serve(req, "203.0.113.9:5555"); rr.Code != 200 {
			t.Fatalf("%q: status %d", conn, rr.Code)
		}
		got := up.last(t).Header
		if got.Get("X-Secret") != "" {
			t.Errorf("Connection: %q: X-Secret reached the upstream", conn)
		}
		for _, own := range []string{"X-Forwarded-For", "X-Real-Ip", "Via", "X-Request-Id"} {
			if got.Get(own) == "" {
				t.Errorf("Connection: %q removed the gateway's own %s", conn, own)
			}
		}
	}
}

// TestMaxForwardsIsAnsweredAtZeroAndDecremented: OPTIONS and TRACE with
// Max-Forwards: 0 were forwarded, and 5 arrived as 5 (RFC 9110 §7.6.2).
// TRACE is refused whatever its Max-Forwards (fresh attack pass A41: a
// TRACE without one reached the upstream with the cookie as a Bearer).
func TestMaxForwardsIsAnsweredAtZeroAndDecremented(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, routes(testRoute(t, "api", up.URL)))
	cases := []struct {
		method string
		vals   []string
		status int
		want   string // the upstream's Max-Forwards; "-" not forwarded
	}{
		{"OPTIONS", []string{"0"}, 200, "-"},
		{"OPTIONS", []string{"00"}, 200, "-"},
		{"TRACE", []string{"0"}, 405, "-"},
		{"OPTIONS", []string{"5"}, 200, "4"},
		{"TRACE", []string{"1"}, 405, "-"},
		{"TRACE", nil, 405, "-"},
		{"TRACE", []string{"7"}, 405, "-"},
		{"OPTIONS", []string{"99999999999999999999"}, 200, "2147483647"},
		{"OPTIONS", []string{"-1"}, 400, "-"},
		{"OPTIONS", []string{" 5"}, 400, "-"},
		{"TRACE", []string{"5", "3"}, 405, "-"},
		{"OPTIONS", []string{"0x1"}, 400, "-"},
		{"OPTIONS", []string{""}, 400, "-"},
		{"GET", []string{"0"}, 200, "0"}, // other methods ignore it
		{"POST", []string{"5"}, 200, "5"},
	}
	for _, c := range cases {
		before := up.calls()
		req := h.newRequest(t, c.method, "", "/x")
		if c.vals != nil {
			req.Header["Max-Forwards"] = c.vals
		}
		rr := h.serve(req, "203.0.113.9:5555")
		if rr.Code != c.status {
			t.Errorf("%s Max-Forwards %q: status %d, want %d", c.method, c.vals, rr.Code, c.status)
		}
		forwarded := up.calls() > before
		switch {
		case c.want == "-" && forwarded:
			t.Errorf("%s Max-Forwards %q was forwarded", c.method, c.vals)
		case c.want != "-" && !forwarded:
			t.Errorf("%s Max-Forwards %q was not forwarded", c.method, c.vals)
		case c.want != "-" && up.last(t).Header.Get("Max-Forwards") != c.want:
			t.Errorf("%s Max-Forwards %q arrived as %q, want %q", c.method, c.vals, up.last(t).Header.Get("Max-Forwards"), c.want)
		}
		if len(c.vals) > 0 && c.vals[0] == "0" && c.method == "OPTIONS" && rr.Header().Get("Allow") == "" {
			t.Errorf("OPTIONS Max-Forwards: 0 answered without Allow")
		}
	}
}

// TestEveryProxiedResponseCarriesVia: no response carried Via (RFC 9110
// §7.6.3); the gateway's entry follows the upstream's own.
func TestEveryProxiedResponseCarriesVia(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/via" {
			w.Header().Set("Via", "1.1 upstream-cache")
		}
		_, _ = io.WriteString(w, "ok")
	})
	h := newHarness(t, routes(testRoute(t, "api", up.URL)))
	res := h.do(t, h.newRequest(t, http.MethodGet, "", "/"))
	if got := res.Header.Values("Via"); len(got) != 1 || got[0] != h.srv.viaEntry11 {
		t.Errorf("Via = %q, want [%q]", got, h.srv.viaEntry11)
	}
	res = h.do(t, h.newRequest(t, http.MethodGet, "", "/via"))
	if got := res.Header.Values("Via"); len(got) != 2 || got[0] != "1.1 upstream-cache" || got[1] != h.srv.viaEntry11 {
		t.Errorf("Via = %q, want the upstream's then the gateway's", got)
	}
}

// TestChunkedRequestClosesTheConnection: with both Content-Length and
// Transfer-Encoding: chunked the connection stayed open, so bytes after
// the chunked body were served as a second request (RFC 9112 §6.1). Every
// combination of CL and TE net/http accepts, in every TE spelling it
// takes, closes after the answer, and the smuggled request never reaches
// the upstream; TE spellings it does not take are refused (501/400).
func TestChunkedRequestClosesTheConnection(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, routes(testRoute(t, "api", up.URL)))
	addr := strings.TrimPrefix(h.front.URL, "http://")
	const smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, te := range []string{"chunked", "Chunked", "CHUNKED", " chunked", "chunked ", "gzip, chunked", "chunked, gzip", "identity", "chunked\r\nTransfer-Encoding: chunked"} {
		for _, cl := range []string{"", "Content-Length: 4\r\n", "Content-Length: 0\r\n", "Content-Length: 40\r\n"} {
			for _, order := range []bool{true, false} {
				head := "Transfer-Encoding: " + te + "\r\n" + cl
				if !order {
					head = cl + "Transfer-Encoding: " + te + "\r\n"
				}
				raw := "POST /up HTTP/1.1\r\nHost: x\r\n" + head + "\r\n4\r\nbody\r\n0\r\n\r\n" + smuggled
				res, _, br := rawRequest(t, addr, raw)
				res.Body.Close()
				accepted := res.StatusCode == 200
				if !accepted && res.StatusCode != 501 && res.StatusCode != 400 {
					t.Errorf("TE %q %q: status %d", te, cl, res.StatusCode)
				}
				if accepted && !res.Close {
					t.Errorf("TE %q %q: the connection stays open after a chunked request", te, cl)
				}
				if second, err := http.ReadResponse(br, nil); err == nil {
					second.Body.Close()
					t.Errorf("TE %q %q: the bytes after the body were answered as a second request (%d)", te, cl, second.StatusCode)
				}
			}
		}
	}
	up.mu.Lock()
	for _, c := range up.seen {
		if strings.Contains(c.RequestURI, "smuggled") {
			t.Errorf("a smuggled request reached the upstream: %s", c.RequestURI)
		}
	}
	up.mu.Unlock()
	// A Content-Length request keeps its connection (keep-alive works).
	res, _, br := rawRequest(t, addr, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody"+smuggled)
	res.Body.Close()
	if res.Close {
		t.Error("a Content-Length request closed its connection")
	}
	if second, err := http.ReadResponse(br, nil); err != nil {
		t.Errorf("keep-alive after Content-Length: %v", err)
	} else {
		second.Body.Close()
	}
}

// isTrustedRewrite reports the family members the gateway sets itself on
// every forwarded request, whoever the peer (setForwarded): from a
// trusted proxy their value is the gateway's, not the header as sent.
func isTrustedRewrite(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "X-Real-Ip", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto":
		return true
	}
	return false
}

// TestForwardedIdentityFamilyIsDocumented: docs/edge.md names every exact
// member and every prefix of the family, so the documented family is the
// one the gateway removes (a member added to proxy.go without its line
// in the docs, or the reverse, fails here).
func TestForwardedIdentityFamilyIsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/edge.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "<!-- forwarded-identity-family -->")
	end := strings.Index(text, "<!-- /forwarded-identity-family -->")
	if start < 0 || end < start {
		t.Fatal("docs/edge.md has no forwarded-identity-family section")
	}
	section := strings.ToLower(text[start:end])
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z0-9-]+)(\\*?)`").FindAllStringSubmatch(section, -1) {
		documented[m[1]+m[2]] = true
	}
	want := map[string]bool{}
	for _, name := range clientClaimHeaders {
		want[name] = true
	}
	for _, p := range clientClaimPrefixes {
		want[p+"*"] = true
	}
	for k := range want {
		if !documented[k] {
			t.Errorf("docs/edge.md does not document the family member `%s`", k)
		}
	}
	for k := range documented {
		if !want[k] {
			t.Errorf("docs/edge.md documents `%s`, which the gateway does not remove", k)
		}
	}
}

// TestProxyHeaderNeverReachesTheUpstream (httpoxy, attack pass A51): a
// client's Proxy header, from an untrusted or a trusted peer, in any
// case (net/http canonicalizes the name it reads), is not forwarded (a CGI upstream reads it as HTTP_PROXY).
func TestProxyHeaderNeverReachesTheUpstream(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Routes: []Route{testRoute(t, "api", up.URL)}})
	for _, peer := range []string{"203.0.113.9:5555", "10.0.0.1:80"} {
		for _, k := range []string{"Proxy", "proxy", "PROXY"} {
			req := h.newRequest(t, http.MethodGet, "", "/")
			req.Header.Set(k, "http://127.0.0.1:1") // as net/http reads any case off the wire
			if rr := h.serve(req, peer); rr.Code != 200 {
				t.Fatalf("status %d", rr.Code)
			}
			for gk := range up.last(t).Header {
				if strings.EqualFold(gk, "proxy") {
					t.Errorf("peer %s: %q reached the upstream", peer, k)
				}
			}
		}
	}
}

// Fresh attack pass 19 A51: a chunked request announcing trailers had
// them forwarded to the upstream after the body, past every header
// policy (X-Forwarded-For, Authorization, Remote-User, an olp_auth cookie
// on a route that forwards none). No request trailer reaches the
// upstream, announced or not, on a chunked body of any size; the body
// does, whole.
func TestRequestTrailersNeverReachTheUpstream(t *testing.T) {
	t.Parallel()
	type seen struct {
		body    string
		trailer http.Header
	}
	got := make(chan seen, 16)
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{string(b), r.Trailer.Clone()}
	})
	h := newHarness(t, routes(testRoute(t, "api", up.URL)))
	addr := strings.TrimPrefix(h.front.URL, "http://")
	trailers := "X-Forwarded-For: 198.51.100.7\r\nAuthorization: Bearer stolen\r\nRemote-User: admin\r\nCookie: olp_auth=x\r\nX-Custom: y\r\n"
	for _, announce := range []string{"Trailer: X-Forwarded-For, Authorization, Remote-User, Cookie, X-Custom\r\n", "Trailer: x-custom\r\n", ""} {
		for _, body := range []string{"", "body", strings.Repeat("b", 40000)} {
			chunks := "0\r\n"
			if body != "" {
				chunks = fmt.Sprintf("%x\r\n%s\r\n0\r\n", len(body), body)
			}
			raw := "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n" + announce + "\r\n" + chunks + trailers + "\r\n"
			res, _, _ := rawRequest(t, addr, raw)
			res.Body.Close()
			if res.StatusCode != 200 {
				t.Fatalf("%q, %d bytes: status %d", announce, len(body), res.StatusCode)
			}
			s := <-got
			if len(s.trailer) != 0 {
				t.Errorf("%q, %d bytes: the upstream got request trailers %v", announce, len(body), s.trailer)
			}
			if s.body != body {
				t.Errorf("%q: the upstream got %d bytes of body, want %d", announce, len(s.body), len(body))
			}
			if v := up.last(t).Header.Get("Trailer"); v != "" {
				t.Errorf("%q: the upstream got Trailer: %q", announce, v)
			}
		}
	}
}

// Fresh attack pass 19 A52: "GET /x?a=1#frag" reached the upstream with
// "#frag" in its target (net/http reads it into the query). A request
// target holding '#' is refused 400 before routing, in every form and
// place (path, query, absolute-form), and never reaches the upstream.
func TestRequestTargetWithAFragmentIsRefused(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, routes(testRoute(t, "api", up.URL)))
	addr := strings.TrimPrefix(h.front.URL, "http://")
	for _, target := range []string{"/x#frag", "/x?a=1#frag", "/#", "/x?#", "/x#a?b=1", "http://x/y#frag"} {
		res, _, _ := rawRequest(t, addr, "GET "+target+" HTTP/1.1\r\nHost: x\r\n\r\n")
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s: status %d, want 400", target, res.StatusCode)
		}
	}
	if n := up.calls(); n != 0 {
		t.Errorf("%d requests with a fragment reached the upstream", n)
	}
	res, _, _ := rawRequest(t, addr, "GET /x?a=%23frag HTTP/1.1\r\nHost: x\r\n\r\n")
	res.Body.Close()
	if res.StatusCode != 200 || up.last(t).RequestURI != "/x?a=%23frag" {
		t.Errorf("an escaped %%23 in the query: status %d, want it forwarded as is", res.StatusCode)
	}
}

// Fresh attack pass 19 A58: a client's X-Borda-Source and X-Borda-Replay
// reached the upstream, where the forwarder's own name the source of an
// event and a replay. Every header in the gateway's namespace, in any
// case and with '_' for '-', is dropped from every peer, a trusted proxy
// included.
func TestClientHeadersInTheGatewaysNamespaceNeverReachTheUpstream(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, Options{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		Routes:         []Route{testRoute(t, "api", up.URL)},
	})
	for _, peer := range []string{"203.0.113.9:5555", "10.0.0.1:80"} {
		for _, k := range []string{"X-Borda-Source", "x-borda-replay", "X-BORDA-REPLAY-FORCE", "X_Borda_Source", "X-Borda-Would-Block", "X-Borda-"} {
			req := h.newRequest(t, http.MethodGet, "", "/")
			req.Header[k] = []string{"evolution"}
			req.Header.Set("X-Bordas", "kept")
			if rr := h.serve(req, peer); rr.Code != 200 {
				t.Fatalf("%s from %s: status %d", k, peer, rr.Code)
			}
			got := up.last(t).Header
			for gk, vs := range got {
				if isOwnHeader(gk) && slices.Contains(vs, "evolution") {
					t.Errorf("%s from %s reached the upstream as %s: %q", k, peer, gk, vs)
				}
			}
			if got.Get("X-Bordas") != "kept" {
				t.Errorf("X-Bordas (not the namespace) was dropped along with %s", k)
			}
		}
	}
}
