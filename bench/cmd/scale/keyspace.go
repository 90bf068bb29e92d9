package main

// The key-space curves (issue 27 item 5): `rate_limits.sync: 50ms` on one
// replica and a private redis-server against 10 000 to 1 000 000 distinct
// client IPs, and the local deny cache against a growing number of
// refused IPs (sync 0).

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/bench/harness"
)

const (
	keyspaceSync    = 50 * time.Millisecond
	keyspaceWorkers = 32
)

// keyspaceConfig is a gateway behind a trusted proxy on 127.0.0.1
// (X-Real-IP names the client) with one ip rule on every route, on the
// Redis at redisURL; sync "0s" decides every request in a store round
// trip. The window is long, so every key written stays in the store to
// be counted. Without sync the deadline is 1 s, so a loaded machine does
// not open the breaker (the deny curve measures the store path, not the
// fallback).
func keyspaceConfig(upstream, redisURL, sync string, limit, denyCache int) []byte {
	deny := ""
	if denyCache > 0 {
		deny = fmt.Sprintf("  deny_cache_size: %d\n", denyCache)
	}
	if sync == "0s" { // the round timeout of sync mode stays the default's
		deny += "  timeout: 1s\n"
	}
	return fmt.Appendf(nil, `environment: development
listen: %q
admin_listen: %q
trusted_proxies: ["127.0.0.1/32"]
client_ip_header: X-Real-IP
redis:
  url: %q
telemetry:
  enabled: false
routes:
  - {name: app, path_prefix: /, upstream: %q}
rate_limits:
  sync: %s
%s  rules:
    - {name: burst, scope: ip, algorithm: fixed_window, limit: %d, window: 1h, routes: ["*"]}
`, listenAddr, adminAddr, redisURL, upstream, sync, deny, limit)
}

// clientIP is the i-th distinct client address (10.0.0.0/8: a header
// value only, no traffic goes there).
func clientIP(i int) string {
	return fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
}

// loadResult is what one closed-loop run measured.
type loadResult struct {
	requests  int
	statuses  map[int]int
	latencies []time.Duration // sorted
	took      time.Duration
}

func (r loadResult) rps() float64 { return float64(r.requests) / r.took.Seconds() }
func (r loadResult) p99() time.Duration {
	return r.latencies[min(len(r.latencies)-1, len(r.latencies)*99/100)]
}

