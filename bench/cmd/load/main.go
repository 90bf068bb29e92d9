// Command load measures, in one run and on loopback, the saturation
// throughput and the latency at a fixed rate of five targets in front of
// the same upstream, and prints them as ratios:
//
//	upstream      the upstream alone (the floor)
//	bare-go       a bare httputil.ReverseProxy with a tuned transport
//	nginx         nginx, one worker, keep-alive upstream pool
//	borda         borda serve, full middleware chain, no rate-limit rule
//	borda-3rules  borda serve with three rate-limit rules on Redis
//
// The proxy under test is pinned to -proxy-cpu (GOMAXPROCS or
// worker_processes 1); the generator and the upstream run on -client-cpu.
// Saturation is measured with wrk and the upstream is a static nginx when
// they are installed (-gen, -upstream): on a 2-CPU machine the client CPU
// is otherwise the bottleneck and every proxy looks the same. Latency at
// the fixed rate is always measured by the Go open-loop generator.
//
//	go run ./bench/cmd/load        # 3 rounds of 10 s saturation + 10 s at 1 000 req/s per target
//	go run ./bench/cmd/load -ci    # 1 round of 1 s saturation + 1.5 s at 1 000 req/s, for CI
//
// Borda writes its counters under olp-dev:bench<id>: on -redis, and the
// run deletes them at the end. Exit status: 1 when a target could not run;
// with -strict, also when a target ratio is missed (figures never fail CI
// otherwise: they depend on the machine).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/olp-edu/borda/bench/harness"
	"github.com/olp-edu/borda/bench/loadgen"
)

type options struct {
	ci                   bool
	sat, fixed, warmup   time.Duration
	rate, workers        int
	rounds               int
	proxyCPU, clientCPU  string
	borda, redisURL, out string
	profile              string
	gen, upstream        string
	strict, keep         bool
	sync                 string
	targets              string
}

func main() {
	var o options
	flag.BoolVar(&o.ci, "ci", false, "short run for CI (1 round, 1 s saturation, 1.5 s fixed rate)")
	flag.DurationVar(&o.sat, "sat", 10*time.Second, "saturation measurement per target")
	flag.DurationVar(&o.fixed, "fixed", 10*time.Second, "fixed-rate measurement per target")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "unrecorded warm-up before each measurement")
	flag.IntVar(&o.rate, "rate", 1000, "fixed rate, requests per second")
	flag.IntVar(&o.workers, "conns", 64, "concurrent connections at saturation")
	flag.IntVar(&o.rounds, "rounds", 3, "measurement rounds (targets interleaved; medians reported)")
	flag.StringVar(&o.proxyCPU, "proxy-cpu", "1", "CPU list the proxy under test is pinned to (taskset); empty: no pinning")
	flag.StringVar(&o.clientCPU, "client-cpu", "0", "CPU list of the generator and the upstream")
	flag.StringVar(&o.borda, "borda", "", "borda binary (default: go build ./cmd/borda)")
	flag.StringVar(&o.redisURL, "redis", "", "Redis for borda's rules and telemetry (default: a private redis-server pinned to -client-cpu, off the proxy's CPU)")
	flag.StringVar(&o.targets, "targets", "upstream,bare-go,nginx,borda,borda-3rules", "targets to measure, comma-separated (also: borda-notelemetry, the baseline of telemetry's cost)")
	flag.StringVar(&o.out, "out", "", "also write the result table (Markdown) to this file")
	flag.StringVar(&o.profile, "profile", "", "save a CPU profile of each Go proxy's (bare-go, borda…) first saturation run to DIR/<target>.pprof")
	flag.StringVar(&o.gen, "gen", "auto", "saturation generator: wrk, go, or auto (wrk when installed: it leaves more of a small machine to the proxy)")
	flag.StringVar(&o.upstream, "upstream", "auto", "upstream server: nginx (static 200), go (bench/cmd/upstream), or auto (nginx when installed)")
	flag.StringVar(&o.sync, "sync", "", "rate_limits.sync of the borda targets' rules (e.g. 50ms; empty: a store round trip per request)")
	flag.BoolVar(&o.strict, "strict", false, "exit 1 when a target ratio is missed")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (configs, logs)")
	install := flag.Bool("install", true, "run scripts/bench-deps.sh when wrk or nginx is missing (installs them from the distribution's packages)")
	flag.Parse()
	if *install {
		harness.InstallTools()
	}
	if o.ci {
		o.sat, o.fixed, o.warmup, o.rounds = time.Second, 1500*time.Millisecond, 500*time.Millisecond, 1
	}
	if o.gen == "auto" {
		o.gen = "go"
		if harness.WrkPath() != "" {
			o.gen = "wrk"
		}
	}
	if o.upstream == "auto" {
		o.upstream = "go"
		if _, err := harness.NginxPath(); err == nil {
			o.upstream = "nginx"
		}
	}
	if err := harness.PinSelf(o.clientCPU); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, o))
}

