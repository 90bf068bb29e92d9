package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/startstop"
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

// expireBatch bounds the rows one DELETE removes, so expiring a large
// backlog never holds long row locks or one huge transaction.
const expireBatch = 10000

// expireSQL deletes up to expireBatch rows of an environment older than
// $2. The kind list (every kind the CHECK allows) lets the delete walk
// gateway_metrics_kind_minute_idx (environment, kind, minute) instead of
// the whole table.
var expireSQL = `
DELETE FROM gateway_metrics WHERE ctid = ANY (ARRAY(
	SELECT ctid FROM gateway_metrics
	WHERE environment = $1
	  AND kind = ANY ('{` + kindList() + `}'::text[])
	  AND minute < $2
	LIMIT ` + strconv.Itoa(expireBatch) + `))`

// kindList is Kinds joined by commas, for the expiry's kind array.
func kindList() string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ",")
}

// AggregateStore is the part of a go-redis client the Aggregator uses
// (*redis.Client, *redis.ClusterClient and redis.UniversalClient fit; on a
// cluster every master is scanned).
type AggregateStore interface {
	redis.Scripter
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
	Set(ctx context.Context, key string, value any, expiration time.Duration) *redis.StatusCmd
	Exists(ctx context.Context, keys ...string) *redis.IntCmd
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
	// Invalid counts counters whose dimension is not ValidText or longer
	// than 512 bytes (written by an older Borda or by something else),
	// plus rows PostgreSQL refused as bad data (SQLSTATE class 22 or 23);
	// they are logged, left to expire and never abort the run.
	Invalid int
	// Expired is the number of gateway_metrics rows of this environment
	// deleted for being older than the retention (telemetry.retention_days).
	Expired int64
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
		slog.Int("keys", r.Keys), slog.Int("skipped", r.Skipped), slog.Int("invalid", r.Invalid),
		slog.Int("rows", r.Rows), slog.Int64("expired", r.Expired),
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
	retention   time.Duration
	hint        func(error) error // SetErrorHint; nil: errors as they are
	interval    time.Duration     // SetInterval: Start's Run interval
	task        startstop.Task    // Start's Run
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

// SetRetention sets how long rows are kept (telemetry.retention_days,
// whose default, 90 days, is a school term of baselines and a bound on
// what attacker-chosen paths can make the table hold): each successful
// run then deletes this environment's rows whose minute is older than d,
// 10 000 per statement. Until it is called no row expires. It must be
// called before Aggregate or Run; d below one day is refused, since the
// counters being aggregated are up to 2 h old.
func (a *Aggregator) SetRetention(d time.Duration) error {
	if d < 24*time.Hour {
		return fmt.Errorf("telemetry retention %s: must be at least 24h", d)
	}
	a.retention = d
	return nil
}

// SetInterval sets the interval of Start's Run (telemetry.aggregate_every);
// d must be positive. Call it before Start.
func (a *Aggregator) SetInterval(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("telemetry aggregation interval %s: must be positive", d)
	}
	a.interval = d
	return nil
}

// Start runs Run(ctx, the SetInterval interval) in the background until
// ctx ends or Stop is called, and returns at once (internal/startstop's
// shape): an error without an interval; a second Start is a no-op, a
// Start after Stop returns startstop.ErrStopped.
func (a *Aggregator) Start(ctx context.Context) error {
	if a.interval <= 0 {
		return errors.New("starting telemetry aggregation: no interval (SetInterval)")
	}
	return a.task.StartTask(ctx, func(ctx context.Context) error { a.Run(ctx, a.interval); return nil })
}

// Stop ends Start's Run and waits for it (a run in progress sees its
// context end), at most until ctx ends. A Stop without a Start, and a
// second Stop, return nil.
func (a *Aggregator) Stop(ctx context.Context) error { return a.task.Stop(ctx) }

// SetErrorHint makes Run log each failure as hint(err): `borda serve`
// passes schema.Hint, so a missing gateway_metrics is logged with "run
// `borda migrate` first" as `borda aggregate` says it. Call it before Run.
func (a *Aggregator) SetErrorHint(hint func(error) error) { a.hint = hint }

