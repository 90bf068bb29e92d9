package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Fresh attack pass 13 R10: two real replicas with rate_limits.sync:
// 50ms, one client alternating between them at a walking pace (a request
// every 100-200 ms), a fixed window of 20: a window passed 8-17 where one
// replica passes 20. The store derives a window's end from its TTL at each
// answer, so the end moved by a millisecond between answers, and a replica
// that compared its lease's window to its view's by equality sent the view
// without its reservation and put the reservation back later: the
// reservations no longer added up to the passes. Every client here passes
// the limit, less at most one request (a share of floor(remaining / 2)
// cannot lease the last request to either replica), never more.
func TestHostileSlowClientOverTwoReplicasPassesTheLimit(t *testing.T) {
	const limit, requests, gap = 20, 28, 100 * time.Millisecond
	replicas, _, _ := startSyncReplicas(t, 2, func(upstream, redisURL, prefix string) string {
		cfg := replicasConfig(upstream, redisURL, prefix)
		cfg = strings.Replace(cfg, "routes:\n", fmt.Sprintf("routes:\n  - {name: walk, path_prefix: /walk/, upstream: %q}\n", upstream), 1)
		return cfg + fmt.Sprintf("    - {name: walk, scope: ip, algorithm: fixed_window, limit: %d, window: 10s, routes: [walk]}\n", limit)
	})
	client := &http.Client{Timeout: 5 * time.Second}
	for k := range 3 {
		ip := fmt.Sprintf("203.0.113.%d", 70+k)
		passed, trace := 0, ""
		for i := range requests {
			req, _ := http.NewRequest("GET", replicas[i%2].public+"/walk/x", nil)
			req.Header.Set("X-Real-IP", ip)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == 200 {
				passed++
				trace += "+"
			} else {
				trace += "."
			}
			time.Sleep(gap) // the pace under test, not a wait for a result
		}
		t.Logf("%s: %s", ip, trace)
		if passed < limit-1 || passed > limit {
			t.Errorf("client %s passed %d of %d over two replicas (%s), want %d or %d", ip, passed, requests, trace, limit-1, limit)
		}
	}
}
