package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/internal/startstop/startstoptest"
	"github.com/olp-edu/borda/internal/upstashtest"
	"github.com/olp-edu/borda/keyspace"
	"github.com/olp-edu/borda/schema"
)

type row struct {
	Kind, Dimension string
	Minute          time.Time
	Count           int64
}

func readRows(t *testing.T, db *pgxpool.Pool, env string) []row {
	t.Helper()
	rows, err := db.Query(t.Context(), `SELECT kind, dimension, minute, count FROM gateway_metrics
		WHERE environment = $1 ORDER BY kind, dimension, minute`, env)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.Kind, &r.Dimension, &r.Minute, &r.Count); err != nil {
			t.Fatal(err)
		}
		r.Minute = r.Minute.UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func newTestAggregator(t *testing.T, rdb redis.UniversalClient, db Execer, ks keyspace.Keyspace) *Aggregator {
	t.Helper()
	a, err := NewAggregator(rdb, db, ks, "development", prometheus.NewRegistry(), discard())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// recordSome writes a known set of counters through a real Recorder over
// two minutes and returns the rows they must become.
func recordSome(t *testing.T, rdb redis.UniversalClient, ks keyspace.Keyspace) []row {
	t.Helper()
	r, _ := newTestRecorder(t, testConfig(1000), ks, NewRedisSink(rdb))
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	m1 := time.Now().UTC().Truncate(time.Minute).Add(-time.Minute)
	m2 := m1.Add(time.Minute)
	for i := range 10 {
		r.Record(Event{Served: true, Time: m1.Add(time.Second), Route: "portal", Path: fmt.Sprintf("/api/alunos/%d", i), Status: 200, Escola: "e7", WouldBlock: i < 3})
	}
	r.Record(Event{Served: true, Time: m2, Route: "portal", Path: "/login", Status: 429, Blocked: true})
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	return []row{
		{"blocked", "portal:/login", m2, 1},
		{"endpoint", "portal:/api/alunos/{id}", m1, 10},
		{"endpoint", "portal:/login", m2, 1},
		{"escola", "e7", m1, 10},
		{"status", "200", m1, 10},
		{"status", "429", m2, 1},
		{"would_block", "portal:/api/alunos/{id}", m1, 3},
	}
}

func TestAggregatingTwiceGivesTheSameRows(t *testing.T) {
	t.Parallel()
	overEachTransport(t, func(t *testing.T, rdb redis.UniversalClient, ks keyspace.Keyspace, _ *upstashtest.Server) {
		db := migratedDB(t)
		want := recordSome(t, rdb, ks)
		a := newTestAggregator(t, rdb, db, ks)

		rep, err := a.Aggregate(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("first run: %+v", rep)
		first := readRows(t, db, "development")
		if !reflect.DeepEqual(first, want) {
			t.Fatalf("rows after the first run:\n got %v\nwant %v", first, want)
		}
		if rep.Rows != len(want) || rep.Changed != int64(len(want)) || rep.Keys != len(want) || rep.Minutes != 2 {
			t.Errorf("first report = %+v, want %d rows, all changed, 2 minutes", rep, len(want))
		}
		if !rep.First.Equal(want[1].Minute) || !rep.Last.Equal(want[0].Minute) {
			t.Errorf("report covers %v..%v, want %v..%v", rep.First, rep.Last, want[1].Minute, want[0].Minute)
		}

		rep, err = a.Aggregate(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if second := readRows(t, db, "development"); !reflect.DeepEqual(second, first) {
			t.Errorf("rows after the second run differ:\n got %v\nwant %v", second, first)
		}
		if rep.Rows != len(want) || rep.Changed != 0 {
			t.Errorf("second report = %+v, want %d rows upserted, 0 changed", rep, len(want))
		}
		if v := gaugeValue(t, a.lastSuccess); v < float64(time.Now().Add(-time.Minute).Unix()) {
			t.Errorf("last success gauge = %v, want about now", v)
		}
		if n, _ := rdb.Exists(t.Context(), ks.AggregateLock()).Result(); n != 0 {
			t.Error("Aggregate left the lock behind")
		}
	})
}

// A counter that grew since the last run updates its row (the upsert sets
// the total; it does not add).
func TestAggregateSetsTheGrownTotal(t *testing.T) {
	t.Parallel()
	overEachTransport(t, func(t *testing.T, rdb redis.UniversalClient, ks keyspace.Keyspace, _ *upstashtest.Server) {
		db := migratedDB(t)
		a := newTestAggregator(t, rdb, db, ks)
		minute := time.Now().UTC().Truncate(time.Minute)
		key := ks.Metric("escola:e1", minute)
		ctx := t.Context()
		rdb.Set(ctx, key, 5, time.Hour)
		if _, err := a.Aggregate(ctx); err != nil {
			t.Fatal(err)
		}
		rdb.IncrBy(ctx, key, 3)
		if _, err := a.Aggregate(ctx); err != nil {
			t.Fatal(err)
		}
		if got := readRows(t, db, "development"); len(got) != 1 || got[0].Count != 8 {
			t.Errorf("rows = %v, want one escola row with count 8", got)
		}
		// A Redis that lost counts (restart, failover) never lowers a row.
		rdb.Set(ctx, key, 2, time.Hour)
		if _, err := a.Aggregate(ctx); err != nil {
			t.Fatal(err)
		}
		if got := readRows(t, db, "development"); len(got) != 1 || got[0].Count != 8 {
			t.Errorf("rows after Redis lost counts = %v, want count 8 kept", got)
		}
	})
}

// Two replicas' turns at once: one writes, the other finds the run lock
// and skips; afterwards the interval is marked done and the lock is free.
func TestTwoAggregatorsAtOnceWriteOnce(t *testing.T) {
	t.Parallel()
	overEachTransport(t, func(t *testing.T, rdb redis.UniversalClient, ks keyspace.Keyspace, _ *upstashtest.Server) {
		db := migratedDB(t)
		want := recordSome(t, rdb, ks)
		aggs := []*Aggregator{newTestAggregator(t, rdb, db, ks), newTestAggregator(t, rdb, db, ks)}
		var wg sync.WaitGroup
		start := make(chan struct{})
		reps := make([]Report, 2)
		errs := make([]error, 2)
		for i, a := range aggs {
			wg.Go(func() {
				<-start
				// As in Run: the winner keeps the lock for the period.
				reps[i], errs[i] = a.aggregate(t.Context(), time.Minute)
			})
		}
		close(start)
		wg.Wait()
		var wrote, skipped int
		var changed int64
		for i := range aggs {
			switch {
			case errs[i] == nil:
				wrote++
				changed += reps[i].Changed
			case errors.Is(errs[i], ErrLocked):
				skipped++
			default:
				t.Fatalf("aggregator %d: %v", i, errs[i])
			}
		}
		if wrote != 1 || skipped != 1 {
			t.Fatalf("%d wrote, %d skipped; want 1 and 1", wrote, skipped)
		}
		if changed != int64(len(want)) {
			t.Errorf("rows changed = %d, want %d", changed, len(want))
		}
		if got := readRows(t, db, "development"); !reflect.DeepEqual(got, want) {
			t.Errorf("rows:\n got %v\nwant %v", got, want)
		}
		if n, _ := rdb.Exists(t.Context(), ks.AggregateLock()).Result(); n != 0 {
			t.Error("the run lock outlived the run")
		}
		ttl, err := rdb.PTTL(t.Context(), ks.AggregateInterval()).Result()
		if err != nil || ttl <= 0 || ttl > time.Minute {
			t.Errorf("interval marker TTL = %v (%v), want 0 < TTL ≤ 1m", ttl, err)
		}
		if _, err := aggs[0].aggregate(t.Context(), time.Minute); !errors.Is(err, errIntervalDone) {
			t.Errorf("a replica's turn during the interval = %v, want errIntervalDone", err)
		}
	})
}

// Without gateway_metrics the run fails, says so, and frees the lock so a
// retry (or another replica) can run.
func TestAggregateWithoutTableFailsAndFreesTheLock(t *testing.T) {
	t.Parallel()
	rdb, ks := testRedis(t)
	cleanKeys(t, rdb, ks)
	db, _ := servicetest.IsolatedDatabase(t)
	recordSome(t, rdb, ks)
	a := newTestAggregator(t, rdb, db, ks)
	_, err := a.Aggregate(t.Context())
	if err == nil {
		t.Fatal("Aggregate without gateway_metrics succeeded")
	}
	t.Logf("error: %v", err)
	if n, _ := rdb.Exists(t.Context(), ks.AggregateLock()).Result(); n != 0 {
		t.Error("a failed run kept the lock")
	}
	if v := gaugeValue(t, a.lastSuccess); v != 0 {
		t.Errorf("last success gauge = %v after a failure, want 0", v)
	}
}

// `borda serve` starts before `borda migrate`: Run fails, retries with
// backoff, and aggregates once the table exists.
func TestRunRetriesUntilTheTableExists(t *testing.T) {
	t.Parallel()
	rdb, ks := testRedis(t)
	cleanKeys(t, rdb, ks)
	db, url := servicetest.IsolatedDatabase(t)
	want := recordSome(t, rdb, ks)
	a := newTestAggregator(t, rdb, db, ks)
	a.backoffBase = 20 * time.Millisecond
	failures := &failureCounter{}
	a.logger = slog.New(failures)
	a.SetErrorHint(schema.Hint) // as borda serve does
	// A 1s interval caps the backoff: with 1h it doubles past the deadline
	// when schema.Up is slow (a loaded CI box) and the test flakes.
	if err := a.SetInterval(time.Second); err != nil {
		t.Fatal(err)
	}
	if err := a.Start(t.Context()); err != nil { // Run, as borda serve starts it
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); failures.n.Load() < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Run logged %d failed attempts in 10s, want a retry", failures.n.Load())
		}
	}
	// The failure says what to do (issue 24 item 9), in serve's own log.
	if last, _ := failures.last.Load().(string); !strings.Contains(last, "gateway_metrics") || !strings.Contains(last, "borda migrate") {
		t.Errorf("aggregation failure logged as %q, want the missing table and `borda migrate`", last)
	}
	if err := schema.Up(t.Context(), url); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for gaugeValue(t, a.lastSuccess) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Run did not aggregate after the table appeared")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := a.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := readRows(t, db, "development"); !reflect.DeepEqual(got, want) {
		t.Errorf("rows:\n got %v\nwant %v", got, want)
	}
}

