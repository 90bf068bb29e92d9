package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/keyspace"
	"github.com/olp-edu/borda/redisconn"
	"github.com/olp-edu/borda/schema"
	"github.com/olp-edu/borda/telemetry"
)

// runAggregate is `borda aggregate --config FILE`: one aggregation of the
// Redis telemetry counters into PostgreSQL gateway_metrics, for cron. It
// needs the shared store, redis.url (REDIS_URL) or the Upstash REST URL
// and token, and database.url (DATABASE_URL). Exit 0 when
// it aggregated or another run was in progress right now, 1 on failure, 2
// on usage or config errors. An interval a `borda serve` already
// aggregated does not stop it (docs/telemetry.md).
func runAggregate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, path := newFlags("aggregate", stderr)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg, code, ok := loadConfig(*path, stderr)
	if !ok {
		return code
	}
	if cfg.StoreKind() == "memory" {
		fmt.Fprintln(stderr, "borda: aggregate needs redis.url (REDIS_URL) or the Upstash REST URL and token (UPSTASH_REDIS_REST_URL, UPSTASH_REDIS_REST_TOKEN): the counters live there")
		return 2
	}
	if cfg.Database.URL == "" {
		fmt.Fprintln(stderr, "borda: aggregate needs database.url (or DATABASE_URL): the rows go to PostgreSQL")
		return 2
	}
	logger := newLogger(stderr)
	ks, err := keyspace.New(cfg.KeyPrefix())
	if err != nil {
		fmt.Fprintf(stderr, "borda: %v\n", err)
		return 2
	}
	ro := redisOptions(cfg.Redis)
	ro.Cold = true // one shot: no pool warmed in the background
	rdb, err := redisconn.New(ro)
	if err != nil {
		fmt.Fprintf(stderr, "borda: %v\n", err)
		return 2
	}
	defer rdb.Close()
	pool, err := pgxpool.New(ctx, cfg.Database.URL.Reveal())
	if err != nil {
		fmt.Fprintf(stderr, "borda: connecting to postgresql: %v\n", err)
		return 2
	}
	defer pool.Close()
	agg, err := telemetry.NewAggregator(rdb, pool, ks, cfg.Environment, prometheus.NewRegistry(), logger)
	if err != nil {
		fmt.Fprintf(stderr, "borda: %v\n", err)
		return 1
	}
	if err := agg.SetRetention(cfg.Telemetry.Retention()); err != nil {
		fmt.Fprintf(stderr, "borda: %v\n", err)
		return 2
	}
	rep, err := agg.Aggregate(ctx)
	switch {
	case errors.Is(err, telemetry.ErrLocked):
		fmt.Fprintf(stdout, "skipped: another aggregation is running now (it holds %s; a crashed run's lock expires within 10 minutes)\n", ks.AggregateLock())
		return 0
	case err != nil:
		err = schema.Hint(err)
		logger.Error("aggregation failed", "error", err, "report", rep)
		fmt.Fprintf(stderr, "borda: aggregate: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "aggregated %d counters into %d rows (%d new or changed, %d skipped, %d invalid), %d minutes",
		rep.Keys, rep.Rows, rep.Changed, rep.Skipped, rep.Invalid, rep.Minutes)
	if rep.Minutes > 0 {
		fmt.Fprintf(stdout, " from %s to %s", rep.First.Format("2006-01-02T15:04Z"), rep.Last.Format("2006-01-02T15:04Z"))
	}
	fmt.Fprintf(stdout, "; %d rows older than %d days deleted, in %s\n", rep.Expired, cfg.Telemetry.RetentionDays, rep.Duration.Round(1e6))
	return 0
}
