package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/servicetest"
)

// Issue 27 (rate limits that hold across replicas in sync mode, on every
// window): three `borda serve` replicas on one Redis with
// rate_limits.sync: 50ms, one client flooding them round-robin. Before,
// a fixed window started at each replica's first hit, the replicas'
// windows drifted apart and a window passed 50-65 of a limit of 50.

const (
	replicaCount  = 3
	replicaLimit  = 50
	replicaWindow = 2 * time.Second
	replicaGap    = time.Millisecond // 1 000 requests/s, round-robin
	replicaSlack  = 5
	// replicaLeastRate is the flood rate (requests/s) below which the
	// replica tests skip: 12 × the limit's own rate (25/s), so every
	// window is still flooded. The bounds hold a fortiori at a lower
	// rate than the scenario's 1 000/s (a replica's overshoot before it
	// hears from the store is rate × interval), so a loaded machine
	// still asserts them; the test only needs the flood to exceed the
	// limit many times over.
	replicaLeastRate = 300
	// The flood covers three whole windows and a quarter.
	replicaFlood   = 3*replicaWindow + replicaWindow/4
	replicaWorkers = 32
	replicaIP      = "203.0.113.50"
)

// replicaPreamble is the start of a synchronizing replica's
// configuration: listeners, the trusted proxy sending X-Real-IP, the
// store at redisURL under prefix, no broker, no telemetry, and the
// "routes:" key, whose entries follow.
func replicaPreamble(redisURL, prefix string) []byte {
	return fmt.Appendf(nil, `environment: development
listen: "{LISTEN}"
admin_listen: "{ADMIN}"
trusted_proxies: ["127.0.0.1/32"]
client_ip_header: X-Real-IP
redis:
  url: %q
  key_prefix: %q
amqp:
  url: "amqp://guest:guest@127.0.0.1:1/"
telemetry:
  enabled: false
routes:
`, redisURL, prefix)
}

func replicasConfig(upstream, redisURL, prefix string) string {
	b := replicaPreamble(redisURL, prefix)
	for _, alg := range []string{"fixed_window", "sliding_window", "gcra", "warm"} {
		b = fmt.Appendf(b, "  - {name: %s, path_prefix: /%s/, upstream: %q}\n", alg, alg, upstream)
	}
	// A loaded machine must not fail a round (each chunk has the
	// timeout): a failed round is not what this test measures.
	b = fmt.Appendf(b, "rate_limits:\n  timeout: 250ms\n  sync: 50ms\n  rules:\n")
	for _, alg := range []string{"fixed_window", "sliding_window", "gcra"} {
		b = fmt.Appendf(b, "    - {name: %s, scope: ip, algorithm: %s, limit: %d, window: %s, routes: [%s]}\n",
			alg, alg, replicaLimit, replicaWindow, alg)
	}
	b = fmt.Appendf(b, "    - {name: warm, scope: ip, algorithm: fixed_window, limit: %d, window: %s, routes: [warm]}\n", replicaLimit, replicaWindow)
	return string(b)
}

// replicaResult is one request of the flood: when it was sent and
// answered (since the flood's start) and whether it passed.
type replicaResult struct {
	sent, answered time.Duration
	passed         bool
}

// floodReplicasHTTP sends GET {replica}/{path} from replicaIP, one every
// replicaGap for d, round-robin over the replicas, from replicaWorkers
// concurrent keep-alive clients (a request that waits for a worker is
// sent late, not dropped). It returns every answer, in sending order.
func floodReplicasHTTP(t *testing.T, replicas []*process, path string, start time.Time, d time.Duration) []replicaResult {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: replicaWorkers}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	type job struct {
		i   int
		url string
	}
	jobs := make(chan job)
	n := int(d / replicaGap)
	results := make([]replicaResult, n)
	var wg sync.WaitGroup
	for range replicaWorkers {
		wg.Go(func() {
			for j := range jobs {
				req, _ := http.NewRequest(http.MethodGet, j.url, nil)
				req.Header.Set("X-Real-IP", replicaIP)
				sent := time.Since(start)
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					continue
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
					t.Errorf("%s: status %d", j.url, resp.StatusCode)
				}
				results[j.i] = replicaResult{sent: sent, answered: time.Since(start), passed: resp.StatusCode == http.StatusOK}
			}
		})
	}
	time.Sleep(time.Until(start))
	for i := range n {
		if w := time.Until(start.Add(time.Duration(i) * replicaGap)); w > 0 {
			time.Sleep(w)
		}
		jobs <- job{i: i, url: replicas[i%len(replicas)].public + "/" + path + "/x"}
	}
	close(jobs)
	wg.Wait()
	return results
}

