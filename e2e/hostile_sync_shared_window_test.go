package e2e

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Fresh attack pass 20 R12 (medium): a route with a route-wide fixed
// window (100 per 2 s) and a per-IP GCRA (20 per 2 s), three replicas with
// sync: 50ms and timeout: 30ms. One IP flooding it from 16 connections
// beside a client at 5 % of the route's limit: the flood's refusals,
// made while its asks failed, were counted into the route-wide window,
// which filled, and the client was refused 23 of 41 (one sync: 0 gateway:
// 0). Here the store is 60 ms away, so every ask fails and every round
// answers: the client must not be refused.
func TestHostileFloodingIPCannotFillASharedRouteWindow(t *testing.T) {
	replicas := replicasBehindASlowStore(t, 60*time.Millisecond, func(upstream, redisURL, prefix string) string {
		return string(replicaPreamble(redisURL, prefix)) + fmt.Sprintf(`  - {name: shared, path_prefix: /shared/, upstream: %q}
  - {name: warm, path_prefix: /warm/, upstream: %q}
rate_limits:
  timeout: 30ms
  sync: 50ms
  rules:
    - {name: route, scope: route, algorithm: fixed_window, limit: 100, window: 2s, routes: [shared]}
    - {name: per_ip, scope: ip, algorithm: gcra, limit: 20, window: 2s, routes: [shared]}
    - {name: warm, scope: ip, algorithm: fixed_window, limit: 50, window: 2s, routes: [warm]}
`, upstream, upstream)
	})
	get := replicaGet(t, replicas, "/shared/x")
	const dur = 5 * time.Second
	start := time.Now()
	var (
		wg                                sync.WaitGroup
		floodSent, floodPassed            atomic.Int64
		victimSent, victimRefused, others atomic.Int64
	)
	for w := range 16 {
		wg.Go(func() {
			for i := w; time.Since(start) < dur; i += 16 {
				floodSent.Add(1)
				switch get(i, "198.51.100.77") {
				case http.StatusOK:
					floodPassed.Add(1)
				case http.StatusTooManyRequests:
				default:
					others.Add(1)
				}
			}
		})
	}
	wg.Go(func() {
		for i := 0; time.Since(start) < dur; i++ {
			time.Sleep(time.Until(start.Add(500*time.Millisecond + time.Duration(i)*200*time.Millisecond))) // 5 per second
			victimSent.Add(1)
			if get(i, "198.51.100.78") == http.StatusTooManyRequests {
				victimRefused.Add(1)
			}
		}
	})
	wg.Wait()
	t.Logf("flood: %d sent, %d passed; client at 5 %%: %d of %d refused; other statuses %d; sync rounds failed %d",
		floodSent.Load(), floodPassed.Load(), victimRefused.Load(), victimSent.Load(), others.Load(), roundFailures(replicas))
	// The scenario happened: the flooding IP was refused, many times (the
	// refusals are what used to fill the shared window; 1 800 and more
	// here, against at most 70 passes of its GCRA).
	if refusedFlood := floodSent.Load() - floodPassed.Load() - others.Load(); refusedFlood < 200 {
		t.Fatalf("the flooding IP was refused %d times: too few to fill the shared window, the test proves nothing", refusedFlood)
	}
	if victimRefused.Load() > 1 {
		t.Errorf("a client at 5 %% of the shared route window was refused %d of %d beside one flooding IP, want at most 1", victimRefused.Load(), victimSent.Load())
	}
}
