package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/olp-edu/borda/internal/startstop"
	"github.com/olp-edu/borda/internal/startstop/startstoptest"
	"github.com/olp-edu/borda/keyspace"
)

// memSink is a Sink in memory; block, when set, makes Add wait for it.
type memSink struct {
	mu      sync.Mutex
	counts  map[string]int64
	batches int
	err     error
	block   chan struct{}
	waiting atomic.Bool // a flush is waiting on block
}

func (s *memSink) Add(ctx context.Context, batch []Increment, ttl time.Duration) error {
	if s.block != nil {
		s.waiting.Store(true)
		select {
		case <-s.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches++
	if s.err != nil {
		return s.err
	}
	if s.counts == nil {
		s.counts = map[string]int64{}
	}
	for _, inc := range batch {
		s.counts[inc.Key] += inc.Delta
	}
	return nil
}

func (s *memSink) get(key string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[key]
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// defaultOptions are the configuration's defaults (telemetry.queue_size
// 65536, flush_every 1s, max_endpoints_per_route 200).
func defaultOptions() Options {
	return Options{QueueSize: 65536, FlushEvery: time.Second, MaxEndpointsPerRoute: 200}
}

func testConfig(queue int) Options {
	c := defaultOptions()
	c.QueueSize = queue
	c.FlushEvery = 50 * time.Millisecond
	return c
}

func newTestRecorder(t *testing.T, cfg Options, ks keyspace.Keyspace, sink Sink) (*Recorder, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	r, err := NewRecorder(cfg, ks, sink, reg, discard())
	if err != nil {
		t.Fatal(err)
	}
	return r, reg
}

func dropped(t testing.TB, r *Recorder, reason string) float64 {
	t.Helper()
	var m dto.Metric
	if err := r.metrics.dropped.WithLabelValues(reason).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// series counts the series of the metric family name in reg.
func series(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

func TestRecorderFoldsEveryDimension(t *testing.T) {
	t.Parallel()
	ks := keyspace.MustNew("olp-dev:t:")
	sink := &memSink{}
	r, _ := newTestRecorder(t, testConfig(100), ks, sink)
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 4, 5, 6, 59, 0, time.FixedZone("BRT", -3*3600))
	r.Record(Event{Served: true, Time: at, Route: "portal", Path: "/api/alunos/1", Status: 200, Escola: "e1"})
	r.Record(Event{Served: true, Time: at, Route: "portal", Path: "/api/alunos/2", Status: 429, Escola: "e1", Blocked: true})
	r.Record(Event{Served: true, Time: at, Route: "portal", Path: "/api/alunos/3", Status: 200, WouldBlock: true})
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{
		"olp-dev:t:m:portal:/api/alunos/{id}:202603040806":             3,
		"olp-dev:t:m:escola:e1:202603040806":                           2,
		"olp-dev:t:m:blocked:portal:/api/alunos/{id}:202603040806":     1,
		"olp-dev:t:m:would_block:portal:/api/alunos/{id}:202603040806": 1,
		"olp-dev:t:m:status:200:202603040806":                          2,
		"olp-dev:t:m:status:429:202603040806":                          1,
	}
	for k, n := range want {
		if got := sink.get(k); got != n {
			t.Errorf("%s = %d, want %d", k, got, n)
		}
	}
	if len(sink.counts) != len(want) {
		t.Errorf("sink has %d keys, want %d: %v", len(sink.counts), len(want), sink.counts)
	}
}

// Record must return at once even when the store hangs and the queue is
// full: the event is dropped and counted.
func TestRecordNeverBlocksWhenQueueIsFull(t *testing.T) {
	t.Parallel()
	sink := &memSink{block: make(chan struct{})}
	cfg := testConfig(10)
	cfg.FlushEvery = time.Millisecond
	r, _ := newTestRecorder(t, cfg, keyspace.MustNew("olp-dev:t:"), sink)
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Hang the flusher in a write, so only the queue takes events.
	r.Record(Event{Served: true, Route: "portal", Path: "/x", Status: 200})
	for !sink.waiting.Load() {
		time.Sleep(time.Millisecond)
	}
	done := make(chan struct{})
	go func() {
		for range 10_000 {
			r.Record(Event{Served: true, Route: "portal", Path: "/x", Status: 200})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Record blocked")
	}
	if got := dropped(t, r, dropQueueFull); got != 10_000-10 {
		t.Errorf("dropped{queue_full} = %v, want 9990 (10000 minus the queue of 10)", got)
	}
	close(sink.block)
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestFailedBatchIsDroppedAndCounted(t *testing.T) {
	t.Parallel()
	sink := &memSink{err: errors.New("redis down")}
	r, reg := newTestRecorder(t, testConfig(100), keyspace.MustNew("olp-dev:t:"), sink)
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	for range 7 {
		r.Record(Event{Served: true, Route: "portal", Path: "/x", Status: 200})
	}
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := dropped(t, r, dropStoreError); got != 7 {
		t.Errorf("dropped{store_error} = %v, want 7 (the events of the failed batch)", got)
	}
	if n := series(t, reg, "borda_telemetry_flush_duration_seconds"); n != 1 {
		t.Errorf("flush duration series = %d, want 1", n)
	}
	r.Record(Event{Served: true, Route: "portal"})
	if got := dropped(t, r, dropStopped); got != 1 {
		t.Errorf("dropped{stopped} = %v after Stop, want 1", got)
	}
}

func TestStopFlushesTheLastBatch(t *testing.T) {
	t.Parallel()
	cfg := testConfig(1000)
	cfg.FlushEvery = time.Hour // only Stop flushes
	ks := keyspace.MustNew("olp-dev:t:")
	sink := &memSink{}
	r, _ := newTestRecorder(t, cfg, ks, sink)
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for range 500 {
		r.Record(Event{Served: true, Time: now, Route: "portal", Path: "/x", Status: 204})
	}
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := sink.get(ks.Metric("portal:/x", now)); got != 500 {
		t.Errorf("after Stop the endpoint counter = %d, want 500", got)
	}
	if err := r.Stop(t.Context()); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// TestSecondStartIsANoOp: the startstop contract (issue 25 §6): a second
// Start starts no second flusher and returns nil; a Start after Stop
// returns startstop.ErrStopped.
func TestSecondStartIsANoOp(t *testing.T) {
	t.Parallel()
	sink := &memSink{}
	r, _ := newTestRecorder(t, testConfig(1), keyspace.MustNew("olp-dev:t:"), sink)
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Errorf("second Start = %v, want nil (a no-op)", err)
	}
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); !errors.Is(err, startstop.ErrStopped) {
		t.Errorf("Start after Stop = %v, want startstop.ErrStopped", err)
	}
}

// TestRecorderSurvivesConcurrentStartStop: Start and Stop from many
// goroutines at once (run with -race).
func TestRecorderSurvivesConcurrentStartStop(t *testing.T) {
	t.Parallel()
	for range 10 {
		r, _ := newTestRecorder(t, testConfig(1), keyspace.MustNew("olp-dev:t:"), &memSink{})
		startstoptest.Stress(t, r)
	}
}

func TestCancelledStartContextFlushesAndStops(t *testing.T) {
	t.Parallel()
	cfg := testConfig(100)
	cfg.FlushEvery = time.Hour
	ks := keyspace.MustNew("olp-dev:t:")
	sink := &memSink{}
	r, _ := newTestRecorder(t, cfg, ks, sink)
	ctx, cancel := context.WithCancel(t.Context())
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	r.Record(Event{Served: true, Time: now, Route: "portal", Path: "/x"})
	cancel()
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := sink.get(ks.Metric("portal:/x", now)); got != 1 {
		t.Errorf("counter = %d, want 1", got)
	}
}

func TestStopHonoursItsContext(t *testing.T) {
	t.Parallel()
	sink := &memSink{block: make(chan struct{})}
	defer close(sink.block)
	r, _ := newTestRecorder(t, testConfig(10), keyspace.MustNew("olp-dev:t:"), sink)
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.Record(Event{Served: true, Route: "portal"})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := r.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stop with a hung store = %v, want DeadlineExceeded", err)
	}
}

func TestNilRecorderRecordsNothing(t *testing.T) {
	t.Parallel()
	var r *Recorder
	r.Record(Event{Served: true, Route: "portal"}) // must not panic
}

func TestNewRecorderRefusesBadConfig(t *testing.T) {
	t.Parallel()
	cfg := testConfig(0)
	if _, err := NewRecorder(cfg, keyspace.MustNew("olp-dev:"), &memSink{}, prometheus.NewRegistry(), discard()); err == nil {
		t.Error("queue_size 0 accepted")
	}
	if _, err := NewRecorder(testConfig(1), keyspace.MustNew("olp-dev:"), nil, prometheus.NewRegistry(), discard()); err == nil {
		t.Error("nil sink accepted")
	}
}

// Two Recorders on one registry share the series instead of failing.
func TestRecordersShareARegistry(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	for range 2 {
		if _, err := NewRecorder(testConfig(1), keyspace.MustNew("olp-dev:"), &memSink{}, reg, discard()); err != nil {
			t.Fatal(err)
		}
	}
}

// A batch reaching maxBatchShapes distinct event shapes is written at once,
// without waiting for the tick.
func TestBatchFlushesOnSize(t *testing.T) {
	t.Parallel()
	cfg := testConfig(10_000)
	cfg.FlushEvery = time.Hour
	cfg.MaxEndpointsPerRoute = 10_000
	sink := &memSink{}
	r, _ := newTestRecorder(t, cfg, keyspace.MustNew("olp-dev:t:"), sink)
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := range maxBatchShapes {
		r.Record(Event{Served: true, Time: now, Route: "portal", Path: fmt.Sprintf("/s%d", i)})
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		sink.mu.Lock()
		n := sink.batches
		sink.mu.Unlock()
		if n >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no batch written on size")
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = r.Stop(t.Context())
}

// Record allocates nothing: the gateway calls it on every request.
func TestRecordDoesNotAllocate(t *testing.T) {
	r, _ := newTestRecorder(t, testConfig(1<<16), keyspace.MustNew("olp-dev:t:"), &memSink{})
	e := Event{Served: true, Time: time.Now(), Route: "portal", Path: "/api/alunos/42", Status: 200, Escola: "e1"}
	if n := testing.AllocsPerRun(1000, func() { r.Record(e) }); n != 0 {
		t.Errorf("Record: %v allocs per call, want 0", n)
	}
}

// fold emptied the queue until it found it empty: producers that kept it
// from emptying kept the flusher from its flush tick, so batches waited
// past telemetry.flush_every. It now takes only what was queued when it
// started.
func TestFoldDoesNotStarveTheFlushTickWhileProducersKeepUp(t *testing.T) {
	t.Parallel()
	r, _ := newTestRecorder(t, testConfig(100), keyspace.MustNew("olp-dev:t:"), &memSink{})
	for range 10 {
		r.events <- Event{Served: true, Route: "portal", Path: "/x"} // zero Time: folding calls r.now
	}
	r.now = func() time.Time { // a producer as fast as the folder: one new event per event folded
		select {
		case r.events <- Event{Served: true, Route: "portal", Path: "/y"}:
		default:
		}
		return time.Now()
	}
	b := newBatch(10)
	r.fold(t.Context(), b)
	if b.events != 10 {
		t.Fatalf("fold took %d events, want the 10 queued when it started", b.events)
	}
}
