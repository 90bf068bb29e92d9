package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/amqpaddr"

	"github.com/olp-edu/borda/internal/startstop"
	"github.com/olp-edu/borda/webhook/topology"
)

// What every long-running command (serve, forward, consume-events) shares:
// its metrics registry, its admin listener and (consume-events) the
// topology at start.

// newCommandRegistry is a private Prometheus registry with the Go and
// process collectors and, in the real process, borda_log_lines_dropped_total.
func newCommandRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	_ = reg.Register(collectors.NewGoCollector())
	_ = reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if sink := processLog; sink != nil {
		_ = reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "borda_log_lines_dropped_total",
			Help: "Log lines dropped because the log output (stderr) was too slow to take them (more than 4 MiB pending) or refused a write (logsink).",
		}, func() float64 { return float64(sink.Dropped()) }))
	}
	return reg
}

// declareTopology declares the exchanges and queues on a short-lived
// connection, so `borda consume-events` starts on a fresh broker (`borda
// forward`'s republishing connection declares them itself). A queue an earlier
// release declared without `x-overflow: reject-publish` is kept and
// logged at error level (topology.DeclareCompatible; docs/upgrading.md).
func declareTopology(ctx context.Context, url string, top topology.Topology, log *slog.Logger) error {
	conn, err := amqpaddr.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		return fmt.Errorf("dialing amqp: %w", err)
	}
	defer conn.Close()
	d, err := top.DeclareCompatible(func() (topology.ClosableDeclarer, error) {
		ch, err := conn.Channel()
		if err != nil {
			return nil, fmt.Errorf("opening channel: %w", err)
		}
		return ch, nil
	})
	if err != nil {
		return err
	}
	if len(d.Unguarded) > 0 {
		log.Error("queues kept with an earlier release's arguments, without x-overflow: reject-publish: a max-length or max-length-bytes policy on them drops events the broker confirmed; migrate them (docs/upgrading.md, \"Queues refuse instead of dropping\")",
			"queues", strings.Join(d.Unguarded, ","))
	}
	return nil
}

// adminListener is the service of serveAdmin: Start listens, Stop shuts
// the listener down.
func adminListener(addr string, reg *prometheus.Registry, log *slog.Logger, ready func() []string) startstop.Service {
	var stop func()
	return startstop.Funcs{
		StartFunc: func(context.Context) error {
			var err error
			stop, err = serveAdmin(addr, reg, log, ready)
			return err
		},
		StopFunc: func(context.Context) error {
			if stop != nil {
				stop()
			}
			return nil
		},
	}
}

// serveAdmin serves /metrics, /healthz and /readyz on addr ("off":
// nothing) and returns the function that stops it. /healthz is liveness
// (200 while the process serves HTTP); /readyz is 200 {"status":"ok"} when
// ready() names nothing, else 503 {"status":"not_ready","waiting_for":[…]}
// with one entry per condition (docs/forwarder.md, "Health and readiness").
func serveAdmin(addr string, reg *prometheus.Registry, log *slog.Logger, ready func() []string) (stop func(), err error) {
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
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		waiting := ready()
		if len(waiting) == 0 {
			io.WriteString(w, `{"status":"ok"}`+"\n")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(struct {
			Status     string   `json:"status"`
			WaitingFor []string `json:"waiting_for"`
		}{"not_ready", waiting})
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
