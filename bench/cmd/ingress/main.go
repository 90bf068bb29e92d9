// Command ingress measures the webhook ingress of borda serve against its
// ceiling, in one run on loopback: a bare amqp091-go publisher with the
// same number of confirms in flight, the same 1 KB persistent messages and
// the same queue type (docs/webhooks.md §10).
//
//	bare-amqp091   a confirm-mode channel, -conns publishes in flight: the ceiling
//	bare, envelope the same with the bytes borda publishes for the event (its envelope)
//	borda          POST /webhooks/bench through borda serve, -conns connections,
//	               each answered 200 only after the broker confirmed
//	borda @ rate   the same at a fixed -rate (open loop), p50/p99
//
//	go run ./bench/cmd/ingress          # 3 rounds × (10 s bare + 10 s bare envelope + 10 s borda + 10 s at 500/s)
//	go run ./bench/cmd/ingress -ci      # 1 round × (2 s + 2 s + 2 s), for CI
//
// Saturation goes through wrk (one thread, a Lua script POSTing unique
// events) when it is installed, else through the Go generator, which costs
// the shared CPU more (the ratio then understates borda). Nothing is
// pinned: the broker, borda, the generator and the bare publisher share the
// machine, as they would share a small VPS. borda runs with no Redis (the
// embedded store) so the figure is the ingress's alone.
//
// Every round purges the run's queue and counts it: each 200
// PUBLISHED_CONFIRMED must be a message there (lost = confirmed − queued
// must be 0; wrk may cut off a few requests at the end whose messages are
// queued but whose answers it never read, so queued may exceed confirmed).
// The run's exchange and queues are deleted at the end. Exit status 1 when a
// run fails or a message is lost; with -strict also when a target is missed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/olp-edu/borda/bench/harness"
	"github.com/olp-edu/borda/bench/loadgen"
	"github.com/olp-edu/borda/bench/webhookload"
	"github.com/olp-edu/borda/webhook/envelope"
)

type options struct {
	ci, strict       bool
	sat, fixed       time.Duration
	warmup           time.Duration
	rate, conns      int
	rounds, pad      int
	queueType, gen   string
	borda, amqp, out string
	profile          string
	envBytes         int // size of the envelope of a bench event (reported)
	channels         int
}

// round is one measurement of each target.
type round struct {
	bare        bareResult
	bareEnv     bareResult        // the bare publisher with envelope-sized messages
	sat         harness.WrkResult // from wrk, or converted from the Go generator
	fixed       loadgen.Result
	confirmed   int64 // 200 PUBLISHED_CONFIRMED seen (saturation + fixed)
	queued, bad int64
}

func main() {
	var o options
	flag.BoolVar(&o.ci, "ci", false, "short run for CI (1 round, 2 s each)")
	flag.DurationVar(&o.sat, "sat", 10*time.Second, "saturation measurement per target")
	flag.DurationVar(&o.fixed, "fixed", 10*time.Second, "fixed-rate measurement")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "unrecorded warm-up of borda before the first round")
	flag.IntVar(&o.rate, "rate", 500, "fixed rate, webhook requests per second")
	flag.IntVar(&o.conns, "conns", 64, "requests (and bare publishes) in flight at saturation")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds (medians reported)")
	flag.IntVar(&o.pad, "pad", 900, "message text padding: events of about 1 KB")
	flag.StringVar(&o.queueType, "queue-type", "quorum", "webhook.queue_type of the run's forward queue: quorum or classic")
	flag.StringVar(&o.gen, "gen", "auto", "saturation generator: wrk, go, or auto (wrk when installed)")
	flag.StringVar(&o.borda, "borda", "", "borda binary (default: go build ./cmd/borda)")
	flag.StringVar(&o.amqp, "amqp", "amqp://guest:guest@127.0.0.1:5672/", "RabbitMQ")
	flag.StringVar(&o.out, "out", "", "also write the result table (Markdown) to this file")
	flag.BoolVar(&o.strict, "strict", false, "exit 1 when a target is missed")
	flag.IntVar(&o.channels, "channels", 0, "webhook.publish_channels of borda (0: the default)")
	flag.StringVar(&o.profile, "profile", "", "save a CPU profile of borda during the first saturation run to this file")
	install := flag.Bool("install", true, "run scripts/bench-deps.sh when wrk or nginx is missing (installs them from the distribution's packages)")
	flag.Parse()
	if *install {
		harness.InstallTools()
	}
	if o.ci {
		o.sat, o.fixed, o.warmup, o.rounds = 2*time.Second, 2*time.Second, 500*time.Millisecond, 1
	}
	if o.gen == "auto" {
		o.gen = "go"
		if harness.WrkPath() != "" {
			o.gen = "wrk"
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, o))
}

