package ratelimit

import (
	"reflect"
	"strconv"
	"testing"
	"time"
)

// pointerFree reports the first field path of t that holds a pointer
// (a pointer, string, slice, map, chan, func or interface), "" when none.
func pointerFree(t reflect.Type, path string) string {
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if p := pointerFree(f.Type, path+"."+f.Name); p != "" {
				return p
			}
		}
		return ""
	case reflect.Array:
		return pointerFree(t.Elem(), path+"[]")
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return ""
	}
	return path + " (" + t.String() + ")"
}

// The per-key entries a synchronizing replica keeps up to 2 × SyncKeys
// of hold no pointer, so the garbage collector neither scans them nor
// follows a pointer per key into them (issue 27 item 5: at 1 000 000
// keys, marking the pointer-dense tables took a fifth of borda's CPU).
// A field of type time.Time (its *Location), string or pointer added to
// either fails here.
func TestPerKeyEntriesHoldNoPointer(t *testing.T) {
	for _, v := range []any{syncKey{}, memoryEntry{}, [syncPage]syncKey{}} {
		if p := pointerFree(reflect.TypeOf(v), reflect.TypeOf(v).String()); p != "" {
			t.Errorf("%s holds a pointer", p)
		}
	}
}

// Entries keep their slot while the table grows past a page, a removed
// key's slot is reused zeroed, and a hit's shape gives back the same Hit
// (its rule's distribution included).
func TestSyncTable_SlotsAreStableAndReusedZeroed(t *testing.T) {
	tb := newSyncTable()
	first := tb.add("k0")
	first.spent = 7
	for i := 1; i < 3*syncPage; i++ {
		tb.add("k" + strconv.Itoa(i)).spent = int64(i)
	}
	if got, ok := tb.get("k0"); !ok || got != first || got.spent != 7 {
		t.Fatalf("k0 moved or changed while the table grew: %p %v, want %p with spent 7", got, got, first)
	}
	if tb.len() != 3*syncPage {
		t.Fatalf("len = %d, want %d", tb.len(), 3*syncPage)
	}
	tb.remove("k5")
	tb.remove("k5") // twice: no second free slot
	if _, ok := tb.get("k5"); ok {
		t.Fatal("k5 still held after remove")
	}
	reused := tb.add("new")
	if reused.spent != 0 {
		t.Errorf("a reused slot kept the removed key's state: spent %d", reused.spent)
	}
	if got, _ := tb.get("k6"); got.spent != 6 {
		t.Errorf("k6's entry = %d after a reuse, want 6", got.spent)
	}
	if n := len(tb.pages); n != 3 {
		t.Errorf("%d pages for %d keys, want 3", n, tb.len())
	}
	if len(tb.free) != 0 {
		t.Errorf("free slots %v after the reuse, want none", tb.free)
	}
	d := &distribution{}
	for _, h := range []Hit{
		{Key: "a", Algorithm: FixedWindow, TTL: 5 * time.Second, Limit: 50, dist: d},
		{Key: "b", Algorithm: GCRA, Limit: 10, Period: time.Minute},
		{Key: "c", Algorithm: SlidingWindow, Limit: 3, Period: time.Second},
		{Key: "d", Algorithm: FixedWindow, TTL: time.Hour, Limit: 1, dist: d},
	} {
		if got := tb.hit(h.Key, tb.shape(h)); got != h {
			t.Errorf("hit(shape(%+v)) = %+v", h, got)
		}
	}
	if len(tb.dists) != 2 {
		t.Errorf("%d distributions held for one rule's, want 2 (none and d)", len(tb.dists))
	}
}

// The zero moment is before every clock a Limiter is given (a field never
// set reads as "over"), and moments keep the order and distance of the
// times they were taken from, on the wall clock of a manual clock too.
func TestMoment_ZeroIsPastAndOrderIsKept(t *testing.T) {
	for _, at := range []time.Time{time.Now(), time.Unix(0, 0), time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC), time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)} {
		m := momentOf(at)
		if m.before(0) || m == 0 {
			t.Errorf("momentOf(%v) = %d: not after the zero moment", at, m)
		}
		later := momentOf(at.Add(1500 * time.Millisecond))
		if !m.before(later) || later.sub(m) != 1500*time.Millisecond || m.add(1500*time.Millisecond) != later {
			t.Errorf("moments of %v and 1.5 s later: %d, %d", at, m, later)
		}
	}
}

// A replica joining cuts every lease to what was spent of it (fresh attack
// pass 8 R02), without walking the table under the syncer's lock: keys
// read after the cut see it, a lease granted after it is kept, and a key
// added after it starts with its own lease.
func TestSyncTable_CutLeasesReachesEveryKeyWhenRead(t *testing.T) {
	tb := newSyncTable()
	for i := range 2*syncPage + 10 {
		k := tb.add("k" + strconv.Itoa(i))
		k.lease, k.spent = 10, int64(i%7)
	}
	tb.cutLeases()
	granted, _ := tb.get("k3")
	granted.lease = 4 // an ask's new share, after the cut
	added := tb.add("new")
	added.lease = 5
	tb.cutLeases()
	tb.cutLeases() // two joins before a read: one cut
	for i := range 2*syncPage + 10 {
		k, _ := tb.get("k" + strconv.Itoa(i))
		want := int64(i % 7)
		if k.lease != want {
			t.Fatalf("k%d lease %d after replicas joined, want %d (what it spent)", i, k.lease, want)
		}
	}
	tb2 := newSyncTable()
	k := tb2.add("a")
	k.lease, k.spent = 9, 2
	tb2.cutLeases()
	k.lease = 6 // granted by an exchange that read the key after the cut
	_, _ = tb2.get("b")
	if got, _ := tb2.get("a"); got.lease != 2 {
		// The assignment above did not go through get, so the cut still
		// applies: every writer of a lease reads the key through get first.
		t.Fatalf("lease %d, want the cut (2): a lease written without get is cut", got.lease)
	}
	k, _ = tb2.get("a")
	k.lease = 6
	if got, _ := tb2.get("a"); got.lease != 6 {
		t.Errorf("a lease granted after the cut, through get, became %d, want 6", got.lease)
	}
	if got, _ := tb.get("new"); got.lease != 0 {
		t.Errorf("a key added between two joins kept lease %d past the second, want 0 (nothing spent)", got.lease)
	}
}
