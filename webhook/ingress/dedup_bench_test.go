package ingress

import (
	"runtime"
	"runtime/metrics"
	"strconv"
	"testing"
	"time"
)

// benchDedupSize and benchDedupTTL are the defaults of dedup_size and
// dedup_ttl (docs/webhooks.md §4).
const (
	benchDedupSize = 20000
	benchDedupTTL  = 30 * time.Minute
	benchSource    = "whatsapp"
)

// benchIDs are Evolution-shaped event ids (instance:event:message id), more
// of them than the table holds, so that cycling through them every begin
// is a new id that evicts the oldest entry.
func benchIDs(n int) []string {
	ids := make([]string, n)
	for k := range ids {
		ids[k] = "test-instance-01:messages.upsert:3EB0C767D26A1D9BF8" + strconv.Itoa(100000+k)
	}
	return ids
}

// BenchmarkDedupBeginConfirm is the table's cost per event on the ingress's
// path: begin of a new id (the table full, so it evicts the oldest) and
// confirm of the claim ("new-id"), or begin of an id already CONFIRMED
// ("duplicate"). "old" is the golang-lru table Borda had (dedup_lru_test.go)
// with the ingress's key concatenation, "table" the pointer-free one
// (dedup.go). The old table read the clock inside (four time.Now per
// new id); the table's reads are counted here too (one per call), though
// on the ingress begin's is the receivedAt it reads anyway.
//
//	go test -run '^$' -bench DedupBeginConfirm -benchmem ./webhook/ingress/
func BenchmarkDedupBeginConfirm(b *testing.B) {
	ids := benchIDs(1 << 16)
	b.Run("old/new-id", func(b *testing.B) {
		d := newLRUDedup(benchDedupSize, benchDedupTTL)
		b.ReportAllocs()
		for n := 0; b.Loop(); n++ {
			key := benchSource + "\x00" + ids[n&(len(ids)-1)]
			_, e := d.begin(key)
			d.confirm(key, e)
		}
		d.lru.Purge() // see BenchmarkDedupFullTableGC
	})
	b.Run("old/duplicate", func(b *testing.B) {
		d := newLRUDedup(benchDedupSize, benchDedupTTL)
		for _, id := range ids[:benchDedupSize] {
			key := benchSource + "\x00" + id
			_, e := d.begin(key)
			d.confirm(key, e)
		}
		b.ReportAllocs()
		for n := 0; b.Loop(); n++ {
			if st, _ := d.begin(benchSource + "\x00" + ids[n%benchDedupSize]); st != stateConfirmed {
				b.Fatal(st)
			}
		}
		d.lru.Purge()
	})
	b.Run("table/new-id", func(b *testing.B) {
		d := newDedup(benchDedupSize, benchDedupTTL)
		b.ReportAllocs()
		for n := 0; b.Loop(); n++ {
			_, t := d.begin(benchSource, ids[n&(len(ids)-1)], time.Now())
			d.confirm(t, time.Now())
		}
	})
	b.Run("table/duplicate", func(b *testing.B) {
		d := newDedup(benchDedupSize, benchDedupTTL)
		for _, id := range ids[:benchDedupSize] {
			_, t := d.begin(benchSource, id, time.Now())
			d.confirm(t, time.Now())
		}
		b.ReportAllocs()
		for n := 0; b.Loop(); n++ {
			if st, _ := d.begin(benchSource, ids[n%benchDedupSize], time.Now()); st != stateConfirmed {
				b.Fatal(st)
			}
		}
	})
}

// BenchmarkDedupFullTableGC is what a full table (dedup_size entries, all
// CONFIRMED) costs the garbage collector. Per run: table-objects, table-B
// and table-scan-B are the heap objects, bytes and scannable bytes (what
// the GC's mark phase reads each cycle) the table adds to the live heap
// (runtime/metrics after a collection, before and after filling it); per
// op, one runtime.GC() with the table live in an otherwise small heap:
// ns/op its wall time, gc-cpu-ns/op the CPU the runtime counts for it.
//
//	go test -run '^$' -bench DedupFullTableGC -benchtime 50x ./webhook/ingress/
func BenchmarkDedupFullTableGC(b *testing.B) {
	b.Run("old", func(b *testing.B) {
		before := heapNow()
		d := newLRUDedup(benchDedupSize, benchDedupTTL)
		for k := range benchDedupSize {
			key := benchSource + "\x00" + "test-instance-01:messages.upsert:3EB0C767D26A1D9BF8" + strconv.Itoa(100000+k)
			_, e := d.begin(key)
			d.confirm(key, e)
		}
		gcWithTable(b, before)
		d.lru.Purge() // its expiry goroutine keeps it for good: let the next runs measure without it
	})
	b.Run("table", func(b *testing.B) {
		before := heapNow()
		d := newDedup(benchDedupSize, benchDedupTTL)
		for k := range benchDedupSize {
			_, t := d.begin(benchSource, "test-instance-01:messages.upsert:3EB0C767D26A1D9BF8"+strconv.Itoa(100000+k), time.Now())
			d.confirm(t, time.Now())
		}
		gcWithTable(b, before)
		runtime.KeepAlive(d)
	})
}

// heapSample is the live heap after a full collection.
type heapSample struct{ objects, bytes, scan uint64 }

var heapMetrics = []metrics.Sample{
	{Name: "/gc/heap/objects:objects"},
	{Name: "/gc/heap/live:bytes"},
	{Name: "/gc/scan/heap:bytes"},
	{Name: "/cpu/classes/gc/total:cpu-seconds"},
}

func heapNow() heapSample {
	runtime.GC()
	metrics.Read(heapMetrics)
	return heapSample{heapMetrics[0].Value.Uint64(), heapMetrics[1].Value.Uint64(), heapMetrics[2].Value.Uint64()}
}

func gcCPU() float64 {
	metrics.Read(heapMetrics)
	return heapMetrics[3].Value.Float64()
}

// gcWithTable reports what the table adds to the live heap (now against
// before) and times runtime.GC() while the table is live.
func gcWithTable(b *testing.B, before heapSample) {
	after := heapNow()
	cpu0 := gcCPU()
	for b.Loop() {
		runtime.GC()
	}
	// After the loop: b.Loop's first call deletes reported metrics.
	b.ReportMetric((gcCPU()-cpu0)*1e9/float64(b.N), "gc-cpu-ns/op")
	b.ReportMetric(float64(after.objects)-float64(before.objects), "table-objects")
	b.ReportMetric(float64(after.bytes)-float64(before.bytes), "table-B")
	b.ReportMetric(float64(after.scan)-float64(before.scan), "table-scan-B")
}
