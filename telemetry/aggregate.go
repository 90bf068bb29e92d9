package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/keyspace"
)

// scanCount is the COUNT hint of each SCAN (keys examined per call).
const scanCount = 1000

// lockTTL bounds how long a crashed aggregation keeps the lock.
const lockTTL = 10 * time.Minute

// upsertSQL writes one page of counters. A Redis counter is the total of
// its minute so far, so a re-run or an overlap sets the row; GREATEST
// keeps the larger total when a Redis restart or failover lost counts
// PostgreSQL already has. Rows already equal are not rewritten.
const upsertSQL = `
INSERT INTO gateway_metrics AS g (environment, kind, dimension, minute, count)
SELECT $1, r.kind, r.dimension, r.minute, r.count
FROM unnest($2::text[], $3::text[], $4::timestamptz[], $5::bigint[]) AS r(kind, dimension, minute, count)
ON CONFLICT (environment, kind, dimension, minute)
DO UPDATE SET count = GREATEST(g.count, EXCLUDED.count), updated_at = now()
WHERE g.count < EXCLUDED.count`

// AggregateStore is the part of a go-redis client the Aggregator uses
// (*redis.Client, *redis.ClusterClient and redis.UniversalClient fit; on a
// cluster every master is scanned).
type AggregateStore interface {
	redis.Scripter
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
	Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd
	MGet(ctx context.Context, keys ...string) *redis.SliceCmd
}

// clusterStore is implemented by *redis.ClusterClient.
type clusterStore interface {
	ForEachMaster(ctx context.Context, fn func(ctx context.Context, client *redis.Client) error) error
}

// Execer runs one SQL statement (*pgxpool.Pool, *pgx.Conn and pgx.Tx fit).
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Report is what one aggregation wrote.
type Report struct {
	// Keys is the number of counters read from Redis.
	Keys int
	// Skipped counts keys under {prefix}m: that are not a counter a
	// Recorder writes (bad dimension or value); they are logged and left.
	Skipped int
	// Rows is the number of gateway_metrics rows upserted (one per
	// counter); Changed is how many of them were new or grew.
	Rows    int
	Changed int64
	// Minutes is the number of distinct minutes covered, from First to
	// Last (zero when Rows is 0).
	Minutes     int
	First, Last time.Time
	// Duration is the wall time of the run, lock included.
	Duration time.Duration
}

// LogValue implements slog.LogValuer.
func (r Report) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int("keys", r.Keys), slog.Int("skipped", r.Skipped), slog.Int("rows", r.Rows),
		slog.Int64("changed", r.Changed), slog.Int("minutes", r.Minutes),
		slog.Time("first", r.First), slog.Time("last", r.Last), slog.Duration("duration", r.Duration))
}

// Aggregator folds the Redis telemetry counters of one keyspace into
// PostgreSQL gateway_metrics rows of one environment.
type Aggregator struct {
	rdb         AggregateStore
	db          Execer
	ks          keyspace.Keyspace
	environment string
	logger      *slog.Logger
	lastSuccess prometheus.Gauge
	now         func() time.Time
	backoffBase time.Duration // first retry delay of Run
}

// NewAggregator returns an Aggregator reading rdb's counters under ks and
// writing rows with environment (configs.Config.Environment) through db,
// typically a *pgxpool.Pool. It registers
// borda_aggregate_last_success_timestamp_seconds on reg.
func NewAggregator(rdb AggregateStore, db Execer, ks keyspace.Keyspace, environment string, reg prometheus.Registerer, logger *slog.Logger) (*Aggregator, error) {
	if rdb == nil || db == nil || environment == "" {
		return nil, errors.New("creating telemetry aggregator: redis, database and environment are required")
	}
	g, err := newLastSuccess(reg)
	if err != nil {
		return nil, err
	}
	return &Aggregator{
		rdb: rdb, db: db, ks: ks, environment: environment, logger: logger,
		lastSuccess: g, now: time.Now, backoffBase: 15 * time.Second,
	}, nil
}

// Aggregate runs one aggregation under the lock {prefix}lock:aggregate
// and releases it: SCAN MATCH {prefix}m:* COUNT 1000 (never KEYS), MGET
// each page, upsert the page into gateway_metrics. It returns ErrLocked,
// without touching anything, when another process holds the lock. A
// failed run may have written some pages; the next run sets the same
// rows.
func (a *Aggregator) Aggregate(ctx context.Context) (Report, error) {
	return a.aggregate(ctx, 0)
}

