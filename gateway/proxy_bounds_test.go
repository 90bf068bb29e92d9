package gateway

import (
	"io"
	"net/http"
	"testing"
	"time"

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
