package telemetry

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/internal/upstashtest"
	"github.com/olp-edu/borda/keyspace"
)

// Counts in Redis equal the events sent, per endpoint, school, status,
// blocked and would-block, when nothing is dropped; every key has a TTL.
func TestRedisCountsEqualEventsSent(t *testing.T) {
	t.Parallel()
	overEachTransport(t, func(t *testing.T, rdb redis.UniversalClient, ks keyspace.Keyspace, _ *upstashtest.Server) {
		r, _ := newTestRecorder(t, testConfig(100_000), ks, NewRedisSink(rdb))
		if err := r.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		want := map[string]int64{}
		var wg sync.WaitGroup
		var mu sync.Mutex
		for g := range 8 {
			wg.Go(func() {
				local := map[string]int64{}
				for i := range 1000 {
					e := Event{
						Time:       now,
						Route:      []string{"portal", "api"}[i%2],
						Path:       fmt.Sprintf("/alunos/%d/notas", i),
						Status:     []int{200, 404, 429}[i%3],
						Escola:     fmt.Sprintf("e%d", (g+i)%5),
						Blocked:    i%3 == 2,
						WouldBlock: i%7 == 0,
					}
					if i%11 == 0 {
						e.Escola = ""
					}
					r.Record(e)
					ep := e.Route + ":/alunos/{id}/notas"
					local[ks.Metric(ep, now)]++
					local[ks.Metric("status:"+fmt.Sprint(e.Status), now)]++
					if e.Escola != "" {
						local[ks.Metric("escola:"+e.Escola, now)]++
					}
					if e.Blocked {
						local[ks.Metric("blocked:"+ep, now)]++
					}
					if e.WouldBlock {
						local[ks.Metric("would_block:"+ep, now)]++
					}
				}
				mu.Lock()
				for k, n := range local {
					want[k] += n
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		if err := r.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if d := dropped(t, r, dropQueueFull) + dropped(t, r, dropStoreError); d != 0 {
			t.Fatalf("%v events dropped; the test needs none", d)
		}
		ctx := t.Context()
		for k, n := range want {
			got, err := rdb.Get(ctx, k).Int64()
			if err != nil || got != n {
				t.Errorf("%s = %d (%v), want %d", k, got, err, n)
			}
		}
		keys := scanKeys(t, ctx, rdb, ks.MetricPattern())
		if len(keys) != len(want) {
			t.Errorf("Redis has %d counters, want %d", len(keys), len(want))
		}
		assertTTLs(t, rdb, keys)
	})
}

// assertTTLs checks 0 < TTL ≤ 2h on every key.
func assertTTLs(t *testing.T, rdb redis.UniversalClient, keys []string) {
	t.Helper()
	for _, k := range keys {
		ttl, err := rdb.PTTL(t.Context(), k).Result()
		if err != nil || ttl <= 0 || ttl > TTL {
			t.Errorf("%s: TTL %v (%v), want 0 < TTL ≤ %v", k, ttl, err, TTL)
		}
	}
}

// roundTrips counts what go-redis sends: one per command, one per
// pipeline.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

// At 1 000 events/s with the default 1 s flush, Redis sees about one round
// trip per 1 000 events: at most one per 100 (issue 4's budget).
func TestAtMostOneRoundTripPer100Events(t *testing.T) {
	t.Parallel()
	rdb, ks := testRedis(t)
	cleanKeys(t, rdb, ks)
	hook := &roundTrips{}
	rdb.AddHook(hook)
	cfg := defaultOptions() // flush_every 1s
	r, _ := newTestRecorder(t, cfg, ks, NewRedisSink(rdb))
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	const events = 1500
	tick := time.NewTicker(time.Millisecond) // ≈1 000/s
	for i := range events {
		<-tick.C
		r.Record(Event{Served: true, Route: "portal", Path: fmt.Sprintf("/x/%d", i), Status: 200, Escola: "e1"})
	}
	tick.Stop()
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	n := hook.n.Load()
	per100 := float64(n) * 100 / events
	t.Logf("%d events → %d Redis round trips (%.2f per 100 events)", events, n, per100)
	if per100 > 1 {
		t.Errorf("%.2f round trips per 100 events, want ≤ 1", per100)
	}
}

// On the Upstash REST store a flush is one HTTPS request: one POST
// /multi-exec carrying INCRBY + EXPIRE per counter, so Upstash bills two
// commands per counter and the flush costs one round trip (issue 27 item
// 4).
func TestAFlushIsOneRESTRequest(t *testing.T) {
	t.Parallel()
	rdb, front := servicetest.RedisOver(t, servicetest.REST)
	ks := keyspace.MustNew(servicetest.KeyPrefix(t))
	cleanKeys(t, rdb, ks)
	cfg := defaultOptions()
	cfg.FlushEvery = time.Hour // only Stop flushes: one batch
	r, _ := newTestRecorder(t, cfg, ks, NewRedisSink(rdb))
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for i := range 300 {
		r.Record(Event{Served: true, Time: now, Route: fmt.Sprintf("r%d", i%10), Path: "/x", Status: 200, Escola: fmt.Sprintf("e%d", i%5)})
	}
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	counters := len(scanKeys(t, t.Context(), rdb, ks.MetricPattern()))
	st := front.Stats()
	t.Logf("300 events, %d counters: %v requests, %v commands", counters, st.Requests, st.Commands)
	if counters != 16 { // 10 endpoints, 5 schools, 1 status
		t.Fatalf("%d counters, want 16", counters)
	}
	// The SCAN just above is the only other request.
	if st.Requests["/multi-exec"] != 1 || st.Commands["/multi-exec"] != 2*counters {
		t.Errorf("the flush sent %v requests, %v commands; want one /multi-exec of %d (INCRBY + EXPIRE per counter)", st.Requests, st.Commands, 2*counters)
	}
}

// Redis unreachable (a closed port): telemetry is lost and counted, and
// Record never blocks.
func TestRedisUnreachableLosesTelemetryButRecordNeverBlocks(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	rdb := redisAt(t, "redis://"+addr+"/0")
	cfg := testConfig(1000)
	r, _ := newTestRecorder(t, cfg, servicetestKeyspace(t), NewRedisSink(rdb))
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	slowest := recordFor(r, 300*time.Millisecond)
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Logf("slowest Record: %v", slowest)
	if slowest > recordBound {
		t.Errorf("a Record took %v with Redis unreachable; it must not wait on Redis", slowest)
	}
	if got := dropped(t, r, dropStoreError); got == 0 {
		t.Error("no event counted as dropped{store_error}")
	}
}

// Redis stopped during traffic (a cut proxy, then a black hole that
// accepts and never answers) loses telemetry, never a Record call; when it
// is back, counting resumes.
func TestRedisStoppedDuringTrafficThenBack(t *testing.T) {
	t.Parallel()
	url := servicetest.RedisURL(t)
	upstream := strings.TrimSuffix(strings.TrimPrefix(url, "redis://"), "/0")
	proxy := newFaultProxy(t, upstream)
	rdb := redisAt(t, "redis://"+proxy.addr()+"/0")
	direct, ks := testRedis(t)
	cleanKeys(t, direct, ks)
	r, _ := newTestRecorder(t, testConfig(10_000), ks, NewRedisSink(rdb))
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	var slowest time.Duration
	slowest = max(slowest, recordFor(r, 150*time.Millisecond))
	proxy.cut()
	// Record until a flush has failed (a loaded machine may take more than
	// one flush interval to get there), within a deadline.
	for cutUntil := time.Now().Add(5 * time.Second); ; {
		slowest = max(slowest, recordFor(r, 200*time.Millisecond))
		if dropped(t, r, dropStoreError) > 0 {
			break
		}
		if time.Now().After(cutUntil) {
			t.Error("no event counted as dropped{store_error} within 5 s of Redis going down")
			break
		}
	}
	proxy.restore()
	// The pool's connections died with the cut; wait for a flush through a new one.
	deadline := time.Now().Add(5 * time.Second)
	for {
		before := dropped(t, r, dropStoreError)
		now := time.Now()
		r.Record(Event{Served: true, Time: now, Route: "portal", Path: "/back", Status: 200})
		time.Sleep(200 * time.Millisecond)
		if n, _ := direct.Get(t.Context(), ks.Metric("portal:/back", now)).Int64(); n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("counting did not resume after Redis came back (drops %v)", before)
		}
	}
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if slowest > recordBound {
		t.Errorf("a Record took %v while Redis was down; it must not wait on Redis", slowest)
	}
	assertTTLs(t, direct, scanKeys(t, t.Context(), direct, ks.MetricPattern()))
}

// A Redis that accepts and never answers holds one flush for
// flushTimeout; Record is unaffected and Stop still returns.
func TestRedisBlackHoleDoesNotBlockRecord(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	rdb := redisAt(t, "redis://"+ln.Addr().String()+"/0")
	r, _ := newTestRecorder(t, testConfig(100_000), servicetestKeyspace(t), NewRedisSink(rdb))
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	slowest := recordFor(r, 300*time.Millisecond)
	start := time.Now()
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*flushTimeout+time.Second {
		t.Errorf("Stop took %v against a black hole, want ≤ %v", d, 3*flushTimeout+time.Second)
	}
	if slowest > recordBound {
		t.Errorf("a Record took %v against a black hole; it must not wait on Redis", slowest)
	}
}

func servicetestKeyspace(t *testing.T) keyspace.Keyspace {
	return keyspace.MustNew(servicetest.KeyPrefix(t))
}

// recordBound is the generous upper bound on one Record call in fault
// tests: far below flushTimeout (what a Record waiting on a hung Redis
// would take), far above scheduler noise under -race.
const recordBound = flushTimeout / 2

// recordFor calls Record from 4 goroutines for d and returns the slowest
// call.
func recordFor(r *Recorder, d time.Duration) time.Duration {
	var wg sync.WaitGroup
	var slowest atomic.Int64
	end := time.Now().Add(d)
	for g := range 4 {
		wg.Go(func() {
			for i := 0; time.Now().Before(end); i++ {
				start := time.Now()
				r.Record(Event{Served: true, Route: "portal", Path: fmt.Sprintf("/g%d/%d", g, i), Status: 200, Escola: "e1"})
				if el := int64(time.Since(start)); el > slowest.Load() {
					slowest.Store(el)
				}
				if i%64 == 0 {
					time.Sleep(100 * time.Microsecond)
				}
			}
		})
	}
	wg.Wait()
	return time.Duration(slowest.Load())
}
