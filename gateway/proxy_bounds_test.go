package gateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/olp-edu/borda/cookies"
	"github.com/olp-edu/borda/internal/egress"
)

// TestUpstreamTransportKeepsTheDocumentedBounds pins newTransport's doc
// comment (and docs/edge.md): 5 s to dial and to shake hands, 30 s TCP
// keep-alive, 1024 idle connections, 256 per host, 90 s idle, no
// environment proxy, no transparent compression, a 64 KiB response head.
func TestUpstreamTransportKeepsTheDocumentedBounds(t *testing.T) {
	d := upstreamDialer()
	if d.Timeout != 5*time.Second || d.KeepAlive != 30*time.Second {
		t.Errorf("dialer: timeout %v, keep-alive %v; want 5s and 30s", d.Timeout, d.KeepAlive)
	}
	tr := newTransport()
	if tr.TLSHandshakeTimeout != 5*time.Second || tr.IdleConnTimeout != 90*time.Second ||
		tr.MaxIdleConns != 1024 || tr.MaxIdleConnsPerHost != 256 || tr.ExpectContinueTimeout != time.Second {
		t.Errorf("transport: TLS handshake %v, idle %v, idle conns %d (%d per host), expect-continue %v",
			tr.TLSHandshakeTimeout, tr.IdleConnTimeout, tr.MaxIdleConns, tr.MaxIdleConnsPerHost, tr.ExpectContinueTimeout)
	}
	if tr.Proxy != nil || !tr.DisableCompression || !tr.ForceAttemptHTTP2 || tr.MaxResponseHeaderBytes != egress.MaxResponseHeaderBytes {
		t.Errorf("transport: proxy set %v, compression disabled %v, HTTP/2 %v, head bound %d",
			tr.Proxy != nil, tr.DisableCompression, tr.ForceAttemptHTTP2, tr.MaxResponseHeaderBytes)
	}
}

// TestRequestViaAppendsThisHopWithTheClientsVersion: the upstream sees the
// client's own Via lines, then this gateway's entry with the version the
// request came in (RFC 9110 §7.6.3): "1.1 …" for HTTP/1.1, "1.0 …" for
// HTTP/1.0.
func TestRequestViaAppendsThisHopWithTheClientsVersion(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, routes(testRoute(t, "api", up.URL)))
	addr := h.front.Listener.Addr().String()
	for _, tc := range []struct {
		raw  string
		want []string
	}{
		{"GET / HTTP/1.1\r\nHost: a\r\n\r\n", []string{"1.1 " + h.srv.via}},
		{"GET / HTTP/1.1\r\nHost: a\r\nVia: 1.1 edge-a\r\n\r\n", []string{"1.1 edge-a", "1.1 " + h.srv.via}},
		{"GET / HTTP/1.0\r\nHost: a\r\n\r\n", []string{"1.0 " + h.srv.via}},
		{"GET / HTTP/1.0\r\nHost: a\r\nVia: 1.0 edge-b\r\n\r\n", []string{"1.0 edge-b", "1.0 " + h.srv.via}},
	} {
		res, conn, _ := rawRequest(t, addr, tc.raw)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		conn.Close()
		got := up.last(t).Header.Values("Via")
		if res.StatusCode != 200 || len(got) != len(tc.want) || got[0] != tc.want[0] || got[len(got)-1] != tc.want[len(tc.want)-1] {
			t.Errorf("%q: status %d, upstream Via %q; want %q", tc.raw, res.StatusCode, got, tc.want)
		}
	}
}

// TestStalledUploadIsCutAtTheBodyTimeout: a proxied request whose body
// stalls is answered 408 at body_timeout (here long before the route
// timeout), while the upstream waits on it.
func TestStalledUploadIsCutAtTheBodyTimeout(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.ReadAll(r.Body) })
	rt := testRoute(t, "api", up.URL)
	rt.Upstream.Timeout = 30 * time.Second
	h := newHarness(t, Options{BodyTimeout: 100 * time.Millisecond, Routes: []Route{rt}})
	res, conn, _ := rawRequest(t, h.front.Listener.Addr().String(),
		"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Type: application/octet-stream\r\nContent-Length: 10\r\n\r\nab")
	defer conn.Close()
	res.Body.Close()
	if res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408 at body_timeout", res.StatusCode)
	}
}

