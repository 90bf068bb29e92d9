package ingress

import (
	"runtime"
	"strconv"
	"testing"
	"time"
)

// TestDedupMemoryFollowsEntriesNotSize: a table configured for 2 000 000
// ids allocated all of its slots at start (93 B each, 394 MB of RSS in
// steady state); its slots now grow with the ids it holds, up to size,
// and past size it evicts the oldest as before.
func TestDedupMemoryFollowsEntriesNotSize(t *testing.T) {
	const size = 2_000_000
	d := newDedup(size, time.Hour)
	if c := cap(d.slots); c > dedupInitialSlots+1 {
		t.Fatalf("a new table of %d holds %d slots (want at most %d)", size, c, dedupInitialSlots+1)
	}
	now := time.Unix(1e9, 0)
	for i := range 10_000 {
		if st, _ := d.begin("meta", strconv.Itoa(i), now); st != stateNew {
			t.Fatalf("id %d: %v", i, st)
		}
	}
	if c := cap(d.slots); c > 2*10_000+dedupInitialSlots {
		t.Fatalf("10 000 ids in a table of %d: %d slots allocated (want about twice the ids at most)", size, c)
	}
	// Small sizes reach their bound and evict the oldest.
	small := newDedup(3, time.Hour)
	for i := range 5 {
		small.begin("meta", strconv.Itoa(i), now.Add(time.Duration(i)))
	}
	if n, c := small.len(), len(small.slots); n != 3 || c != 4 {
		t.Fatalf("a table of 3 after 5 ids: %d entries, %d slots (want 3 and 4)", n, c)
	}
	if st, _ := small.begin("meta", "0", now.Add(10)); st != stateNew {
		t.Fatalf("the oldest id was not evicted: %v", st)
	}
	if st, _ := small.begin("meta", "4", now.Add(11)); st != stateInFlight {
		t.Fatalf("the newest id was evicted: %v", st)
	}
}

// BenchmarkDedupMemoryFollowsEntries reports the heap a table of
// 2 000 000 configured entries holds with 0, 10 000 and 100 000 ids in it
// (heap-B: bytes; B/entry: per id held).
func BenchmarkDedupMemoryFollowsEntries(b *testing.B) {
	for _, n := range []int{0, 10_000, 100_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			var heap float64
			for b.Loop() {
				var m0, m1 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&m0)
				d := newDedup(2_000_000, time.Hour)
				now := time.Unix(1e9, 0)
				for i := range n {
					d.begin("meta", strconv.Itoa(i), now)
				}
				runtime.GC()
				runtime.ReadMemStats(&m1)
				heap = float64(m1.HeapAlloc) - float64(m0.HeapAlloc)
				runtime.KeepAlive(d)
			}
			b.ReportMetric(heap, "heap-B")
			if n > 0 {
				b.ReportMetric(heap/float64(n), "B/entry")
			}
		})
	}
}
