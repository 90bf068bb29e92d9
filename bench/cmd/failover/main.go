// Command failover proves that Borda rides through the loss of a RabbitMQ
// cluster node (issue 23, item 6; bench/failover): a private three-node
// cluster, `borda serve` and `borda forward` given every node in AMQP_URL,
// a steady webhook load, and two scenarios, each stopping one node
// mid-stream and starting it again: the node serve publishes to, then the
// node that leads the forward queue.
//
//	go run ./bench/cmd/failover                      # 200 events/s; 10 s before, 15 s down, 10 s after, per scenario
//	go run ./bench/cmd/failover -rate 50 -down 8s    # lighter
//
// Exit status 1 when an invariant breaks (an event confirmed and not
// POSTed exactly once, an answer other than 200 or 503, a dead letter, a
// process that exited) or the run cannot be made.
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

	"github.com/olp-edu/borda/bench/failover"
	"github.com/olp-edu/borda/bench/harness"
	"github.com/olp-edu/borda/internal/brokernode"
)

func main() {
	rate := flag.Int("rate", 200, "webhook events per second (open loop)")
	before := flag.Duration("before", 10*time.Second, "load before the node stop")
	down := flag.Duration("down", 15*time.Second, "how long the node stays down, under load")
	after := flag.Duration("after", 10*time.Second, "load once the node is back")
	settle := flag.Duration("settle", 60*time.Second, "wait for every confirmed event to be POSTed")
	base := flag.Int("cluster-base", 46000, "node i listens on base+i (AMQP) and base+10+i (distribution)")
	prefix := flag.String("cluster-name", "borda-failover", "node-name prefix (prefix-1..3@localhost)")
	scenarios := flag.String("scenarios", "connected,leader", "scenarios to run, in order")
	bordaBin := flag.String("borda", "", "borda binary (default: go build ./cmd/borda)")
	redisURL := flag.String("redis", "redis://127.0.0.1:6379/0", "Redis for the forwarder's idempotency keys (a unique prefix, deleted at the end)")
	listen := flag.String("listen", "", "serve's listener (default: a free loopback port)")
	admin := flag.String("admin", "", "serve's admin listener")
	fwdAdmin := flag.String("forward-admin", "", "forward's admin listener")
	legacy := flag.String("legacy", "", "the legacy stand-in's listener")
	keepLogs := flag.Bool("keep", false, "keep the run's directory (serve.log, forward.log, node logs) even when it passes")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	keepDir = *keepLogs
	os.Exit(run(ctx, failover.Config{
		Borda: *bordaBin, RedisURL: *redisURL, Rate: *rate, Before: *before, Down: *down, After: *after, Settle: *settle,
		ClusterBase: *base, ClusterPrefix: *prefix, Scenarios: strings.Split(*scenarios, ","),
		Listen: *listen, Admin: *admin, ForwardAdmin: *fwdAdmin, Legacy: *legacy, Log: os.Stdout,
	}))
}

var keepDir bool

func run(ctx context.Context, cfg failover.Config) int {
	if err := brokernode.Available(); err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "borda-failover-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		return 1
	}
	cfg.Dir = dir
	keep := false
	defer func() {
		if keep {
			fmt.Printf("logs kept in %s (serve.log, forward.log, cluster/N/log)\n", dir)
		} else {
			os.RemoveAll(dir)
		}
	}()
	if cfg.Borda == "" {
		root, err := harness.ModuleRoot()
		if err == nil {
			cfg.Borda, err = harness.Build(ctx, root, dir, "./cmd/borda")
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "failover: building borda:", err)
			return 1
		}
	} else if cfg.Borda, err = filepath.Abs(cfg.Borda); err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		return 1
	}
	fmt.Printf("machine: %s\nfailover: %d events/s, per scenario %s before the stop, %s down, %s after\n",
		harness.Machine(), cfg.Rate, cfg.Before, cfg.Down, cfg.After)
	scenarios, err := failover.Run(ctx, cfg)
	code := 0
	for _, s := range scenarios {
		fmt.Print(s.String())
		for _, f := range s.Failures() {
			fmt.Printf("FAIL %s: %s\n", s.Name, f)
			code = 1
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		code = 1
	}
	keep = code != 0 || keepDir
	if code == 0 {
		fmt.Println("PASS: every confirmed event reached the legacy stand-in exactly once; only 200 and 503 answered; no restart")
	}
	return code
}
