package ingress

import (
	"hash/maphash"
	"math"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a clock the tests move by hand; safe for concurrent use.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time { return time.Unix(0, c.ns.Load()) }

func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// clockedDedup is a table whose begin and confirm read a fakeClock, as
// the ingress's read its clock.
type clockedDedup struct {
	*dedup
	fake *fakeClock
}

func (d clockedDedup) begin(source, id string) (dedupState, dedupTicket) {
	return d.dedup.begin(source, id, d.fake.now())
}

func (d clockedDedup) confirm(t dedupTicket) { d.dedup.confirm(t, d.fake.now()) }

func newTestDedup(size int, ttl time.Duration) (clockedDedup, *fakeClock) {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return clockedDedup{newDedup(size, ttl), c}, c
}

func mustBegin(t *testing.T, d clockedDedup, source, id string, want dedupState) dedupTicket {
	t.Helper()
	st, tk := d.begin(source, id)
	if st != want {
		t.Fatalf("begin(%q, %q) = %v, want %v", source, id, st, want)
	}
	if (st == stateNew) != (tk.gen != 0) {
		t.Fatalf("begin(%q, %q) = %v with ticket %+v", source, id, st, tk)
	}
	return tk
}

func TestDedupStateMachine(t *testing.T) {
	d, _ := newTestDedup(2, time.Minute)
	a := mustBegin(t, d, "s", "a", stateNew)
	mustBegin(t, d, "s", "a", stateInFlight)
	d.confirm(a)
	mustBegin(t, d, "s", "a", stateConfirmed)
	b := mustBegin(t, d, "s", "b", stateNew)
	d.forget(b)
	mustBegin(t, d, "s", "b", stateNew)
	// A stale ticket never removes a newer owner's entry.
	d.forget(b)
	mustBegin(t, d, "s", "b", stateInFlight)
	// The zero ticket owns nothing.
	d.forget(dedupTicket{})
	d.confirm(dedupTicket{})
	mustBegin(t, d, "s", "b", stateInFlight)
	// Bounded: a third id evicts the oldest (a).
	mustBegin(t, d, "s", "c", stateNew)
	if n := d.len(); n != 2 {
		t.Fatalf("len = %d, want 2", n)
	}
	mustBegin(t, d, "s", "a", stateNew)
}

// The pair is what is remembered: the same id from another source, or a
// split of the same bytes elsewhere, is another event.
func TestDedupKeySeparatesSourceAndID(t *testing.T) {
	d, _ := newTestDedup(10, time.Minute)
	d.confirm(mustBegin(t, d, "ab", "c", stateNew))
	mustBegin(t, d, "a", "bc", stateNew)
	mustBegin(t, d, "abc", "", stateNew)
	mustBegin(t, d, "other", "c", stateNew)
	mustBegin(t, d, "ab", "c", stateConfirmed)
}

// The digest is the two seeded sums of source, 0x00, id, written without
// building the string: the same as hashing the concatenation.
func TestDedupKeyIsDigestOfSourceNULID(t *testing.T) {
	d, _ := newTestDedup(1, time.Minute)
	k := d.key("whatsapp", "test-instance-01:messages.upsert:AC0F")
	s := "whatsapp\x00test-instance-01:messages.upsert:AC0F"
	var want dedupKey
	for half, seed := range []maphash.Seed{d.seed1, d.seed2} {
		v := maphash.String(seed, s)
		for b := range 8 {
			want[half*8+b] = byte(v >> (8 * b))
		}
	}
	if k != want {
		t.Fatalf("key = %x, want %x", k, want)
	}
	if d2, _ := newTestDedup(1, time.Minute); d2.key("whatsapp", "x") == d.key("whatsapp", "x") {
		t.Fatal("two tables share their seeds")
	}
}

func TestDedupExpiresAfterTTLByInjectedClock(t *testing.T) {
	d, clock := newTestDedup(10, time.Minute)
	d.confirm(mustBegin(t, d, "s", "a", stateNew))
	clock.advance(time.Minute)
	mustBegin(t, d, "s", "a", stateConfirmed) // live through its last instant
	clock.advance(time.Nanosecond)
	mustBegin(t, d, "s", "a", stateNew)
	// An IN_FLIGHT claim expires too (a request that never settles).
	clock.advance(time.Minute + time.Nanosecond)
	mustBegin(t, d, "s", "a", stateNew)
}

func TestDedupConfirmRestartsTTL(t *testing.T) {
	d, clock := newTestDedup(10, time.Minute)
	a := mustBegin(t, d, "s", "a", stateNew)
	clock.advance(50 * time.Second)
	d.confirm(a)
	clock.advance(50 * time.Second) // 100 s after the claim, 50 s after the confirm
	mustBegin(t, d, "s", "a", stateConfirmed)
	clock.advance(11 * time.Second)
	mustBegin(t, d, "s", "a", stateNew)
}

// A confirm after the claim expired puts the id back, CONFIRMED.
func TestDedupConfirmRevivesExpiredClaim(t *testing.T) {
	d, clock := newTestDedup(10, time.Minute)
	a := mustBegin(t, d, "s", "a", stateNew)
	clock.advance(2 * time.Minute)
	d.confirm(a)
	mustBegin(t, d, "s", "a", stateConfirmed)
}

func TestDedupEvictsOldestFirstWithinSize(t *testing.T) {
	const size = 4
	d, clock := newTestDedup(size, time.Hour)
	tk := make([]dedupTicket, 6)
	for k := range tk {
		tk[k] = mustBegin(t, d, "s", strconv.Itoa(k), stateNew)
		clock.advance(time.Second)
		if n := d.len(); n != min(k+1, size) {
			t.Fatalf("after %d begins len = %d", k+1, n)
		}
	}
	// 0 and 1 are gone, 2..5 remain.
	for k := 2; k < 6; k++ {
		mustBegin(t, d, "s", strconv.Itoa(k), stateInFlight)
	}
	// A confirm makes 2 the newest: the next new id evicts 3, not 2.
	d.confirm(tk[2])
	mustBegin(t, d, "s", "new", stateNew)
	mustBegin(t, d, "s", "2", stateConfirmed)
	mustBegin(t, d, "s", "3", stateNew) // evicts 4
	mustBegin(t, d, "s", "5", stateInFlight)
	mustBegin(t, d, "s", "4", stateNew) // evicts 5
	// A hit does not make an entry younger: 2 is the oldest, and goes.
	mustBegin(t, d, "s", "2", stateConfirmed)
	mustBegin(t, d, "s", "6", stateNew)
	mustBegin(t, d, "s", "new", stateInFlight)
	mustBegin(t, d, "s", "2", stateNew)
}

// A full table evicts the expired entry first: it is the oldest.
func TestDedupFullTableEvictsExpiredFirst(t *testing.T) {
	d, clock := newTestDedup(2, time.Minute)
	mustBegin(t, d, "s", "old", stateNew)
	clock.advance(2 * time.Minute)
	mustBegin(t, d, "s", "live", stateNew)
	mustBegin(t, d, "s", "next", stateNew)
	mustBegin(t, d, "s", "live", stateInFlight)
}

// A late confirm or forget of a claim whose entry was evicted and whose
// slot now holds another id touches neither that id nor the id's new claim.
func TestDedupStaleTicketAfterEvictionAndSlotReuse(t *testing.T) {
	d, _ := newTestDedup(1, time.Hour)
	a := mustBegin(t, d, "s", "a", stateNew)
	b := mustBegin(t, d, "s", "b", stateNew) // evicts a; b takes a's slot
	if a.slot != b.slot {
		t.Fatalf("slots %d and %d: the test needs the slot reused", a.slot, b.slot)
	}
	d.forget(a)
	mustBegin(t, d, "s", "b", stateInFlight)

	// a's confirm puts a back (evicting b), CONFIRMED; b's owner then
	// confirms and puts b back, evicting a.
	d.confirm(a)
	mustBegin(t, d, "s", "a", stateConfirmed)
	d.forget(b) // b's entry is gone and its slot is a's: nothing
	mustBegin(t, d, "s", "a", stateConfirmed)

	// A new claim on a (after b took the slot again) is not a's old
	// ticket's: the old ticket neither confirms nor forgets it.
	b2 := mustBegin(t, d, "s", "b", stateNew)
	_ = b2
	a2 := mustBegin(t, d, "s", "a", stateNew)
	d.forget(a)
	mustBegin(t, d, "s", "a", stateInFlight)
	d.confirm(a)
	mustBegin(t, d, "s", "a", stateInFlight)
	d.confirm(a2)
	mustBegin(t, d, "s", "a", stateConfirmed)
}

// A ticket stays its claim's after confirm put the id back: forget
// removes it, as the LRU table did.
func TestDedupForgetAfterConfirmReAdded(t *testing.T) {
	d, _ := newTestDedup(1, time.Hour)
	a := mustBegin(t, d, "s", "a", stateNew)
	mustBegin(t, d, "s", "b", stateNew)
	d.confirm(a)
	d.forget(a)
	mustBegin(t, d, "s", "a", stateNew)
}

// Many requests on a few ids: exactly one owns an id at a time, and -race
// sees the table's state only under its lock.
func TestDedupConcurrentBeginConfirmForget(t *testing.T) {
	d, _ := newTestDedup(64, time.Hour)
	const ids = 8
	var owners [ids]atomic.Int32
	var claims, confirms atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 2000 {
				k := (g + n) % ids
				st, tk := d.begin("s", strconv.Itoa(k))
				if st != stateNew {
					continue
				}
				claims.Add(1)
				if c := owners[k].Add(1); c != 1 {
					t.Errorf("id %d has %d owners", k, c)
				}
				owners[k].Add(-1)
				if n%5 == 0 {
					d.confirm(tk)
					confirms.Add(1)
				} else {
					d.forget(tk)
				}
			}
		}()
	}
	wg.Wait()
	// Each id is claimed until its first confirm, then CONFIRMED for good.
	if c := confirms.Load(); c != ids {
		t.Fatalf("%d confirms (of %d claims), want one per id (%d)", c, claims.Load(), ids)
	}
	for k := range ids {
		mustBegin(t, d, "s", strconv.Itoa(k), stateConfirmed)
	}
}

