package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/olp-edu/borda/adminui"
	"github.com/olp-edu/borda/configs"
)

// runServe implements `borda serve --config FILE`: the gateway until SIGTERM
// or SIGINT, then the shutdown order of docs/edge.md ("Operating it"): readiness 503, stop
// accepting, drain in-flight HTTP (shutdown.drain), drain outstanding AMQP
// confirms, flush telemetry, close connections. SIGHUP reloads the
// rate-limit rules from the same file; a bad file is logged and the running
// rules stay.
func runServe(ctx context.Context, args []string, _, stderr io.Writer) int {
	fs, path := newFlags("serve", stderr)
	listen := fs.String("listen", "", "public listener address, over `listen` and $BORDA_LISTEN (e.g. :8080)")
	adminListen := fs.String("admin-listen", "", "admin listener address, over `admin_listen` and $BORDA_ADMIN_LISTEN (\"off\" disables)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	// The flags win over the file and the environment, and are validated
	// as the file's keys are: they are applied as the variables that set
	// the same keys (configs.ApplyEnv).
	if !setFlagEnv(stderr, map[string]string{"BORDA_LISTEN": *listen, "BORDA_ADMIN_LISTEN": *adminListen}) {
		return 2
	}
	cfg, code, ok := loadConfig(*path, stderr)
	if !ok {
		return code
	}
	logger := newLogger(stderr)
	app, err := newApp(ctx, cfg, logger)
	if err != nil {
		logger.Error("starting borda serve", "err", err)
		return 1
	}
	closed := false
	defer func() {
		if !closed {
			app.close()
		}
	}()

	servers := []*http.Server{app.gateway.HTTPServer(cfg.Listen, app.gateway.Handler())}
	if cfg.AdminListen != "off" {
		// Private: only probes and /metrics without ADMIN_TOKEN from a
		// peer that is not loopback (docs/operations.md).
		admin := adminui.Private(app.adminHandler(ctx, cfg), cfg.AdminToken.Reveal(), nil, logger)
		servers = append(servers, app.gateway.AdminHTTPServer(cfg.AdminListen, admin))
	}
	listeners := make([]net.Listener, 0, len(servers))
	for _, srv := range servers {
		ln, err := net.Listen("tcp", srv.Addr)
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			// It read "listening" at error level: as if it listened.
			which := "public listener (--listen, BORDA_LISTEN, listen)"
			if len(listeners) > 0 {
				which = "admin listener (--admin-listen, BORDA_ADMIN_LISTEN, admin_listen)"
			}
			logger.Error("cannot listen, so borda serve exits", "listener", which, "addr", srv.Addr, "err", err)
			return 1
		}
		if len(listeners) == 0 {
			ln = app.gateway.Listener(ln) // server.max_connections and max_connections_per_ip
		} else {
			ln = app.gateway.AdminListener(ln, cfg.Server.AdminMaxConnections) // its own cap
		}
		listeners = append(listeners, ln)
	}
	serveErr := make(chan error, len(servers))
	for i, srv := range servers {
		go func() {
			if err := srv.Serve(listeners[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				serveErr <- err
			}
		}()
	}
	logger.Info("borda serve started", "listen", listeners[0].Addr().String(), "admin", cfg.AdminListen,
		"environment", cfg.Environment, "store", cfg.StoreKind(), "routes", len(cfg.Routes), "version", version)

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	exit := 0
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-serveErr:
			logger.Error("serving", "err", err)
			exit = 1
			break loop
		case <-hup:
			app.reload(*path)
		}
	}

	// The budget from SIGTERM to exit (docs/edge.md, "Shutdown"):
	// readiness_grace + drain for HTTP, then what is left of
	// confirm_drain for the broker's confirms and telemetry.
	grace, drain := cfg.Shutdown.ReadinessGrace.D(), cfg.Shutdown.Drain.D()
	stopBy := time.Now().Add(grace + drain + cfg.Shutdown.ConfirmDrain.D())
	logger.Info("shutting down", "readiness_grace", cfg.Shutdown.ReadinessGrace.String(), "drain", cfg.Shutdown.Drain.String(),
		"confirm_drain", cfg.Shutdown.ConfirmDrain.String())
	drainCtx, cancel := context.WithTimeout(context.Background(), grace+drain)
	defer cancel()
	if err := app.gateway.Shutdown(drainCtx, grace, servers...); err != nil {
		logger.Warn("requests still running at the drain deadline were cancelled", "err", err)
	}
	confirmCtx, cancelConfirm := context.WithDeadline(context.Background(), stopBy)
	defer cancelConfirm()
	app.shutdown(confirmCtx, logger)
	// Close every connection before saying "stopped": it is the last line
	// the process writes (closing took ~1.7 s after it before).
	app.close()
	closed = true
	logger.Info("stopped")
	return exit
}

// reload re-reads the rate-limit rules from path (SIGHUP): load and
// validate the whole file (configs names each bad field), map the rules,
// swap them.
func (a *app) reload(path string) {
	cfg, err := configs.Load(path)
	if err != nil {
		a.log.Error("reload refused: keeping the running rules", "config", path, "err", err)
		return
	}
	if err := a.limiter.Reload(limiterRules(cfg)); err != nil {
		a.log.Error("reload refused: keeping the running rules", "config", path, "err", err)
		return
	}
	a.ops.reloaded(cfg)
	a.log.Info("rate-limit rules reloaded", "config", path, "rules", len(cfg.RateLimits.Rules))
	// The deny lists' files are re-read; a bad one keeps the lists in force.
	if deny, err := a.deny.build(cfg, a.log); err != nil {
		a.log.Error("deny lists not reloaded: keeping the running lists", "config", path, "err", err)
	} else {
		a.gateway.SetDeny(deny)
		if err := a.deny.start(context.WithoutCancel(context.Background())); err != nil {
			a.log.Error("starting deny-list feeds", "err", err)
		}
	}
}
