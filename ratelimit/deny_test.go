package ratelimit

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// cycleDenyCache refuses keys distinct keys in turn, passes times, through
// a deny cache of size, as the Limiter does (a miss is refused by the
// store, then cached), and returns the share of the requests after the
// first two passes that the cache spared.
func cycleDenyCache(size, keys, passes int) float64 {
	d := newDenyCache(size)
	now := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	until := now.Add(time.Hour)
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("olp:rl:burst:%s", keySpaceIP(i))
	}
	hits, counted := 0, 0
	for p := range passes {
		for _, k := range names {
			_, ok := d.get(k, now)
			if !ok {
				d.add(k, until)
			}
			if p >= 2 {
				counted++
				if ok {
					hits++
				}
			}
		}
	}
	return float64(hits) / float64(counted)
}

// Issue 27 item 5: the deny cache (an LRU of 65 536 keys) collapsed
// between 10 000 and 100 000 refused IPs, from 0.12 to 0.90 store calls
// per request: refused keys cycling past its size evicted one another
// before any was read again, so it spared nothing. Now, with twice and
// four times as many refused keys as it holds, it still spares a share
// of the requests near its size over the keys.
func TestDenyCache_MoreRefusedKeysThanItHoldsIsNoCliff(t *testing.T) {
	t.Parallel()
	const size = 4096
	if got := cycleDenyCache(size, size/2, 4); got < 0.99 {
		t.Errorf("%d refused keys in a cache of %d: spared %.2f of the requests, want all", size/2, size, got)
	}
	for _, keys := range []int{2 * size, 4 * size} {
		if got, want := cycleDenyCache(size, keys, 5), 0.5*float64(size)/float64(keys); got < want {
			t.Errorf("%d refused keys in a cache of %d: spared %.2f of the requests, want at least %.2f", keys, size, got, want)
		}
	}
}

// BenchmarkDenyCache_RefusedKeysCycling reports the share of requests the
// default-sized deny cache spares (spared/op) when that many refused keys
// cycle: all up to its size, then about size / keys.
func BenchmarkDenyCache_RefusedKeysCycling(b *testing.B) {
	for _, keys := range []int{10_000, 50_000, 100_000, 200_000, 1_000_000} {
		b.Run(fmt.Sprint(keys), func(b *testing.B) {
			var spared float64
			for b.Loop() {
				spared = cycleDenyCache(testDenyCacheSize, keys, 5)
			}
			b.ReportMetric(spared, "spared/op")
		})
	}
}

// TestNoDenyCacheStillRefuses: Options.DenyCacheSize 0 is no deny cache
// (the default size lives in the configuration alone): a key over its
// limit is refused by the store on every request.
func TestNoDenyCacheStillRefuses(t *testing.T) {
	t.Parallel()
	cfg := rulesConfig(burstRule(2, 5*time.Second))
	cfg.DenyCacheSize = 0
	l, _ := newTestLimiter(t, cfg, testKS, NewMemoryStore(0))
	if l.deny != nil {
		t.Fatal("a deny cache was built for size 0")
	}
	s := Subject{Route: "portal", IP: "203.0.113.80"}
	for i := 1; i <= 5; i++ {
		if v := l.Decide(context.Background(), s); v.Blocked() != (i > 2) {
			t.Fatalf("request %d: %s", i, outcomes(v))
		}
	}
}
