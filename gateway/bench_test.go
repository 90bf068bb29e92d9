package gateway

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The chain against a bare ReverseProxy, both on an in-process upstream
// (so only the gateway's own work is measured) and on a loopback one.
//
//	go test -run '^$' -bench . -benchmem ./gateway/

// benchOptions is the portal route on portal.example.org to upstream, with
// a credentialed CORS policy for the portal's origin.
func benchOptions(b *testing.B, upstream string) Options {
	rt := testRoute(b, "portal", upstream)
	rt.Hosts = []string{"portal.example.org"}
	rt.Upstream.Timeout = 30 * time.Second
	rt.CORS = &CORSPolicy{AllowedOrigins: []string{"https://portal.example.org"}, AllowCredentials: true}
	return routes(rt)
}

func benchChain(b *testing.B, upstream string, transport http.RoundTripper) http.Handler {
	srv := newServer(b, benchOptions(b, upstream), Deps{
		Verifier:  newVerifier(b),
		Limiter:   allowLimiter{},
		Recorder:  nopRecorder{},
		Registry:  prometheus.NewRegistry(),
		Logger:    slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn})), // as the load harness: no access log
		Transport: transport,
	})
	return srv.Handler()
}

func benchBare(upstream string, transport http.RoundTripper) http.Handler {
	u, _ := url.Parse(upstream)
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.SetXForwarded()
		},
		Transport:  transport,
		BufferPool: &bufferPool{}, // as bench/cmd/bareproxy: a fair baseline
	}
}

type allowLimiter struct{}

func (allowLimiter) Decide(context.Context, ratelimitSubject) ratelimitVerdict {
	return ratelimitVerdict{}
}

type nopRecorder struct{}

func (nopRecorder) Record(telemetryEvent) {}

func runBench(b *testing.B, h http.Handler) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest(http.MethodGet, "http://portal.example.org/api/alunos/42?x=1", nil)
			req.RemoteAddr = "203.0.113.9:5555"
			req.Header.Set("Origin", "https://portal.example.org")
			req.Header.Set("Cookie", "olp_auth=abc; olp_mural=m; theme=dark")
			rr := httptest.NewRecorder()
			h.ServeHTTP(rr, req)
			if rr.Code != 200 {
				b.Fatalf("status %d", rr.Code)
			}
		}
	})
}

var inProcess = roundTripFunc(func(r *http.Request) (*http.Response, error) { return okResponse(r), nil })

func BenchmarkChainInProcess(b *testing.B) {
	runBench(b, benchChain(b, "http://upstream.internal", inProcess))
}

func BenchmarkBareReverseProxyInProcess(b *testing.B) {
	runBench(b, benchBare("http://upstream.internal", inProcess))
}

func loopbackUpstream(b *testing.B) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	b.Cleanup(up.Close)
	return up
}

func BenchmarkChainLoopback(b *testing.B) {
	up := loopbackUpstream(b)
	runBench(b, benchChain(b, up.URL, newTransport()))
}

func BenchmarkBareReverseProxyLoopback(b *testing.B) {
	up := loopbackUpstream(b)
	runBench(b, benchBare(up.URL, newTransport()))
}

// The route of `proxy-peers.sh`'s Borda has no rule: one catch-all
// route, the portal's cookie policy, no CORS policy, no verifier.

// runPlainBench sends what wrk sends: GET / with a Host and nothing else,
// from one peer, each goroutine on its own keep-alive connection (the
// connection context Server.HTTPServer gives, with its peerMemo).
func runPlainBench(b *testing.B, h http.Handler) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		conn := context.WithValue(context.Background(), peerMemoKey{}, &peerMemo{})
		for pb.Next() {
			req := httptest.NewRequestWithContext(conn, http.MethodGet, "http://127.0.0.1:18003/", nil)
			req.RemoteAddr = "127.0.0.1:40000"
			rr := httptest.NewRecorder()
			h.ServeHTTP(rr, req)
			if rr.Code != 200 {
				b.Fatalf("status %d", rr.Code)
			}
		}
	})
}

// BenchmarkChainPlainGetInProcess is the request of the peers script
// through the full chain (client IP, routing, identity, limiter, cookies,
// telemetry record, metrics, access log at warn) to an in-process
// upstream; BenchmarkBarePlainGetInProcess is the bare ReverseProxy on
// the same request.
func BenchmarkChainPlainGetInProcess(b *testing.B) {
	rt := testRoute(b, "bench", "http://upstream.internal")
	rt.Upstream.Timeout = 30 * time.Second
	srv := newServer(b, routes(rt), Deps{
		Limiter:   allowLimiter{},
		Recorder:  nopRecorder{},
		Registry:  prometheus.NewRegistry(),
		Logger:    slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Transport: inProcess,
	})
	runPlainBench(b, srv.Handler())
}

func BenchmarkBarePlainGetInProcess(b *testing.B) {
	runPlainBench(b, benchBare("http://upstream.internal", inProcess))
}