func run(ctx context.Context, o options) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "ingress:", err); return 1 }
	setup, err := harness.NewSetup(ctx, "ingress", o.borda)
	if err != nil {
		return fail(err)
	}
	defer setup.Close()
	id := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	listen, _ := harness.FreeAddr()
	admin, _ := harness.FreeAddr()
	spec := harness.BordaSpec{
		Listen: listen, Admin: admin, Upstream: "http://" + setup.UpstreamAddr, AMQPURL: o.amqp,
		Webhook: true, Name: "bench-ingress-" + id, Token: "bench-token-" + id, QueueType: o.queueType,
		PublishChannels: o.channels,
	}
	defer harness.DeleteTopology(o.amqp, spec)
	borda, err := harness.StartBorda(setup.Dir, "borda", "", setup.Borda, spec)
	if err != nil {
		return fail(err)
	}
	defer borda.Stop(10 * time.Second)
	if err := loadgen.WaitReady(ctx, "http://"+listen+"/readyz", 20*time.Second); err != nil {
		return fail(fmt.Errorf("borda serve not ready on /readyz: %w; log tail: %s", err, strings.TrimSpace(borda.Tail(800))))
	}
	url := "http://" + listen + harness.WebhookPath
	body := []byte(fmt.Sprintf(`{"event":"messages.upsert","instance":"bench","data":{"key":{"id":"bare"},"message":{"conversation":"olá%s"}}}`, strings.Repeat("x", o.pad)))
	// What borda publishes for that event: the envelope (docs/webhooks.md §5),
	// base64 body and metadata, about 1.4 times the body. A bare publisher
	// of the same bytes separates the contract's cost from the gateway's.
	envBody, err := envelope.New("bench:messages.upsert:bare", "whatsapp", "application/json",
		map[string]string{"content-type": "application/json", "user-agent": "wrk"}, body, time.Now()).Encode()
	if err != nil {
		return fail(err)
	}
	o.envBytes = len(envBody)
	fmt.Printf("machine: %s\ningress: %s queue, %d-byte events, %d in flight, %s saturation generator, %d req/s fixed rate; nothing pinned\n\n",
		harness.Machine(), o.queueType, len(body), o.conns, o.gen, o.rate)

	client := loadgen.NewClient(o.conns, 10*time.Second)
	warm := loadgen.Saturate(ctx, client, webhookload.PaddedRequest(url, spec.Token, id+"-warm", o.pad), o.conns, 0, o.warmup)
	if warm.Status[200] == 0 {
		return fail(fmt.Errorf("warm-up: no 200 from %s (statuses %v, first error %q); log tail: %s", url, warm.Status, warm.FirstErr, strings.TrimSpace(borda.Tail(800))))
	}
	if _, err := harness.PurgeQueue(o.amqp, spec.ForwardQueue()); err != nil {
		return fail(err)
	}

	var rounds []round
	lost := false
	for n := 1; n <= o.rounds && ctx.Err() == nil; n++ {
		var r round
		if r.bare, err = barePublish(ctx, o.amqp, spec.Exchange(), spec.RoutingKey(), body, o.conns, o.sat); err != nil {
			return fail(err)
		}
		if r.bareEnv, err = barePublish(ctx, o.amqp, spec.Exchange(), spec.RoutingKey(), envBody, o.conns, o.sat); err != nil {
			return fail(err)
		}
		if _, err := harness.PurgeQueue(o.amqp, spec.ForwardQueue()); err != nil {
			return fail(err)
		}
		run := fmt.Sprintf("%s-r%d", id, n)
		var profiled chan error
		if o.profile != "" && n == 1 {
			profiled = make(chan error, 1)
			go func() { profiled <- harness.SaveProfile(ctx, "http://"+admin, o.sat, o.profile) }()
		}
		if r.sat, err = saturate(ctx, o, setup.Dir, url, spec.Token, run); err != nil {
			return fail(err)
		}
		if profiled != nil {
			if err := <-profiled; err != nil {
				fmt.Println("profile:", err)
			} else {
				fmt.Printf("profile: %s (go tool pprof -top %[1]s)\n", o.profile)
			}
		}
		r.confirmed = r.sat.Requests - r.sat.Non2xx // a socket error is not a response: never counted as confirmed
		r.bad = r.sat.Non2xx + r.sat.SocketErrors
		r.fixed = loadgen.FixedClassify(ctx, client, webhookload.PaddedRequest(url, spec.Token, run+"-fixed", o.pad), webhookload.Classify, o.rate, 4*o.conns, 0, o.fixed)
		r.confirmed += r.fixed.Classes[webhookload.Confirmed]
		r.bad += r.fixed.Requests - r.fixed.Classes[webhookload.Confirmed] + r.fixed.Errors
		queued, err := harness.PurgeQueue(o.amqp, spec.ForwardQueue())
		if err != nil {
			return fail(err)
		}
		r.queued = int64(queued)
		rounds = append(rounds, r)
		fmt.Printf("round %d  bare %7.0f msg/s (p50 %v p99 %v)   borda %7.0f req/s (p50 %v p99 %v)   at %d/s p50 %v p99 %v   confirmed %d queued %d other %d\n",
			n, r.bare.rps(), ms(r.bare.quantile(0.5)), ms(r.bare.quantile(0.99)), r.sat.RPS, ms(r.sat.P50), ms(r.sat.P99),
			o.rate, ms(r.fixed.Latencies.Quantile(0.5)), ms(r.fixed.Latencies.Quantile(0.99)), r.confirmed, r.queued, r.bad)
		if r.queued < r.confirmed {
			fmt.Printf("LOST: %d events answered 200 PUBLISHED_CONFIRMED are not in %s\n", r.confirmed-r.queued, spec.ForwardQueue())
			lost = true
		}
	}
	if ctx.Err() != nil || len(rounds) == 0 {
		return 1
	}
	table, missed := report(rounds, o)
	fmt.Println()
	fmt.Print(table)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(table), 0o644); err != nil {
			return fail(err)
		}
	}
	if lost || (o.strict && missed) {
		return 1
	}
	return 0
}

