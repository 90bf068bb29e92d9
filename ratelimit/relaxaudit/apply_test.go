package relaxaudit_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
	"github.com/olp-edu/borda/ratelimit"
	"github.com/olp-edu/borda/ratelimit/relaxaudit"
	"github.com/olp-edu/borda/schema"
)

type target struct {
	relaxaudit.Target
	rdb   redis.UniversalClient
	key   string
	proxy *servicetest.OutageProxy // between the store and Redis
}

// newTarget is a migrated schema of the test's own and a Redis store
// under the test's key prefix, reached through an outage proxy.
func newTarget(t *testing.T, migrated bool) target {
	t.Helper()
	pool, dbURL := servicetest.IsolatedDatabase(t)
	if migrated {
		if err := schema.Up(t.Context(), dbURL); err != nil {
			t.Fatal(err)
		}
	}
	url := servicetest.RedisURL(t)
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	direct := redis.NewClient(opt)
	t.Cleanup(func() { direct.Close() })
	proxy := servicetest.NewOutageProxy(t, opt.Addr)
	opt.Addr = proxy.Addr()
	opt.MaxRetries = -1
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	ks, err := keyspace.New(servicetest.KeyPrefix(t))
	if err != nil {
		t.Fatal(err)
	}
	key := ks.Relax("burst")
	t.Cleanup(func() { direct.Del(context.Background(), key) })
	return target{Target: relaxaudit.Target{Store: ratelimit.NewRedisStore(rdb), Keys: ks, DB: pool, Environment: "development",
		Origin: relaxaudit.OriginPage}, rdb: direct, key: key, proxy: proxy}
}

var rx = relaxaudit.Relax{Rule: "burst", Factor: 3, For: 30 * time.Minute, Operator: "ana.plantao", Reason: "matrícula"}

// TestApplyRecordsTheRelaxThenWritesIt: the row says who, why, from where,
// the factor, how long and "applied"; the store holds the factor with the
// relax's TTL.
func TestApplyRecordsTheRelaxThenWritesIt(t *testing.T) {
	tg := newTarget(t, true)
	before := time.Now()
	a, err := relaxaudit.Apply(t.Context(), tg.Target, rx)
	if err != nil || a.Unrecorded != nil {
		t.Fatalf("Apply: %v (unrecorded %v)", err, a.Unrecorded)
	}
	if a.AuditID == 0 || a.Until.Before(before.Add(rx.For)) || a.Until.After(time.Now().Add(rx.For)) {
		t.Fatalf("Applied = %+v", a)
	}
	if v := tg.rdb.Get(t.Context(), tg.key).Val(); v != "3" {
		t.Errorf("%s = %q, want 3", tg.key, v)
	}
	if ttl := tg.rdb.PTTL(t.Context(), tg.key).Val(); ttl <= 29*time.Minute || ttl > 30*time.Minute {
		t.Errorf("%s PTTL = %v, want about 30m", tg.key, ttl)
	}
	var env, rule, operator, reason, origin, outcome, errText string
	var factor float64
	var lasts time.Duration
	var endsAt time.Time
	err = tg.DB.QueryRow(t.Context(), `SELECT environment, rule, factor, extract(epoch FROM lasts)::bigint * 1000000000, operator, reason, origin, ends_at, outcome, error
FROM limit_relaxes WHERE id = $1`, a.AuditID).Scan(&env, &rule, &factor, &lasts, &operator, &reason, &origin, &endsAt, &outcome, &errText)
	if err != nil {
		t.Fatal(err)
	}
	if env != "development" || rule != "burst" || factor != 3 || lasts != 30*time.Minute || operator != "ana.plantao" || reason != "matrícula" ||
		origin != "page" || outcome != "applied" || errText != "" || !endsAt.Equal(a.Until.Truncate(time.Microsecond)) {
		t.Errorf("row: %s %s ×%v %v %s %q %s ends %v %s %q", env, rule, factor, lasts, operator, reason, origin, endsAt, outcome, errText)
	}
}

// TestApplyWithTheStoreDownRecordsAFailureAndRelaxesNothing: the store
// refusing is ErrStore, the row says failed with the error, and no relax
// is in force once the store is back.
func TestApplyWithTheStoreDownRecordsAFailureAndRelaxesNothing(t *testing.T) {
	tg := newTarget(t, true)
	tg.proxy.SetDown(true)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	a, err := relaxaudit.Apply(ctx, tg.Target, rx)
	if !errors.Is(err, relaxaudit.ErrStore) {
		t.Fatalf("Apply with the store down = %v, want ErrStore", err)
	}
	if strings.Contains(err.Error(), "stays pending") {
		t.Errorf("the error says the row stays pending, but it was recorded as failed: %v", err)
	}
	var outcome, errText string
	if err := tg.DB.QueryRow(t.Context(), `SELECT outcome, error FROM limit_relaxes WHERE id = $1`, a.AuditID).Scan(&outcome, &errText); err != nil {
		t.Fatal(err)
	}
	if outcome != "failed" || errText == "" {
		t.Errorf("row: outcome %q error %q, want failed with the reason", outcome, errText)
	}
	if n := tg.rdb.Exists(t.Context(), tg.key).Val(); n != 0 {
		t.Errorf("%s exists after a failed relax", tg.key)
	}
}

// TestApplyWithoutItsAuditRowRelaxesNothing: a database that was never
// migrated (or is down) refuses the row: ErrNotRecorded, the migrate hint
// available through schema.Hint, and nothing in the store.
func TestApplyWithoutItsAuditRowRelaxesNothing(t *testing.T) {
	tg := newTarget(t, false)
	_, err := relaxaudit.Apply(t.Context(), tg.Target, rx)
	if !errors.Is(err, relaxaudit.ErrNotRecorded) || !strings.Contains(schema.Hint(err).Error(), "run `borda migrate` first") {
		t.Fatalf("Apply without limit_relaxes = %v, want ErrNotRecorded with the migrate hint", err)
	}
	if n := tg.rdb.Exists(t.Context(), tg.key).Val(); n != 0 {
		t.Errorf("%s written without its audit row", tg.key)
	}
}