// Aggregate runs one aggregation under the lock {prefix}lock:aggregate
// and releases it: SCAN MATCH {prefix}m:* COUNT 1000 (never KEYS), MGET
// each page, upsert the page into gateway_metrics, then delete rows older
// than the retention. It returns ErrLocked, without touching anything,
// only when another run is in progress right now; an interval a `borda
// serve` replica already aggregated does not stop it (re-runs set the same
// rows). A failed run may have written some pages; the next run sets the
// same rows.
func (a *Aggregator) Aggregate(ctx context.Context) (Report, error) {
	return a.aggregate(ctx, 0)
}

// aggregate is one run. With interval > 0 it is Run's turn: it is skipped
// (errIntervalDone) when {prefix}lock:aggregate:interval exists, and a
// success sets that marker for interval, before the run lock is
// released, so a replica that takes the lock afterwards sees it. The run
// lock itself is always released at the end.
func (a *Aggregator) aggregate(ctx context.Context, interval time.Duration) (rep Report, err error) {
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
		if err == nil && interval > 0 {
			if merr := a.rdb.Set(uctx, a.ks.AggregateInterval(), l.token, interval).Err(); merr != nil {
				// Other replicas then aggregate this interval again:
				// harmless, re-runs set the same rows.
				a.logger.Warn("aggregation interval not marked done", "error", merr)
			}
		}
		if lerr := l.release(uctx); lerr != nil {
			a.logger.Warn("aggregation lock left to expire", "error", lerr)
		}
	}()
	if interval > 0 {
		n, xerr := a.rdb.Exists(ctx, a.ks.AggregateInterval()).Result()
		if xerr != nil {
			return rep, fmt.Errorf("reading the aggregation interval marker: %w", xerr)
		}
		if n > 0 {
			return rep, errIntervalDone
		}
	}
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
	err = ScanCounters(ctx, a.rdb, a.ks.MetricPattern(), page)
	rep.Minutes = len(minutes)
	if err == nil {
		rep.Expired, err = a.expire(ctx)
	}
	rep.Duration = time.Since(start)
	if err != nil {
		return rep, err
	}
	a.lastSuccess.Set(float64(a.now().UnixNano()) / 1e9)
	return rep, nil
}

// expire deletes this environment's rows older than the retention (none
// without one), in batches of expireBatch, and returns how many it
// deleted.
func (a *Aggregator) expire(ctx context.Context) (int64, error) {
	if a.retention <= 0 {
		return 0, nil
	}
	cutoff := a.now().Add(-a.retention).UTC()
	var total int64
	for {
		tag, err := a.db.Exec(ctx, expireSQL, a.environment, cutoff)
		if err != nil {
			return total, fmt.Errorf("deleting gateway_metrics rows older than %s: %w", cutoff.Format(time.RFC3339), err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < expireBatch {
			return total, nil
		}
	}
}

// scanner is what one node's scan needs.
type scanner interface {
	Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd
	MGet(ctx context.Context, keys ...string) *redis.SliceCmd
}

// ScanCounters walks the telemetry counters whose keys match (a keyspace
// pattern: Keyspace.MetricPattern, Keyspace.MetricKindPattern) page by
// page: values[i] is keys[i]'s value, nil when it expired between SCAN
// and the read. On a Redis Cluster client (ForEachMaster) it walks every
// master, concurrently, so page must be safe for concurrent calls; any
// other client is one node. The aggregator and the operator page
// (docs/operations.md) read the counters through it.
func ScanCounters(ctx context.Context, rdb scanner, match string, page func(keys []string, values []any) error) error {
	if cl, ok := rdb.(clusterStore); ok {
		return cl.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return scanNode(ctx, node, true, match, page)
		})
	}
	return scanNode(ctx, rdb, false, match, page)
}