// Once warm, begin, confirm and forget allocate nothing, evictions and map
// churn included.
func TestDedupZeroAllocsOnceWarm(t *testing.T) {
	const size = 1000
	d, clock := newTestDedup(size, time.Minute)
	ids := make([]string, 8*size)
	for k := range ids {
		ids[k] = "id-" + strconv.Itoa(k)
	}
	n := 0
	cycle := func() {
		id := ids[n%len(ids)]
		n++
		_, tk := d.begin("s", id)
		if n%3 == 0 {
			d.forget(tk)
		} else {
			d.confirm(tk)
		}
		d.begin("s", id)
		clock.advance(time.Millisecond)
	}
	for range 50 * size {
		cycle()
	}
	if a := testing.AllocsPerRun(20*size, cycle); a != 0 {
		t.Fatalf("%v allocations per begin/confirm/forget", a)
	}
}

// The GC never scans the table: its slots and keys hold no pointers.
func TestDedupSlotsHoldNoPointers(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[dedupSlot](), reflect.TypeFor[dedupKey](), reflect.TypeFor[int32]()} {
		if p := pointerPath(typ); p != "" {
			t.Errorf("%v holds a pointer: %s", typ, p)
		}
	}
}

// pointerPath names a field of typ that is or holds a pointer, "" if none.
func pointerPath(typ reflect.Type) string {
	switch typ.Kind() {
	case reflect.Struct:
		for f := range typ.Fields() {
			if p := pointerPath(f.Type); p != "" {
				return f.Name + "." + p
			}
		}
		return ""
	case reflect.Array:
		return pointerPath(typ.Elem())
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return ""
	}
	return typ.Kind().String()
}