// saturate runs the closed-loop load through borda: wrk with a generated
// Lua script, or the Go generator.
func saturate(ctx context.Context, o options, dir, url, token, run string) (harness.WrkResult, error) {
	if o.gen == "wrk" {
		script := filepath.Join(dir, run+".lua")
		if err := os.WriteFile(script, []byte(webhookload.WrkScript(token, run, o.pad)), 0o644); err != nil {
			return harness.WrkResult{}, err
		}
		return harness.RunWrk(ctx, harness.WrkRun{URL: url, Conns: o.conns, Duration: o.sat, Script: script})
	}
	c := loadgen.NewClient(o.conns, 10*time.Second)
	res := loadgen.Saturate(ctx, c, webhookload.PaddedRequest(url, token, run, o.pad), o.conns, 0, o.sat)
	non2xx := res.Requests - res.Status[200] // Requests counts responses only
	return harness.WrkResult{RPS: res.RPS(), Requests: res.Requests, Non2xx: non2xx, SocketErrors: res.Errors, Bad: non2xx + res.Errors,
		P50: res.Latencies.Quantile(0.5), P99: res.Latencies.Quantile(0.99)}, nil
}

// report renders the medians over the rounds and the targets.
func report(rs []round, o options) (string, bool) {
	med := func(f func(round) float64) float64 {
		v := make([]float64, 0, len(rs))
		for _, r := range rs {
			v = append(v, f(r))
		}
		return harness.Median(v)
	}
	dur := func(f func(round) time.Duration) time.Duration {
		return time.Duration(med(func(r round) float64 { return float64(f(r)) }))
	}
	bare := med(func(r round) float64 { return r.bare.rps() })
	borda := med(func(r round) float64 { return r.sat.RPS })
	fixedP99 := dur(func(r round) time.Duration { return r.fixed.Latencies.Quantile(0.99) })
	var b strings.Builder
	fmt.Fprintf(&b, "| target (%s queue, %d in flight) | msg/s | × bare | p50 | p99 |\n|---|---:|---:|---:|---:|\n", o.queueType, o.conns)
	fmt.Fprintf(&b, "| bare amqp091-go publisher | %.0f | 1.00 | %v | %v |\n", bare,
		ms(dur(func(r round) time.Duration { return r.bare.quantile(0.5) })), ms(dur(func(r round) time.Duration { return r.bare.quantile(0.99) })))
	bareEnv := med(func(r round) float64 { return r.bareEnv.rps() })
	fmt.Fprintf(&b, "| bare publisher, envelope-sized messages (%d bytes) | %.0f | %.2f | %v | %v |\n", o.envBytes, bareEnv, bareEnv/bare,
		ms(dur(func(r round) time.Duration { return r.bareEnv.quantile(0.5) })), ms(dur(func(r round) time.Duration { return r.bareEnv.quantile(0.99) })))
	fmt.Fprintf(&b, "| borda ingress over HTTP (%s) | %.0f | %.2f | %v | %v |\n", o.gen, borda, borda/bare,
		ms(dur(func(r round) time.Duration { return r.sat.P50 })), ms(dur(func(r round) time.Duration { return r.sat.P99 })))
	fmt.Fprintf(&b, "| borda ingress at %d req/s | %.0f | — | %v | %v |\n", o.rate,
		med(func(r round) float64 { return r.fixed.RPS() }), ms(dur(func(r round) time.Duration { return r.fixed.Latencies.Quantile(0.5) })), ms(fixedP99))
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "MISS"
	}
	ratioOK, p99OK := borda >= 0.8*bare, fixedP99 <= 10*time.Millisecond
	fmt.Fprintf(&b, "\n| target | measured | |\n|---|---:|---|\n")
	fmt.Fprintf(&b, "| ingress ≥ 0.8 × bare publisher at %d in flight | %.2f | %s |\n", o.conns, borda/bare, verdict(ratioOK))
	fmt.Fprintf(&b, "| p99 ≤ 10 ms at %d req/s | %v | %s |\n", o.rate, ms(fixedP99), verdict(p99OK))
	return b.String(), !ratioOK || !p99OK
}

func ms(d time.Duration) time.Duration {
	if d > time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
