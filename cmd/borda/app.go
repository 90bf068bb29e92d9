package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/gateway"
	"github.com/olp-edu/borda/identity"
	"github.com/olp-edu/borda/internal/egress"
	"github.com/olp-edu/borda/keyspace"
	"github.com/olp-edu/borda/ratelimit"
	"github.com/olp-edu/borda/redisconn"
	"github.com/olp-edu/borda/schema"
	"github.com/olp-edu/borda/telemetry"
	"github.com/olp-edu/borda/webhook/ingress"
	"github.com/olp-edu/borda/webhook/publish"
	"github.com/olp-edu/borda/webhook/queueguard"
)

// app holds every component `borda serve` runs, built once at start.
type app struct {
	log        *slog.Logger
	registry   *prometheus.Registry
	redis      redis.UniversalClient // nil on the embedded store; over restconn on the REST store
	db         *pgxpool.Pool         // nil without database.url
	limiter    *ratelimit.Limiter
	limitStore ratelimit.Store     // the limiter's store (the operator page reads relaxes from it)
	recorder   *telemetry.Recorder // nil when telemetry is off
	publisher  *publish.Publisher  // nil when the ingress is off
	guard      *queueguard.Guard   // nil without amqp.management_url
	verifier   *identity.Verifier  // nil without auth.jwt_secret_env's secret or auth.jwks_url
	gateway    *gateway.Server
	ops        *opsPage // the operator page (options_adminui.go); nil when off
	deny       denyLists
	stopBg     context.CancelFunc
	bgDone     chan struct{}
}

// newApp builds the components in dependency order. Nothing here waits on
// Redis, RabbitMQ or PostgreSQL: each connects in the background, so the
// gateway serves (and /healthz answers) while a dependency is down.
func newApp(ctx context.Context, cfg configs.Config, logger *slog.Logger) (*app, error) {
	a := &app{log: logger, registry: newCommandRegistry(), bgDone: make(chan struct{})}
	ks, err := keyspace.New(cfg.KeyPrefix())
	if err != nil {
		return nil, err
	}
	store, err := a.store(cfg)
	if err != nil {
		return nil, err
	}
	a.limitStore = store
	a.limiter, err = ratelimit.New(limiterOptions(cfg), ks, store, a.registry, logger)
	if err != nil {
		return nil, fmt.Errorf("building rate limiter: %w", err)
	}
	deps := gateway.Deps{Limiter: a.limiter, Registry: a.registry, Logger: logger, Checks: map[string]func(context.Context) error{}}

	switch {
	case !cfg.Telemetry.Enabled:
		logger.Info("telemetry counters off (telemetry.enabled: false)")
	case a.redis == nil:
		logger.Info("telemetry counters off: they need a shared store, redis.url or the Upstash REST URL and token (the embedded store does not keep them)")
	default:
		a.recorder, err = telemetry.NewRecorder(recorderOptions(cfg.Telemetry), ks, telemetry.NewRedisSink(a.redis), a.registry, logger)
		if err != nil {
			return nil, fmt.Errorf("building telemetry recorder: %w", err)
		}
		a.recorder.SetDistribution(limiterDistribution{a.limiter})
		deps.Recorder = a.recorder
	}

	if webhookEnabled(cfg.Webhook) {
		popts := ingressPublisherOptions(cfg, logger, a.registry)
		if a.guard, err = queueGuard(cfg, *popts.Topology, logger); err != nil {
			return nil, err
		}
		if a.guard != nil {
			popts.Guard = a.guard
		}
		a.publisher, err = publish.New(popts)
		if err != nil {
			return nil, fmt.Errorf("building webhook publisher: %w", err)
		}
		in, err := newIngress(cfg.Webhook, a.publisher, logger, a.registry)
		if err != nil {
			// The portal keeps being served; the webhook paths answer 503
			// (providers retry) and /readyz/webhook names the problem.
			logger.Error("webhook ingress not configured; its paths answer 503 until fixed", "err", err)
			a.publisher = nil
			u := ingress.NewUnconfigured(webhookPaths(cfg.Webhook), err)
			deps.Webhook = u
			deps.Checks["webhook"] = func(context.Context) error { return u.Ready() }
		} else {
			in.SetClientIP(gateway.ClientSubject) // the failed-auth throttle's key
			deps.Webhook = in
			deps.Checks["webhook"] = func(context.Context) error {
				if err := a.publisher.Ready(); err != nil {
					return err
				}
				return a.publisher.Degraded() // ready, with warnings (publish.DegradedError)
			}
		}
	}

	if err := a.buildGateway(cfg, deps); err != nil {
		a.close()
		return nil, fmt.Errorf("building gateway: %w", err)
	}

	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	a.stopBg = stop
	if err := a.limiter.Start(bg); err != nil {
		stop()
		return nil, fmt.Errorf("starting rate limiter: %w", err)
	}
	if a.publisher != nil {
		if err := a.publisher.Start(bg); err != nil {
			stop()
			return nil, fmt.Errorf("starting webhook publisher: %w", err)
		}
		if a.guard != nil {
			a.guard.Start(bg) // reads the queues off the request path, every 10 s
		}
	}
	if a.recorder != nil {
		if err := a.recorder.Start(bg); err != nil {
			stop()
			return nil, fmt.Errorf("starting telemetry recorder: %w", err)
		}
	}
	if err := a.deny.start(bg); err != nil {
		stop()
		return nil, fmt.Errorf("starting deny-list feeds: %w", err)
	}
	go func() {
		defer close(a.bgDone)
		a.aggregate(bg, cfg, ks)
	}()
	return a, nil
}

