package main

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/olp-edu/borda/adminui"
	"github.com/olp-edu/borda/adminui/promwindow"
	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/internal/redact"
	"github.com/olp-edu/borda/keyspace"
)

// opsPage is the operator page of `borda serve` (adminui, docs/operations.md)
// and what it holds: the metrics window, a PostgreSQL pool for the replay
// and relax audits, and the configuration in effect (SIGHUP swaps the rules).
type opsPage struct {
	cfg    atomic.Pointer[configs.Config]
	window *promwindow.Window
	db     *pgxpool.Pool // nil without database.url
	broker *opsBroker    // nil without a webhook ingress
	page   *adminui.Page
}

// opsWindowFamilies are the Prometheus families the page reads over the
// last minutes (docs/operations.md lists what each section shows).
var opsWindowFamilies = []string{
	"borda_ratelimit_decisions_total", "borda_ratelimit_store_errors_total",
	"webhook_ingress_latency_seconds", "borda_webhook_broker_connected", "borda_webhook_broker_blocked",
	"borda_webhook_publish_unconfirmed", "borda_webhook_publish_failures_total",
	"borda_denied_total",
}

// opsSpan is the "last minutes" the page's counts cover.
const opsSpan = 5 * time.Minute

// adminHandler is the admin listener's handler with the operator page
// mounted (/ui; "/" redirects there). A page that cannot be built is
// logged and the admin listener serves without it.
func (a *app) adminHandler(ctx context.Context, cfg configs.Config) http.Handler {
	admin := a.gateway.AdminHandler()
	ops, err := a.newOpsPage(ctx, cfg)
	if err != nil {
		a.log.Error("operator page off", "err", err)
		return admin
	}
	a.ops = ops
	if actions, _ := cfg.OperatorActions(); cfg.AdminToken == "" && len(actions) > 0 {
		// Only what the token would enable here: it said "relax" with the
		// embedded store, which offers no relax.
		a.log.Info("operator page read-only: set ADMIN_TOKEN to "+strings.Join(actions, " and ")+" from it", "path", "/ui")
	}
	return adminui.Mount(admin, ops.page.Handler())
}

func (a *app) newOpsPage(ctx context.Context, cfg configs.Config) (*opsPage, error) {
	ks, err := keyspace.New(cfg.KeyPrefix())
	if err != nil {
		return nil, err
	}
	o := &opsPage{window: promwindow.New(a.registry, opsWindowFamilies, 10*time.Second, opsSpan+time.Minute)}
	o.cfg.Store(&cfg)
	if cfg.Database.URL != "" {
		if o.db, err = pgxpool.New(ctx, cfg.Database.URL.Reveal()); err != nil {
			a.log.Warn("operator page: replay and relax off, bad database.url", "err", redact.Error(err))
			o.db = nil
		}
	}
	store := a.limitStore // the limiter's own: the embedded store counts in this process only
	src := adminui.Sources{
		Routes:  opsRoutes{cfg: &o.cfg},
		Limiter: &opsLimiter{cfg: &o.cfg, limiter: a.limiter, store: store, redis: a.redis, ks: ks, window: o.window},
		Rollout: &opsRollout{cfg: &o.cfg, db: o.db, window: o.window},
		Relaxer: &opsRelaxer{cfg: &o.cfg, store: store, ks: ks, db: o.db, limiter: a.limiter},
	}
	if cfg.Webhook.Path != "" || len(cfg.Webhook.Sources) > 0 {
		top := topologyOf(cfg)
		o.broker = &opsBroker{url: cfg.AMQP.URL.Reveal()}
		src.Pipeline = &opsPipeline{top: top, publisher: a.publisher, redis: a.redis, ks: ks, window: o.window, broker: o.broker}
		dl := &opsDeadLetters{top: top, broker: o.broker, db: o.db}
		if a.publisher != nil {
			dl.pub = a.publisher
		}
		src.DeadLetters = dl
	}
	o.page, err = adminui.New(src, adminui.Options{
		Token: cfg.AdminToken.Reveal(), Environment: cfg.Environment, Logger: a.log,
	})
	if err != nil {
		return nil, err
	}
	if err := o.window.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	return o, nil
}

// reloaded shows cfg's rules from now on (SIGHUP).
func (o *opsPage) reloaded(cfg configs.Config) {
	if o == nil {
		return
	}
	cur := *o.cfg.Load()
	cur.RateLimits = cfg.RateLimits
	o.cfg.Store(&cur)
}

// close stops the window and closes the pool; nil-safe.
func (o *opsPage) close(log *slog.Logger) {
	if o == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := o.window.Stop(ctx); err != nil {
		log.Warn("stopping the operator page's metrics window", "err", err)
	}
	if o.broker != nil {
		o.broker.close()
	}
	if o.db != nil {
		o.db.Close()
	}
}