type target struct {
	name   string
	url    string
	admin  string              // pprof base URL (borda admin listener, bareproxy -pprof), for profiles
	rounds [][2]loadgen.Result // per round: saturation, fixed rate
	err    error
}

// rps is the median saturation throughput over the rounds.
func (t *target) rps() float64 {
	var v []float64
	for _, r := range t.rounds {
		v = append(v, r[0].RPS())
	}
	return harness.Median(v)
}

// latency is the median over the rounds of the q-quantile at the fixed rate.
func (t *target) latency(q float64) time.Duration {
	var v []float64
	for _, r := range t.rounds {
		v = append(v, float64(r[1].Latencies.Quantile(q)))
	}
	return time.Duration(harness.Median(v))
}

func run(ctx context.Context, o options) int {
	root, err := harness.ModuleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "borda-bench-load-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		return 1
	}
	if o.keep {
		fmt.Println("work directory:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	bins := map[string]string{}
	for _, pkg := range []string{"./bench/cmd/upstream", "./bench/cmd/bareproxy", "./cmd/borda"} {
		if pkg == "./cmd/borda" && o.borda != "" {
			bins[pkg] = o.borda
			continue
		}
		if bins[pkg], err = harness.Build(ctx, root, dir, pkg); err != nil {
			fmt.Fprintln(os.Stderr, "load:", err)
			return 1
		}
	}
	upAddr, _ := harness.FreeAddr()
	var up *harness.Process
	if o.upstream == "nginx" {
		up, err = harness.StartNginxUpstream(dir, o.clientCPU, upAddr)
	} else {
		up, err = harness.Start(dir, "upstream", o.clientCPU, nil, bins["./bench/cmd/upstream"], "-listen", upAddr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		return 1
	}
	defer up.Stop(2 * time.Second)
	if err := harness.WaitTCP(ctx, upAddr, 5*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		return 1
	}
	if o.redisURL == "" {
		// A private Redis on the client CPU: a shared, unpinned one is
		// scheduled on the proxy's CPU part of the time and charges its
		// Lua time to the proxy under test.
		redisProc, url, err := harness.StartRedis(ctx, dir, "redis", "", o.clientCPU)
		if err != nil {
			fmt.Fprintln(os.Stderr, "load:", err)
			return 1
		}
		defer redisProc.Stop(2 * time.Second)
		o.redisURL = url
	}
	runID := fmt.Sprintf("bench%d", time.Now().UnixNano()%1e9)
	prefix := "olp-dev:" + runID + ":"
	defer cleanupRedis(o.redisURL, prefix)

	fmt.Printf("machine: %s\nproxy pinned to CPU %q, generator and upstream to CPU %q; saturation generator %s, upstream %s\n",
		harness.Machine(), o.proxyCPU, o.clientCPU, o.gen, o.upstream)
	fmt.Printf("per target and round: %s saturation (%d connections), %s at %d req/s, %s warm-up each; %d rounds, medians reported\n\n",
		o.sat, o.workers, o.fixed, o.rate, o.warmup, o.rounds)
	var results []*target
	failed := false
	for _, name := range strings.Split(o.targets, ",") {
		t := &target{name: strings.TrimSpace(name)}
		results = append(results, t)
		stop, err := startTarget(ctx, dir, bins, o, t, upAddr, prefix)
		if err != nil {
			t.err = err
			failed = true
			fmt.Printf("%-13s FAILED: %v\n", t.name, err)
			continue
		}
		defer stop()
	}
	// Rounds interleave the targets, so a burst of noise from elsewhere on
	// the machine hits one round of each rather than all of one target.
	for round := 1; round <= o.rounds && ctx.Err() == nil; round++ {
		for _, t := range results {
			if t.err != nil || ctx.Err() != nil {
				continue
			}
			sat, fixed := measure(ctx, o, t)
			t.rounds = append(t.rounds, [2]loadgen.Result{sat, fixed})
			fmt.Printf("round %d %-13s %8.0f req/s   p50 %-8v p99 %-8v (at %d req/s; statuses %v %v)\n", round, t.name, sat.RPS(),
				round2(fixed.Latencies.Quantile(0.5)), round2(fixed.Latencies.Quantile(0.99)), o.rate, sat.Status, fixed.Status)
			for _, r := range []loadgen.Result{sat, fixed} {
				if r.Errors > 0 {
					fmt.Printf("%-21s %d transport errors, first: %s\n", "", r.Errors, r.FirstErr)
				}
			}
		}
	}
	if ctx.Err() != nil {
		return 1
	}
	table, missed := report(results, o)
	fmt.Println()
	fmt.Print(table)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(table), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "load:", err)
		}
	}
	if failed || (o.strict && missed) {
		return 1
	}
	return 0
}

