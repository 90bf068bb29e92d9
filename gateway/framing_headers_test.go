package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// forwardedIdentityFamily is every header of the untrusted
// forwarded-identity family (issue 22 item 5): scheme/host overrides,
// authenticating-proxy identity, Envoy's internal headers.
var forwardedIdentityFamily = []string{
	"X-Scheme", "X-Url-Scheme", "Front-End-Https", "X-Host", "X-ProxyUser-Ip", "Remote-User",
	"X-Remote-User", "X-Envoy-External-Address", "X-Envoy-Internal", "X-Envoy-Original-Path",
	"X-Envoy-Decorator-Operation", "X-Original-Host", "X-Original-Uri", "X-Http-Method-Override",
	"X-Auth-Request-User", "X-Auth-Request-Email", "X-Goog-Authenticated-User-Email",
	"X-Ms-Client-Principal-Name", "X-Amzn-Oidc-Identity", "X-Webauth-User", "X-Forwarded-Protocol",
	"Cf-Visitor", "X-Ssl-Client-Verify", "Ssl-Client-Cert", "X-Arr-Ssl", "X-Client-Cert",
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
	cfg := parseConfig(t, `
headers_with_underscores: allow
trusted_proxies: ["10.0.0.0/8"]
routes:
  - name: api
    upstream: "{up}"
`, nil, map[string]string{"up": up.URL})
	h := newHarness(t, cfg)
	for _, name := range forwardedIdentityFamily {
		for _, k := range spellings(name) {
			req := h.newRequest(t, http.MethodGet, "", "/")
			req.Header[k] = []string{"https"}
			req.Header.Set("X-Kept", "yes")
			if rr := h.serve(req, "203.0.113.9:5555"); rr.Code != 200 {
				t.Fatalf("%s: status %d", k, rr.Code)
			}
			got := up.last(t).Header
			if _, ok := got[k]; ok {
				t.Errorf("untrusted client's %q reached the upstream", k)
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
		if v := up.last(t).Header.Get(name); v != "https" {
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
	h := newHarness(t, parseConfig(t, "routes:\n  - name: api\n    upstream: \"{up}\"\n", nil, map[string]string{"up": up.URL}))
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
	h := newHarness(t, parseConfig(t, "routes:\n  - name: api\n    upstream: \"{up}\"\n", nil, map[string]string{"up": up.URL}))
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
	h := newHarness(t, parseConfig(t, "routes:\n  - name: api\n    upstream: \"{up}\"\n", nil, map[string]string{"up": up.URL}))
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
	h := newHarness(t, parseConfig(t, "routes:\n  - name: api\n    upstream: \"{up}\"\n", nil, map[string]string{"up": up.URL}))
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
