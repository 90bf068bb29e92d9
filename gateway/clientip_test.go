package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func TestClientIP(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	xff := &clientIP{trusted: trusted, v6Bits: 64}
	real := &clientIP{trusted: trusted, header: "X-Real-Ip", v6Bits: 64}
	cf := &clientIP{trusted: trusted, header: "Cf-Connecting-Ip", v6Bits: 64}
	tests := []struct {
		name     string
		c        *clientIP
		peer     string
		headers  map[string][]string
		want     string
		wantTrst bool
	}{
		{"untrusted peer ignores headers", xff, "203.0.113.9:1", map[string][]string{"X-Forwarded-For": {"1.1.1.1"}}, "203.0.113.9", false},
		{"untrusted peer ignores X-Real-IP", real, "203.0.113.9:1", map[string][]string{"X-Real-Ip": {"1.1.1.1"}}, "203.0.113.9", false},
		{"trusted: rightmost untrusted", xff, "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"6.6.6.6, 198.51.100.1, 10.0.0.7"}}, "198.51.100.1", true},
		{"trusted: several XFF lines", xff, "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"6.6.6.6", "198.51.100.2, 10.9.9.9"}}, "198.51.100.2", true},
		{"trusted: all trusted → leftmost", xff, "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"10.1.1.1, 10.2.2.2"}}, "10.1.1.1", true},
		{"trusted: garbage stops the walk", xff, "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"198.51.100.1, garbage, 10.2.2.2"}}, "10.2.2.2", true},
		{"trusted: no XFF → peer", xff, "10.0.0.1:1", nil, "10.0.0.1", true},
		{"trusted: entry with port", xff, "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"[2001:db8::5]:443"}}, "2001:db8::5", true},
		{"trusted: mapped entry", xff, "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"::ffff:198.51.100.3"}}, "198.51.100.3", true},
		{"X-Real-IP from trusted", real, "10.0.0.1:1", map[string][]string{"X-Real-Ip": {" 198.51.100.4 "}}, "198.51.100.4", true},
		{"bad X-Real-IP falls back to XFF", real, "10.0.0.1:1", map[string][]string{"X-Real-Ip": {"nope"}, "X-Forwarded-For": {"198.51.100.5"}}, "198.51.100.5", true},
		{"two CF headers are not believed", cf, "10.0.0.1:1", map[string][]string{"Cf-Connecting-Ip": {"1.1.1.1", "2.2.2.2"}}, "10.0.0.1", true},
		{"CF-Connecting-IP", cf, "10.0.0.1:1", map[string][]string{"Cf-Connecting-Ip": {"2001:db8:1:2::9"}}, "2001:db8:1:2::9", true},
		{"mapped peer", xff, "[::ffff:10.0.0.1]:1", map[string][]string{"X-Forwarded-For": {"198.51.100.6"}}, "198.51.100.6", true},
		{"zone dropped", xff, "[fe80::1%eth0]:1", nil, "fe80::1", false},
		{"trusted v6 proxy", xff, "[2001:db8:ffff::1]:1", map[string][]string{"X-Forwarded-For": {"2001:db8:1:2::1"}}, "2001:db8:1:2::1", true},
		{"trusted: empty first entry", xff, "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {",198.51.100.8"}}, "198.51.100.8", true},
		{"trusted: empty entries between", xff, "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"198.51.100.9, ,10.0.0.3,"}}, "198.51.100.9", true},
		{"bare IPv4 peer", xff, "10.0.0.1", map[string][]string{"X-Forwarded-For": {"198.51.100.10"}}, "198.51.100.10", true},
		{"bare IPv6 peer", xff, "2001:db8:ffff::2", map[string][]string{"X-Forwarded-For": {"198.51.100.11"}}, "198.51.100.11", true},
		{"bracketed peer without a port", xff, "[2001:db8:ffff::3]", map[string][]string{"X-Forwarded-For": {"198.51.100.12"}}, "198.51.100.12", true},
		{"peer with a named port", xff, "10.0.0.1:http", map[string][]string{"X-Forwarded-For": {"198.51.100.13"}}, "198.51.100.13", true},
		{"unparsable peer", xff, "not-an-address", map[string][]string{"X-Forwarded-For": {"198.51.100.14"}}, "invalid IP", false},
	}
	for _, tc := range tests {
		got, trusted := tc.c.resolve(tc.peer, http.Header(tc.headers))
		if got.String() != tc.want || trusted != tc.wantTrst {
			t.Errorf("%s: resolve = %s %v, want %s %v", tc.name, got, trusted, tc.want, tc.wantTrst)
		}
	}
}

func TestClientIPSubject(t *testing.T) {
	t.Parallel()
	c := &clientIP{v6Bits: 64}
	for in, want := range map[string]string{
		"203.0.113.9":          "203.0.113.9",
		"2001:db8:1:2:aaaa::1": "2001:db8:1:2::/64",
		"::ffff:203.0.113.9":   "203.0.113.9",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
	} {
		if got := c.subject(netip.MustParseAddr(in).Unmap()); got != want {
			t.Errorf("subject(%s) = %s, want %s", in, got, want)
		}
	}
	if got := (&clientIP{v6Bits: 48}).subject(netip.MustParseAddr("2001:db8:1:2::1")); got != "2001:db8:1::/48" {
		t.Errorf("/48 subject = %s", got)
	}
	if got := c.subject(netip.Addr{}); got != "unknown" {
		t.Errorf("zero subject = %s", got)
	}
}

func FuzzClientIP(f *testing.F) {
	for _, s := range []string{"1.2.3.4", "1.2.3.4, 10.0.0.1", "garbage,,, ,", "[::1]:80, ::ffff:1.2.3.4", "2001:db8::1%eth0", strings.Repeat("1.1.1.1,", 50)} {
		f.Add("10.0.0.1:1234", s, "198.51.100.1")
		f.Add("203.0.113.9:1", s, "")
	}
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	f.Fuzz(func(t *testing.T, peer, xff, realIP string) {
		for _, c := range []*clientIP{{trusted: trusted, v6Bits: 64}, {trusted: trusted, header: "X-Real-Ip", v6Bits: 56}} {
			h := http.Header{"X-Forwarded-For": {xff}, "X-Real-Ip": {realIP}}
			got, trusted := c.resolve(peer, h)
			peerAddr := parseHostPort(peer)
			if !trusted && got != peerAddr {
				t.Fatalf("untrusted peer %q: client %s, want the peer %s", peer, got, peerAddr)
			}
			if got.Is4In6() || got.Zone() != "" {
				t.Fatalf("client %s not normalized", got)
			}
			s := c.subject(got)
			if got.Is6() && !strings.HasSuffix(s, "/64") && !strings.HasSuffix(s, "/56") {
				t.Fatalf("IPv6 subject %q not grouped", s)
			}
			if strings.ContainsAny(s, " ,\r\n") {
				t.Fatalf("subject %q has separators", s)
			}
		}
	})
}

// CF-Connecting-IP, True-Client-IP, X-Client-IP and the rest of the
// client-IP (and URL override) headers an upstream may trust reached it
// unchanged from an untrusted peer; a trusted proxy's are kept.
func TestClientIPClaimHeadersFromUntrustedPeerAreRemoved(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, Options{
		TrustedProxies:        []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		KeepUnderscoreHeaders: true,
		Routes:                []Route{testRoute(t, "app", up.URL)},
	})
	names := []string{"CF-Connecting-IP", "True-Client-IP", "X-Client-IP", "Fastly-Client-IP",
		"X-Cluster-Client-IP", "X-Original-Forwarded-For", "Client-IP", "X-Forwarded", "Forwarded-For",
		"X-Originating-IP", "X-Remote-IP", "X-Remote-Addr", "X_Client_IP", "true_client_ip",
		"X-Original-URL", "X-Rewrite-URL", "X-Envoy-External-Address"}
	for _, peer := range []string{"203.0.113.7:1234", "10.1.2.3:1234"} {
		req := h.newRequest(t, http.MethodGet, "portal.example.org", "/x")
		for _, n := range names {
			req.Header[n] = []string{"198.51.100.1"}
		}
		if rr := h.serve(req, peer); rr.Code != 200 {
			t.Fatalf("%s: status %d", peer, rr.Code)
		}
		seen := up.last(t).Header
		for _, n := range names {
			_, ok := seen[n]
			if !ok {
				_, ok = seen[http.CanonicalHeaderKey(n)]
			}
			if trusted := strings.HasPrefix(peer, "10."); ok != trusted {
				t.Errorf("peer %s: %s reached the upstream = %v", peer, n, ok)
			}
		}
	}
}

// TestPeerMemoParsesTheConnectionsPeerOnce: the peer of a connection is
// parsed on its first request and reused while RemoteAddr is the same;
// another RemoteAddr (never on one TCP connection) is parsed afresh.
func TestPeerMemoParsesTheConnectionsPeerOnce(t *testing.T) {
	var m peerMemo
	for range 3 {
		if a, s := m.peer("[::ffff:203.0.113.9]:5555"); a != netip.MustParseAddr("203.0.113.9") || s != "203.0.113.9" {
			t.Fatalf("peer = %v %q", a, s)
		}
	}
	first := m.p.Load()
	m.peer("[::ffff:203.0.113.9]:5555")
	if m.p.Load() != first {
		t.Error("the same RemoteAddr was parsed again")
	}
	if a, s := m.peer("[2001:db8::1]:443"); a != netip.MustParseAddr("2001:db8::1") || s != "2001:db8::1" {
		t.Errorf("new peer = %v %q", a, s)
	}
	if a, s := m.peer("not an address"); a.IsValid() || s != "unknown" {
		t.Errorf("unparsable peer = %v %q", a, s)
	}
}

// TestClientIPOverServedConnectionsIsThePeer: through Server.HTTPServer
// (the connection context with its peerMemo), every request of a
// keep-alive connection is attributed to the peer, in the upstream's
// X-Forwarded-For and in the access log, and a trusted peer's
// X-Forwarded-For still names the client.
func TestClientIPOverServedConnectionsIsThePeer(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	for _, tc := range []struct {
		name      string
		trusted   []netip.Prefix
		xff, want string
	}{
		{"untrusted", nil, "198.51.100.7", "127.0.0.1"},
		{"trusted", []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, "198.51.100.7", "198.51.100.7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{TrustedProxies: tc.trusted, Routes: []Route{testRoute(t, "api", up.URL)}})
			hs := h.srv.HTTPServer("127.0.0.1:0", h.srv.Handler())
			front := httptest.NewUnstartedServer(hs.Handler)
			front.Config = hs
			front.Start()
			t.Cleanup(front.Close)
			client := front.Client()
			for range 3 { // one keep-alive connection
				req, _ := http.NewRequest(http.MethodGet, front.URL+"/x", nil)
				req.Header.Set("X-Forwarded-For", tc.xff)
				res, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if got := up.last(t).Header.Get("X-Forwarded-For"); got != tc.want {
					t.Errorf("upstream X-Forwarded-For = %q, want %q", got, tc.want)
				}
			}
			if !strings.Contains(h.logs.String(), `"client_ip":"`+tc.want+`"`) {
				t.Errorf("access log lacks client_ip %s:\n%s", tc.want, h.logs)
			}
		})
	}
}