// replicasSeeEachOther waits until the registry holds every replica
// and each has leased (its asks counter moved: a replica asks only when
// it counts more than one replica), warming a key of its own.
func replicasSeeEachOther(t *testing.T, rdb *redis.Client, prefix string, replicas []*process) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for rdb.ZCard(ctx, prefix+"rlsync:replicas").Val() < int64(len(replicas)) {
		if time.Now().After(deadline) {
			t.Fatalf("the replicas did not register (%d of %d)", rdb.ZCard(ctx, prefix+"rlsync:replicas").Val(), len(replicas))
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i, p := range replicas {
		ip := fmt.Sprintf("192.0.2.%d", 10+i)
		for serverMetric(t, p.admin, "borda_ratelimit_sync_asks_total") <= 0 {
			if time.Now().After(deadline) {
				t.Fatalf("replica %d never asked the store: it does not count the others", i)
			}
			req, _ := http.NewRequest(http.MethodGet, p.public+"/warm/x", nil)
			req.Header.Set("X-Real-IP", ip)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
	}
}

// windowEnds polls the fixed window's key until stop and returns the
// ends of the windows it saw (this machine's clock, since start): the
// store's windows, which every replica adopts. Each end is a lower bound:
// Redis read the TTL after the poll was sent, so the window ends no
// earlier than the send + the TTL; of the polls of one window the latest
// such bound is kept. An end placed late counts the next window's first
// passes, which come at once, in this one (the likely cause of a CI run's
// 58 of 50 in a first window that a dozen runs beside a CPU load counted
// 48: the end was the middle of the poll's round trip); placed early, it
// moves into the next window only the passes of this window's last
// milliseconds, which a flood has spent long before.
func windowEnds(rdb *redis.Client, key string, start time.Time, stop <-chan struct{}) []time.Duration {
	ctx := context.Background()
	var ends []time.Duration
	for {
		select {
		case <-stop:
			return ends
		default:
		}
		before := time.Now()
		ttl, err := rdb.PTTL(ctx, key).Result()
		if err == nil && ttl > 0 {
			end := before.Add(ttl).Sub(start)
			switch n := len(ends); {
			case n == 0 || end-ends[n-1] > replicaWindow/2:
				ends = append(ends, end)
			case end > ends[n-1]:
				ends[n-1] = end
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Three real replicas, sync: 50ms, one client round-robin at up to 1 000
// requests/s (32 keep-alive workers) for three windows of 50 per 2 s: a
// fixed window passes at most the limit + 5 in every window (the store's
// windows, read from the key's TTL, which every replica adopts; a pass
// counted in the window it was answered in); a sliding window too, the
// key's first window included (clock-aligned; a pass counted in the window
// it was sent and answered in); GCRA at most 1.1 × (+ 5) what one gateway
// without sync allows, over the whole flood and after the first window.
// The first window of a key no replica has exchanged yet is held by the
// early exchange (docs/rate-limiting.md, "Quota leasing"). A machine too
// loaded to send replicaLeastRate requests/s skips the test, saying so
// (fails it under BORDA_REQUIRE_SERVICES=1); between that and 1 000/s the
// bounds are asserted.
func TestSyncReplicas_EveryWindowPassesTheLimitWithinFive(t *testing.T) {
	replicas, rdb, prefix := startSyncReplicas(t, replicaCount, replicasConfig)

	for _, alg := range []string{"fixed_window", "sliding_window", "gcra"} {
		t.Run(alg, func(t *testing.T) {
			passed, last, windows, at := floodAndWindows(t, replicas, rdb, prefix, alg)
			if alg != "gcra" {
				// The first window too: a fixed window's first store
				// window starts with the flood; a key no replica has
				// exchanged yet is exchanged early, once half a share is
				// spent.
				checkWindows(t, alg, windows, passed, replicaLimit/2, at)
				return
			}
			checkGCRA(t, passed, last, replicaSlack)
			if len(passed) < replicaLimit {
				t.Errorf("gcra passed %d, fewer than its burst %d", len(passed), replicaLimit)
			}
		})
	}
}

// checkGCRA asserts a GCRA flood's passes (the last sent at last, since
// the flood's start) against what one gateway without sync allows: the
// burst, then one request per emission interval (window / limit). The
// first window (a key no replica has exchanged yet: each spends its share
// of a whole bucket unreserved) is logged; from the second on, the flood
// is held to 1.1 × that rate + slack, and over the whole flood too.
func checkGCRA(t *testing.T, passed []replicaResult, last time.Duration, slack int) {
	t.Helper()
	interval := replicaWindow / replicaLimit
	allowed := replicaLimit + int(last/interval)
	steady, steadyAllowed := 0, int((last-replicaWindow)/interval)
	for _, r := range passed {
		if r.sent >= replicaWindow {
			steady++
		}
	}
	t.Logf("gcra: %d passed over %v, one gateway without sync allows %d (%.2f ×); after the first window %d, allowed %d (%.2f ×)",
		len(passed), last.Round(time.Millisecond), allowed, float64(len(passed))/float64(allowed),
		steady, steadyAllowed, float64(steady)/float64(steadyAllowed))
	if float64(steady) > 1.1*float64(steadyAllowed)+float64(slack) {
		t.Errorf("gcra passed %d after the first window, want ≤ 1.1 × %d + %d", steady, steadyAllowed, slack)
	}
	if float64(len(passed)) > 1.1*float64(allowed)+float64(slack) {
		t.Errorf("gcra passed %d over the flood, want ≤ 1.1 × %d + %d", len(passed), allowed, slack)
	}
}

// floodAndWindows floods alg's route on replicas from replicaIP
// (floodReplicasHTTP, from the next clock-aligned window edge, for
// replicaFlood) and returns the requests that passed, the last one's send
// (since the flood's start), and the windows to count the passes in with
// the time each pass counts at: a fixed window's are the store's windows,
// back to back (read from the key's TTL, which every replica adopts; the
// next starts at the first hit after one ends, the first at the flood's
// start), those that ended within the flood, a pass counted when it was
// answered; a sliding window's are clock-aligned, a pass counted when it
// was sent and answered in the same window; GCRA has none. The issue's
// scenario is 1 000 requests/s; a machine too loaded to send
// replicaLeastRate (the flood would no longer test the windows) skips the
// test, saying so, or fails it under BORDA_REQUIRE_SERVICES=1.
func floodAndWindows(t *testing.T, replicas []*process, rdb *redis.Client, prefix, alg string) (passed []replicaResult, last time.Duration, windows [][2]time.Duration, at func(replicaResult) time.Duration) {
	t.Helper()
	start := time.Now().Truncate(replicaWindow).Add(replicaWindow)
	stop := make(chan struct{})
	endsCh := make(chan []time.Duration, 1)
	if alg == "fixed_window" {
		go func() { endsCh <- windowEnds(rdb, prefix+"rl:fixed_window:"+replicaIP, start, stop) }()
	} else {
		endsCh <- nil
	}
	res := floodReplicasHTTP(t, replicas, alg, start, replicaFlood)
	close(stop)
	ends := <-endsCh
	for _, r := range res {
		last = max(last, r.sent)
	}
	if rate := float64(len(res)) / last.Seconds(); rate < replicaLeastRate {
		// CI (BORDA_REQUIRE_SERVICES=1) fails rather than skips: a skip
		// there would let the bounds go untested unnoticed.
		servicetest.Inconclusive(t, "machine too loaded: %d requests in %v (%.0f/s), the scenario needs at least %d/s",
			len(res), last.Round(time.Millisecond), rate, replicaLeastRate)
	}
	for _, r := range res {
		if r.passed {
			passed = append(passed, r)
		}
	}
	t.Logf("%s: %d requests in %v (%.0f/s), %d passed", alg, len(res), last.Round(time.Millisecond),
		float64(len(res))/last.Seconds(), len(passed))
	switch alg {
	case "fixed_window":
		from := time.Duration(0)
		for _, e := range ends {
			if e <= last {
				windows = append(windows, [2]time.Duration{from, e})
			}
			from = e
		}
		return passed, last, windows, func(r replicaResult) time.Duration { return r.answered }
	case "sliding_window":
		for from := time.Duration(0); from+replicaWindow <= last; from += replicaWindow {
			windows = append(windows, [2]time.Duration{from, from + replicaWindow})
		}
		// A pass sent in one window and answered in the next was decided
		// in either: on a loaded machine an answer can come a few hundred
		// milliseconds late. It counts in neither, and is logged.
		straddled := 0
		for _, r := range passed {
			if r.sent/replicaWindow != r.answered/replicaWindow {
				straddled++
			}
		}
		t.Logf("%s: %d passes straddle a window's edge (sent in one, answered in the next), counted in neither", alg, straddled)
		return passed, last, windows, func(r replicaResult) time.Duration {
			if r.sent/replicaWindow != r.answered/replicaWindow {
				return -1
			}
			return r.sent
		}
	}
	return passed, last, windows, func(r replicaResult) time.Duration { return r.sent }
}

// checkWindows counts the passes in each window (by the time at returns)
// and asserts each is at most the limit + replicaSlack and at least
// least (the flood tested the window: it was held, not refused), over at
// least three windows.
func checkWindows(t *testing.T, alg string, windows [][2]time.Duration, passed []replicaResult, least int, at func(replicaResult) time.Duration) {
	t.Helper()
	if len(windows) < 3 {
		t.Fatalf("%s: %d whole windows in the flood (%v), want 3", alg, len(windows), windows)
	}
	counts := make([]int, len(windows))
	for _, r := range passed {
		for i, w := range windows {
			if a := at(r); a >= w[0] && a < w[1] {
				counts[i]++
			}
		}
	}
	t.Logf("%s: passed per window %v (windows %v)", alg, counts, windows)
	if most := slices.Max(counts); most > replicaLimit+replicaSlack {
		t.Errorf("%s: a window passed %d, want ≤ %d (the limit + %d)", alg, most, replicaLimit+replicaSlack, replicaSlack)
	}
	if fewest := slices.Min(counts); fewest < least {
		t.Errorf("%s: a window passed %d of a limit of %d, want ≥ %d: the flood did not test it", alg, fewest, replicaLimit, least)
	}
}

// startSyncReplicas starts n `borda serve` on the local Redis under a
// fresh key prefix (deleted at the end), with the config config builds
// for an empty upstream, and, with more than one, waits until they count
// each other. It returns the replicas, a client of that Redis and the
// prefix.
func startSyncReplicas(t *testing.T, n int, config func(upstream, redisURL, prefix string) string) ([]*process, *redis.Client, string) {
	t.Helper()
	redisURL := servicetest.RedisURL(t)
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	prefix := servicetest.KeyPrefix(t)
	rdb := redis.NewClient(opts)
	t.Cleanup(func() {
		ctx := context.Background()
		for it := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator(); it.Next(ctx); {
			rdb.Del(ctx, it.Val())
		}
		rdb.Close()
	})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(up.Close)
	cfg := config(up.URL, redisURL, prefix)
	replicas := make([]*process, n)
	for i := range replicas {
		replicas[i] = startServe(t, cfg)
	}
	if n > 1 {
		replicasSeeEachOther(t, rdb, prefix, replicas)
	}
	return replicas, rdb, prefix
}
