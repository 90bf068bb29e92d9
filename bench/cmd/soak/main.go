// Command soak runs borda serve under mixed proxy and webhook traffic for a
// while and checks that it stays flat and loses nothing.
//
//	go run ./bench/cmd/soak                    # 10 minutes, 500 proxy + 25 webhook req/s
//	go run ./bench/cmd/soak -ci                # 1 minute, 200 + 20 req/s, for CI
//	go run ./bench/cmd/soak -duration 1h -proxy-rps 1000
//
// Every -interval (10 s) it samples RSS and open fds (/proc), goroutines
// (/debug/pprof/goroutine?debug=1 on the admin listener) and the live heap
// (HeapAlloc right after a forced collection, /debug/pprof/heap?gc=1).
// Growth from the warm-up's peak (the first 25 % of the run) to the mean of
// the last two samples must stay under 10 % (issue 5). Only the one-minute
// -ci run also passes within +1 MiB of live heap and +10 goroutines or fds
// (its connection pools to Redis, RabbitMQ and the upstream may still be
// settling; a leak per request or per connection shows as hundreds within
// minutes), and reports RSS without judging it (in one minute RSS follows
// the GC pacer and the allocator's kept pages, not what is reachable). The
// full run has no such allowance and judges RSS too.
//
// Every 200 PUBLISHED_CONFIRMED must be a message in RabbitMQ: the run
// publishes to its own exchange and queue (bench-soak-<id>), counts the
// queue at the end (lost = confirmed − queued must be 0), then deletes
// them.
//
// Every event is distinct, so the webhook dedup cache (an LRU bounded by
// webhook.dedup_size, 20 000 by default, entries kept 30 minutes) grows
// until it is full: about 0.6 KiB per entry (a 10-minute run at the
// default size grew 8.5 MiB for 14 500 events), 12 MiB when full.
// That growth is bounded by design, so the soak runs with -dedup-size 2000
// (full after 80 s at 25 req/s, inside the warm-up) to see past it, and the
// -ci run with 200 (full after 10 s at 20 req/s).
//
// It uses the local Redis (-redis; keys under olp-dev:bench…:,
// checked for TTLs and deleted at the end) and RabbitMQ (-amqp). Exit
// status 1 when a check fails.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/olp-edu/borda/bench/harness"
	"github.com/olp-edu/borda/bench/loadgen"
	"github.com/olp-edu/borda/bench/webhookload"
)

func main() {
	ci := flag.Bool("ci", false, "short run for CI (1 minute)")
	duration := flag.Duration("duration", 10*time.Minute, "how long to run traffic")
	interval := flag.Duration("interval", 10*time.Second, "sampling interval")
	proxyRPS := flag.Int("proxy-rps", 500, "proxy requests per second")
	webhookRPS := flag.Int("webhook-rps", 25, "webhook requests per second")
	bordaBin := flag.String("borda", "", "borda binary (default: go build ./cmd/borda)")
	redisURL := flag.String("redis", "redis://127.0.0.1:6379/0", "Redis for rules and telemetry")
	amqpURL := flag.String("amqp", "amqp://guest:guest@127.0.0.1:5672/", "RabbitMQ")
	maxGrowth := flag.Float64("max-growth", 0.10, "allowed growth of RSS, goroutines and fds")
	dedupSize := flag.Int("dedup-size", 2000, "webhook.dedup_size: small, so the bounded dedup cache is full before the warm-up ends")
	flag.Parse()
	if *ci {
		// 200 entries: the dedup cache is full after 10 s at 20 req/s,
		// inside the one-minute run's warm-up.
		*duration, *proxyRPS, *webhookRPS, *dedupSize = time.Minute, 200, 20, 200
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, *duration, *interval, *proxyRPS, *webhookRPS, *bordaBin, *redisURL, *amqpURL, *maxGrowth, *dedupSize, *ci))
}

