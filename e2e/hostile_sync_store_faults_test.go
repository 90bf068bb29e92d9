package e2e

import (
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
)

// Fresh attack pass 17 R-LOSS: three replicas with sync: 50ms on a Redis
// behind a proxy that resets a fifth of the connections as an answer comes
// back (Redis ran the script; the replica never hears it did): the
// replicas sent each lost call's view again from the same base, counting
// their passes, and the leases the store had reserved, twice, and a
// client at 60 % of a fixed window's limit was refused 47-49 of 121
// requests. A lost call is now resolved by its marker before its keys go
// again (docs/rate-limiting.md, "A lost answer"). With one answer in five
// lost: a client at 60 % of the limit is refused at most a tenth of its
// requests on a fixed and on a sliding window (0 here; before: 40 %), and
// a flood passes at most the limit + 5 in every window.
func TestHostileLostStoreAnswersNeitherRefuseAClientNorPassAFlood(t *testing.T) {
	target, err := url.Parse(servicetest.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	var lose atomic.Int64 // per mille of the answers lost
	lossy, lost := startLossyProxy(t, target.Host, &lose)
	replicas, rdb, prefix := startSyncReplicas(t, replicaCount, behind(target, lossy))
	lose.Store(200)
	for _, path := range []string{"/fixed_window/x", "/sliding_window/x"} {
		t.Run("under_the_limit"+path, func(t *testing.T) {
			before := lost.Load()
			ip := "203.0.113.61"
			if path == "/sliding_window/x" {
				ip = "203.0.113.62"
			}
			refused, sent := paceClientOn(t, replicas, path, ip, time.Now(), 3*replicaWindow)
			t.Logf("%s: %d of %d requests refused at 60 %% of the limit (%d answers lost meanwhile)", path, len(refused), sent, lost.Load()-before)
			if lost.Load() == before {
				t.Fatal("the proxy lost no answer: the test proves nothing")
			}
			if len(refused) > sent/10 {
				t.Errorf("%d of %d requests of a client under its limit refused (at %v), want at most a tenth", len(refused), sent, refused)
			}
		})
	}
	t.Run("flood/sliding_window", func(t *testing.T) {
		passed, _, windows, at := floodAndWindows(t, replicas, rdb, prefix, "sliding_window")
		checkWindows(t, "sliding_window", windows, passed, replicaLimit/2, at)
	})
	replayed := 0.0
	for _, p := range replicas {
		replayed += serverMetric(t, p.admin, `borda_ratelimit_sync_replays_total{result="merged"}`)
	}
	t.Logf("%d answers lost, %v lost calls resolved", lost.Load(), replayed)
	if replayed == 0 {
		t.Errorf("no lost call was resolved (borda_ratelimit_sync_replays_total{result=\"merged\"} = 0): the answers the proxy lost were not the sync calls'")
	}
}

// Fresh attack pass 18 R02: with a fifth of the requests to Redis held up
// 2.5 s on the network (the replica gave up on them; Redis ran them later,
// after their exchange markers had expired), the late calls merged a
// second time and a client at 60 % of a fixed window's limit was refused
// 18-35 of 121 requests, in 1.1-1.4 s runs of 429s. A marked call now
// carries its last moment to run (a second after it was sent); later, the
// store does not run it. With one request in five held up 2.5 s, the
// client is refused at most a tenth of its requests.
func TestHostileLateStoreRequestsDoNotRefuseAClientUnderItsLimit(t *testing.T) {
	target, err := url.Parse(servicetest.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	var hold atomic.Int64 // per mille of the requests held up
	late, held := startLateProxy(t, target.Host, &hold, 2500*time.Millisecond)
	replicas, _, _ := startSyncReplicas(t, replicaCount, behind(target, late))
	hold.Store(200)
	refused, sent := paceClientOn(t, replicas, "/fixed_window/x", "203.0.113.63", time.Now(), 3*replicaWindow)
	t.Logf("%d of %d requests refused at 60 %% of the limit (%d requests held up 2.5 s)", len(refused), sent, held.Load())
	if held.Load() == 0 {
		t.Fatal("the proxy held no request up: the test proves nothing")
	}
	if len(refused) > sent/10 {
		t.Errorf("%d of %d requests of a client under its limit refused (at %v), want at most a tenth", len(refused), sent, refused)
	}
}

// Fresh attack pass 18 R01 (docs/rate-limiting.md Known gaps (7)): with
// half of the store's answers lost, a fixed window over three replicas
// passed 65-98 of 50 now and then, in windows after the key's first, and
// GCRA 59-61 per 2 s where one replica passes 50. A replica whose flood
// the deny cache refused until the window's end sent nothing for a
// second, and its first failure after that quiet was taken for an outage
// (measured from the last answer): it passed on its own view (49 of a
// window on one replica). Three binaries, one answer in two lost: two
// fixed-window floods and a sliding one, every window at most the limit
// + 10, but a key's first window, held to the documented first-window
// bound, limit + (N − 1) × floor(limit / N) (+ 5), when its early
// exchange's answer is lost (docs/rate-limiting.md, "A concurrent burst
// spread over the replicas"); a GCRA flood within 1.1 × one gateway + 10
// after its first window.
func TestHostileHalfTheStoreAnswersLostFloodHoldsTheBounds(t *testing.T) {
	target, err := url.Parse(servicetest.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	var lose atomic.Int64
	lossy, lost := startLossyProxy(t, target.Host, &lose)
	replicas, rdb, prefix := startSyncReplicas(t, replicaCount, behind(target, lossy))
	lose.Store(500)
	first := replicaLimit + (replicaCount-1)*(replicaLimit/replicaCount) + replicaSlack
	for flood, alg := range []string{"fixed_window", "fixed_window", "sliding_window"} {
		passed, _, windows, at := floodAndWindows(t, replicas, rdb, prefix, alg)
		counts := make([]int, len(windows))
		for _, r := range passed {
			for i, w := range windows {
				if a := at(r); a >= w[0] && a < w[1] {
					counts[i]++
				}
			}
		}
		t.Logf("flood %d (%s): passed per window %v", flood, alg, counts)
		for i, n := range counts {
			bound := replicaLimit + 2*replicaSlack
			if i == 0 && (flood == 0 || alg == "sliding_window") {
				bound = first // the key's first window
			}
			if n > bound {
				t.Errorf("flood %d (%s): window %d passed %d, want ≤ %d", flood, alg, i, n, bound)
			}
		}
	}
	passed, last, _, _ := floodAndWindows(t, replicas, rdb, prefix, "gcra")
	checkGCRA(t, passed, last, 2*replicaSlack)
	replays := map[string]float64{}
	for _, p := range replicas {
		for _, r := range []string{"merged", "failed", "given_up"} {
			replays[r] += serverMetric(t, p.admin, `borda_ratelimit_sync_replays_total{result="`+r+`"}`)
		}
	}
	t.Logf("%d answers lost; lost calls resolved %v", lost.Load(), replays)
	if lost.Load() == 0 || replays["merged"] == 0 {
		t.Errorf("%d answers lost, %v lost calls merged: the test proved nothing", lost.Load(), replays["merged"])
	}
}

// behind is the replicas' config (replicasConfig) with the store reached
// through proxy (an address) in place of target's host.
func behind(target *url.URL, proxy string) func(upstream, redisURL, prefix string) string {
	return func(upstream, _, prefix string) string {
		u := *target
		u.Host = proxy
		return replicasConfig(upstream, u.String(), prefix)
	}
}
