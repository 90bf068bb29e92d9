package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// writeConfig writes a config file with body and returns its path; the
// URL variables are cleared so the file decides.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	t.Setenv("REDIS_URL", "")
	t.Setenv("DATABASE_URL", "")
	p := filepath.Join(t.TempDir(), "borda.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAggregateAndMigrateNeedTheirURLs(t *testing.T) {
	cases := []struct {
		cmd  func(context.Context, []string, *bytes.Buffer, *bytes.Buffer) int
		body string
		want string
	}{
		{func(ctx context.Context, a []string, o, e *bytes.Buffer) int { return runAggregate(ctx, a, o, e) },
			"environment: development\n", "needs redis.url"},
		{func(ctx context.Context, a []string, o, e *bytes.Buffer) int { return runAggregate(ctx, a, o, e) },
			"environment: development\nredis: {url: \"redis://127.0.0.1:6379\"}\n", "needs database.url"},
		{func(ctx context.Context, a []string, o, e *bytes.Buffer) int { return runMigrate(ctx, a, o, e) },
			"environment: development\n", "needs database.url"},
	}
	for _, c := range cases {
		path := writeConfig(t, c.body)
		var out, errb bytes.Buffer
		if code := c.cmd(t.Context(), []string{"--config", path}, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("config %q: exit %d, stderr %q; want 2 and %q", c.body, code, errb.String(), c.want)
		}
	}
}

// `borda migrate` then `borda aggregate`, as cron runs them, against the
// real servers: the counters become rows, a second migrate is a no-op.
func TestMigrateThenAggregate(t *testing.T) {
	redisURL := servicetest.RedisURL(t)
	prefix := servicetest.KeyPrefix(t)
	ctx := t.Context()
	// A schema of its own; it used to be dropped through a pool already
	// closed by then, so every run left one behind.
	db, dbURL := servicetest.IsolatedDatabase(t)
	path := writeConfig(t, fmt.Sprintf("environment: development\nredis: {url: %q, key_prefix: %q}\ndatabase: {url: %q}\n", redisURL, prefix, dbURL))

	var out, errb bytes.Buffer
	if code := runMigrate(ctx, []string{"--config", path}, &out, &errb); code != 0 || !strings.Contains(out.String(), "00001_gateway_metrics.sql") {
		t.Fatalf("migrate: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	out.Reset()
	if code := runMigrate(ctx, []string{"--config", path}, &out, &errb); code != 0 || !strings.Contains(out.String(), "up to date") {
		t.Fatalf("second migrate: exit %d, stdout %q", code, out.String())
	}

	opt, _ := redis.ParseURL(redisURL)
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() }) // after the Del below (cleanups run last-in first-out)
	ks := keyspace.MustNew(prefix)
	minute := time.Now().UTC().Truncate(time.Minute)
	key := ks.Metric("escola:e42", minute)
	rdb.Set(ctx, key, 17, time.Hour)
	t.Cleanup(func() { rdb.Del(context.Background(), key, ks.AggregateLock()) })

	out.Reset()
	errb.Reset()
	if code := runAggregate(ctx, []string{"--config", path}, &out, &errb); code != 0 || !strings.Contains(out.String(), "aggregated 1 counters into 1 rows") {
		t.Fatalf("aggregate: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	var n int64
	err := db.QueryRow(ctx, "SELECT count FROM gateway_metrics WHERE environment = 'development' AND kind = 'escola' AND dimension = 'e42'").Scan(&n)
	if err != nil || n != 17 {
		t.Errorf("gateway_metrics escola e42 = %d (%v), want 17", n, err)
	}
}

// TestAggregateBeforeMigrateSaysToRunMigrate: against a database never
// migrated, `borda aggregate` printed only `relation "gateway_metrics"
// does not exist`; it now says to run `borda migrate` (exit 1).
func TestAggregateBeforeMigrateSaysToRunMigrate(t *testing.T) {
	redisURL := servicetest.RedisURL(t)
	_, dbURL := servicetest.IsolatedDatabase(t)
	path := writeConfig(t, fmt.Sprintf("environment: development\nredis: {url: %q, key_prefix: %q}\ndatabase: {url: %q}\n", redisURL, servicetest.KeyPrefix(t), dbURL))
	t.Setenv("BORDA_LOG_LEVEL", "error")
	var out, errb bytes.Buffer
	code := runAggregate(t.Context(), []string{"--config", path}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "gateway_metrics") || !strings.Contains(errb.String(), "run `borda migrate` first") {
		t.Fatalf("aggregate before migrate: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}