func run(ctx context.Context, duration, interval time.Duration, proxyRPS, webhookRPS int, bordaBin, redisURL, amqpURL string, maxGrowth float64, dedupSize int, ci bool) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "soak:", err); return 1 }
	setup, err := harness.NewSetup(ctx, "soak", bordaBin)
	if err != nil {
		return fail(err)
	}
	defer setup.Close()
	dir, bordaBin, upAddr := setup.Dir, setup.Borda, setup.UpstreamAddr

	id := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	listen, _ := harness.FreeAddr()
	admin, _ := harness.FreeAddr()
	spec := harness.BordaSpec{
		Listen: listen, Admin: admin, Upstream: "http://" + upAddr,
		RedisURL: redisURL, KeyPrefix: "olp-dev:bench" + id + ":", AMQPURL: amqpURL,
		Rules: 3, Webhook: true, Name: "bench-soak-" + id, Token: "bench-token-" + id,
		DedupSize: dedupSize,
	}
	defer harness.DeleteTopology(amqpURL, spec)
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if n, _ := harness.KeysWithoutTTL(cctx, redisURL, spec.KeyPrefix); n > 0 {
			fmt.Printf("FAIL: %d Redis keys under %s have no TTL\n", n, spec.KeyPrefix)
		}
		_, _ = harness.DeleteKeys(cctx, redisURL, spec.KeyPrefix)
	}()
	borda, err := harness.StartBorda(dir, "borda", "", bordaBin, spec)
	if err != nil {
		return fail(err)
	}
	defer borda.Stop(10 * time.Second)
	if err := loadgen.WaitReady(ctx, "http://"+listen+"/readyz", 20*time.Second); err != nil {
		return fail(fmt.Errorf("borda serve not ready on /readyz: %w; log tail: %s", err, strings.TrimSpace(borda.Tail(800))))
	}
	adminBase := "http://" + admin
	fmt.Printf("machine: %s\nsoak: %s of %d proxy req/s + %d webhook req/s, sampling every %s (borda pid %d)\n",
		harness.Machine(), duration, proxyRPS, webhookRPS, interval, borda.PID())

	var wg sync.WaitGroup
	var proxyRes, hookRes loadgen.Result
	wg.Add(2)
	go func() {
		defer wg.Done()
		// Few connections, reused: the client's pool must not grow with a
		// latency spike, or borda's goroutines and fds would track the
		// generator instead of borda.
		c := loadgen.NewClient(32, 10*time.Second)
		proxyRes = loadgen.Fixed(ctx, c, loadgen.Get("http://"+listen+"/api/items/1", ""), proxyRPS, 512, 0, duration)
	}()
	go func() {
		defer wg.Done()
		c := loadgen.NewClient(8, 10*time.Second)
		req := webhookload.Request("http://"+listen+harness.WebhookPath, spec.Token, spec.Name)
		hookRes = loadgen.FixedClassify(ctx, c, req, webhookload.Classify, webhookRPS, 256, 0, duration)
	}()

	var samples []harness.Stats
	tick := time.NewTicker(interval)
	start := time.Now()
	end := start.Add(duration)
	fmt.Printf("%8s %10s %10s %10s %6s\n", "t", "RSS MiB", "heap MiB", "goroutines", "fds")
	for time.Now().Before(end) && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
			s, err := harness.Sample(borda.PID(), adminBase)
			if err != nil {
				fmt.Println("sample:", err)
				continue
			}
			samples = append(samples, s)
			fmt.Printf("%8s %10.1f %10.2f %10d %6d\n", time.Since(start).Round(time.Second), float64(s.RSSBytes)/(1<<20), float64(s.HeapLiveBytes)/(1<<20), s.Goroutines, s.FDs)
		}
	}
	tick.Stop()
	wg.Wait()
	time.Sleep(time.Second) // let the last confirms land

	ok := true
	fmt.Printf("\nproxy:   %d requests, statuses %v, %d transport errors, p50 %v p99 %v\n", proxyRes.Requests, proxyRes.Status,
		proxyRes.Errors, proxyRes.Latencies.Quantile(0.5), proxyRes.Latencies.Quantile(0.99))
	fmt.Printf("webhook: %d requests, outcomes %v, %d transport errors, p99 %v\n", hookRes.Requests, hookRes.Classes, hookRes.Errors, hookRes.Latencies.Quantile(0.99))
	for _, r := range []loadgen.Result{proxyRes, hookRes} {
		if r.Errors > 0 {
			fmt.Printf("FAIL: %d transport errors, the first: %s\n", r.Errors, r.FirstErr)
			ok = false
		}
	}
	if proxyRes.Status[200] != proxyRes.Requests {
		fmt.Println("FAIL: some proxy requests did not answer 200")
		ok = false
	}
	confirmed := hookRes.Classes[webhookload.Confirmed]
	queued, err := harness.QueueDepth(amqpURL, spec.ForwardQueue())
	if err != nil {
		fmt.Println("FAIL:", err)
		ok = false
	}
	lost := max(confirmed-int64(queued), 0)
	fmt.Printf("accounting: %d PUBLISHED_CONFIRMED, %d messages in %s, lost %d, extra %d\n", confirmed, queued, spec.ForwardQueue(), lost, max(int64(queued)-confirmed, 0))
	if lost != 0 || confirmed == 0 {
		fmt.Println("FAIL: every confirmed event must be in the queue (and some must be confirmed)")
		ok = false
	}
	if !flat(samples, duration, interval, maxGrowth, ci) {
		ok = false
	}
	if ok {
		fmt.Println("soak: PASS")
		return 0
	}
	fmt.Println("soak: FAIL")
	return 1
}

