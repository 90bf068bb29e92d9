package gateway

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
	"github.com/olp-edu/borda/ratelimit"
)

// The chain in process with three rules that apply to an anonymous
// request (fixed window and GCRA on the IP, sliding window on the route;
// limits out of reach) against the same chain with no rule, the rules on the shared
// Redis: exact (a round trip per request) and rate_limits.sync 50ms
// (docs/rate-limiting.md, "Synchronization"):
//
//	go test -run '^$' -bench 'ChainRateLimit' -benchmem ./gateway/
func BenchmarkChainRateLimit(b *testing.B) {
	b.Run("no-rule", func(b *testing.B) {
		runBench(b, benchChain(b, "http://upstream.internal", inProcess))
	})
	for _, interval := range []time.Duration{0, 50 * time.Millisecond} {
		name := "three-rules-exact"
		if interval > 0 {
			name = "three-rules-sync-" + interval.String()
		}
		b.Run(name, func(b *testing.B) {
			runBench(b, benchChainWithRules(b, interval))
		})
	}
}

// benchChainWithRules is benchChain with the real Limiter deciding three
// rules on the shared Redis.
func benchChainWithRules(b *testing.B, interval time.Duration) http.Handler {
	prefix := servicetest.KeyPrefix(b)
	rdb := servicetest.RedisClient(b, servicetest.RedisURL(b), false)
	open := int64(1) << 40
	opts := ratelimit.Options{
		Timeout:   time.Second, // a loaded machine must not fail open here
		RelaxPoll: 5 * time.Second,
		Sync:      interval,
		Rules: []ratelimit.Rule{
			{Name: "burst", Scope: ratelimit.ScopeIP, Limit: open, Window: 5 * time.Second, Routes: []string{ratelimit.AllRoutes}},
			{Name: "login", Scope: ratelimit.ScopeIP, Algorithm: ratelimit.GCRA, Limit: open, Window: time.Minute, Routes: []string{ratelimit.AllRoutes}},
			{Name: "portal", Scope: ratelimit.ScopeRoute, Algorithm: ratelimit.SlidingWindow, Limit: open, Window: time.Minute, Routes: []string{ratelimit.AllRoutes}},
		},
	}
	l, err := ratelimit.New(opts, keyspace.MustNew(prefix), ratelimit.NewRedisStore(rdb), prometheus.NewRegistry(), nil)
	if err != nil {
		b.Fatal(err)
	}
	_ = l.Start(context.Background())
	b.Cleanup(func() {
		_ = l.Stop(context.Background())
		iter := rdb.Scan(context.Background(), 0, prefix+"*", 1000).Iterator()
		for iter.Next(context.Background()) {
			rdb.Del(context.Background(), iter.Val())
		}
	})
	srv := newServer(b, benchOptions(b, "http://upstream.internal"), Deps{
		Verifier:  newVerifier(b),
		Limiter:   l,
		Recorder:  nopRecorder{},
		Registry:  prometheus.NewRegistry(),
		Logger:    slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Transport: inProcess,
	})
	return srv.Handler()
}
