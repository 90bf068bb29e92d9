package ingress

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"sync"
	"time"
)

// dedupState is where an event id stands.
type dedupState uint8

const (
	stateNew       dedupState = iota // not seen: the caller owns it now
	stateInFlight                    // another request is publishing it
	stateConfirmed                   // the broker confirmed it
)

func (s dedupState) String() string {
	switch s {
	case stateInFlight:
		return "IN_FLIGHT"
	case stateConfirmed:
		return "CONFIRMED"
	}
	return "NEW"
}

// dedupKey is the 128-bit keyed digest of (source, id) the table stores
// instead of the strings (see dedup).
type dedupKey [16]byte

// dedupTicket is a claim on an id: begin returns one with stateNew, and
// confirm and forget act only while it still owns the id. It is a value
// (no allocation): the key, the slot the claim was put in and the claim's
// generation, which no other claim ever has. The zero ticket owns nothing.
type dedupTicket struct {
	key  dedupKey
	slot int32
	gen  uint64
}

// dedupSlot is one entry of the table: no pointers, so the garbage
// collector never scans the slice that holds them.
type dedupSlot struct {
	key        dedupKey
	expiresAt  int64  // ns since dedup.base, in the callers' time
	gen        uint64 // the owning claim's generation; 0: the slot is free
	prev, next int32  // the age list (slot 0 its head), or the free list (next)
	state      dedupState
}

// dedup remembers event ids for the webhook ingress (docs/webhooks.md §4):
// IN_FLIGHT while one request publishes, CONFIRMED once the broker acked;
// a failed publish forgets the id at once so the provider's retry is
// accepted. It holds at most size ids, the oldest evicted first, each for
// ttl after its claim or its confirm. It is per process: replicas each keep
// their own, and the forwarder's Redis idempotency key catches what slips
// through.
//
// Nothing in its entries is a pointer the GC has to follow: ids are kept
// as a 128-bit digest of (source, 0x00, id) — two hash/maphash sums under
// two seeds drawn at random when the process starts, written piece by
// piece (no concatenated string) — the entries live in one slice linked
// by int32 indices (prev/next), and the index is a map[dedupKey]int32.
// Both grow on demand up to size (append's geometric growth: at most about
// twice the most entries ever held at once), so memory follows the ids in
// use, not the configured size (2 000 000 configured once cost 394 MB at
// start; BenchmarkDedupMemoryFollowsEntries). Once warm, begin, confirm
// and forget allocate nothing.
//
// Two different (source, id) pairs share a digest with probability about
// 2^-128 per pair (20 000 entries against each new id: under 2^-113 per
// event). An attacker cannot aim at a collision: the seeds are random per
// process and no digest ever leaves it, so there is nothing to search
// against. Source names cannot hold 0x00 (configs' validName), so the
// separator makes the written bytes, and hence the pair, unambiguous. A
// collision would answer a new event ALREADY_PROCESSED (or 429).
//
// Tickets carry the claim's generation, unique for the table's life (a
// uint64 counter), so a late confirm or forget of a claim whose entry was
// evicted, or whose slot now holds another id, never touches another
// request's entry. The age list is ordered by the last claim or confirm,
// newest at the head: with a clock that does not go back it is also the
// expiry order, so the entry evicted when the table is full is the first
// to expire (an expired one, if any).
//
// The clock is the caller's: begin and confirm take the time (the
// ingress's receivedAt, the publish's end), so tests drive time and the
// table reads no clock of its own.
type dedup struct {
	seed1, seed2 maphash.Seed
	ttl          int64     // ns
	base         time.Time // expiresAt counts from here (time.Now: monotonic when the callers' times are)

	mu    sync.Mutex
	size  int         // the most entries held; slots grows up to size+1
	slots []dedupSlot // slots[0] is the age list's head, never an entry
	index map[dedupKey]int32
	free  int32  // the first free slot (linked by next), 0: none
	gens  uint64 // the last generation handed out
}

// dedupInitialSlots is the capacity a table starts with (48 KiB of slots);
// past it the slots and the index grow as entries arrive.
const dedupInitialSlots = 1024

// newDedup returns a table of size entries (at least 1, at most
// math.MaxInt32-1: slots are int32) that remembers an id for ttl.
func newDedup(size int, ttl time.Duration) *dedup {
	size = min(max(size, 1), math.MaxInt32-1)
	initial := min(size, dedupInitialSlots)
	return &dedup{
		seed1: maphash.MakeSeed(),
		seed2: maphash.MakeSeed(),
		ttl:   int64(ttl),
		base:  time.Now(),
		size:  size,
		slots: make([]dedupSlot, 1, initial+1),
		index: make(map[dedupKey]int32, initial),
	}
}

