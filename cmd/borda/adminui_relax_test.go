package main

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/adminui"
	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
	"github.com/olp-edu/borda/ratelimit"
	"github.com/olp-edu/borda/schema"
)

// pageRelaxer is the operator page's relaxer over a real Redis store and
// a migrated schema of the test's own, with a limiter whose relax poll
// (1 h) never runs during the test.
func pageRelaxer(t *testing.T, redisURL string) (*opsRelaxer, *ratelimit.Limiter) {
	t.Helper()
	pool, dbURL := servicetest.IsolatedDatabase(t)
	if err := schema.Up(t.Context(), dbURL); err != nil {
		t.Fatal(err)
	}
	cfg := configs.Config{Environment: "development"}
	cfg.Redis.URL = configs.Secret(redisURL)
	cfg.RateLimits.Rules = []configs.Rule{{Name: "burst", Scope: "ip", Limit: 50, Window: configs.Duration(5 * time.Second)}}
	var p atomic.Pointer[configs.Config]
	p.Store(&cfg)
	rdb := servicetest.RedisClient(t, redisURL, false)
	store := ratelimit.NewRedisStore(rdb)
	ks := keyspace.MustNew(servicetest.KeyPrefix(t))
	t.Cleanup(func() { rdb.Del(context.Background(), ks.Relax("burst")) })
	lim, err := ratelimit.New(ratelimit.Options{Rules: []ratelimit.Rule{{Name: "burst", Scope: ratelimit.ScopeIP, Limit: 50, Window: 5 * time.Second,
		Routes: []string{ratelimit.AllRoutes}}}, RelaxPoll: time.Hour, Timeout: time.Second}, ks, store, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return &opsRelaxer{cfg: &p, store: store, ks: ks, db: pool, limiter: lim}, lim
}

// TestPageRelaxIsInForceHereAtOnceAndRecorded: a relax from the page is
// recorded (origin page) and this process's limiter applies it at once,
// not after relax_poll: the page shows it in force, and so it is.
func TestPageRelaxIsInForceHereAtOnceAndRecorded(t *testing.T) {
	o, lim := pageRelaxer(t, servicetest.RedisURL(t))
	ctx := t.Context()
	res, err := o.Relax(ctx, adminui.RelaxRequest{Rule: "burst", Factor: "3", For: "10m", Operator: "ana.plantao", Reason: "matrícula"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rule != "burst" || res.Factor != 3 || res.AuditID == 0 || time.Until(res.Until) <= 9*time.Minute || res.Warning != "" {
		t.Fatalf("RelaxResult = %+v", res)
	}
	v := lim.Decide(ctx, ratelimit.Subject{Route: "portal", IP: "203.0.113.9"})
	if len(v.Decisions) != 1 || v.Decisions[0].Limit != 150 {
		t.Errorf("the limiter decides with %+v right after the relax, want limit 150", v.Decisions)
	}
	var origin, operator, outcome string
	if err := o.db.QueryRow(ctx, `SELECT origin, operator, outcome FROM limit_relaxes WHERE id = $1`, res.AuditID).Scan(&origin, &operator, &outcome); err != nil {
		t.Fatal(err)
	}
	if origin != "page" || operator != "ana.plantao" || outcome != "applied" {
		t.Errorf("limit_relaxes row: %s %s %s", origin, operator, outcome)
	}
}

// TestPageRelaxRefusesWhatTheCLIRefuses: the form's fields go through the
// CLI's parser, each refusal named by field (*adminui.BadRelax), and
// nothing is recorded or written.
func TestPageRelaxRefusesWhatTheCLIRefuses(t *testing.T) {
	o, _ := pageRelaxer(t, servicetest.RedisURL(t))
	_, err := o.Relax(t.Context(), adminui.RelaxRequest{Rule: "nope", Factor: "0.5", For: "25h", Operator: "ana", Reason: ""})
	var bad *adminui.BadRelax
	if !errors.As(err, &bad) {
		t.Fatalf("err = %v, want *adminui.BadRelax", err)
	}
	var got []string
	for _, p := range bad.Problems {
		got = append(got, p.Field)
	}
	if strings.Join(got, ",") != "rule,factor,for,reason" {
		t.Errorf("refused fields %v, want rule,factor,for,reason", got)
	}
	var n int
	if err := o.db.QueryRow(t.Context(), `SELECT count(*) FROM limit_relaxes`).Scan(&n); err != nil || n != 0 {
		t.Errorf("rows after a refused form: %d (%v)", n, err)
	}
}

// TestPageRelaxWithTheStoreDownIsAnErrorNotASuccess: Redis unreachable,
// the relax is an error naming the store (the page's 503), recorded
// failed.
func TestPageRelaxWithTheStoreDownIsAnErrorNotASuccess(t *testing.T) {
	servicetest.DatabaseURL(t)
	o, _ := pageRelaxer(t, "redis://127.0.0.1:1/0")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	_, err := o.Relax(ctx, adminui.RelaxRequest{Rule: "burst", Factor: "2", For: "10m", Operator: "ana", Reason: "fila"})
	var bad *adminui.BadRelax
	if err == nil || errors.As(err, &bad) || !strings.Contains(err.Error(), "the rate-limit store did not take it") {
		t.Fatalf("err = %v, want the store's refusal", err)
	}
	var outcome string
	if err := o.db.QueryRow(t.Context(), `SELECT outcome FROM limit_relaxes`).Scan(&outcome); err != nil || outcome != "failed" {
		t.Errorf("row outcome %q (%v), want failed", outcome, err)
	}
}

// TestPageRelaxIsUnavailableWithoutASharedStoreOrADatabase: the page says
// why instead of offering a form that cannot work.
func TestPageRelaxIsUnavailableWithoutASharedStoreOrADatabase(t *testing.T) {
	var p atomic.Pointer[configs.Config]
	p.Store(&configs.Config{})
	o := &opsRelaxer{cfg: &p}
	if why := o.Unavailable(); !strings.Contains(why, "embedded store") {
		t.Errorf("memory store: Unavailable = %q", why)
	}
	p.Store(&configs.Config{Redis: configs.Redis{URL: "redis://127.0.0.1:6379/0"}})
	if why := o.Unavailable(); !strings.Contains(why, "set database.url (DATABASE_URL)") {
		t.Errorf("no database: Unavailable = %q", why)
	}
	if _, err := o.Relax(t.Context(), adminui.RelaxRequest{Rule: "burst", Factor: "2", For: "1m", Operator: "a", Reason: "b"}); err == nil {
		t.Error("Relax without a database succeeded")
	}
}