// scanNode walks one node's counters page by page. On a cluster node, keys
// of one page live in different slots, so values are read with pipelined
// GETs instead of MGET (which needs one slot).
func scanNode(ctx context.Context, c scanner, cluster bool, match string, page func([]string, []any) error) error {
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, match, scanCount).Result()
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
// SCAN and MGET (nil values) are ignored; keys that are not counters are
// skipped and counters whose dimension is not ValidText are counted
// invalid, never sent. When PostgreSQL refuses the page as bad data, it
// is written row by row and the refused rows are counted invalid, so one
// poisoned counter never stops the others from landing.
func (a *Aggregator) upsert(ctx context.Context, keys []string, values []any, rep *Report, minutes map[int64]struct{}) error {
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
			a.logger.Warn("telemetry key skipped: not a counter", "key", quoteKey(key))
			continue
		}
		if len(value) > maxDimensionLen || !ValidText(value) {
			rep.Invalid++
			a.logger.Warn("telemetry counter skipped: its dimension is not valid text (invalid UTF-8, a control character, or too long)", "key", quoteKey(key))
			continue
		}
		rows[rowKey{string(kind), value, minute.Unix()}] = n
	}
	if len(rows) == 0 {
		return nil
	}
	changed, err := a.write(ctx, rows)
	if isDataError(err) && len(rows) > 1 {
		a.logger.Warn("gateway_metrics refused a page as bad data; writing it row by row", "rows", len(rows), "error", err)
		changed, err = 0, nil
		for k, n := range rows {
			c, rerr := a.write(ctx, map[rowKey]int64{k: n})
			if isDataError(rerr) {
				rep.Invalid++
				delete(rows, k)
				a.logger.Warn("gateway_metrics refused a row", "kind", k.kind, "dimension", quoteKey(k.dim), "error", rerr)
				continue
			}
			if rerr != nil {
				err = rerr
				break
			}
			changed += c
		}
	} else if isDataError(err) {
		rep.Invalid++
		a.logger.Warn("gateway_metrics refused a row", "error", err)
		clear(rows)
		err = nil
	}
	if err != nil {
		return err
	}
	for k := range rows {
		t := time.Unix(k.minute, 0).UTC()
		minutes[k.minute] = struct{}{}
		if rep.First.IsZero() || t.Before(rep.First) {
			rep.First = t
		}
		if t.After(rep.Last) {
			rep.Last = t
		}
	}
	rep.Rows += len(rows)
	rep.Changed += changed
	return nil
}

// rowKey is one gateway_metrics row's identity within an environment.
type rowKey struct {
	kind, dim string
	minute    int64 // Unix seconds
}

// write upserts rows in one statement and returns how many were new or
// grew.
func (a *Aggregator) write(ctx context.Context, rows map[rowKey]int64) (int64, error) {
	kinds := make([]string, 0, len(rows))
	dims := make([]string, 0, len(rows))
	mins := make([]time.Time, 0, len(rows))
	counts := make([]int64, 0, len(rows))
	for k, n := range rows {
		kinds = append(kinds, k.kind)
		dims = append(dims, k.dim)
		mins = append(mins, time.Unix(k.minute, 0).UTC())
		counts = append(counts, n)
	}
	tag, err := a.db.Exec(ctx, upsertSQL, a.environment, kinds, dims, mins, counts)
	if err != nil {
		return 0, fmt.Errorf("upserting %d rows into gateway_metrics: %w", len(rows), err)
	}
	return tag.RowsAffected(), nil
}

// isDataError reports whether PostgreSQL refused a statement for its data:
// SQLSTATE class 22 (data exception: invalid byte sequence, NUL in text,
// value too long) or 23 (integrity constraint violation: a CHECK). Any
// other failure (connection, missing table, permission) stops the run.
func isDataError(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || len(pe.Code) != 5 {
		return false
	}
	return strings.HasPrefix(pe.Code, "22") || strings.HasPrefix(pe.Code, "23")
}

// quoteKey renders a key or value for a log line: Go-quoted ASCII (so no
// raw control byte or invalid UTF-8 reaches the log) and cut at 200 bytes.
func quoteKey(s string) string {
	const max = 200
	if len(s) > max {
		return strconv.QuoteToASCII(s[:max]) + "…"
	}
	return strconv.QuoteToASCII(s)
}
