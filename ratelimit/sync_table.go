package ratelimit

import (
	"time"
)

// syncPage is how many syncKeys one page of a syncTable holds.
const syncPage = 1024

// syncTable holds a synchronizing replica's syncKeys: an index from key to
// slot, and the slots in pages of pointer-free entries that never move (a
// *syncKey stays valid while its key is in the table). With up to 2 ×
// SyncKeys keys, a table of individually allocated entries holding a Hit
// and four time.Time gave the garbage collector a pointer-dense object per
// key to mark and scan on every cycle; a page is one noscan object per
// 1 024 keys (docs/performance.md, "Rate-limit key space"). The caller
// serializes every call (syncer.mu).
type syncTable struct {
	index map[string]uint32
	pages []*[syncPage]syncKey
	free  []uint32
	// dists are the distribution counters of the hits' rules (index 0:
	// none), by hitShape.dist: one per rule name (distributions.attach),
	// so bounded by the rules a configuration ever named.
	dists  []*distribution
	distOf map[*distribution]uint32
	// epoch counts the times more replicas joined (cutLeases); an entry
	// whose epoch is older has its lease cut when it is next read.
	epoch uint32
}

func newSyncTable() *syncTable {
	return &syncTable{index: map[string]uint32{}, dists: []*distribution{nil}, distOf: map[*distribution]uint32{}}
}

// hitShape is a Hit without its key, pointer-free: the parameters a
// syncKey keeps of its last hit.
type hitShape struct {
	algorithm   Algorithm
	dist        uint32
	ttl, period time.Duration
	limit       int64
}

// len returns the keys held.
func (t *syncTable) len() int { return len(t.index) }

// get returns key's entry, its lease cut if more replicas joined since
// the entry was last read (cutLeases).
func (t *syncTable) get(key string) (*syncKey, bool) {
	i, ok := t.index[key]
	if !ok {
		return nil, false
	}
	k := t.slot(i)
	if k.epoch != t.epoch {
		k.lease, k.epoch = min(k.lease, k.spent), t.epoch
	}
	return k, true
}

// cutLeases cuts every entry's lease to what was spent of it, in O(1):
// each entry is cut when it is next read (get). A replica that joins makes
// every lease taken while fewer replicas shared the keys too large; a walk
// of up to 2 × SyncKeys entries under the syncer's lock stalled every
// request of the replica while it ran.
func (t *syncTable) cutLeases() { t.epoch++ }

func (t *syncTable) slot(i uint32) *syncKey { return &t.pages[i/syncPage][i%syncPage] }

// add holds key with the zero entry and returns it; key must not be held.
func (t *syncTable) add(key string) *syncKey {
	var i uint32
	if n := len(t.free); n > 0 {
		i, t.free = t.free[n-1], t.free[:n-1]
	} else {
		n := uint32(len(t.index))
		if int(n) == len(t.pages)*syncPage {
			t.pages = append(t.pages, new([syncPage]syncKey))
		}
		i = n
	}
	t.index[key] = i
	k := t.slot(i)
	*k = syncKey{epoch: t.epoch}
	return k
}

// remove drops key; its entry's slot is reused by a later add.
func (t *syncTable) remove(key string) {
	if i, ok := t.index[key]; ok {
		delete(t.index, key)
		t.free = append(t.free, i)
	}
}

// all yields every key and its entry, from a random place (Go's map
// iteration); remove is allowed meanwhile.
func (t *syncTable) all(yield func(string, *syncKey) bool) {
	for key, i := range t.index {
		if !yield(key, t.slot(i)) {
			return
		}
	}
}

// shape returns h without its key.
func (t *syncTable) shape(h Hit) hitShape {
	d, ok := t.distOf[h.dist]
	if !ok && h.dist != nil {
		d = uint32(len(t.dists))
		t.dists = append(t.dists, h.dist)
		t.distOf[h.dist] = d
	}
	return hitShape{algorithm: h.Algorithm, dist: d, ttl: h.TTL, period: h.Period, limit: h.Limit}
}

// hit returns the Hit of key whose shape is s.
func (t *syncTable) hit(key string, s hitShape) Hit {
	return Hit{Key: key, Algorithm: s.algorithm, TTL: s.ttl, Limit: s.limit, Period: s.period, dist: t.dists[s.dist]}
}
