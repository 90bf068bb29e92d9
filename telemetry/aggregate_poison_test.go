package telemetry

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/keyspace"
)

// setCounters writes raw counter keys, as an older Borda (or anything
// else with access to Redis) may have left them.
func setCounters(t *testing.T, rdb redis.UniversalClient, keys map[string]int64) {
	t.Helper()
	for k, n := range keys {
		if err := rdb.Set(t.Context(), k, n, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// Issue 13 item 5: a "%ff" or "%00" path used to become a key whose row
// PostgreSQL refused, failing every run for the key's 2 h. Counters whose
// dimension is not valid text are now skipped and counted, in the same
// page as good ones, and the good rows land.
func TestPoisonedCountersDoNotStopTheAggregation(t *testing.T) {
	t.Parallel()
	rdb, ks := testRedis(t)
	cleanKeys(t, rdb, ks)
	db := migratedDB(t)
	m := time.Now().UTC().Truncate(time.Minute).Add(-time.Minute)
	minute := m.Format(keyspace.MinuteLayout)
	bad := map[string]int64{}
	for name, p := range hostileTexts {
		bad[ks.Prefix()+"m:portal:"+p+":"+minute] = 1
		if strings.Contains(name, "C1") || strings.Contains(name, "NUL") {
			bad[ks.Prefix()+"m:escola:e"+p+":"+minute] = 1
			bad[ks.Prefix()+"m:blocked:portal:"+p+":"+minute] = 1
		}
	}
	bad[ks.Prefix()+"m:portal:/"+strings.Repeat("z", 600)+":"+minute] = 1
	setCounters(t, rdb, bad)
	setCounters(t, rdb, map[string]int64{
		ks.Metric("portal:/ação", m):   5,
		ks.Metric("escola:3141", m):    2,
		ks.Metric("status:200", m):     7,
		ks.Metric("portal:other", m):   3,
		ks.Metric("unrouted:other", m): 1,
	})
	a := newTestAggregator(t, rdb, db, ks)
	rep, err := a.Aggregate(t.Context())
	if err != nil {
		t.Fatalf("Aggregate = %v, want success with the poisoned counters skipped", err)
	}
	want := []row{
		{"endpoint", "portal:/ação", m, 5},
		{"endpoint", "portal:other", m, 3},
		{"endpoint", "unrouted:other", m, 1},
		{"escola", "3141", m, 2},
		{"status", "200", m, 7},
	}
	if got := readRows(t, db, "development"); !reflect.DeepEqual(got, want) {
		t.Errorf("rows:\n got %v\nwant %v", got, want)
	}
	if rep.Invalid != len(bad) || rep.Rows != len(want) || rep.Skipped != 0 {
		t.Errorf("report = %+v, want %d invalid, %d rows, 0 skipped", rep, len(bad), len(want))
	}
}

// Whatever else PostgreSQL refuses as bad data (here a CHECK an operator
// added) costs only the refused row: the page is retried row by row.
func TestRowsPostgreSQLRefusesAreCountedAndTheRestLand(t *testing.T) {
	t.Parallel()
	rdb, ks := testRedis(t)
	cleanKeys(t, rdb, ks)
	db := migratedDB(t)
	if _, err := db.Exec(t.Context(), `ALTER TABLE gateway_metrics ADD CONSTRAINT no_refuse CHECK (dimension NOT LIKE '%refuse-me%')`); err != nil {
		t.Fatal(err)
	}
	m := time.Now().UTC().Truncate(time.Minute).Add(-time.Minute)
	setCounters(t, rdb, map[string]int64{
		ks.Metric("portal:/refuse-me", m): 1,
		ks.Metric("portal:/a", m):         2,
		ks.Metric("portal:/b", m):         3,
	})
	rep, err := newTestAggregator(t, rdb, db, ks).Aggregate(t.Context())
	if err != nil {
		t.Fatalf("Aggregate = %v", err)
	}
	want := []row{{"endpoint", "portal:/a", m, 2}, {"endpoint", "portal:/b", m, 3}}
	if got := readRows(t, db, "development"); !reflect.DeepEqual(got, want) {
		t.Errorf("rows:\n got %v\nwant %v", got, want)
	}
	if rep.Invalid != 1 || rep.Rows != 2 || rep.Changed != 2 {
		t.Errorf("report = %+v, want 1 invalid, 2 rows, 2 changed", rep)
	}
}

// gateway_metrics keeps telemetry.retention_days: each run deletes this
// environment's older rows (in batches) and leaves other environments'.
// The retention has one default, the configuration's: an Aggregator not
// given one expires nothing, even a row older than 90 days.
func TestRetentionDeletesOnlyThisEnvironmentsOldRows(t *testing.T) {
	t.Parallel()
	rdb, ks := testRedis(t)
	cleanKeys(t, rdb, ks)
	db := migratedDB(t)
	now := time.Now().UTC().Truncate(time.Minute)
	old := now.Add(-48 * time.Hour)
	recent := now.Add(-23 * time.Hour)
	// expireBatch+5 old rows, so the delete takes two statements.
	if _, err := db.Exec(t.Context(), `INSERT INTO gateway_metrics (environment, kind, dimension, minute, count)
		SELECT 'development', 'endpoint', 'portal:/old/' || i, $1, 1 FROM generate_series(1, $2::int) AS i`, old, expireBatch+5); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(t.Context(), `INSERT INTO gateway_metrics (environment, kind, dimension, minute, count) VALUES
		('development', 'escola', '3141', $1, 4), ('production', 'escola', '3141', $2, 9), ('development', 'escola', '2718', $3, 1)`,
		recent, old, now.Add(-100*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	a := newTestAggregator(t, rdb, db, ks)
	if rep, err := a.Aggregate(t.Context()); err != nil || rep.Expired != 0 {
		t.Fatalf("without a retention: expired %d rows (err %v), want none", rep.Expired, err)
	}
	if err := a.SetRetention(24 * time.Hour); err != nil {
		t.Fatal(err)
	}
	rep, err := a.Aggregate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Expired != expireBatch+6 {
		t.Errorf("expired %d rows, want %d", rep.Expired, expireBatch+6)
	}
	if got, want := readRows(t, db, "development"), []row{{"escola", "3141", recent, 4}}; !reflect.DeepEqual(got, want) {
		t.Errorf("development rows:\n got %v\nwant %v", got, want)
	}
	if got := readRows(t, db, "production"); len(got) != 1 {
		t.Errorf("production rows = %v, want its one row kept", got)
	}
	if err := a.SetRetention(time.Hour); err == nil {
		t.Error("a retention under a day was accepted")
	}
}

// Issue 16 §2.3: after a `borda serve` aggregated, a one-shot `borda
// aggregate` used to be skipped for 9/10 of the interval. Only a run in
// progress may turn it away now.
func TestOneShotAggregatesRightAfterAReplicasTurn(t *testing.T) {
	t.Parallel()
	rdb, ks := testRedis(t)
	cleanKeys(t, rdb, ks)
	db := migratedDB(t)
	want := recordSome(t, rdb, ks)
	serve := newTestAggregator(t, rdb, db, ks)
	if _, err := serve.aggregate(t.Context(), time.Hour); err != nil {
		t.Fatal(err)
	}
	// New counts after the replica's turn.
	m := want[1].Minute
	setCounters(t, rdb, map[string]int64{ks.Metric("portal:/api/alunos/{id}", m): 12})
	rep, err := newTestAggregator(t, rdb, db, ks).Aggregate(t.Context())
	if err != nil {
		t.Fatalf("one-shot Aggregate after a replica's turn = %v, want it to run", err)
	}
	if rep.Changed != 1 {
		t.Errorf("one-shot changed %d rows, want 1 (the grown counter)", rep.Changed)
	}
	if _, err := serve.aggregate(t.Context(), time.Hour); !errors.Is(err, errIntervalDone) {
		t.Errorf("the replica's next turn = %v, want errIntervalDone", err)
	}
	// A run in progress still turns the one-shot away.
	l, err := acquireLock(t.Context(), rdb, ks.AggregateLock(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.release(t.Context()) }()
	if _, err := newTestAggregator(t, rdb, db, ks).Aggregate(t.Context()); !errors.Is(err, ErrLocked) {
		t.Errorf("one-shot during a run = %v, want ErrLocked", err)
	}
}
