package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/gateway"
	"github.com/olp-edu/borda/identity"
	"github.com/olp-edu/borda/internal/egress"
	"github.com/olp-edu/borda/internal/startstop"
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
	// services are the background services, in start order (startServices);
	// shutdown stops them in reverse.
	services startstop.List
}

// newApp builds the components in dependency order. Nothing here waits on
// Redis, RabbitMQ or PostgreSQL: each connects in the background, so the
// gateway serves (and /healthz answers) while a dependency is down.
func newApp(ctx context.Context, cfg configs.Config, logger *slog.Logger) (*app, error) {
	a := &app{log: logger, registry: newCommandRegistry()}
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

	if err := a.startServices(ctx, cfg, ks); err != nil {
		return nil, err
	}
	return a, nil
}

// startServices starts `borda serve`'s background services in order and
// keeps them in a.services, which shutdown stops in reverse: the limiter,
// the deny-list feeds, the aggregation, the telemetry recorder, the
// webhook publisher, the queue guard (webhook/queueguard). The reverse is the shutdown order (docs/edge.md):
// the publisher's outstanding confirms and the recorder's last flush
// within shutdown.confirm_drain, then the rest, each waited for however
// long it takes (startstop.Unbounded), as they end before the Redis and
// database pools close.
func (a *app) startServices(ctx context.Context, cfg configs.Config, ks keyspace.Keyspace) error {
	_ = a.services.Add("rate limiter", startstop.Unbounded(a.limiter))
	_ = a.services.Add("deny-list feeds", startstop.Unbounded(startstop.Funcs{
		StartFunc: a.deny.start,
		StopFunc:  func(ctx context.Context) error { a.deny.stop(ctx); return nil },
	}))
	if agg := a.aggregator(ctx, cfg, ks); agg != nil {
		_ = a.services.Add("telemetry aggregation", startstop.Unbounded(agg))
	}
	if a.recorder != nil {
		_ = a.services.Add("telemetry recorder", a.recorder)
	}
	if a.publisher != nil {
		_ = a.services.Add("webhook publisher", a.publisher)
	}
	if a.guard != nil {
		// Reads the queues off the request path, at start and every 10 s,
		// until stopped (first in the reverse order: before the publisher).
		var stopGuard context.CancelFunc
		_ = a.services.Add("webhook queue guard", startstop.Funcs{
			StartFunc: func(ctx context.Context) error {
				var gctx context.Context
				gctx, stopGuard = context.WithCancel(context.WithoutCancel(ctx))
				a.guard.Start(gctx)
				return nil
			},
			StopFunc: func(context.Context) error {
				if stopGuard != nil {
					stopGuard()
				}
				return nil
			},
		})
	}
	return a.services.Start(context.WithoutCancel(ctx))
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
	return newStore(cfg, a.redis, egress.Client(nil, 2*time.Second))
}

// aggregator builds the hourly aggregation when database.url and a shared
// store (redis.url or the Upstash REST URL) are set, and telemetry is on;
// nil (logged) otherwise.
func (a *app) aggregator(ctx context.Context, cfg configs.Config, ks keyspace.Keyspace) *telemetry.Aggregator {
	if cfg.Database.URL == "" || a.redis == nil || !cfg.Telemetry.Enabled {
		return nil
	}
	db, err := pgxpool.New(context.WithoutCancel(ctx), cfg.Database.URL.Reveal())
	if err != nil {
		a.log.Error("aggregation off: bad database.url", "err", err)
		return nil
	}
	a.db = db
	agg, err := telemetry.NewAggregator(a.redis, db, ks, cfg.Environment, a.registry, a.log)
	if err == nil {
		err = agg.SetRetention(cfg.Telemetry.Retention())
	}
	if err == nil {
		err = agg.SetInterval(cfg.Telemetry.AggregateEvery.D())
	}
	if err != nil {
		a.log.Error("aggregation off", "err", err)
		return nil
	}
	agg.SetErrorHint(schema.Hint) // "relation gateway_metrics does not exist" says to run `borda migrate`
	return agg
}

// shutdown stops the background services in reverse start order after
// HTTP has drained, within ctx (shutdown.confirm_drain) for the
// publisher's outstanding confirms and the telemetry flush; a no-op the
// second time.
func (a *app) shutdown(ctx context.Context, logger *slog.Logger) {
	if err := a.services.Stop(ctx); err != nil {
		logger.Warn("stopping background services", "err", err)
	}
}

// close releases everything; safe to call after shutdown and on a
// half-built app.
func (a *app) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	a.shutdown(ctx, a.log) // a no-op after runServe's own shutdown
	cancel()
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
