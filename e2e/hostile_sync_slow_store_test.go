package e2e

import (
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
)

// Fresh attack pass 14 R-SLOW-1: three replicas with sync: 50ms on a
// Redis answering in about 25 ms of a 30 ms rate_limits.timeout, one IP
// flooding them: the asks (on the request path, under the timeout, behind
// a round on the wire) failed, a failed ask let each replica's view
// decide on counts a round trip old, and about 150 of a limit of 50
// passed in every window. A failed ask while the rounds reach the store
// now holds the replica to its lease, and the next round asks for it;
// and the replica's estimate of the store's clock is never behind it
// (Limiter.learnSkew: behind, a sliding window passed 65); a round failing
// now and then is no outage (pass 16 R1). Every fixed
// and sliding window passes at most the limit + 5, and at least a third
// of it (the flood is held, not refused); GCRA at most 1.1 × (+ 5) what one
// gateway without sync allows. The slow store costs passes: a lease
// refused for a failed ask is renewed by the next round (about 75 ms), so
// a window passes 24-48 (at least a third of the limit is asserted).
func TestHostileSlowStoreFloodOverThreeReplicasPassesTheLimit(t *testing.T) {
	target, err := url.Parse(servicetest.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	var delay atomic.Int64
	delay.Store(int64(25 * time.Millisecond))
	slow := startDelayProxy(t, target.Host, &delay)
	config := func(upstream, _, prefix string) string {
		u := *target
		u.Host = slow
		cfg := replicasConfig(upstream, u.String(), prefix)
		return strings.Replace(cfg, "timeout: 250ms", "timeout: 30ms", 1)
	}
	replicas, rdb, prefix := startSyncReplicas(t, replicaCount, config)
	flooded := false // a flood subtest ran (-run may pick others)
	// A sync round failing now and then (past its deadline on a loaded
	// machine) is no outage: the bounds must hold through it (fresh attack
	// pass 16 R1), so round failures are logged, not skipped.
	for _, alg := range []string{"fixed_window", "sliding_window", "gcra"} {
		t.Run(alg, func(t *testing.T) {
			failedBefore := roundFailures(replicas)
			flooded = true
			passed, last, windows, at := floodAndWindows(t, replicas, rdb, prefix, alg)
			t.Logf("%s: %d sync rounds failed during the flood", alg, roundFailures(replicas)-failedBefore)
			if alg != "gcra" {
				checkWindows(t, alg, windows, passed, replicaLimit/3, at)
				return
			}
			// One gateway without sync passes the burst, then one request
			// per emission interval.
			allowed := replicaLimit + int(last/(replicaWindow/replicaLimit))
			t.Logf("gcra: %d passed over %v, one gateway without sync allows %d", len(passed), last.Round(time.Millisecond), allowed)
			if float64(len(passed)) > 1.1*float64(allowed)+replicaSlack {
				t.Errorf("gcra passed %d, want ≤ 1.1 × %d + %d", len(passed), allowed, replicaSlack)
			}
			if len(passed) < allowed/2 {
				t.Errorf("gcra passed %d of the %d one gateway allows: the flood was refused, not held", len(passed), allowed)
			}
		})
	}
	// Fresh attack pass 15 R01: with the store slower than the timeout
	// (60 ms: every ask fails, the rounds succeed), a client at 60 % of a
	// sliding window's limit spread over the replicas was refused about a
	// third of its requests. Within its own share of the limit a replica
	// whose ask failed passes on its view.
	t.Run("under_the_limit_at_60ms", func(t *testing.T) {
		delay.Store(int64(60 * time.Millisecond))
		defer delay.Store(int64(25 * time.Millisecond))
		failedBefore := roundFailures(replicas)
		refused, sent := paceClient(t, replicas, "203.0.113.51", time.Now(), 3*replicaWindow)
		t.Logf("%d of %d requests refused at 60 %% of the limit with the store 60 ms away (%d sync rounds failed)",
			len(refused), sent, roundFailures(replicas)-failedBefore)
		// Before: 36-38 of 121 (a third). A few refusals remain at a
		// sliding window's edge, where the replicas' held leases move into
		// the new window while the old one still weighs (2-3 of 92 here;
		// 0-1 with a healthy store): docs/rate-limiting.md, Known gaps (5).
		if len(refused) > sent/10 {
			t.Errorf("%d of %d requests of a client under its limit refused, want at most a tenth", len(refused), sent)
		}
	})
	// Fresh attack pass 15 R15: with a healthy store, a new client at 60 %
	// of a sliding window's limit that started mid-window was refused
	// 3-8 requests in a row right after its key's first window edge (the
	// replicas' leases carried whole into the new window).
	t.Run("under_the_limit_across_the_first_edge", func(t *testing.T) {
		delay.Store(0)
		defer delay.Store(int64(25 * time.Millisecond))
		edge := time.Now().Truncate(replicaWindow).Add(2 * replicaWindow)
		refused, sent := paceClient(t, replicas, "203.0.113.52", edge.Add(-replicaWindow/4), 2*replicaWindow)
		t.Logf("%d of %d requests refused across the key's first window edge (at %v from the edge)", len(refused), sent, refused)
		if len(refused) > 2 {
			t.Errorf("%d of %d requests of a client under its limit refused across its first window edge, want at most 2", len(refused), sent)
		}
	})
	asks, failed := 0.0, 0.0
	for _, p := range replicas {
		asks += serverMetric(t, p.admin, "borda_ratelimit_sync_asks_total")
		failed += max(0, serverMetric(t, p.admin, `borda_ratelimit_sync_rounds_total{result="error"}`))
	}
	t.Logf("asks %v, failed exchanges %v", asks, failed)
	if flooded && failed == 0 {
		t.Errorf("no exchange failed with the store 25 ms away and a 30 ms timeout: the test did not reproduce the slow store")
	}
}

// paceClient sends GET /sliding_window/x from ip at 15 requests a second
// (30 of the limit of 50 per 2 s: 60 %), round-robin over replicas, from
// start for d, and returns when each refused request was sent (since
// start) and how many were sent.
func paceClient(t *testing.T, replicas []*process, ip string, start time.Time, d time.Duration) (refused []time.Duration, sent int) {
	t.Helper()
	return paceClientOn(t, replicas, "/sliding_window/x", ip, start, d)
}

// paceClientOn is paceClient on path.
func paceClientOn(t *testing.T, replicas []*process, path, ip string, start time.Time, d time.Duration) (refused []time.Duration, sent int) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	const gap = 66 * time.Millisecond
	for ; time.Since(start) < d; sent++ {
		time.Sleep(time.Until(start.Add(time.Duration(sent) * gap))) // the client's pace, not a wait before an assertion
		req, _ := http.NewRequest(http.MethodGet, replicas[sent%len(replicas)].public+path, nil)
		req.Header.Set("X-Real-IP", ip)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			refused = append(refused, time.Since(start).Round(time.Millisecond))
		}
	}
	return refused, sent
}

// roundFailures counts the replicas' log lines saying a sync round failed
// (the outage's first line, and each minute's summary).
func roundFailures(replicas []*process) int {
	n := 0
	for _, p := range replicas {
		n += strings.Count(p.logs.String(), "rate-limit sync round failed")
	}
	return n
}
