package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"time"

	"github.com/olp-edu/borda/bench/harness"
	"github.com/olp-edu/borda/bench/loadgen"
)

// measure runs one round against t: saturation (wrk or the Go generator),
// then the fixed rate (always the Go open-loop generator).
func measure(ctx context.Context, o options, t *target) (sat, fixed loadgen.Result) {
	c := loadgen.NewClient(o.workers, 5*time.Second)
	var profiled chan error
	if o.profile != "" && t.admin != "" && len(t.rounds) == 0 {
		profiled = make(chan error, 1)
		go func() {
			time.Sleep(o.warmup)
			profiled <- harness.SaveProfile(ctx, t.admin, o.sat, filepath.Join(o.profile, t.name+".pprof"))
		}()
	}
	if o.gen == "wrk" {
		sat = wrkSaturate(ctx, o, t.url)
	} else {
		sat = loadgen.Saturate(ctx, c, loadgen.Get(t.url, ""), o.workers, o.warmup, o.sat)
	}
	if profiled != nil {
		if err := <-profiled; err != nil {
			fmt.Printf("%-21s profile: %v\n", "", err)
		} else {
			fmt.Printf("%-21s profile: %s (go tool pprof -top %[2]s)\n", "", filepath.Join(o.profile, t.name+".pprof"))
		}
	}
	c.CloseIdleConnections()
	c = loadgen.NewClient(256, 5*time.Second)
	fixed = loadgen.Fixed(ctx, c, loadgen.Get(t.url, ""), o.rate, 256, o.warmup, o.fixed)
	c.CloseIdleConnections()
	return sat, fixed
}

// wrkSaturate measures saturation with wrk (a warm-up run, then the
// measured one) and returns it as a Result with no latencies.
func wrkSaturate(ctx context.Context, o options, url string) loadgen.Result {
	secs := time.Duration(math.Round(o.sat.Seconds())) * time.Second
	secs = max(secs, time.Second)
	res := loadgen.Result{Status: map[int]int64{}, Elapsed: secs}
	if !o.ci { // wrk counts whole seconds; CI skips the warm-up run to stay short
		if _, _, err := harness.Wrk(ctx, o.clientCPU, o.workers, max(o.warmup, time.Second), url); err != nil {
			res.Errors, res.FirstErr = 1, err.Error()
			return res
		}
	}
	rps, bad, err := harness.Wrk(ctx, o.clientCPU, o.workers, secs, url)
	if err != nil {
		res.Errors, res.FirstErr = 1, err.Error()
		return res
	}
	res.Requests = int64(rps * secs.Seconds())
	res.Status[200] = res.Requests - bad
	if bad > 0 {
		res.Status[0] = bad // non-2xx/3xx or socket errors, as wrk counts them
	}
	return res
}
