package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A refused request counts into no rule that had room (docs/security.md,
// "Rate limits"). One IP floods a route whose rules are a route-wide fixed
// window (40 per 30 s) and a per-IP GCRA (2 a second) over two gateways
// sharing Redis (rate_limits.sync: 0, each with its own deny cache, so
// the flood's refusals reach the store a few times a second); then
// clients, one request each from its own address, take what the route
// window has left. Every request the flood's GCRA refused used to count
// into the route window, which the flood alone filled. The route window
// must pass exactly its limit: the flood's passes and the clients'.
func TestHostileRefusedRequestsSpendNoSharedWindow(t *testing.T) {
	config := func(upstream, redisURL, prefix string) string {
		return string(replicaPreamble(redisURL, prefix)) + fmt.Sprintf(`  - {name: shared, path_prefix: /shared/, upstream: %q}
rate_limits:
  timeout: 250ms
  rules:
    - {name: route, scope: route, algorithm: fixed_window, limit: 40, window: 30s, routes: [shared]}
    - {name: per_ip, scope: ip, algorithm: gcra, limit: 2, window: 1s, routes: [shared]}
`, upstream)
	}
	var cfg string
	replicas, _, _ := startSyncReplicas(t, 1, func(upstream, redisURL, prefix string) string {
		cfg = config(upstream, redisURL, prefix)
		return cfg
	})
	replicas = append(replicas, startServe(t, cfg))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	send := func(replica int, ip string) (int, []string) {
		req, _ := http.NewRequest(http.MethodGet, replicas[replica%len(replicas)].public+"/shared/x", nil)
		req.Header.Set("X-Real-IP", ip)
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		var p struct {
			Violated []string `json:"violated-policies"`
		}
		if resp.StatusCode == http.StatusTooManyRequests {
			_ = json.NewDecoder(resp.Body).Decode(&p)
		}
		return resp.StatusCode, p.Violated
	}

	start := time.Now()
	var floodPassed, floodRefused, others atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; time.Since(start) < 3*time.Second; i += 8 {
				switch code, violated := send(i, "198.51.100.90"); {
				case code == http.StatusOK:
					floodPassed.Add(1)
				case code == http.StatusTooManyRequests && slices.Equal(violated, []string{"per_ip"}):
					floodRefused.Add(1)
				default:
					others.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if others.Load() != 0 {
		t.Fatalf("the flood got %d answers that were neither a pass nor a per_ip refusal: the route window filled with %d passes", others.Load(), floodPassed.Load())
	}
	if floodRefused.Load() < 200 {
		t.Fatalf("the flood was refused %d times: too few to have filled the route window, the test proves nothing", floodRefused.Load())
	}
	clients := 0
	var last []string
	for i := range 80 {
		code, violated := send(i, fmt.Sprintf("203.0.113.%d", 100+i))
		if code != http.StatusOK {
			last = violated
			break
		}
		clients++
	}
	if elapsed := time.Since(start); elapsed > 25*time.Second {
		t.Skipf("the test took %s: the route window (30 s) may have turned over", elapsed)
	}
	t.Logf("flood: %d passed, %d refused; clients: %d passed, then %v", floodPassed.Load(), floodRefused.Load(), clients, last)
	if got := floodPassed.Load() + int64(clients); got != 40 || !slices.Equal(last, []string{"route"}) {
		t.Errorf("the route window passed %d (the flood %d, the clients %d) before refusing %v; want exactly its limit, 40, then a refusal by route",
			got, floodPassed.Load(), clients, last)
	}
}

// Fresh attack pass 22 R01 (medium): two replicas synchronizing
// (rate_limits.sync: 50ms), a login rule of 1 a minute per IP (below the
// replicas: the store decides it per request) and a route-wide window of
// 20 beside it. One IP sends 15 concurrent logins to each replica: each
// refused login had been counted into the route window on the replica's
// view first, the window filled, and every other client was refused for
// the rest of it. The other clients must pass.
func TestHostileRefusedLoginsOverTwoReplicasSpendNoRouteWindow(t *testing.T) {
	replicas, _, _ := startSyncReplicas(t, 2, func(upstream, redisURL, prefix string) string {
		return string(replicaPreamble(redisURL, prefix)) + fmt.Sprintf(`  - {name: auth, path_prefix: /auth/, upstream: %q}
  - {name: warm, path_prefix: /warm/, upstream: %q}
rate_limits:
  timeout: 250ms
  sync: 50ms
  rules:
    - {name: login, scope: ip, algorithm: gcra, limit: 1, window: 60s, routes: [auth]}
    - {name: authroute, scope: route, algorithm: fixed_window, limit: 20, window: 30s, routes: [auth]}
    - {name: warm, scope: ip, algorithm: fixed_window, limit: 50, window: 2s, routes: [warm]}
`, upstream, upstream)
	})
	get := replicaGet(t, replicas, "/auth/login")
	var passed, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			switch get(i, "198.51.100.91") {
			case http.StatusOK:
				passed.Add(1)
			case http.StatusTooManyRequests:
				refused.Add(1)
			}
		})
	}
	wg.Wait()
	if passed.Load() > 2 || refused.Load() < 25 {
		t.Fatalf("the login rule passed %d and refused %d of 30: the scenario did not happen", passed.Load(), refused.Load())
	}
	for i := range 10 {
		if code := get(i, fmt.Sprintf("203.0.113.%d", 200+i)); code != http.StatusOK {
			t.Errorf("client %d, after one address's %d refused logins, got %d: the route window (20) holds at most %d passes", i, refused.Load(), code, passed.Load()+int64(i))
		}
	}
}