// flat compares the highest sample of the warm-up (the first 25 % of the
// run, at least two intervals) with the mean of the last two samples: a
// leak keeps growing past the warm-up's peak, while the allocator's and the
// connection pools' early swings stay under it.
//
// slack, when set (the -ci run only), also passes a growth within +1 MiB of
// live heap and +10 goroutines or fds, and a step after the warm-up that
// the last samples do not exceed: in a one-minute run a connection pool
// (Redis, the upstream, the load generator's own connections after a
// latency spike) can settle after the warm-up, and a CI run saw fds 23,
// 23, 36, 36, 36, 36 — a leak keeps growing, a pool that settled does not.
// The -ci run reports RSS without judging it: in one minute RSS follows
// the GC pacer's heap target and the pages the allocator keeps (a CI run
// saw 32.7 → 38.4 MiB on a flat load), so the live heap after a forced
// collection judges memory there; the full run judges both.
func flat(samples []harness.Stats, duration, interval time.Duration, maxGrowth float64, slack bool) bool {
	if len(samples) < 3 {
		fmt.Printf("FAIL: only %d samples; run longer than 3 intervals\n", len(samples))
		return false
	}
	warm := max(duration/4, 2*interval)
	nWarm := max(int((warm+interval-1)/interval), 1) // samples in the warm-up
	base := samples[0]
	for _, s := range samples[:min(nWarm, len(samples)-2)] {
		base.RSSBytes = max(base.RSSBytes, s.RSSBytes)
		base.HeapLiveBytes = max(base.HeapLiveBytes, s.HeapLiveBytes)
		base.Goroutines = max(base.Goroutines, s.Goroutines)
		base.FDs = max(base.FDs, s.FDs)
	}
	last := samples[len(samples)-2:]
	// settled: the highest sample between the warm-up and the last two
	// (none: the run is too short to tell a step from a leak).
	mid := samples[min(nWarm, len(samples)-2) : len(samples)-2]
	ok := true
	check := func(what string, judged bool, allowance float64, of func(harness.Stats) float64) {
		from, to := of(base), (of(last[0])+of(last[1]))/2
		growth := 0.0
		if from > 0 {
			growth = (to - from) / from
		}
		settled := false
		if len(mid) > 0 {
			peak := of(mid[0])
			for _, s := range mid[1:] {
				peak = max(peak, of(s))
			}
			settled = to <= peak
		}
		pass := growth < maxGrowth || (slack && (to-from <= allowance || settled))
		verdict := "ok"
		switch {
		case !judged:
			verdict = "reported (judged by the full run)"
		case !pass:
			verdict, ok = "FAIL", false
		}
		fmt.Printf("%-10s %10.1f → %10.1f  growth %+6.1f%%  %s\n", what, from, to, 100*growth, verdict)
	}
	rss := func(s harness.Stats) float64 { return float64(s.RSSBytes) / (1 << 20) }
	heap := func(s harness.Stats) float64 { return float64(s.HeapLiveBytes) / (1 << 20) }
	goroutines := func(s harness.Stats) float64 { return float64(s.Goroutines) }
	fds := func(s harness.Stats) float64 { return float64(s.FDs) }
	check("RSS MiB", !slack, 0, rss)
	if base.HeapLiveBytes < 0 || last[0].HeapLiveBytes < 0 || last[1].HeapLiveBytes < 0 {
		fmt.Println("FAIL: the live heap was not sampled (the admin listener's /debug/pprof/heap)")
		ok = false
	} else {
		check("heap MiB", true, 1, heap)
	}
	check("goroutines", true, 10, goroutines)
	check("fds", true, 10, fds)
	return ok
}
