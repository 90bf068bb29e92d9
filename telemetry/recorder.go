package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/internal/outagelog"
	"github.com/olp-edu/borda/internal/startstop"
	"github.com/olp-edu/borda/keyspace"
)

// TTL is the lifetime of every telemetry counter, refreshed by each batch
// that touches it (docs/telemetry.md). The hourly aggregation reads a minute at
// least once before it expires.
const TTL = 2 * time.Hour

// maxBatchShapes flushes a batch early once it holds this many distinct
// event shapes (endpoint, school, status, block flags, minute). A flush
// therefore covers at least that many events (Redis sees under one round
// trip per 500 events at any rate), and its MULTI/EXEC stays small: at
// most 5 counters per shape, 2 commands per counter.
const maxBatchShapes = 500

// flushTimeout bounds one batch write: one short try, then the batch is
// dropped and counted.
const flushTimeout = time.Second

// Recorder counts requests per minute in Redis off the request path. Build
// it with NewRecorder, call Start once, Record per request from any
// goroutine, and Stop at shutdown to flush the last batch. A nil *Recorder
// records nothing, so a gateway with telemetry off can hold one.
type Recorder struct {
	events      chan Event
	sink        Sink
	ks          keyspace.Keyspace
	flushEvery  time.Duration
	maxPerRoute int
	logger      *slog.Logger
	metrics     *recorderMetrics
	now         func() time.Time
	// outage logs failed flushes once, then a summary a minute, then
	// their end (internal/outagelog).
	outage *outagelog.Outage

	dist DistributionSource // nil: no distribution counters

	stopped atomic.Bool
	bg      startstop.Runner // the flusher
}

// Options configures a Recorder (docs/telemetry.md).
type Options struct {
	// QueueSize bounds the events waiting for the next batch (≥ 1).
	QueueSize int
	// FlushEvery is the longest an event waits before its batch is
	// written (> 0).
	FlushEvery time.Duration
	// MaxEndpointsPerRoute caps distinct endpoint templates per route per
	// minute (≥ 1); the overflow counts as "{route}:other".
	MaxEndpointsPerRoute int
	// Clock stamps each event's minute and times the dropped-batch
	// outage (nil: the wall clock).
	Clock clock.Clock
}

// NewRecorder returns a Recorder that queues up to o.QueueSize events,
// writes them to sink every o.FlushEvery (or sooner, by 500 event shapes)
// and caps endpoints at o.MaxEndpointsPerRoute per route per minute. It
// registers borda_telemetry_dropped_total{reason} and
// borda_telemetry_flush_duration_seconds on reg. Errors: a registration
// conflict, a nil sink, or an o value that is not positive.
func NewRecorder(o Options, ks keyspace.Keyspace, sink Sink, reg prometheus.Registerer, logger *slog.Logger) (*Recorder, error) {
	if o.QueueSize < 1 || o.FlushEvery <= 0 || o.MaxEndpointsPerRoute < 1 {
		return nil, fmt.Errorf("creating telemetry recorder: queue_size, flush_every and max_endpoints_per_route must be positive (got %d, %s, %d)",
			o.QueueSize, o.FlushEvery, o.MaxEndpointsPerRoute)
	}
	if sink == nil {
		return nil, errors.New("creating telemetry recorder: sink is nil")
	}
	m, err := newRecorderMetrics(reg)
	if err != nil {
		return nil, err
	}
	r := &Recorder{
		events:      make(chan Event, o.QueueSize),
		sink:        sink,
		ks:          ks,
		flushEvery:  o.FlushEvery,
		maxPerRoute: o.MaxEndpointsPerRoute,
		logger:      logger,
		metrics:     m,
		now:         clock.Or(o.Clock).Now,
	}
	r.outage = outagelog.New(logger, outagelog.Options{Every: time.Minute, CountKey: "batches", Clock: clock.Func(func() time.Time { return r.now() })})
	return r, nil
}

// DistributionSource gives the rate limiter's distribution counts since
// it was last asked (*ratelimit.Limiter fits, through an adapter in
// cmd/borda): fn is called once per rule and threshold with the number
// of subject-windows that went past it.
type DistributionSource interface {
	TakeDistribution(fn func(rule string, at, past int64))
}

// SetDistribution makes each flush take src's counts and write them,
// under the flush's minute, as KindDistribution counters in the same
// batch (docs/rollout.md). Call it before Start.
func (r *Recorder) SetDistribution(src DistributionSource) {
	if r != nil {
		r.dist = src
	}
}