// drive sends total GETs from keyspaceWorkers keep-alive clients, the
// i-th from clientIP(i mod keys); done (when not nil) counts the answered
// ones as they come.
func drive(ctx context.Context, total, keys int, done *atomic.Int64) (loadResult, error) {
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: keyspaceWorkers, MaxConnsPerHost: keyspaceWorkers}, Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	var next atomic.Int64
	var mu sync.Mutex
	res := loadResult{requests: total, statuses: map[int]int{}}
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for range keyspaceWorkers {
		wg.Go(func() {
			lat := make([]time.Duration, 0, total/keyspaceWorkers+1)
			st := map[int]int{}
			for {
				i := int(next.Add(1)) - 1
				if i >= total || ctx.Err() != nil {
					break
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+listenAddr+"/x", nil)
				req.Header.Set("X-Real-IP", clientIP(i%keys))
				t := time.Now()
				resp, err := c.Do(req)
				if err != nil {
					mu.Lock()
					firstErr = cmpOr(firstErr, err)
					mu.Unlock()
					break
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat = append(lat, time.Since(t))
				st[resp.StatusCode]++
				if done != nil {
					done.Add(1)
				}
			}
			mu.Lock()
			res.latencies = append(res.latencies, lat...)
			for k, v := range st {
				res.statuses[k] += v
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	res.took = time.Since(start)
	slices.Sort(res.latencies)
	if len(res.latencies) < total && firstErr == nil {
		firstErr = ctx.Err()
	}
	return res, firstErr
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// keyspacePoint is one point of the key-space curve.
type keyspacePoint struct {
	keys      int
	load      loadResult
	stored    int64   // rate-limit keys in the store two sync intervals after the last answer
	worstLag  float64 // worst share, during the run, of the keys answered two intervals before a sample that the store did not hold yet
	rssMB     int64
	cpuPerReq float64 // borda's CPU (user + system) per request, µs
	dropped   float64 // borda_ratelimit_sync_dropped_total
	roundsErr float64
}

// keyspaceCurve runs the key-space points: for each, a private
// redis-server, `borda serve` with sync 50ms, and max(keys, minRequests)
// requests over keys distinct client IPs.
func keyspaceCurve(ctx context.Context, bin, dir, upstream string, points []int, minRequests int) ([]keyspacePoint, error) {
	var out []keyspacePoint
	for _, n := range points {
		p, err := keyspaceRun(ctx, bin, dir, upstream, n, max(n, minRequests))
		if err != nil {
			return out, fmt.Errorf("key space %d: %w", n, err)
		}
		out = append(out, p)
		fmt.Fprint(os.Stderr, keyspaceTable(out))
	}
	return out, nil
}

func keyspaceRun(ctx context.Context, bin, dir, upstream string, keys, total int) (keyspacePoint, error) {
	pt := keyspacePoint{keys: keys}
	srv, redisURL, stopAll, err := startOnPrivateRedis(ctx, bin, dir, fmt.Sprintf("ks%d", keys), func(redisURL string) []byte {
		return keyspaceConfig(upstream, redisURL, keyspaceSync.String(), 1_000_000, 0)
	})
	if err != nil {
		return pt, err
	}
	defer stopAll()
	opt, _ := redis.ParseURL(redisURL)
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	// A sample every 100 ms: the answered count, and the keys the store
	// holds (DBSIZE less the replica registry).
	type sample struct {
		at       time.Time
		answered int64
		stored   int64
	}
	var done atomic.Int64
	var samples []sample
	sctx, cancel := context.WithCancel(ctx)
	var sw sync.WaitGroup
	sw.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case now := <-t.C:
				a := done.Load()
				n, _ := rdb.DBSize(sctx).Result()
				samples = append(samples, sample{now, a, max(n-1, 0)})
			}
		}
	})
	cpu0 := cpuTime(srv.Process.Pid)
	if dir := os.Getenv("BORDA_SCALE_PROFILE_DIR"); dir != "" {
		// A CPU profile of borda from the run's second second, for 5 s
		// (within the shortest point's run), then its heap (admin_pprof:
		// loopback), for reading where a point's time and memory go.
		go func() {
			time.Sleep(2 * time.Second)
			for _, p := range []struct{ path, name string }{
				{"/debug/pprof/profile?seconds=5", "cpu"},
				{"/debug/pprof/heap", "heap"},
			} {
				resp, err := http.Get("http://" + adminAddr + p.path)
				if err != nil {
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				_ = os.WriteFile(fmt.Sprintf("%s/keyspace-%d.%s.pprof", dir, keys, p.name), b, 0o644)
			}
		}()
	}
	load, err := drive(ctx, total, keys, &done)
	cpu1 := cpuTime(srv.Process.Pid)
	cancel()
	sw.Wait()
	if err != nil {
		return pt, err
	}
	pt.cpuPerReq = float64((cpu1 - cpu0).Microseconds()) / float64(total)
	time.Sleep(2 * keyspaceSync)
	n, err := rdb.DBSize(ctx).Result()
	if err != nil {
		return pt, err
	}
	pt.load, pt.stored, pt.rssMB = load, n-1, rss(srv.Process.Pid)>>10
	// Worst lag: for each sample, the distinct keys answered by two
	// intervals before it (less the requests in flight) against the keys
	// stored.
	for _, s := range samples {
		var before int64
		for _, e := range samples {
			if e.at.After(s.at.Add(-2 * keyspaceSync)) {
				break
			}
			before = e.answered
		}
		hit := min(int64(keys), max(before-keyspaceWorkers, 0))
		if hit > 0 {
			pt.worstLag = max(pt.worstLag, float64(hit-min(s.stored, hit))/float64(hit))
		}
	}
	pt.dropped = adminMetric("borda_ratelimit_sync_dropped_total")
	pt.roundsErr = adminMetric(`borda_ratelimit_sync_rounds_total{result="error"}`)
	return pt, nil
}

// denyPoint is one point of the deny-cache curve.
type denyPoint struct {
	refused      int
	load         loadResult
	callsPerReq  float64 // rate-limit store commands per request, refused pass
	refusedShare float64
	rssMB        float64
}

// denyCurve runs, for each number of refused IPs, `borda serve` with sync
// 0 (a store call per decision) and a limit of 1 per 10 minutes: one pass
// over the IPs (each passes), a second (each is refused by the store and
// enters the deny cache), then the measured passes, where every request
// is refused: from the deny cache (no store call) or by the store.
func denyCurve(ctx context.Context, bin, dir, upstream string, points []int, denyCache int) ([]denyPoint, error) {
	var out []denyPoint
	for _, n := range points {
		p, err := denyRun(ctx, bin, dir, upstream, n, denyCache)
		if err != nil {
			return out, fmt.Errorf("deny cache %d: %w", n, err)
		}
		out = append(out, p)
		fmt.Fprint(os.Stderr, denyTable(out, denyCache))
	}
	return out, nil
}

func denyRun(ctx context.Context, bin, dir, upstream string, n, denyCache int) (denyPoint, error) {
	p := denyPoint{refused: n}
	srv, _, done, err := startOnPrivateRedis(ctx, bin, dir, fmt.Sprintf("deny%d", n), func(redisURL string) []byte {
		return keyspaceConfig(upstream, redisURL, "0s", 1, denyCache)
	})
	if err != nil {
		return p, err
	}
	defer done()
	if _, err := drive(ctx, 2*n, n, nil); err != nil {
		return p, err
	}
	before := adminMetric(`borda_redis_commands_total{purpose="ratelimit"}`)
	measured := max(n, 50_000)
	load, err := drive(ctx, measured, n, nil)
	if err != nil {
		return p, err
	}
	after := adminMetric(`borda_redis_commands_total{purpose="ratelimit"}`)
	p.load, p.callsPerReq = load, (after-before)/float64(measured)
	p.refusedShare = float64(load.statuses[http.StatusTooManyRequests]) / float64(measured)
	p.rssMB = float64(rss(srv.Process.Pid) >> 10)
	return p, nil
}

// keyspaceTable is the key-space curve as a Markdown table, throughput
// and p99 also as ratios to the first point's.
func keyspaceTable(pts []keyspacePoint) string {
	var b strings.Builder
	b.WriteString("| distinct keys (requests) | keys in the store 2 intervals after the last answer | worst lag during the run | req/s (× first) | p99 (× first) | borda CPU per request (× first) | RSS | counts not sent | failed rounds |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range pts {
		hit := min(p.keys, p.load.requests)
		fmt.Fprintf(&b, "| %d (%d) | %d of %d (%.1f %%) | %.1f %% | %.0f (%.2f ×) | %.1f ms (%.2f ×) | %.1f µs (%.2f ×) | %d MB | %.0f | %.0f |\n",
			p.keys, p.load.requests, p.stored, hit, 100*float64(p.stored)/float64(hit), 100*p.worstLag,
			p.load.rps(), p.load.rps()/pts[0].load.rps(), ms(p.load.p99()), ms(p.load.p99())/ms(pts[0].load.p99()),
			p.cpuPerReq, p.cpuPerReq/pts[0].cpuPerReq, p.rssMB, p.dropped, p.roundsErr)
	}
	return b.String()
}

// denyTable is the deny-cache curve as a Markdown table.
func denyTable(pts []denyPoint, size int) string {
	var b strings.Builder
	sz := "default"
	if size > 0 {
		sz = fmt.Sprint(size)
	}
	fmt.Fprintf(&b, "| refused client IPs (deny cache: %s) | store calls per request | refused | req/s (× first) | p99 | RSS |\n|---|---|---|---|---|---|\n", sz)
	for _, p := range pts {
		fmt.Fprintf(&b, "| %d | %.2f | %.1f %% | %.0f (%.2f ×) | %.1f ms | %.0f MB |\n",
			p.refused, p.callsPerReq, 100*p.refusedShare, p.load.rps(), p.load.rps()/pts[0].load.rps(), ms(p.load.p99()), p.rssMB)
	}
	return b.String()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// startOnPrivateRedis starts a private redis-server and `borda serve`
// with the configuration config returns for its URL (written as
// dir/name.yaml); done stops both.
func startOnPrivateRedis(ctx context.Context, bin, dir, name string, config func(redisURL string) []byte) (*exec.Cmd, string, func(), error) {
	rp, redisURL, err := harness.StartRedis(ctx, dir, "redis-"+name, "", "")
	if err != nil {
		return nil, "", nil, err
	}
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, config(redisURL), 0o600); err != nil {
		rp.Stop(5 * time.Second)
		return nil, "", nil, err
	}
	srv, _, err := startServe(ctx, bin, path)
	if err != nil {
		rp.Stop(5 * time.Second)
		return nil, "", nil, err
	}
	return srv, redisURL, func() { stop(srv); rp.Stop(5 * time.Second) }, nil
}

// adminMetric reads one series (name with its labels) from the admin
// listener's /metrics; -1 when absent.
func adminMetric(series string) float64 {
	resp, err := client.Get("http://" + adminAddr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	return -1
}
