package e2e

// Hostile inputs against routing and what reaches the upstream
// (docs/edge.md, "Paths", "Forwarded headers", "Streams and upgrades"):
// encoded slashes and other spellings of ".." that walk out of a route's
// prefix and upstream base path, h2c upgrades that would tunnel past the
// gateway, client-IP headers an upstream may trust, and two
// Authorization lines.

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// pathServe is a `borda serve` config with /api (strip_prefix) and /full
// (no strip) on api's base path /v1, and a catch-all route "admin" to
// admin, limited to one request a minute per IP; top is top-level YAML.
func pathServe(api, admin, top string) string {
	return `environment: development
listen: "{LISTEN}"
admin_listen: "{ADMIN}"
redis:
  url: ""
amqp:
  url: "amqp://guest:guest@127.0.0.1:1/"
telemetry:
  enabled: false
` + top + `
rate_limits:
  rules:
    - {name: adminonce, scope: ip, limit: 1, window: 1m, routes: [admin]}
routes:
  - name: api
    path_prefix: /api
    strip_prefix: true
    upstream: "` + api + `/v1"
  - name: full
    path_prefix: /full
    upstream: "` + api + `/v1"
  - name: admin
    upstream: "` + admin + `"
`
}

// pathGet sends "GET target" with the given header lines, exactly as
// written, and closes the connection.
func pathGet(t *testing.T, base, target string, headers ...string) (*http.Response, string) {
	t.Helper()
	raw := "GET " + target + " HTTP/1.1\r\nHost: portal.example.org\r\nConnection: close\r\n"
	for _, h := range headers {
		raw += h + "\r\n"
	}
	resp, body, err := rawExchange(t, base, raw+"\r\n", 10*time.Second)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	return resp, body
}

// pathWalkOuts are spellings of /api/../admin (and /full/../admin) that a
// decoding, ;param-stripping or twice-decoding upstream resolves to
// /admin, outside the route's prefix and its upstream's base path /v1.
var pathWalkOuts = []string{
	"/api/..%2fadmin", "/api/..%2Fadmin", "/api/x%2f..%2f..%2fadmin", "/api/..%5cadmin", "/api/..%5Cadmin",
	`/api/..\admin`, "/api/%2e%2e%2fadmin", "/api/.%2e%2Fadmin", "/api/..%252fadmin", "/api/%252e%252e/admin",
	"/api/..;/admin", "/api/%2e%2e;x/admin", "/api/a%00/../admin", "/full/..%2fadmin", "/full/x%2f..%2f..%2fadmin",
	"/full/..;/admin", `/full\..\admin`,
}

// GET /api/..%2fadmin on a strip_prefix route to http://up/v1 reached the
// upstream as /v1/..%2fadmin, nginx's /admin; the same with x%2f..%2f..,
// backslashes, double encoding, ;params and through a non-stripping
// route. By default each is a 400 problem and no upstream sees it.
func TestHostilePathEscapedSlashCannotLeaveUpstreamBase(t *testing.T) {
	api, admin := recordingUpstream(t), recordingUpstream(t)
	p := startServe(t, pathServe(api.URL, admin.URL, ""))
	for _, target := range pathWalkOuts {
		resp, body := pathGet(t, p.public, target)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "Endereço inválido") {
			t.Errorf("%s: got %d %q, want the 400 problem", target, resp.StatusCode, body)
		}
	}
	for _, r := range append(api.requests(), admin.requests()...) {
		t.Errorf("an upstream saw %q", r.RequestURI)
	}
	// Ordinary paths still pass, escapes kept.
	resp, _ := pathGet(t, p.public, "/api/alunos/a%20b")
	if got := api.requests(); resp.StatusCode != 200 || len(got) != 1 || got[0].RequestURI != "/v1/alunos/a%20b" {
		t.Fatalf("/api/alunos/a%%20b: %d, upstream saw %+v", resp.StatusCode, got)
	}
}

// With escaped_slashes: unescape the decoded path is routed: /api/..%2fadmin
// is the admin route's /admin, counted and limited there (its one request
// a minute), never the api upstream's /v1/..%2fadmin.
func TestHostilePathUnescapedSlashIsRoutedAndLimitedAsItsRealRoute(t *testing.T) {
	api, admin := recordingUpstream(t), recordingUpstream(t)
	p := startServe(t, pathServe(api.URL, admin.URL, "escaped_slashes: unescape\n"))
	resp, _ := pathGet(t, p.public, "/api/..%2fadmin")
	if resp.StatusCode != 200 {
		t.Fatalf("first: status %d", resp.StatusCode)
	}
	if got := admin.requests(); len(got) != 1 || got[0].RequestURI != "/admin" {
		t.Fatalf("admin upstream saw %+v, want /admin", got)
	}
	for _, target := range []string{`/api/..\admin`, "/full/x%2F..%2F..%5cadmin"} {
		if resp, _ := pathGet(t, p.public, target); resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("%s: status %d, want 429 from the admin route's limit", target, resp.StatusCode)
		}
	}
	if got := api.requests(); len(got) != 0 {
		t.Fatalf("api upstream saw %+v", got)
	}
	m, err := http.Get(p.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Body.Close()
	body, _ := io.ReadAll(m.Body)
	if !strings.Contains(string(body), `borda_http_requests_total{code="200",method="GET",route="admin"} 1`) {
		t.Fatalf("the 200 is not counted under route admin:\n%s", grepLines(string(body), "borda_http_requests_total"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// pathH2CUpstream stands in for a lenient upstream that accepts a loose
// h2c upgrade (Upgrade: h2c with or without HTTP2-Settings in
// Connection) and then owns the connection; with always it switches on
// every request. It records the headers of each request.
type pathH2CUpstream struct {
	ln     net.Listener
	always bool
	mu     sync.Mutex
	seen   []http.Header
	wg     sync.WaitGroup
}

func newPathH2CUpstream(t *testing.T, always bool) *pathH2CUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &pathH2CUpstream{ln: ln, always: always}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for i := 0; i < 200; i++ { // bounded
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.wg.Add(1)
			go u.serve(c)
		}
	}()
	t.Cleanup(func() { ln.Close(); u.wg.Wait() })
	return u
}

func (u *pathH2CUpstream) serve(c net.Conn) {
	defer u.wg.Done()
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return
	}
	u.mu.Lock()
	u.seen = append(u.seen, req.Header.Clone())
	u.mu.Unlock()
	if u.always || strings.Contains(strings.ToLower(strings.Join(req.Header["Upgrade"], ",")), "h2c") {
		// A real h2c server would now read the client preface and serve
		// HTTP/2 streams for any path; the marker shows the tunnel.
		_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\nH2C-TUNNEL-OPEN")
		return
	}
	_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nplain")
}

func (u *pathH2CUpstream) headers() []http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]http.Header(nil), u.seen...)
}

