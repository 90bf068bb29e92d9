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

	"github.com/prometheus/client_golang/prometheus"
)

// The chain against a bare ReverseProxy, both on an in-process upstream
// (so only the gateway's own work is measured) and on a loopback one.
//
//	go test -run '^$' -bench . -benchmem ./gateway/

const benchConfig = `
cors:
  policies:
    portal: {allowed_origins: ["https://portal.example.org"], allow_credentials: true}
routes:
  - name: portal
    hosts: [portal.example.org]
    upstream: "{up}"
    cors: portal
    rate_limits: [burst]
rate_limits:
  rules:
    - {name: burst, scope: ip, limit: 1000000000, window: 1m}
`

func benchChain(b *testing.B, upstream string, transport http.RoundTripper) http.Handler {
	cfg := parseConfig(b, benchConfig, map[string]string{"AUTH_JWT_SECRET": testSecret}, map[string]string{"up": upstream})
	srv := newServer(b, cfg, Deps{
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

// peersConfig is the route of `proxy-peers.sh`'s Borda with no rule: one
// catch-all route, the default cookie policy, no CORS policy, no verifier.
const peersConfig = `
routes:
  - name: bench
    path_prefix: "/"
    upstream: "{up}"
`

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
	cfg := parseConfig(b, peersConfig, nil, map[string]string{"up": "http://upstream.internal"})
	srv := newServer(b, cfg, Deps{
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