// TestHeadersAtTheEdgesOfTheDroppedNamespacesNeverReachTheUpstream: a
// name that starts with '_' is dropped like any name holding one (the
// default), and the bare prefix "X-Borda-" is in the gateway's namespace.
func TestHeadersAtTheEdgesOfTheDroppedNamespacesNeverReachTheUpstream(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, routes(testRoute(t, "api", up.URL)))
	res, conn, _ := rawRequest(t, h.front.Listener.Addr().String(),
		"GET / HTTP/1.1\r\nHost: a\r\n_Remote-User: admin\r\nX-Borda-: spoof\r\nX-Bord: kept\r\n\r\n")
	defer conn.Close()
	res.Body.Close()
	got := up.last(t).Header
	if res.StatusCode != 200 || got.Get("_Remote-User") != "" || len(got["X-Borda-"]) != 0 || got.Get("X-Bord") != "kept" {
		t.Fatalf("status %d, upstream headers %v; want _Remote-User and X-Borda- dropped, X-Bord kept", res.StatusCode, got)
	}
}

// TestForwardedHeadersAtTheEdgesOfTheirRules: from a trusted proxy its
// X-Forwarded-Proto is believed for http and https only, and its
// X-Forwarded-Host when it sent exactly one; from an untrusted peer the
// configured client-IP header of any name, the bare "X-Forwarded-" and a
// claim prefix starting with an upper-case letter are dropped, and a
// 64-byte header name passes untouched.
func TestForwardedHeadersAtTheEdgesOfTheirRules(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	trusted := routes(testRoute(t, "api", up.URL))
	trusted.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	untrusted := routes(testRoute(t, "api", up.URL))
	untrusted.ClientIPHeader = "X-My-Client"
	long := "X-" + strings.Repeat("a", 62)
	for _, tc := range []struct {
		name    string
		opts    Options
		headers string
		header  string // the upstream's header checked
		want    string
	}{
		{"trusted https", trusted, "X-Forwarded-Proto: https\r\n", "X-Forwarded-Proto", "https"},
		{"trusted odd scheme", trusted, "X-Forwarded-Proto: gopher\r\n", "X-Forwarded-Proto", "http"},
		{"trusted host", trusted, "X-Forwarded-Host: portal.example.org\r\n", "X-Forwarded-Host", "portal.example.org"},
		{"trusted two hosts", trusted, "X-Forwarded-Host: evil.example\r\nX-Forwarded-Host: portal.example.org\r\n", "X-Forwarded-Host", "a"},
		{"untrusted client-IP header", untrusted, "X-My-Client: 6.6.6.6\r\n", "X-My-Client", ""},
		{"untrusted bare X-Forwarded-", untrusted, "X-Forwarded-: 6.6.6.6\r\n", "X-Forwarded-", ""},
		{"untrusted upper-case claim prefix", untrusted, "Akamai-Origin-Hop: 1\r\n", "Akamai-Origin-Hop", ""},
		{"untrusted 64-byte name", untrusted, long + ": v\r\n", long, "v"},
	} {
		h := newHarness(t, tc.opts)
		res, conn, _ := rawRequest(t, h.front.Listener.Addr().String(), "GET / HTTP/1.1\r\nHost: a\r\n"+tc.headers+"\r\n")
		res.Body.Close()
		conn.Close()
		got := up.last(t).Header
		if res.StatusCode != 200 || strings.Join(got[http.CanonicalHeaderKey(tc.header)], ",") != tc.want {
			t.Errorf("%s: status %d, upstream %s = %q; want %q", tc.name, res.StatusCode, tc.header, got[http.CanonicalHeaderKey(tc.header)], tc.want)
		}
	}
}