// A late confirm (its claim expired and another request claimed the id)
// never takes the id from the newer claim while that claim lives, through
// its last instant: the id stays IN_FLIGHT, the newer request's.
func TestDedupLateConfirmLeavesANewerClaimThroughItsLastInstant(t *testing.T) {
	d, clock := newTestDedup(10, time.Minute)
	late := mustBegin(t, d, "s", "a", stateNew)
	clock.advance(2 * time.Minute)
	newer := mustBegin(t, d, "s", "a", stateNew)
	clock.advance(time.Minute) // the newer claim's last instant
	d.confirm(late)
	mustBegin(t, d, "s", "a", stateInFlight)
	d.forget(newer)
	mustBegin(t, d, "s", "a", stateNew)
}

// The table's size is clamped to what int32 slots can index, and to at
// least one entry.
func TestDedupSizeIsClampedToItsSlots(t *testing.T) {
	for _, c := range []struct{ size, want int }{
		{-5, 1}, {0, 1}, {1, 1}, {1 << 20, 1 << 20},
		{math.MaxInt32 - 1, math.MaxInt32 - 1},
		{math.MaxInt32, math.MaxInt32 - 1},
		{math.MaxInt, math.MaxInt32 - 1},
	} {
		if got := newDedup(c.size, time.Minute).size; got != c.want {
			t.Errorf("newDedup(%d).size = %d, want %d", c.size, got, c.want)
		}
	}
}
