package ratelimit

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// Benchmarks of rate_limits.sync (docs/rate-limiting.md,
// "Synchronization"). Run:
//
//	go test -run '^$' -bench 'Sync' -benchmem ./ratelimit/

// openSeedRules are the three seed rules with limits no client reaches:
// every request is counted (a blocked one is refused from the deny cache
// and costs the store nothing).
func openSeedRules() Options {
	opts := seedRules()
	for i := range opts.Rules {
		opts.Rules[i].Limit = 1 << 40
	}
	return opts
}

// BenchmarkDecide_Sync_ThreeRules: a decision on the local view (the
// three seed rules, 1 024 subjects), the allocations per decision.
func BenchmarkDecide_Sync_ThreeRules(b *testing.B) {
	opts := seedRules()
	opts.Sync = 50 * time.Millisecond
	l, err := New(opts, testKS, NewMemoryStore(0), prometheus.NewRegistry(), nil)
	if err != nil {
		b.Fatal(err)
	}
	subjects := make([]Subject, 1024)
	for i := range subjects {
		subjects[i] = Subject{Route: "portal", IP: "203.0.113." + strconv.Itoa(i%250), User: "u-" + strconv.Itoa(i), Escola: "e-" + strconv.Itoa(i%40)}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		l.Decide(context.Background(), subjects[i%len(subjects)])
		i++
	}
}

// BenchmarkSync_RedisCommandsPer1000Requests counts, with a go-redis hook,
// the Redis commands one client's requests cost under the three seed
// rules (limits out of reach: every request counted) with sync 50ms (sync rounds, relax polls, the last round at Stop):
// "busy" sends as fast as it can, "1000rps" one request a millisecond for
// two seconds.
func BenchmarkSync_RedisCommandsPer1000Requests(b *testing.B) {
	for _, paced := range []bool{false, true} {
		name := "busy"
		if paced {
			name = "1000rps"
		}
		b.Run(name, func(b *testing.B) {
			prefix := servicetest.KeyPrefix(b)
			rdb := testRedis(b, prefix)
			counter := &commandCounter{}
			rdb.AddHook(counter)
			opts := openSeedRules()
			opts.Sync = 50 * time.Millisecond
			l, err := New(opts, keyspace.MustNew(prefix), NewRedisStore(rdb), prometheus.NewRegistry(), nil)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			s := Subject{Route: "portal", IP: "203.0.113.9", User: "u-42", Escola: "e-7"}
			before := counter.n.Load()
			_ = l.Start(ctx)
			b.ReportAllocs()
			requests, start := 0, time.Now()
			if paced {
				tick := time.NewTicker(time.Millisecond)
				for end := time.Now().Add(2 * time.Second); time.Now().Before(end); <-tick.C {
					l.Decide(ctx, s)
					requests++
				}
				tick.Stop()
			} else {
				for b.Loop() {
					l.Decide(ctx, s)
					requests++
				}
			}
			elapsed := time.Since(start)
			_ = l.Stop(ctx)
			b.ReportMetric(float64(counter.n.Load()-before)*1000/float64(requests), "redis-cmds/1000req")
			b.ReportMetric(float64(requests)/elapsed.Seconds(), "requests/s")
		})
	}
}

// BenchmarkSync_P99WithSlowStore: 20 ms of latency between the limiter
// and Redis (toxiproxy on loopback), three rules every request passes
// (so none is refused from the deny cache), ~1 000 decisions a
// second for three seconds; it reports the p50 and p99 a decision adds,
// exact (a store round trip per request, timeout raised to 200 ms so it
// does not fail open) against sync 50ms:
//
//	go test -run '^$' -bench 'SlowStore' ./ratelimit/
func BenchmarkSync_P99WithSlowStore(b *testing.B) {
	for _, interval := range []time.Duration{0, 50 * time.Millisecond} {
		name := "exact"
		if interval > 0 {
			name = "sync-" + interval.String()
		}
		b.Run(name, func(b *testing.B) {
			redisURL := servicetest.RedisURL(b)
			p, addr := faultProxy(b, strings.TrimSuffix(strings.TrimPrefix(redisURL, "redis://"), "/0"))
			prefix := servicetest.KeyPrefix(b)
			rdb := newRedis(b, "redis://"+addr+"/0")
			b.Cleanup(func() { checkTTLsAndClean(b, newRedis(b, redisURL), prefix) })
			opts := openSeedRules()
			opts.Timeout, opts.Sync = 200*time.Millisecond, interval
			l, err := New(opts, keyspace.MustNew(prefix), NewRedisStore(rdb), prometheus.NewRegistry(), nil)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			_ = l.Start(ctx)
			defer l.Stop(ctx)
			s := Subject{Route: "portal", IP: "203.0.113.9", User: "u-42", Escola: "e-7"}
			l.Decide(ctx, s) // dial and load the script before the latency
			addToxic(b, p, `{"name":"slow","type":"latency","stream":"downstream","attributes":{"latency":20}}`)
			// One decision a millisecond, each in its own goroutine as
			// requests are: a slow decision does not hold back the next.
			var (
				mu   sync.Mutex
				took []time.Duration
				wg   sync.WaitGroup
				open atomic.Int64
			)
			tick := time.NewTicker(time.Millisecond)
			for end := time.Now().Add(3 * time.Second); time.Now().Before(end); <-tick.C {
				wg.Add(1)
				go func() {
					defer wg.Done()
					start := time.Now()
					if v := l.Decide(ctx, s); v.Decisions[0].Outcome == OutcomeError {
						open.Add(1)
					}
					d := time.Since(start)
					mu.Lock()
					took = append(took, d)
					mu.Unlock()
				}()
			}
			tick.Stop()
			wg.Wait()
			if open.Load() > 0 {
				b.Fatalf("%d decisions failed open: the timeout is too short for the bench", open.Load())
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(len(took))/3, "decisions/s")
		})
	}
}
