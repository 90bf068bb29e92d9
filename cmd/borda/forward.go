package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/keyspace"
	"github.com/olp-edu/borda/redisconn"
	"github.com/olp-edu/borda/webhook/forward"
	"github.com/olp-edu/borda/webhook/topology"
)

// runForward is `borda forward [--config FILE] [--admin ADDR]`: re-deliver
// queued webhooks to LEGACY_WEBHOOK_URL until SIGINT/SIGTERM, then finish
// the deliveries in flight. Exit 2 on config errors, 1 on runtime failure.
func runForward(ctx context.Context, args []string, _, stderr io.Writer) int {
	fs, path := newFlags("forward", stderr)
	admin := fs.String("admin", "127.0.0.1:9092", `admin listener for /metrics and /healthz ("off" disables)`)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg, code, ok := loadConfig(*path, stderr)
	if !ok {
		return code
	}
	log := newLogger(stderr)
	rdb, err := redisconn.New(cfg.Redis)
	if err != nil {
		fmt.Fprintf(stderr, "borda: forward needs redis.url (REDIS_URL) for its idempotency keys: %v\n", err)
		return 2
	}
	defer rdb.Close()
	keys, err := keyspace.New(cfg.KeyPrefix())
	if err != nil {
		fmt.Fprintf(stderr, "borda: %v\n", err)
		return 2
	}
	reg := newCommandRegistry()
	top := topology.FromConfig(cfg)
	f, err := forward.New(forward.Options{
		Forward: cfg.Forward, Topology: top, AMQPURL: cfg.AMQP.URL.Reveal(),
		Redis: rdb, Keys: keys, Logger: log, Registerer: reg,
	})
	if err != nil {
		fmt.Fprintf(stderr, "borda: %v\n", err)
		return 2
	}
	if err := declareTopology(ctx, cfg.AMQP.URL.Reveal(), top); err != nil {
		log.Error("declaring topology", "err", err)
		return 1
	}
	stopAdmin, err := serveAdmin(*admin, reg, log)
	if err != nil {
		log.Error("starting admin listener", "err", err)
		return 1
	}
	defer stopAdmin()
	log.Info("forwarding", "queue", cfg.Forward.Queue, "prefetch", cfg.Forward.Prefetch, "admin", *admin)
	if err := f.Run(ctx); err != nil {
		log.Error("forward stopped", "err", err)
		return 1
	}
	log.Info("forward stopped")
	return 0
}

// newCommandRegistry is a private Prometheus registry with the Go and
// process collectors.
func newCommandRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	_ = reg.Register(collectors.NewGoCollector())
	_ = reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// declareTopology declares the exchanges and queues on a short-lived
// connection, so a worker starts on a fresh broker.
func declareTopology(ctx context.Context, url string, top topology.Topology) error {
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		return fmt.Errorf("dialing amqp: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("opening channel: %w", err)
	}
	return top.Declare(ch)
}

// serveAdmin serves /metrics and /healthz on addr ("off": nothing) and
// returns the function that stops it.
func serveAdmin(addr string, reg *prometheus.Registry, log *slog.Logger) (stop func(), err error) {
	if addr == "off" || addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"ok"}`+"\n")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin listener", "err", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
