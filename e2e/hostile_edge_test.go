package e2e

// Hostile clients against the edge's connection caps, framing and
// forwarded headers (issue 22 items 3-5; docs/security.md, sections
// framing, resources and admin), each against the real binary.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// openIdle opens n connections to base and leaves them idle (nothing
// sent), closed at the end of the test.
func openIdle(t *testing.T, base string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := net.DialTimeout("tcp", hostPort(base), 2*time.Second)
		if err != nil {
			t.Fatalf("dial %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	return conns
}

// TestHostileAdminFloodCannotStarveThePublicListener: 20 000 idle
// connections to the admin port exhausted the process's descriptors and
// the public listener stopped accepting. With admin_max_connections 8,
// 300 connections to the admin port leave the public listener serving,
// and the admin port still answers /healthz (its idle connections are
// reclaimed or refused, never a silent queue for the probe).
func TestHostileAdminFloodCannotStarveThePublicListener(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "", "server:\n  admin_max_connections: 8\n"))
	flood := openIdle(t, p.admin, 300)
	for i := range 3 {
		if code, _, _ := serverRaw(t, p.public, "GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 5*time.Second); code != 200 {
			t.Fatalf("public request %d during the admin flood: %d", i, code)
		}
	}
	// A probe refused while the flood is fresh is answered 503 or closed
	// (never left waiting); once the flood's connections have been silent
	// for a second they are reclaimed and the probe's retry is served.
	var code int
	for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if code, _, _ = serverRaw(t, p.admin, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", 3*time.Second); code == 200 {
			break
		}
	}
	if code != 200 {
		t.Fatalf("admin /healthz during the flood: %d (0: closed)", code)
	}
	// At most 8 of the flood are served: the rest were refused with 503
	// or closed (a read sees the answer or EOF, not a hang).
	open := 0
	for _, c := range flood[:50] {
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil && isNetTimeout(err) {
			open++
		}
	}
	if open > 8 {
		t.Errorf("%d of the first 50 flood connections are still held open, over admin_max_connections 8", open)
	}
}

