package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/olp-edu/borda/internal/startstop"
	"github.com/olp-edu/borda/keyspace"
	"github.com/olp-edu/borda/redisconn"
	"github.com/olp-edu/borda/webhook/forward"
)

// runForward is `borda forward [--config FILE] [--admin ADDR]`: re-deliver
// queued webhooks to LEGACY_WEBHOOK_URL until SIGINT/SIGTERM, then finish
// the deliveries in flight. Exit 2 on config errors, 1 on runtime failure.
func runForward(ctx context.Context, args []string, _, stderr io.Writer) int {
	fs, path := newFlags("forward", stderr)
	def := "127.0.0.1:9092"
	if v := strings.TrimSpace(os.Getenv("BORDA_ADMIN_LISTEN")); v != "" {
		def = v
	}
	admin := fs.String("admin-listen", def, `admin listener for /metrics, /healthz and /readyz ("off" disables); $BORDA_ADMIN_LISTEN sets the default`)
	fs.StringVar(admin, "admin", def, "the same as --admin-listen")
	summaryEvery := fs.Duration("summary-every", forward.DefaultSummaryEvery, "log a summary line at info this often (delivered, duplicates, retried, dead-lettered, breaker); each delivery is logged at debug (BORDA_LOG_LEVEL=debug)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg, code, ok := loadConfig(*path, stderr)
	if !ok {
		return code
	}
	log := newLogger(stderr)
	// The last line the process writes: deferred first, it runs after
	// every other deferred close (status snapshot, admin listener, Redis).
	var runErr error
	running := false
	defer func() {
		switch {
		case runErr != nil:
			log.Error("forward stopped", "err", runErr)
		case running:
			log.Info("forward stopped")
		}
	}()
	rdb, err := redisconn.New(redisOptions(cfg.Redis))
	if err != nil {
		fmt.Fprintf(stderr, "borda: forward needs redis.url (REDIS_URL) or the Upstash REST URL and token (UPSTASH_REDIS_REST_URL, UPSTASH_REDIS_REST_TOKEN) for its idempotency keys: %v\n", err)
		return 2
	}
	defer rdb.Close()
	keys, err := keyspace.New(cfg.KeyPrefix())
	if err != nil {
		fmt.Fprintf(stderr, "borda: %v\n", err)
		return 2
	}
	reg := newCommandRegistry()
	opts := forwardOptions(cfg)
	opts.Redis, opts.Keys, opts.Logger, opts.Registerer = rdb, keys, log, reg
	f, err := forward.New(opts)
	if err != nil {
		fmt.Fprintf(stderr, "borda: %v\n", err)
		return 2
	}
	// No declare of its own: the forwarder's republishing connection
	// declares the topology before the forwarder consumes
	// (webhook/forward, TestForward_DeclaresItsTopologyBeforeConsuming).
	status, err := forwardStatus(rdb, keys, f, log)
	if err != nil {
		log.Error("starting the status snapshot", "err", err)
		return 1
	}
	// Started in this order, stopped in reverse: the summary, then the
	// forwarder (its deliveries in flight finish, however long that
	// takes), the status snapshot, the admin listener.
	var services startstop.List
	_ = services.Add("admin listener", adminListener(*admin, reg, log, f.Readiness))
	_ = services.Add("status snapshot", status)
	_ = services.Add("forwarder", startstop.Unbounded(f))
	_ = services.Add("summary", startstop.Loop(func(ctx context.Context) { f.RunSummary(ctx, *summaryEvery) }))
	if err := services.Start(ctx); err != nil {
		log.Error("starting borda forward", "err", err)
		return 1
	}
	log.Info("forwarding", "queue", cfg.Forward.Queue, "prefetch", cfg.Forward.Prefetch, "admin", *admin)
	running = true
	select {
	case <-ctx.Done():
	case <-f.Done():
	}
	_ = services.Stop(context.Background())
	if runErr = f.Err(); runErr != nil {
		return 1
	}
	return 0
}
