package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
)

// A refused request counts into no rule that had room (docs/security.md,
// "Rate limits"). One IP floods a route whose rules are a route-wide fixed
// window (40 per 30 s) and a per-IP GCRA (2 a second) over two gateways
// sharing Redis (rate_limits.sync: 0, each with its own deny cache, so
// the flood's refusals reach the store a few times a second); then
// clients, one request each from its own address, take what the route
// window has left. Every request the flood's GCRA refused used to count
// into the route window, which the flood alone filled. The route window
// must pass exactly its limit: the flood's passes and the clients'. The
// tests of this file give the store a timeout of 1 s: on a loaded
// machine a call past a shorter one fails open, and a pass that did not
// reach the store is not what they measure.
func TestHostileRefusedRequestsSpendNoSharedWindow(t *testing.T) {
	config := func(upstream, redisURL, prefix string) string {
		return string(replicaPreamble(redisURL, prefix)) + fmt.Sprintf(`  - {name: shared, path_prefix: /shared/, upstream: %q}
rate_limits:
  timeout: 1s
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
		servicetest.Inconclusive(t, "the test took %s: the route window (30 s) may have turned over", elapsed)
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
	replicas := twoSyncReplicas(t, "auth", `    - {name: login, scope: ip, algorithm: gcra, limit: 1, window: 60s, routes: [auth]}
    - {name: authroute, scope: route, algorithm: fixed_window, limit: 20, window: 30s, routes: [auth]}
`)
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

// Fresh attack pass 23 RL-02 (medium): two replicas synchronizing, a
// per-IP GCRA of 1 per 2 s (below the replicas: the store decides it per
// request) beside a route-wide fixed and sliding window of 100. One IP
// floods from 50
// connections for 10 s: each of its refused requests took a share of the route's
// lease on its replica's view and asked the store for more, the store
// kept what it leased, and 110 other clients then passed 66 of the 95
// the route had left. The other clients must get what the flood left.
func TestHostileConcurrentRefusedFloodOverTwoReplicasLeavesTheRouteWindow(t *testing.T) {
	replicas := twoSyncReplicas(t, "login", `    - {name: ipg, scope: ip, algorithm: gcra, limit: 1, window: 2s, routes: [login]}
    - {name: rtfw, scope: route, algorithm: fixed_window, limit: 100, window: 60s, routes: [login]}
    - {name: rtsw, scope: route, algorithm: sliding_window, limit: 100, window: 60s, routes: [login]}
`)
	get := replicaGet(t, replicas, "/login/x")
	start := time.Now()
	floodPassed, floodRefused := floodFrom(t, get, "198.51.100.92", 50, 10*time.Second)
	var wg sync.WaitGroup
	var clients atomic.Int64
	for i := range 110 {
		wg.Go(func() {
			if get(i, fmt.Sprintf("203.0.%d.%d", 113+i/100, i%100+1)) == http.StatusOK {
				clients.Add(1)
			}
		})
	}
	wg.Wait()
	if elapsed := time.Since(start); elapsed > 50*time.Second {
		servicetest.Inconclusive(t, "the test took %s: the route window (60 s) may have turned over", elapsed)
	}
	total := floodPassed + clients.Load()
	t.Logf("flood: %d passed, %d refused; 110 clients: %d passed; the route window passed %d of 100", floodPassed, floodRefused, clients.Load(), total)
	// The replicas' slack: at most the limit + 5 in a window; at least,
	// a lease one replica holds may go unspent when the 110 come at once
	// (94 in a loaded CI run). Before, 26, 66, 71 and 83.
	if total < 90 || total > 105 {
		t.Errorf("the route window (100) passed %d: the flood %d, the other clients %d of 110; want 90-105", total, floodPassed, clients.Load())
	}
}

// Fresh attack pass 23 RL-01 (medium): a gateway on a Redis Cluster, a
// per-IP GCRA (5 per 5 s) beside a route-wide fixed and sliding window
// (100 per minute). One IP floods from 50 connections for 12 s: the deny cache
// lets its requests through together each time a token comes back, they
// all read room in the first pass, and the second pass, which counts
// each key alone, counted every one of them into the route windows (122
// for 9 passes); every other client was refused for the rest of the
// minute. The other clients must pass.
func TestHostileConcurrentRefusedFloodOnARedisClusterLeavesTheRouteWindow(t *testing.T) {
	p := startClusterGateway(t, servicetest.KeyPrefix(t), `    - {name: ipg, scope: ip, algorithm: gcra, limit: 5, window: 5s, routes: [login]}
    - {name: rtfw, scope: route, algorithm: fixed_window, limit: 100, window: 60s, routes: [login]}
    - {name: rtsw, scope: route, algorithm: sliding_window, limit: 100, window: 60s, routes: [login]}
`)
	get := replicaGet(t, []*process{p}, "/login/x")
	floodPassed, floodRefused := floodFrom(t, get, "198.51.100.93", 50, 12*time.Second)
	refused := 0
	for i := range 10 {
		if get(i, fmt.Sprintf("203.0.113.%d", 220+i)) != http.StatusOK {
			refused++
		}
	}
	t.Logf("flood: %d passed, %d refused; 10 other clients: %d refused", floodPassed, floodRefused, refused)
	// The flood's own passes are its GCRA's (17 in 12 s), and a few more
	// on a loaded machine, whose store calls past the timeout fail open
	// (25 in a CI run): far from the route's 100.
	if floodPassed > 60 {
		t.Fatalf("the flood passed %d: its own passes, not its refusals, could fill the route windows", floodPassed)
	}
	if refused > 0 {
		t.Errorf("after one address's flood (%d passed, %d refused), %d of 10 other clients were refused by route windows of 100", floodPassed, floodRefused, refused)
	}
}

// startClusterGateway starts a gateway on the tests' private Redis
// Cluster under prefix (sync: 0), its routes login (/login/) and shared
// (/shared/) on one upstream, rules the rate_limits.rules entries.
func startClusterGateway(t *testing.T, prefix, rules string) *process {
	t.Helper()
	seed := servicetest.StartedRedisCluster(t).URL
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(up.Close)
	preamble := strings.Replace(string(replicaPreamble(seed, prefix)), "redis:\n", "redis:\n  cluster: true\n", 1)
	return startServe(t, preamble+fmt.Sprintf(`  - {name: login, path_prefix: /login/, upstream: %q}
  - {name: shared, path_prefix: /shared/, upstream: %q}
rate_limits:
  timeout: 1s
  rules:
%s`, up.URL, up.URL, rules))
}

// twoSyncReplicas starts two replicas synchronizing every 50 ms (store
// timeout 1 s) with the route name (/name/) and rules (rate_limits.rules
// entries), beside the warm route and rule replicasSeeEachOther uses.
func twoSyncReplicas(t *testing.T, name, rules string) []*process {
	t.Helper()
	replicas, _, _ := startSyncReplicas(t, 2, func(upstream, redisURL, prefix string) string {
		return string(replicaPreamble(redisURL, prefix)) + fmt.Sprintf(`  - {name: %s, path_prefix: /%s/, upstream: %q}
  - {name: warm, path_prefix: /warm/, upstream: %q}
rate_limits:
  timeout: 1s
  sync: 50ms
  rules:
%s    - {name: warm, scope: ip, algorithm: fixed_window, limit: 50, window: 2s, routes: [warm]}
`, name, name, upstream, upstream, rules)
	})
	return replicas
}

// Fresh attack pass 24 RL-01 (medium): two gateways on a Redis Cluster,
// a route-wide window of 100 per 30 s at 80, a per-IP GCRA of 2 a
// second. One gateway takes bursts of 64 concurrent requests, each burst
// from one address; the other, clients one at a time. The cluster
// counted each burst's requests into the route window, then took back
// those the GCRA refused: a client reading the window in between was
// refused, and the window refused everyone at 85-91 passes. The first
// client refused must find the window full but for a moment's count: 95
// passes at least.
func TestHostileFloodBurstsOnARedisClusterNeverFillTheWindowForOthers(t *testing.T) {
	prefix := servicetest.KeyPrefix(t)
	rules := `    - {name: route, scope: route, algorithm: fixed_window, limit: 100, window: 30s, routes: [shared]}
    - {name: per_ip, scope: ip, algorithm: gcra, limit: 2, window: 1s, routes: [shared]}
`
	a, b := startClusterGateway(t, prefix, rules), startClusterGateway(t, prefix, rules)
	onA, onB := replicaGet(t, []*process{a}, "/shared/x"), replicaGet(t, []*process{b}, "/shared/x")
	start := time.Now()
	var passed atomic.Int64
	for i := range 80 {
		if onB(0, fmt.Sprintf("10.5.0.%d", i)) == http.StatusOK {
			passed.Add(1)
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for burst := range 12 {
			select {
			case <-done:
				return
			default:
			}
			var bw sync.WaitGroup
			for range 64 {
				bw.Go(func() {
					if onA(0, fmt.Sprintf("198.51.105.%d", burst)) == http.StatusOK {
						passed.Add(1)
					}
				})
			}
			bw.Wait()
		}
	})
	clients := 0
	for i := range 40 {
		if onB(0, fmt.Sprintf("10.6.0.%d", i)) != http.StatusOK {
			break
		}
		passed.Add(1)
		clients++
	}
	close(done)
	wg.Wait()
	if time.Since(start) > 25*time.Second {
		servicetest.Inconclusive(t, "the test took %s: the window (30 s) may have turned over", time.Since(start))
	}
	if clients == 40 {
		t.Fatal("no client was refused: the route window never filled, the test proves nothing")
	}
	// A count the cluster takes back a moment later may refuse a client
	// in that moment (docs/rate-limiting.md, "Decided together"); before,
	// the first client was refused at 85-91.
	if n := passed.Load(); n < 95 {
		t.Errorf("a client was refused after %d clients, when the route window (100) had passed %d, want 95 at least: requests the flood's GCRA refused held its room", clients, n)
	}
}

// floodFrom sends requests from ip over conns concurrent connections for
// d (connection w on get's replica w, w+conns, …) and returns how many
// passed and how many were refused (429); it fails the test unless 200
// at least were refused (the refusals are what each test is about).
func floodFrom(t *testing.T, get func(replica int, ip string) int, ip string, conns int, d time.Duration) (passed, refused int64) {
	t.Helper()
	start := time.Now()
	var p, r atomic.Int64
	var wg sync.WaitGroup
	for w := range conns {
		wg.Go(func() {
			for i := w; time.Since(start) < d; i += conns {
				switch get(i, ip) {
				case http.StatusOK:
					p.Add(1)
				case http.StatusTooManyRequests:
					r.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if r.Load() < 200 {
		t.Fatalf("the flood was refused %d times: the test proves nothing", r.Load())
	}
	return p.Load(), r.Load()
}