// TestForwardedValuesFollowEachRequestOfAConnection: the forwarding
// values remembered per connection are reused only while the client IP,
// host and scheme stay the same; a request that changes any one of them
// gets its own.
func TestForwardedValuesFollowEachRequestOfAConnection(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	o := routes(testRoute(t, "api", up.URL))
	o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	h := newHarness(t, o)
	_, base := servedHarness(t, h) // the gateway's own server: one memo per connection
	addr := strings.TrimPrefix(base, "http://")
	steps := []struct{ xff, xfh, xfp string }{
		{"198.51.100.1", "h1.example", "http"},
		{"198.51.100.2", "h1.example", "http"},
		{"198.51.100.2", "h2.example", "http"},
		{"198.51.100.2", "h2.example", "https"},
		{"198.51.100.2", "h2.example", "https"},
	}
	var conn net.Conn
	var br *bufio.Reader
	for i, s := range steps {
		raw := "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: " + s.xff + "\r\nX-Forwarded-Host: " + s.xfh + "\r\nX-Forwarded-Proto: " + s.xfp + "\r\n\r\n"
		var res *http.Response
		if conn == nil {
			res, conn, br = rawRequest(t, addr, raw)
			defer conn.Close()
		} else {
			if _, err := io.WriteString(conn, raw); err != nil {
				t.Fatal(err)
			}
			var err error
			if res, err = http.ReadResponse(br, nil); err != nil {
				t.Fatal(err)
			}
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		got := up.last(t).Header
		want := `for=` + s.xff + `;host="` + s.xfh + `";proto=` + s.xfp
		if got.Get("X-Forwarded-For") != s.xff || got.Get("X-Forwarded-Host") != s.xfh || got.Get("X-Forwarded-Proto") != s.xfp || got.Get("Forwarded") != want {
			t.Errorf("request %d on one connection: upstream got %q %q %q %q; want %s %s %s %q", i+1,
				got.Get("X-Forwarded-For"), got.Get("X-Forwarded-Host"), got.Get("X-Forwarded-Proto"), got.Get("Forwarded"), s.xff, s.xfh, s.xfp, want)
		}
	}
}

// TestForwardedValueOfEveryShapeOfClientAndHost: Forwarded quotes an
// IPv6 client in brackets, however long, renders an absent Host (HTTP/1.0)
// as host="", and keeps a space a trusted proxy sent in the host.
func TestForwardedValueOfEveryShapeOfClientAndHost(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	o := routes(testRoute(t, "api", up.URL))
	o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	h := newHarness(t, o)
	const v6 = "2001:db8:1234:5678:9abc:def0:1234:5678"
	for _, tc := range []struct{ raw, want string }{
		{"GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: " + v6 + "\r\n\r\n", `for="[` + v6 + `]";host="a";proto=http`},
		{"GET / HTTP/1.0\r\n\r\n", `for=127.0.0.1;host="";proto=http`},
		{"GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-Host: portal example\r\n\r\n", `for=127.0.0.1;host="portal example";proto=http`},
	} {
		res, conn, _ := rawRequest(t, h.front.Listener.Addr().String(), tc.raw)
		res.Body.Close()
		conn.Close()
		if got := up.last(t).Header.Get("Forwarded"); res.StatusCode != 200 || got != tc.want {
			t.Errorf("%q: status %d, Forwarded %q; want %q", tc.raw, res.StatusCode, got, tc.want)
		}
	}
}

// TestUpstreamSetCookieForAnUnforwardedPortalCookieIsRemovedAndLogged: a
// route that forwards no portal session drops an upstream's Set-Cookie of
// olp_auth and says so once; another cookie passes without a line.
func TestUpstreamSetCookieForAnUnforwardedPortalCookieIsRemovedAndLogged(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Set-Cookie", r.URL.Query().Get("c")+"=v; Path=/")
	})
	rt := testRoute(t, "maps", up.URL)
	rt.Cookies.Forward = []cookies.Forward{}
	h := newHarness(t, routes(rt))
	const line = "upstream Set-Cookie for a portal cookie the route does not forward was removed"
	for _, tc := range []struct {
		cookie string
		kept   bool
		lines  int
	}{{"theme", true, 0}, {"olp_auth", false, 1}, {"theme", true, 1}} {
		res := h.do(t, h.newRequest(t, http.MethodGet, "", "/?c="+tc.cookie))
		kept := strings.HasPrefix(res.Header.Get("Set-Cookie"), tc.cookie+"=")
		if kept != tc.kept || strings.Count(h.logs.String(), line) != tc.lines {
			t.Errorf("Set-Cookie %s: kept %v (%q), %d warn lines; want kept %v, %d lines", tc.cookie, kept, res.Header.Get("Set-Cookie"), strings.Count(h.logs.String(), line), tc.kept, tc.lines)
		}
	}
}