// aggregate is Aggregate keeping the lock for hold after a success (0:
// release it). A failed run always releases it so another replica retries.
func (a *Aggregator) aggregate(ctx context.Context, hold time.Duration) (rep Report, err error) {
	start := time.Now()
	l, err := acquireLock(ctx, a.rdb, a.ks.AggregateLock(), lockTTL)
	if err != nil {
		return rep, err
	}
	defer func() {
		// Release even when ctx is cancelled: a held lock would block
		// every replica until lockTTL.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		var lerr error
		if err == nil && hold > 0 {
			lerr = l.hold(uctx, hold)
		} else {
			lerr = l.release(uctx)
		}
		if lerr != nil {
			a.logger.Warn("aggregation lock left to expire", "error", lerr)
		}
	}()
	// A run never outlives its lock: past lockTTL another replica may
	// start, and a hung PostgreSQL must not stall Run's retries.
	ctx, cancel := context.WithTimeout(ctx, lockTTL)
	defer cancel()
	minutes := make(map[int64]struct{})
	var mu sync.Mutex // ForEachMaster scans the masters concurrently
	page := func(keys []string, values []any) error {
		mu.Lock()
		defer mu.Unlock()
		return a.upsert(ctx, keys, values, &rep, minutes)
	}
	if cl, ok := a.rdb.(clusterStore); ok {
		err = cl.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return a.scan(ctx, node, true, page)
		})
	} else {
		err = a.scan(ctx, a.rdb, false, page)
	}
	rep.Minutes = len(minutes)
	rep.Duration = time.Since(start)
	if err != nil {
		return rep, err
	}
	a.lastSuccess.Set(float64(a.now().UnixNano()) / 1e9)
	return rep, nil
}

// scanner is what one node's scan needs.
type scanner interface {
	Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd
	MGet(ctx context.Context, keys ...string) *redis.SliceCmd
}

// scan walks one node's counters page by page. On a cluster node, keys of
// one page live in different slots, so values are read with pipelined
// GETs instead of MGET (which needs one slot).
func (a *Aggregator) scan(ctx context.Context, c scanner, cluster bool, page func([]string, []any) error) error {
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, a.ks.MetricPattern(), scanCount).Result()
		if err != nil {
			return fmt.Errorf("scanning telemetry counters: %w", err)
		}
		if len(keys) > 0 {
			values, err := readValues(ctx, c, keys, cluster)
			if err != nil {
				return err
			}
			if err := page(keys, values); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

func readValues(ctx context.Context, c scanner, keys []string, cluster bool) ([]any, error) {
	if !cluster {
		values, err := c.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, fmt.Errorf("reading telemetry counters: %w", err)
		}
		return values, nil
	}
	p, ok := c.(interface{ Pipeline() redis.Pipeliner })
	if !ok {
		return nil, errors.New("reading telemetry counters: cluster node cannot pipeline")
	}
	pipe := p.Pipeline()
	cmds := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Get(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("reading telemetry counters: %w", err)
	}
	values := make([]any, len(keys))
	for i, cmd := range cmds {
		if v, err := cmd.Result(); err == nil {
			values[i] = v
		}
	}
	return values, nil
}

// upsert parses one page and writes its rows. Keys that expired between
// SCAN and MGET (nil values) are ignored.
func (a *Aggregator) upsert(ctx context.Context, keys []string, values []any, rep *Report, minutes map[int64]struct{}) error {
	type rowKey struct {
		kind, dim string
		minute    int64
	}
	rows := make(map[rowKey]int64, len(keys))
	for i, key := range keys {
		if values[i] == nil {
			continue
		}
		rep.Keys++
		dim, minute, ok := a.ks.MetricDimension(key)
		kind, value, ok2 := ParseDimension(dim)
		s, _ := values[i].(string)
		n, err := strconv.ParseInt(s, 10, 64)
		if !ok || !ok2 || err != nil || n < 0 {
			rep.Skipped++
			a.logger.Warn("telemetry key skipped: not a counter", "key", key)
			continue
		}
		rows[rowKey{string(kind), value, minute.Unix()}] = n
	}
	if len(rows) == 0 {
		return nil
	}
	kinds := make([]string, 0, len(rows))
	dims := make([]string, 0, len(rows))
	mins := make([]time.Time, 0, len(rows))
	counts := make([]int64, 0, len(rows))
	for k, n := range rows {
		kinds = append(kinds, k.kind)
		dims = append(dims, k.dim)
		t := time.Unix(k.minute, 0).UTC()
		mins = append(mins, t)
		counts = append(counts, n)
		minutes[k.minute] = struct{}{}
		if rep.First.IsZero() || t.Before(rep.First) {
			rep.First = t
		}
		if t.After(rep.Last) {
			rep.Last = t
		}
	}
	tag, err := a.db.Exec(ctx, upsertSQL, a.environment, kinds, dims, mins, counts)
	if err != nil {
		return fmt.Errorf("upserting %d rows into gateway_metrics: %w", len(rows), err)
	}
	rep.Rows += len(rows)
	rep.Changed += tag.RowsAffected()
	return nil
}