// startTarget starts the process behind t (none for the upstream), waits
// until a request through it answers 200, and returns its stop function.
func startTarget(ctx context.Context, dir string, bins map[string]string, o options, t *target, upAddr, prefix string) (func(), error) {
	addr, err := harness.FreeAddr()
	if err != nil {
		return nil, err
	}
	var p *harness.Process
	switch t.name {
	case "upstream":
		t.url = "http://" + upAddr + "/api/items/123"
		return func() {}, nil
	case "bare-go":
		pprofAddr, _ := harness.FreeAddr()
		t.admin = "http://" + pprofAddr // profiled like borda with -profile
		p, err = harness.Start(dir, "bareproxy", o.proxyCPU, []string{"GOMAXPROCS=" + cpuCount(o.proxyCPU)},
			bins["./bench/cmd/bareproxy"], "-listen", addr, "-upstream", "http://"+upAddr, "-pprof", pprofAddr)
	case "nginx":
		p, err = harness.StartNginx(dir, o.proxyCPU, addr, upAddr)
	case "borda", "borda-3rules", "borda-notelemetry":
		admin, _ := harness.FreeAddr()
		spec := harness.BordaSpec{Listen: addr, Admin: admin, Upstream: "http://" + upAddr, RedisURL: o.redisURL, KeyPrefix: prefix, Sync: o.sync}
		if t.name == "borda-3rules" {
			spec.Rules = 3
		}
		spec.NoTelemetry = t.name == "borda-notelemetry"
		t.admin = "http://" + admin
		p, err = harness.StartBorda(dir, t.name, o.proxyCPU, bins["./cmd/borda"], spec)
	default:
		return nil, fmt.Errorf("unknown target %q", t.name)
	}
	if err != nil {
		return nil, err
	}
	t.url = "http://" + addr + "/api/items/123"
	stop := func() { p.Stop(5 * time.Second) }
	if err := waitOK(ctx, t.url, 15*time.Second); err != nil {
		if ok, exitErr := p.Exited(); ok {
			err = fmt.Errorf("%s exited (%v): %s", p.Name, exitErr, strings.TrimSpace(p.Tail(600)))
		} else {
			err = fmt.Errorf("%w; log tail: %s", err, strings.TrimSpace(p.Tail(600)))
		}
		stop()
		return nil, err
	}
	return stop, nil
}

func waitOK(ctx context.Context, url string, timeout time.Duration) error {
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		resp, err := c.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("no 200 from %s within %s (last: %s)", url, timeout, last)
}

func cleanupRedis(redisURL, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n, err := harness.KeysWithoutTTL(ctx, redisURL, prefix); err == nil && n > 0 {
		fmt.Printf("WARNING: %d Redis keys under %s have no TTL\n", n, prefix)
	}
	if n, err := harness.DeleteKeys(ctx, redisURL, prefix); err == nil && n > 0 {
		fmt.Printf("deleted %d Redis keys under %s\n", n, prefix)
	}
}

func cpuCount(cpus string) string {
	n := 0
	for _, part := range strings.Split(cpus, ",") {
		var a, b int
		if _, err := fmt.Sscanf(part, "%d-%d", &a, &b); err == nil {
			n += b - a + 1
		} else if part != "" {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprint(n)
}

func round2(d time.Duration) time.Duration {
	if d > time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