// store picks the rate-limit store: Redis (redis.url), Upstash REST
// (rest_url + rest_token), or the embedded in-memory store. On Redis and
// on REST it also builds the shared client (a.redis) the telemetry, the
// aggregation and the operator page use; on REST that client's
// connections are restconn's (one HTTPS request per command, pipeline or
// transaction).
func (a *app) store(cfg configs.Config) (ratelimit.Store, error) {
	switch cfg.StoreKind() {
	case "redis", "upstash-rest":
		rdb, err := redisconn.New(redisOptions(cfg.Redis))
		if err != nil {
			return nil, err
		}
		a.redis = rdb
	case "memory":
		a.log.Warn("no Redis configured: rate limits use the embedded in-memory store, which counts for this instance only")
	}
	return newStore(cfg, a.redis, &http.Client{Timeout: 2 * time.Second, Transport: egress.Transport()})
}

// aggregate runs the hourly aggregation when database.url and a shared
// store (redis.url or the Upstash REST URL) are set; it returns when ctx
// ends.
func (a *app) aggregate(ctx context.Context, cfg configs.Config, ks keyspace.Keyspace) {
	if cfg.Database.URL == "" || a.redis == nil || !cfg.Telemetry.Enabled {
		return
	}
	db, err := pgxpool.New(ctx, cfg.Database.URL.Reveal())
	if err != nil {
		a.log.Error("aggregation off: bad database.url", "err", err)
		return
	}
	a.db = db
	agg, err := telemetry.NewAggregator(a.redis, db, ks, cfg.Environment, a.registry, a.log)
	if err != nil {
		a.log.Error("aggregation off", "err", err)
		return
	}
	if err := agg.SetRetention(cfg.Telemetry.Retention()); err != nil {
		a.log.Error("aggregation off", "err", err)
		return
	}
	agg.SetErrorHint(schema.Hint) // "relation gateway_metrics does not exist" says to run `borda migrate`
	agg.Run(ctx, cfg.Telemetry.AggregateEvery.D())
}

// shutdown runs the steps after HTTP has drained, within ctx
// (shutdown.confirm_drain): outstanding confirms, telemetry flush.
func (a *app) shutdown(ctx context.Context, logger *slog.Logger) {
	if a.publisher != nil {
		if err := a.publisher.Stop(ctx); err != nil {
			logger.Warn("closing webhook publisher", "err", err)
		}
		a.publisher = nil
	}
	if a.recorder != nil {
		if err := a.recorder.Stop(ctx); err != nil {
			logger.Warn("flushing telemetry", "err", err)
		}
		a.recorder = nil
	}
}

// close releases everything; safe to call after shutdown and on a
// half-built app.
func (a *app) close() {
	if a.stopBg != nil {
		a.stopBg()
		<-a.bgDone
		a.stopBg = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	a.shutdown(ctx, a.log) // a no-op after runServe's own shutdown
	cancel()
	a.deny.stop(context.Background())
	if a.limiter != nil {
		_ = a.limiter.Stop(context.Background()) // waits for the relax poller's one-second read at most
	}
	a.ops.close(a.log)
	if a.gateway != nil {
		_ = a.gateway.Close()
	}
	if a.verifier != nil {
		_ = a.verifier.Stop(context.Background())
	}
	if a.db != nil {
		a.db.Close()
	}
	if a.redis != nil {
		if err := a.redis.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
			a.log.Warn("closing redis", "err", err)
		}
	}
}
