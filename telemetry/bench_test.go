package telemetry

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/keyspace"
)

// BenchmarkRecord is the request path's cost: one Record per request from
// every P. Drops (queue full) are reported, not hidden.
func BenchmarkRecord(b *testing.B) {
	r, err := NewRecorder(testConfig(65536), keyspace.MustNew("olp-dev:b:"), &memSink{}, prometheus.NewRegistry(), discard())
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	e := Event{Served: true, Time: time.Now(), Route: "portal", Path: "/api/alunos/42", Status: 200, Escola: "e1"}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.Record(e)
		}
	})
	b.StopTimer()
	_ = r.Stop(b.Context())
	var drops float64
	for _, reason := range []string{dropQueueFull, dropStoreError} {
		drops += dropped(b, r, reason)
	}
	b.ReportMetric(drops/float64(b.N), "drops/op")
}

// BenchmarkFold is the flusher's cost per event (templating, cap, folding).
func BenchmarkFold(b *testing.B) {
	bt := newBatch(200)
	now := time.Now
	e := Event{Served: true, Time: time.Now(), Route: "portal", Path: "/api/alunos/42/notas", Status: 200, Escola: "e1", WouldBlock: true}
	b.ReportAllocs()
	for b.Loop() {
		bt.add(e, now)
	}
}

// BenchmarkRoundTripsPer100Events measures Redis round trips per 100
// events through a real Redis with the default 1 s flush: the events of
// one second share one pipeline.
func BenchmarkRoundTripsPer100Events(b *testing.B) {
	rdb, ks := testRedis(b)
	cleanKeys(b, rdb, ks)
	hook := &roundTrips{}
	rdb.AddHook(hook)
	cfg := testConfig(65536)
	cfg.FlushEvery = 1e9
	r, err := NewRecorder(cfg, ks, NewRedisSink(rdb), prometheus.NewRegistry(), discard())
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	tick := time.NewTicker(time.Millisecond) // ≈1 000 events/s, as in issue 4
	defer tick.Stop()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		<-tick.C
		r.Record(Event{Served: true, Route: "portal", Path: "/api/alunos/42", Status: 200, Escola: "e1"})
	}
	_ = r.Stop(b.Context())
	b.ReportMetric(float64(hook.n.Load())*100/float64(b.N), "roundtrips/100events")
}