// A client that leaves HTTP2-Settings out of Connection got a 101 from a
// lenient upstream and then spoke HTTP/2 to it directly (any path,
// spoofed X-Forwarded-For, one rate-limit decision for any number of
// requests). Now the upstream sees a plain request without Upgrade or
// HTTP2-Settings and the client gets its plain answer.
func TestHostilePathH2CUpgradeIsNotTunnelled(t *testing.T) {
	up := newPathH2CUpstream(t, false)
	p := startServe(t, minimalServe("http://"+up.ln.Addr().String(), "", ""))
	for _, hs := range [][]string{
		{"Connection: Upgrade", "Upgrade: h2c", "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA"},
		{"Connection: Upgrade, HTTP2-Settings", "Upgrade: h2c", "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA"},
		{"Connection: upgrade", "Upgrade: H2C"},
		{"Connection: Upgrade", "Upgrade: websocket, h2c"},
	} {
		n := len(up.headers())
		resp, body := pathGet(t, p.public, "/anything", hs...)
		if resp.StatusCode == http.StatusSwitchingProtocols || strings.Contains(body, "H2C-TUNNEL") {
			t.Errorf("%q: tunnelled: %d %q", hs, resp.StatusCode, body)
			continue
		}
		seen := up.headers()
		if len(seen) != n+1 {
			t.Errorf("%q: upstream saw %d requests, want 1", hs, len(seen)-n)
			continue
		}
		if h := seen[n]; h.Get("Upgrade") != "" || h.Get("Http2-Settings") != "" {
			t.Errorf("%q: upstream saw Upgrade %q HTTP2-Settings %q", hs, h.Get("Upgrade"), h.Get("Http2-Settings"))
		}
	}
}

// An upstream that switches protocols although no allowed upgrade was
// asked for gets a 502, not a tunnel.
func TestHostilePathUnsolicitedSwitchIsBadGateway(t *testing.T) {
	up := newPathH2CUpstream(t, true)
	p := startServe(t, minimalServe("http://"+up.ln.Addr().String(), "", ""))
	resp, body := pathGet(t, p.public, "/", "Connection: Upgrade", "Upgrade: h2c")
	if resp.StatusCode != http.StatusBadGateway || strings.Contains(body, "H2C-TUNNEL") {
		t.Fatalf("got %d %q, want 502", resp.StatusCode, body)
	}
}

// CF-Connecting-IP, True-Client-IP, X-Client-IP and their kin from an
// untrusted client reached the upstream unchanged.
func TestHostilePathSpoofedClientIPHeadersAreRemoved(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "", ""))
	names := []string{"CF-Connecting-IP", "True-Client-IP", "X-Client-IP", "Fastly-Client-IP",
		"X-Cluster-Client-IP", "X-Original-Forwarded-For", "Client-IP", "X-Original-URL", "X-Rewrite-URL"}
	var hs []string
	for _, n := range names {
		hs = append(hs, n+": 198.51.100.1")
	}
	if resp, _ := pathGet(t, p.public, "/x", hs...); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	got := up.requests()
	if len(got) != 1 {
		t.Fatalf("upstream saw %d requests", len(got))
	}
	for _, n := range names {
		if v := got[0].Header.Get(n); v != "" {
			t.Errorf("%s: %q reached the upstream", n, v)
		}
	}
	if v := got[0].Header.Get("X-Real-Ip"); v != "127.0.0.1" {
		t.Errorf("X-Real-IP = %q, want the peer", v)
	}
}

// Two Authorization lines: identity verified the first and the upstream
// got both. Now a 400 and nothing reaches the upstream.
func TestHostilePathTwoAuthorizationLinesAreRefused(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "", ""))
	resp, body := pathGet(t, p.public, "/x", "Authorization: Bearer first.token.x", "Authorization: Bearer second.token.y")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "Authorization") {
		t.Fatalf("got %d %q, want 400", resp.StatusCode, body)
	}
	if got := up.requests(); len(got) != 0 {
		t.Fatalf("upstream saw %+v", got)
	}
}