// key is the digest of (source, id) under the table's seeds.
func (d *dedup) key(source, id string) dedupKey {
	var h1, h2 maphash.Hash
	h1.SetSeed(d.seed1)
	h2.SetSeed(d.seed2)
	h1.WriteString(source)
	h2.WriteString(source)
	h1.WriteByte(0)
	h2.WriteByte(0)
	h1.WriteString(id)
	h2.WriteString(id)
	var k dedupKey
	binary.LittleEndian.PutUint64(k[:8], h1.Sum64())
	binary.LittleEndian.PutUint64(k[8:], h2.Sum64())
	return k
}

// clock is now in the table's time: ns since base.
func (d *dedup) clock(now time.Time) int64 { return int64(now.Sub(d.base)) }

// begin returns stateNew and a ticket when the source's id was unknown or
// expired at now (it is IN_FLIGHT now, owned by the caller, for ttl), else
// the id's state and the zero ticket.
func (d *dedup) begin(source, id string, at time.Time) (dedupState, dedupTicket) {
	k := d.key(source, id)
	now := d.clock(at)
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.index[k]; ok {
		if e := &d.slots[s]; now <= e.expiresAt {
			return e.state, dedupTicket{}
		}
		d.remove(s)
	}
	d.gens++
	t := dedupTicket{key: k, gen: d.gens}
	t.slot = d.add(k, t.gen, stateInFlight, now)
	return stateNew, t
}

// confirm marks the ticket's id CONFIRMED and restarts its TTL at now,
// adding it back if the table evicted it meanwhile (or it expired) and no
// other claim holds it now.
func (d *dedup) confirm(t dedupTicket, at time.Time) {
	if t.gen == 0 {
		return
	}
	now := d.clock(at)
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.owned(t)
	if ok {
		e := &d.slots[s]
		e.state = stateConfirmed
		e.expiresAt = now + d.ttl
		d.unlink(s)
		d.pushFront(s)
		return
	}
	if s, held := d.index[t.key]; held {
		if now <= d.slots[s].expiresAt {
			return // another request's claim
		}
		d.remove(s)
	}
	d.add(t.key, t.gen, stateConfirmed, now)
}

// forget removes the ticket's id if the ticket still owns it.
func (d *dedup) forget(t dedupTicket) {
	if t.gen == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.owned(t); ok {
		d.remove(s)
	}
}

// len is how many entries the table holds, expired ones not yet reclaimed
// included.
func (d *dedup) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.index)
}

// owned returns the slot holding the ticket's claim: the one it was put
// in, or the one confirm put it back in. d.mu is held.
func (d *dedup) owned(t dedupTicket) (int32, bool) {
	if t.slot > 0 && int(t.slot) < len(d.slots) && d.slots[t.slot].gen == t.gen {
		return t.slot, true
	}
	if s, ok := d.index[t.key]; ok && d.slots[s].gen == t.gen {
		return s, true
	}
	return 0, false
}

// add puts key in a slot at the head of the age list (a new slot while the
// table holds fewer than size, else a free one, else the oldest entry's,
// evicted) and returns the slot. d.mu is held.
func (d *dedup) add(key dedupKey, gen uint64, state dedupState, now int64) int32 {
	s := d.free
	if s == 0 && len(d.slots) <= d.size {
		// Grow by one slot (append doubles the capacity when it must):
		// no pointer into d.slots is held here.
		d.slots = append(d.slots, dedupSlot{})
		s = int32(len(d.slots) - 1)
		d.slots[s].next = d.free
		d.free = s
	}
	if s == 0 {
		s = d.slots[0].prev // the tail: the oldest
		d.remove(s)
		s = d.free
	}
	d.free = d.slots[s].next
	d.slots[s] = dedupSlot{key: key, expiresAt: now + d.ttl, gen: gen, state: state}
	d.pushFront(s)
	d.index[key] = s
	return s
}

// remove frees slot s: out of the index and the age list, onto the free
// list, its generation cleared so no ticket owns it. d.mu is held.
func (d *dedup) remove(s int32) {
	delete(d.index, d.slots[s].key)
	d.unlink(s)
	d.slots[s] = dedupSlot{next: d.free}
	d.free = s
}

// unlink takes slot s out of the age list. d.mu is held.
func (d *dedup) unlink(s int32) {
	e := &d.slots[s]
	d.slots[e.prev].next = e.next
	d.slots[e.next].prev = e.prev
}

// pushFront puts slot s at the head of the age list. d.mu is held.
func (d *dedup) pushFront(s int32) {
	head := &d.slots[0]
	e := &d.slots[s]
	e.prev, e.next = 0, head.next
	d.slots[head.next].prev = s
	head.next = s
}