// Record queues e for the next batch. It never blocks and never does I/O:
// when the queue is full (or the Recorder is stopped) the event is dropped
// and counted in borda_telemetry_dropped_total. Safe for concurrent use.
func (r *Recorder) Record(e Event) {
	if r == nil {
		return
	}
	if r.stopped.Load() {
		r.metrics.stopped.Inc()
		return
	}
	select {
	case r.events <- e:
	default:
		r.metrics.queueFull.Inc()
	}
}

// Start runs the flusher until Stop is called or ctx is done; either way
// the events queued by then are flushed in a last batch. It returns at
// once; a second Start is a no-op (nil), a Start after Stop returns
// startstop.ErrStopped (internal/startstop's contract).
func (r *Recorder) Start(ctx context.Context) error {
	return r.bg.Start(ctx, r.run)
}

// Stop makes Record drop new events, flushes the queued ones and waits for
// that last batch until ctx is done (returning ctx.Err()). A Recorder
// never started returns at once. Stop may be called more than once.
func (r *Recorder) Stop(ctx context.Context) error {
	r.stopped.Store(true)
	if err := r.bg.Stop(ctx); err != nil {
		return fmt.Errorf("stopping telemetry recorder: %w", err)
	}
	return nil
}

// foldEvery is how often the flusher wakes to fold the queued events.
// Waking per event would cost a goroutine switch per request, on the
// proxy's own CPU (measured: 12 % of a saturated single-core proxy); at
// 50 wake-ups a second the queue (telemetry.queue_size, 65 536 by default)
// must hold 20 ms of traffic: it absorbs 3 million events a second before
// it drops any.
const foldEvery = 20 * time.Millisecond

// run is the flusher goroutine: the only reader of r.events and the only
// owner of the batch and the endpoint cap.
func (r *Recorder) run(ctx context.Context) {
	wctx := context.WithoutCancel(ctx) // the last batch is written after ctx ends
	b := newBatch(r.maxPerRoute)
	tick := time.NewTicker(r.flushEvery)
	defer tick.Stop()
	fold := time.NewTicker(min(foldEvery, r.flushEvery))
	defer fold.Stop()
	for {
		select {
		case <-fold.C:
			r.fold(wctx, b)
		case <-tick.C:
			r.fold(wctx, b)
			r.flush(wctx, b)
		case <-ctx.Done(): // ctx's end or Stop
			r.stopped.Store(true)
			r.drain(wctx, b)
			return
		}
	}
}

// fold adds the events queued when it starts to b, flushing whenever b
// reaches maxBatchShapes. It takes no more than were queued then, so
// producers that outpace it cannot keep it from the flush tick.
func (r *Recorder) fold(ctx context.Context, b *batch) {
	for range len(r.events) {
		b.add(<-r.events, r.now)
		if b.len() >= maxBatchShapes {
			r.flush(ctx, b)
		}
	}
	if endpoint, escola := b.takeInvalid(); endpoint+escola > 0 {
		r.metrics.invalidEndpoint.Add(float64(endpoint))
		r.metrics.invalidEscola.Add(float64(escola))
	}
	if overflow, refused := b.takeFolded(); overflow+refused > 0 {
		r.metrics.foldedCap.Add(float64(overflow))
		r.metrics.foldedRefused.Add(float64(refused))
	}
}

// drain folds what is queued now and flushes it.
func (r *Recorder) drain(ctx context.Context, b *batch) {
	r.fold(ctx, b)
	r.flush(ctx, b)
}

// flush writes b in one try bounded by flushTimeout and resets it; on
// failure the batch's events are counted as dropped.
func (r *Recorder) flush(ctx context.Context, b *batch) {
	if r.dist != nil {
		minute := r.now().Unix() / 60
		r.dist.TakeDistribution(func(rule string, at, past int64) { b.addDistribution(rule, at, past, minute) })
	}
	if b.len() == 0 {
		return
	}
	incs := b.increments(r.ks)
	ctx, cancel := context.WithTimeout(ctx, flushTimeout)
	start := time.Now()
	err := r.sink.Add(ctx, incs, TTL)
	cancel()
	r.metrics.flushDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		r.metrics.storeError.Add(float64(b.events))
		// Once at warn, then a summary a minute while Redis is down (a
		// batch is flushed every second: a warn line each was ~60 a minute).
		r.outage.Repeat("telemetry batch dropped", "events", b.events, "counters", len(incs), "error", err)
	} else {
		r.outage.End("telemetry writes resumed: batches reach Redis again")
	}
	b.reset()
}