// Keys under {prefix}m: that no Recorder writes are skipped, not fatal.
func TestAggregateSkipsForeignKeys(t *testing.T) {
	t.Parallel()
	overEachTransport(t, func(t *testing.T, rdb redis.UniversalClient, ks keyspace.Keyspace, _ *upstashtest.Server) {
		db := migratedDB(t)
		ctx := t.Context()
		minute := time.Now().UTC().Truncate(time.Minute)
		rdb.Set(ctx, ks.Metric("status:200", minute), 4, time.Hour)
		rdb.Set(ctx, ks.Metric("status:200", minute)+"x", 1, time.Hour) // bad minute
		rdb.Set(ctx, ks.Metric("nodimension", minute), 1, time.Hour)
		rdb.Set(ctx, ks.Metric("escola:e1", minute), "NaN", time.Hour)
		a := newTestAggregator(t, rdb, db, ks)
		rep, err := a.Aggregate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Rows != 1 || rep.Skipped != 3 {
			t.Errorf("report = %+v, want 1 row and 3 skipped", rep)
		}
	})
}

// The lock is released only by its holder (compare-and-delete).
func TestLockReleaseKeepsAnotherHoldersLock(t *testing.T) {
	t.Parallel()
	overEachTransport(t, func(t *testing.T, rdb redis.UniversalClient, ks keyspace.Keyspace, _ *upstashtest.Server) {
		ctx := t.Context()
		l, err := acquireLock(ctx, rdb, ks.AggregateLock(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := acquireLock(ctx, rdb, ks.AggregateLock(), time.Minute); !errors.Is(err, ErrLocked) {
			t.Fatalf("second acquire = %v, want ErrLocked", err)
		}
		rdb.Set(ctx, ks.AggregateLock(), "someone-else", time.Minute) // ours expired, another took it
		if err := l.release(ctx); err != nil {
			t.Fatal(err)
		}
		if v, _ := rdb.Get(ctx, ks.AggregateLock()).Result(); v != "someone-else" {
			t.Errorf("release deleted another holder's lock (now %q)", v)
		}
	})
}

func TestBackoffDoublesUpToTheInterval(t *testing.T) {
	t.Parallel()
	for attempt, want := range map[int]time.Duration{1: 15 * time.Second, 2: 30 * time.Second, 3: time.Minute, 10: time.Hour, 100: time.Hour} {
		got := backoff(15*time.Second, time.Hour, attempt)
		if got < want*8/10 || got > want*12/10 {
			t.Errorf("backoff(attempt %d) = %v, want %v ±20%%", attempt, got, want)
		}
	}
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// failureCounter is a slog.Handler counting the aggregator's "telemetry
// aggregation failed" lines (one per failed attempt).
type failureCounter struct {
	n    atomic.Int64
	last atomic.Value // string: the last failure's error attribute
}

func (c *failureCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *failureCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "telemetry aggregation failed" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "error" {
				c.last.Store(a.Value.String())
			}
			return true
		})
		c.n.Add(1)
	}
	return nil
}
func (c *failureCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *failureCounter) WithGroup(string) slog.Handler      { return c }

// TestAggregatorSurvivesConcurrentStartStop: the aggregation as borda
// serve runs it, started and stopped from many goroutines at once (run
// with -race); without an interval Start refuses.
func TestAggregatorSurvivesConcurrentStartStop(t *testing.T) {
	t.Parallel()
	rdb, ks := testRedis(t)
	db, _ := servicetest.IsolatedDatabase(t) // no table: each run fails and waits to retry
	if err := newTestAggregator(t, rdb, db, ks).Start(t.Context()); err == nil {
		t.Error("Start without SetInterval accepted")
	}
	for range 5 {
		a, err := NewAggregator(rdb, db, ks, "development", prometheus.NewRegistry(), discard())
		if err != nil {
			t.Fatal(err)
		}
		if err := a.SetInterval(time.Hour); err != nil {
			t.Fatal(err)
		}
		startstoptest.Stress(t, a)
	}
}
