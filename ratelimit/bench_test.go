package ratelimit

import (
	"context"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// Benchmarks of the decision path (allocations per request). Run:
//
//	go test -run '^$' -bench . -benchmem ./ratelimit/

func BenchmarkDecide_NoRule(b *testing.B) {
	cfg := rulesConfig()
	l, _ := newTestLimiter(b, cfg, testKS, NewMemoryStore(0))
	s := Subject{Route: "portal", IP: "203.0.113.9"}
	b.ReportAllocs()
	for b.Loop() {
		l.Decide(context.Background(), s)
	}
}

func BenchmarkDecide_Memory_OneRule(b *testing.B) {
	l, _ := newTestLimiter(b, rulesConfig(burstRule(1<<40, time.Hour)), testKS, NewMemoryStore(0))
	s := Subject{Route: "portal", IP: "203.0.113.9"}
	b.ReportAllocs()
	for b.Loop() {
		l.Decide(context.Background(), s)
	}
}

func BenchmarkDecide_Memory_ThreeRules(b *testing.B) {
	l, _ := newTestLimiter(b, seedRules(), testKS, NewMemoryStore(0))
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

func BenchmarkDecide_Memory_SlidingWindow(b *testing.B) {
	r := burstRule(1<<40, time.Hour)
	r.Algorithm = SlidingWindow
	l, _ := newTestLimiter(b, rulesConfig(r), testKS, NewMemoryStore(0))
	s := Subject{Route: "portal", IP: "203.0.113.9"}
	b.ReportAllocs()
	for b.Loop() {
		l.Decide(context.Background(), s)
	}
}

func BenchmarkDecide_Redis_ThreeRules(b *testing.B) {
	prefix := servicetest.KeyPrefix(b)
	rdb := testRedis(b, prefix)
	cfg := seedRules()
	for i := range cfg.Rules {
		cfg.Rules[i].Limit = 1 << 40
	}
	cfg.Timeout = time.Second // a loaded CI machine must not fail open here
	l, _ := newTestLimiter(b, cfg, keyspace.MustNew(prefix), NewRedisStore(rdb))
	s := Subject{Route: "portal", IP: "203.0.113.9", User: "u-1", Escola: "e-1"}
	b.ReportAllocs()
	var failed atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if v := l.Decide(context.Background(), s); v.Decisions[0].Outcome != OutcomeAllow {
				failed.Add(1)
			}
		}
	})
	b.ReportMetric(float64(failed.Load())/float64(b.N), "failopen/op")
}

func BenchmarkDecide_DenyCacheHit(b *testing.B) {
	l, _ := newTestLimiter(b, rulesConfig(burstRule(1, time.Hour)), testKS, NewMemoryStore(0))
	s := Subject{Route: "portal", IP: "203.0.113.9"}
	l.Decide(context.Background(), s)
	l.Decide(context.Background(), s)
	b.ReportAllocs()
	for b.Loop() {
		l.Decide(context.Background(), s)
	}
}

func BenchmarkWriteHeaders(b *testing.B) {
	l, _ := newTestLimiter(b, seedRules(), testKS, NewMemoryStore(0))
	v := l.Decide(context.Background(), Subject{Route: "portal", IP: "203.0.113.9", User: "u-1", Escola: "e-1"})
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		WriteHeaders(rec.Header(), v)
	}
}

// BenchmarkDecide_REST_ThreeRules compares the two ways a decision can
// reach Upstash's REST API (docs/rate-limiting.md, "Upstash REST"): the
// RESTStore (its own HTTP client, one POST of EVALSHA per decision) and
// the RedisStore over go-redis whose connections are restconn's (the
// client telemetry, forward and aggregate use). Both through
// internal/upstashtest in front of the local Redis; requests/op is what
// the server counted.
func BenchmarkDecide_REST_ThreeRules(b *testing.B) {
	url := servicetest.RedisURL(b)
	for _, tc := range []struct {
		name  string
		store func(b *testing.B, restURL string) Store
	}{
		{"RESTStore", func(b *testing.B, restURL string) Store {
			s, err := NewRESTStore(restURL, servicetest.RESTToken, nil)
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"RedisStore_over_restconn", func(b *testing.B, restURL string) Store {
			return NewRedisStore(servicetest.RESTClient(b, restURL))
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			prefix := servicetest.KeyPrefix(b)
			front, restURL := servicetest.RESTFront(b, url)
			b.Cleanup(func() { checkTTLsAndClean(b, newRedis(b, url), prefix) })
			cfg := seedRules()
			for i := range cfg.Rules {
				cfg.Rules[i].Limit = 1 << 40
			}
			cfg.Timeout = time.Second // a loaded machine must not fail open here
			l, _ := newTestLimiter(b, cfg, keyspace.MustNew(prefix), tc.store(b, restURL))
			s := Subject{Route: "portal", IP: "203.0.113.9", User: "u-1", Escola: "e-1"}
			l.Decide(context.Background(), s) // the script is cached from here on
			before := front.Stats().TotalRequests()
			b.ReportAllocs()
			var failed atomic.Int64
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if v := l.Decide(context.Background(), s); v.Decisions[0].Outcome != OutcomeAllow {
						failed.Add(1)
					}
				}
			})
			b.ReportMetric(float64(failed.Load())/float64(b.N), "failopen/op")
			b.ReportMetric(float64(front.Stats().TotalRequests()-before)/float64(b.N), "requests/op")
		})
	}
}
