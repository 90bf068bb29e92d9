package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/instances"
	"github.com/olp-edu/borda/internal/startstop"
	"github.com/olp-edu/borda/schema"
)

// consumerOptions maps cfg into the events consumer's options, with the
// caller's database pool, logger and registry.
func consumerOptions(cfg configs.Config, db *pgxpool.Pool, log *slog.Logger, reg prometheus.Registerer) instances.Options {
	return instances.Options{
		AMQPURL: cfg.AMQP.URL.Reveal(), Queue: cfg.Forward.EventsQueue, Prefetch: cfg.Forward.Prefetch,
		DB: db, Logger: log, Registerer: reg,
	}
}

// runConsumeEvents is `borda consume-events [--config FILE] [--admin
// ADDR]`: keep PostgreSQL whatsapp_instances current from the events
// queue's connection.update events until SIGINT/SIGTERM. Needs
// database.url (DATABASE_URL) and `borda migrate`.
func runConsumeEvents(ctx context.Context, args []string, _, stderr io.Writer) int {
	fs, path := newFlags("consume-events", stderr)
	admin := fs.String("admin", "127.0.0.1:9093", `admin listener for /metrics, /healthz and /readyz ("off" disables)`)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg, code, ok := loadConfig(*path, stderr)
	if !ok {
		return code
	}
	if cfg.Database.URL == "" {
		fmt.Fprintln(stderr, "borda: consume-events needs database.url (or DATABASE_URL)")
		return 2
	}
	if cfg.Forward.EventsQueue == "" {
		fmt.Fprintln(stderr, `borda: consume-events needs forward.events_queue; it is "" (no events queue is declared)`)
		return 2
	}
	log := newLogger(stderr)
	pool, err := pgxpool.New(ctx, cfg.Database.URL.Reveal())
	if err != nil {
		fmt.Fprintf(stderr, "borda: parsing database.url: %v\n", err)
		return 2
	}
	defer pool.Close()
	reg := newCommandRegistry()
	c, err := instances.New(consumerOptions(cfg, pool, log, reg))
	if err != nil {
		fmt.Fprintf(stderr, "borda: %v\n", err)
		return 2
	}
	if err := declareTopology(ctx, cfg.AMQP.URL.Reveal(), topologyOf(cfg), log); err != nil {
		log.Error("declaring topology", "err", err)
		return 1
	}
	// Started in this order, stopped in reverse: the consumer (the
	// delivery in hand is finished), then the admin listener.
	var services startstop.List
	_ = services.Add("admin listener", adminListener(*admin, reg, log, c.Readiness))
	_ = services.Add("events consumer", startstop.Unbounded(c))
	if err := services.Start(ctx); err != nil {
		log.Error("starting borda consume-events", "err", err)
		return 1
	}
	log.Info("consuming events", "queue", cfg.Forward.EventsQueue)
	select {
	case <-ctx.Done():
	case <-c.Done():
	}
	_ = services.Stop(context.Background())
	if err := c.Err(); err != nil {
		log.Error("consume-events stopped", "err", schema.Hint(err))
		return 1
	}
	return 0
}