// TestHostileIdleKeepAlivesOfOneClientDoNotLockOutOthers: one client
// holding server.max_connections idle keep-alive connections kept
// provider webhooks out. With max_connections 20, the flooder's 20 idle
// keep-alives do not stop the next client, and past
// max_connections_per_ip its busy connections get 503, counted.
func TestHostileIdleKeepAlivesOfOneClientDoNotLockOutOthers(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "", "server:\n  max_connections: 20\n  max_connections_per_ip: 10\n  body_timeout: 30s\n"))
	for range 20 {
		c, err := net.DialTimeout("tcp", hostPort(p.public), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(c, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	if code, _, _ := serverRaw(t, p.public, "GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 5*time.Second); code != 200 {
		t.Fatalf("a client after 20 idle keep-alives: %d (0: no answer)", code)
	}
	for range 10 {
		c, err := net.DialTimeout("tcp", hostPort(p.public), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_, _ = io.WriteString(c, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nx")
	}
	var code int
	var body string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if code, body, _ = serverRaw(t, p.public, "GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 5*time.Second); code == 503 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code != 503 || !strings.Contains(body, "Conexões demais") {
		t.Fatalf("over the per-IP cap with every connection busy: %d %q, want 503 in PT-BR", code, body)
	}
	if v := serverMetric(t, p.admin, `borda_http_connections_refused_total{listener="public",reason="per_ip"}`); v < 1 {
		t.Errorf("borda_http_connections_refused_total = %v", v)
	}
}

// TestHostileChunkedWithContentLengthSmugglesNoSecondRequest: CL + TE
// kept the connection open, so bytes after the chunked body were served
// as a second request.
func TestHostileChunkedWithContentLengthSmugglesNoSecondRequest(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "", ""))
	for _, te := range []string{"chunked", "Chunked", " chunked"} {
		raw := "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: " + te + "\r\n\r\n4\r\nbody\r\n0\r\n\r\n" +
			"GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n"
		code, _, closed := serverRaw(t, p.public, raw, 5*time.Second)
		if code != 200 || !closed {
			t.Errorf("TE %q: status %d, closed %v; want 200 and the connection closed", te, code, closed)
		}
	}
	for _, r := range up.requests() {
		if strings.Contains(r.RequestURI, "smuggled") {
			t.Errorf("the smuggled request reached the upstream")
		}
	}
}

// TestHostileForwardedIdentityHeadersAndMaxForwards: X-Scheme: https
// (Tornado xheaders) and the rest of the family reached the upstream;
// Max-Forwards 0 was forwarded, 5 arrived as 5; no response had Via.
func TestHostileForwardedIdentityHeadersAndMaxForwards(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "", ""))
	family := []string{"X-Scheme", "X-Url-Scheme", "Front-End-Https", "X-Host", "X-ProxyUser-Ip", "X-Envoy-Internal", "Remote-User", "x_scheme",
		// Platform identity headers (A30).
		"Fly-Client-IP", "Fly-Forwarded-Proto", "Cf-Access-Authenticated-User-Email", "cf-access-jwt-assertion",
		"CF-Connecting-IPv6", "True-Client-IP", "X-Pomerium-Jwt-Assertion", "X-Vercel-Forwarded-For",
		"X-Client-Dn", "X-SSL-Client-Verify", "X-Client-Cert", "X-Forwarded-Client-Cert", "Ssl-Client-Cert",
		"X-Amzn-Oidc-Data", "X-Goog-Authenticated-User-Email", "X-MS-CLIENT-PRINCIPAL-NAME", "Tailscale-User-Login",
		"X-Auth-Request-Email", "X-Forwarded-User", "X-Forwarded-Email", "X-Forwarded-Groups",
		"X-Forwarded-Preferred-Username", "X-Remote-User", "X-Remote-Group", "X-WEBAUTH-USER", "x-webauth-email",
		// httpoxy (A51).
		"proxy",
		// Sendfile control (fresh attack pass 15 X02: Rack's
		// X-Accel-Redirect to a client-chosen path, CVE-2025-61780).
		"X-Sendfile-Type", "X-Accel-Mapping", "X-Sendfile", "X-Lighttpd-Send-File", "x_accel_redirect"}
	var head strings.Builder
	for _, k := range family {
		fmt.Fprintf(&head, "%s: https\r\n", k)
	}
	resp, _, err := rawExchange(t, p.public, "OPTIONS /a HTTP/1.1\r\nHost: a\r\nMax-Forwards: 5\r\n"+head.String()+"Connection: close\r\n\r\n", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("Via") == "" {
		t.Error("the response carries no Via")
	}
	seen := up.requests()
	if len(seen) != 1 {
		t.Fatalf("upstream saw %d requests", len(seen))
	}
	for _, k := range family {
		norm := strings.ReplaceAll(strings.ToLower(k), "_", "-")
		for got := range seen[0].Header {
			if strings.ReplaceAll(strings.ToLower(got), "_", "-") == norm {
				t.Errorf("%s reached the upstream as %s", k, got)
			}
		}
	}
	if v := seen[0].Header.Get("Max-Forwards"); v != "4" {
		t.Errorf("Max-Forwards arrived as %q, want 4", v)
	}
	for _, m := range []string{"OPTIONS", "TRACE"} {
		resp, _, err := rawExchange(t, p.public, m+" /a HTTP/1.1\r\nHost: a\r\nMax-Forwards: 0\r\nConnection: close\r\n\r\n", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if m == "OPTIONS" && resp.StatusCode != 200 || m == "TRACE" && resp.StatusCode != 405 {
			t.Errorf("%s Max-Forwards 0: %d", m, resp.StatusCode)
		}
	}
	if n := len(up.requests()); n != 1 {
		t.Errorf("Max-Forwards: 0 was forwarded (%d upstream requests)", n)
	}
}

// TestHostileAdminPlaneFromLoopbackAndWithToken: the admin plane's
// loopback rule through the real binary (every peer here is loopback:
// the non-loopback peers are adminui's TestAdminPlaneNeedsTheTokenUnlessLoopback).
// 127.0.0.2 is loopback too; probes and /metrics answer anyone.
func TestHostileAdminPlaneFromLoopbackAndWithToken(t *testing.T) {
	p := startServe(t, minimalServe("http://127.0.0.1:1", "", ""), "ADMIN_TOKEN=e2e-admin-token")
	port := p.admin[strings.LastIndexByte(p.admin, ':')+1:]
	for _, path := range []string{"/ui", "/healthz", "/metrics"} {
		for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port, ""} {
			hostLine := "Host: " + host + "\r\n"
			if host == "" {
				hostLine = "Host:\r\n"
			}
			code, _, _ := serverRaw(t, p.admin, "GET "+path+" HTTP/1.1\r\n"+hostLine+"Connection: close\r\n\r\n", 5*time.Second)
			if code == 401 || code == 403 || code == 0 {
				t.Errorf("loopback %s Host %q: %d", path, host, code)
			}
		}
	}
	// From 127.0.0.2 (still loopback), dialled from that source address.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 2 * time.Second}
	c, err := d.Dial("tcp", hostPort(p.admin))
	if err != nil {
		t.Skipf("cannot dial from 127.0.0.2: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, "GET /ui HTTP/1.1\r\nHost: 127.0.0.1:"+port+"\r\nConnection: close\r\n\r\n")
	if code, _, _ := serverReadAnswer(c); code != 200 {
		t.Errorf("/ui from 127.0.0.2: %d", code)
	}
}

// TestHostileDNSRebindingReadsMetricsAndReadyz (issue 22 B10): /metrics
// and /readyz on the admin listener answered any Host, so a DNS-rebinding
// page (evil.example resolving to 127.0.0.1) in an operator's browser
// read them. Through the real binary: every admin path with a DNS-name
// Host is 421 unless it carries the token; by IP or localhost (a
// Prometheus scrape by pod IP) it answers.
func TestHostileDNSRebindingReadsMetricsAndReadyz(t *testing.T) {
	p := startServe(t, minimalServe("http://127.0.0.1:1", "", ""), "ADMIN_TOKEN=e2e-rebind-token")
	port := p.admin[strings.LastIndexByte(p.admin, ':')+1:]
	for _, path := range []string{"/metrics", "/readyz", "/healthz", "/ui"} {
		for _, host := range []string{"evil.example:" + port, "127.0.0.1.nip.io:" + port, "localhost.evil.example"} {
			code, _, _ := serverRaw(t, p.admin, "GET "+path+" HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n", 5*time.Second)
			if code != http.StatusMisdirectedRequest {
				t.Errorf("%s with Host %q: %d, want 421", path, host, code)
			}
			if path == "/ui" {
				continue // the page refuses a DNS name even with the token (adminui hostGuard)
			}
			code, _, _ = serverRaw(t, p.admin, "GET "+path+" HTTP/1.1\r\nHost: "+host+"\r\nAuthorization: Bearer e2e-rebind-token\r\nConnection: close\r\n\r\n", 5*time.Second)
			if code == http.StatusMisdirectedRequest || code == 401 || code == 0 {
				t.Errorf("%s with Host %q and the token: %d", path, host, code)
			}
		}
		if path == "/ui" {
			continue
		}
		for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port} {
			code, _, _ := serverRaw(t, p.admin, "GET "+path+" HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n", 5*time.Second)
			if code != http.StatusOK && !(path == "/readyz" && code == http.StatusServiceUnavailable) {
				t.Errorf("%s with Host %q: %d, want it answered", path, host, code)
			}
		}
	}
}

// TestHostileOtherGatewaysIdentityHeadersReachTheUpstream (attack pass
// A01): identity headers of other proxies and gateways (Kong, Tailscale,
// App Engine, nginx mTLS, WebLogic, Envoy jwt_authn) reached the upstream
// from an untrusted client. Through the real binary, the attacker's exact
// request: none arrives, ordinary headers do.
func TestHostileOtherGatewaysIdentityHeadersReachTheUpstream(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "", ""))
	sent := []string{"X-Consumer-Username", "X-Consumer-Id", "X-Credential-Identifier", "X-Userinfo", "X-Jwt-Payload",
		"Tailscale-User-Login", "X-Tailscale-User-Login", "X-Appengine-User-Email", "X-Webauth-Email", "X-Authenticated-Email",
		"X-Remote-Email", "X-Auth-Email", "X-Token-Subject", "X-User-Id", "X-Usuario-Id", "X_Escola_Id", "X-Client-Verify", "X-Client-S-Dn",
		"Proxy-Client-IP", "WL-Proxy-Client-IP", "X-Original-Remote-Addr", "X-Original-Proto", "X-Is-Https", "Https",
		"WL-Proxy-SSL", "WL-Proxy-Client-Cert", "Incap-Client-IP", "X-Sucuri-ClientIP", "Cdn-Src-Ip", "X-Middleware-Subrequest", // A003
		"X-Goog-Iap-Jwt-Assertion", "X-Jwt-Claim-Sub"}
	var head strings.Builder
	for _, k := range sent {
		fmt.Fprintf(&head, "%s: forged\r\n", k)
	}
	resp, _, err := rawExchange(t, p.public, "GET /x HTTP/1.1\r\nHost: a\r\nX-Kept: yes\r\n"+head.String()+"Connection: close\r\n\r\n", 5*time.Second)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	seen := up.requests()
	if len(seen) != 1 || seen[0].Header.Get("X-Kept") != "yes" {
		t.Fatalf("upstream saw %d requests", len(seen))
	}
	for k, vs := range seen[0].Header {
		for _, v := range vs {
			if v == "forged" {
				t.Errorf("%s reached the upstream", k)
			}
		}
	}
}
