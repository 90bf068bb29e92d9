package ratelimit

import (
	"context"
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/olp-edu/borda/internal/clock"
)

// DefaultMemoryKeys bounds the keys a MemoryStore holds (about 150 bytes
// each, so ~40 MB at the bound).
const DefaultMemoryKeys = 1 << 18

const memoryShards = 32

// MemoryStore is the embedded Store for a single instance (no Redis
// configured). It has the semantics of the Redis script: fixed-window
// counters that start at the first hit and expire with their TTL, GCRA
// arithmetic identical to the script's, relax values with a TTL. Memory is
// bounded: each of 32 shards is an LRU, and an expired entry is replaced
// on its next use. Evicting a live key under pressure forgets its count
// (fails open for that key), the least-recently-seen key first. Its clock
// is the process's (time.Now) unless SetClock replaces it: one process,
// one clock.
type MemoryStore struct {
	seed   maphash.Seed
	clock  atomic.Pointer[clock.Clock]
	shards [memoryShards]memoryShard
}

type memoryShard struct {
	mu   sync.Mutex
	keys *simplelru.LRU[string, *memoryEntry]
}

type memoryEntry struct {
	n       int64   // fixed window count
	end     float64 // fixed window: the store's window adopted (KeyState.End), 0: none
	tat     float64 // GCRA theoretical arrival time, unix ms
	relax   float64 // relax factor
	sliding slidingState
	expires moment // when the entry is over (moment.go: pointer-free)
}

// slidingState is the script's "s{window}:{index}:{current}:{previous}".
type slidingState struct {
	window, index, cur, prev float64
}

// NewMemoryStore returns an empty store holding at most maxKeys keys
// (DefaultMemoryKeys when maxKeys ≤ 0).
func NewMemoryStore(maxKeys int) *MemoryStore {
	return newMemoryStoreEvicting(maxKeys, nil)
}

// newMemoryStoreEvicting is NewMemoryStore calling onEvict (when not nil)
// with every key the store drops: evicted past maxKeys, or removed because
// its state became empty. onEvict runs with the key's shard locked: it
// must not call the store.
func newMemoryStoreEvicting(maxKeys int, onEvict func(key string)) *MemoryStore {
	if maxKeys <= 0 {
		maxKeys = DefaultMemoryKeys
	}
	per := max(maxKeys/memoryShards, 1)
	var cb simplelru.EvictCallback[string, *memoryEntry]
	if onEvict != nil {
		cb = func(key string, _ *memoryEntry) { onEvict(key) }
	}
	s := &MemoryStore{seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].keys, _ = simplelru.NewLRU[string, *memoryEntry](per, cb) // only errors on size ≤ 0
	}
	return s
}

// SetClock makes c the store's clock (nil: the wall clock). The Limiter's
// local limits of on_store_error use it to share the Limiter's clock;
// tests use it to drive time.
func (s *MemoryStore) SetClock(c clock.Clock) {
	if c == nil {
		s.clock.Store(nil)
		return
	}
	s.clock.Store(&c)
}

func (s *MemoryStore) now() time.Time {
	if c := s.clock.Load(); c != nil {
		return (*c).Now()
	}
	return time.Now()
}

func (s *MemoryStore) shard(key string) *memoryShard {
	return &s.shards[maphash.String(s.seed, key)%memoryShards]
}

// entry returns key's live entry, creating a fresh one (expiring at now+ttl)
// when it is missing or expired. The caller holds sh.mu.
func (sh *memoryShard) entry(key string, now time.Time, ttl time.Duration) (*memoryEntry, bool) {
	if e, ok := sh.keys.Get(key); ok && momentOf(now).before(e.expires) {
		return e, true
	}
	e := &memoryEntry{expires: momentOf(now).add(ttl)}
	sh.keys.Add(key, e)
	return e, false
}

// Hit implements Store, on the store's clock: the request's hits are
// decided together (Store.Hit), under the locks of every shard they fall
// in, taken in shard order.
func (s *MemoryStore) Hit(_ context.Context, hits []Hit, out []Count) (time.Time, error) {
	return s.hitMode(hits, out, modeDecide), nil
}

// peek decides hits as Hit does and writes nothing: what the store would
// answer (every Count with Counted false).
func (s *MemoryStore) peek(hits []Hit, out []Count) time.Time {
	return s.hitMode(hits, out, modePeek)
}

// hitMode is the hit script on the embedded store, in its modes
// (modeDecide, modePeek, modeRefused): a first pass decides every hit
// with nothing written, a second counts what the request's outcome says.
func (s *MemoryStore) hitMode(hits []Hit, out []Count, mode string) time.Time {
	if len(hits) == 0 {
		return time.Time{}
	}
	now := s.now()
	var lockedBuf [8]uint8
	locked := s.lockShards(hits, lockedBuf[:0])
	defer s.unlockShards(locked)
	var pendBuf [4]memoryPending
	pend := pendBuf[:0]
	if len(hits) > len(pendBuf) {
		pend = make([]memoryPending, 0, len(hits))
	}
	refused := mode == modeRefused
	for i, h := range hits {
		pend = append(pend, memoryPending{})
		out[i] = s.shard(h.Key).decide(h, now, &pend[i], mode != modePeek)
		if !h.Observe && !allowed(h, out[i]) {
			refused = true
		}
	}
	if mode == modePeek {
		return now
	}
	for i, h := range hits {
		room := allowed(h, out[i])
		switch {
		case h.Algorithm == FixedWindow && (!refused || !room):
			out[i] = s.shard(h.Key).countFixed(h, now)
		case h.Algorithm != FixedWindow && room && !refused:
			s.shard(h.Key).commit(h, now, &pend[i])
			out[i].Counted = true
		}
	}
	return now
}

// lockShards locks the shards of hits' keys in ascending order (so two
// requests never wait on each other), each once, and returns their
// indexes appended to buf.
func (s *MemoryStore) lockShards(hits []Hit, buf []uint8) []uint8 {
	for _, h := range hits {
		buf = append(buf, uint8(maphash.String(s.seed, h.Key)%memoryShards))
	}
	slices.Sort(buf)
	buf = slices.Compact(buf)
	for _, i := range buf {
		s.shards[i].mu.Lock()
	}
	return buf
}

func (s *MemoryStore) unlockShards(locked []uint8) {
	for _, i := range locked {
		s.shards[i].mu.Unlock()
	}
}

// memoryPending is what a decided GCRA or sliding-window hit writes when
// it is counted (memoryShard.commit).
type memoryPending struct {
	tat, ttl                 float64
	window, index, cur, prev float64
}

// decide is the script's first pass for h on the shard (locked): its
// Count as if counted, the write it would make in p. mend allows the
// script's repairs (a GCRA arrival time past now + period is capped).
func (sh *memoryShard) decide(h Hit, now time.Time, p *memoryPending, mend bool) Count {
	switch h.Algorithm {
	case GCRA:
		return sh.gcra(h, now, p, mend)
	case SlidingWindow:
		return sh.slidingWindow(h, now, p)
	}
	ttl := max(h.TTL.Truncate(time.Millisecond), time.Millisecond)
	if e, ok := sh.keys.Get(h.Key); ok && momentOf(now).before(e.expires) {
		left := min(e.expires.sub(momentOf(now)).Truncate(time.Millisecond), ttl)
		return Count{N: e.n + 1, TTL: left}
	}
	return Count{N: 1, TTL: ttl}
}

// countFixed counts h's fixed-window hit (the shard is locked).
func (sh *memoryShard) countFixed(h Hit, now time.Time) Count {
	ttl := max(h.TTL.Truncate(time.Millisecond), time.Millisecond)
	e, _ := sh.entry(h.Key, now, ttl)
	if limit := momentOf(now).add(ttl); limit.before(e.expires) {
		e.expires = limit // as the script: never longer than the window
	}
	e.n++
	return Count{N: e.n, TTL: e.expires.sub(momentOf(now)).Truncate(time.Millisecond), Counted: true}
}

// commit writes a GCRA or sliding-window hit that decide found room for.
func (sh *memoryShard) commit(h Hit, now time.Time, p *memoryPending) {
	ttl := time.Duration(p.ttl) * time.Millisecond
	e, _ := sh.entry(h.Key, now, ttl)
	if h.Algorithm == GCRA {
		e.tat = p.tat
	} else {
		e.sliding = slidingState{window: p.window, index: p.index, cur: p.cur + 1, prev: p.prev}
	}
	e.expires = momentOf(now).add(ttl)
}

// slidingWindow is the script's sliding-window branch, in unix
// milliseconds, with the same float64 arithmetic in the same order.
func (sh *memoryShard) slidingWindow(h Hit, now time.Time, p *memoryPending) Count {
	nowMS := float64(now.UnixMilli())
	w := float64(h.Period.Milliseconds())
	limit := float64(h.Limit)
	idx := math.Floor(nowMS / w)
	var cur, prev float64
	if e, ok := sh.keys.Get(h.Key); ok && momentOf(now).before(e.expires) && e.sliding.window == w {
		switch st := e.sliding; {
		case st.index >= idx:
			idx, cur, prev = st.index, st.cur, st.prev
		case st.index == idx-1:
			prev = st.cur
		}
	}
	elapsed := max(0, nowMS-idx*w)
	rate := prev*(w-elapsed)/w + cur
	if rate+1 <= limit {
		ttl := max(1, (idx+2)*w-nowMS)
		*p = memoryPending{ttl: ttl, window: w, index: idx, cur: cur, prev: prev}
		return Count{Allowed: true, Remaining: int64(math.Floor(limit - rate - 1)), ResetAfter: time.Duration(ttl) * time.Millisecond}
	}
	var retry float64
	if cur+1 <= limit {
		retry = w*(1-(limit-1-cur)/prev) - elapsed
	} else {
		y := 0.0
		if cur > limit-1 {
			y = w * (1 - (limit-1)/cur)
		}
		retry = (w - elapsed) + y
	}
	reset := 0.0
	if cur > 0 {
		reset = (idx+2)*w - nowMS
	} else if prev > 0 {
		reset = (idx+1)*w - nowMS
	}
	return Count{
		RetryAfter: time.Duration(max(1, math.Ceil(retry))) * time.Millisecond,
		ResetAfter: time.Duration(max(0, math.Ceil(reset))) * time.Millisecond,
	}
}

// gcra is the script's GCRA branch, in unix milliseconds.
func (sh *memoryShard) gcra(h Hit, now time.Time, p *memoryPending, mend bool) Count {
	nowMS := float64(now.UnixMilli())
	period := float64(h.Period.Milliseconds())
	interval := period / float64(h.Limit)
	slack := gcraSlack(period, float64(h.Limit))
	tat := nowMS
	if e, ok := sh.keys.Get(h.Key); ok && momentOf(now).before(e.expires) && e.tat > tat {
		tat = e.tat
		// As the script: capped at now + period + slack, the most a pass
		// leaves (a tat a pass left is never cut).
		if tat > nowMS+period+slack {
			tat = nowMS + period + slack
			if mend {
				e.tat, e.expires = tat, momentOf(now).add(time.Duration(math.Ceil(period+slack))*time.Millisecond)
			}
		}
	}
	newTAT := tat + interval
	// diff is how early, past the slack, the hit is.
	diff := nowMS - (newTAT - period) + slack
	// As the script: the waits are reported within the period, rounded up
	// past the thousandth of a ms the arrival time is kept to.
	if diff < 0 {
		return Count{
			RetryAfter: time.Duration(math.Max(1, math.Ceil(-diff-0.001))) * time.Millisecond,
			ResetAfter: time.Duration(math.Min(math.Ceil(tat-nowMS), period)) * time.Millisecond,
		}
	}
	ttl := math.Max(1, math.Ceil(newTAT-nowMS))
	*p = memoryPending{tat: newTAT, ttl: ttl}
	return Count{Allowed: true, Remaining: int64(math.Floor(diff / interval)), ResetAfter: time.Duration(math.Min(ttl, period)) * time.Millisecond}
}

// ReadRelax implements Store.
func (s *MemoryStore) ReadRelax(_ context.Context, keys []string) ([]RelaxValue, error) {
	now := s.now()
	out := make([]RelaxValue, len(keys))
	for i, k := range keys {
		sh := s.shard(k)
		sh.mu.Lock()
		if e, ok := sh.keys.Get(k); ok && momentOf(now).before(e.expires) && e.relax > 0 {
			out[i] = RelaxValue{Factor: e.relax, TTL: e.expires.sub(momentOf(now)).Truncate(time.Millisecond)}
		}
		sh.mu.Unlock()
	}
	return out, nil
}

// WriteRelax implements Store.
func (s *MemoryStore) WriteRelax(_ context.Context, key string, factor float64, ttl time.Duration) error {
	sh := s.shard(key)
	sh.mu.Lock()
	sh.keys.Add(key, &memoryEntry{relax: factor, expires: momentOf(s.now()).add(ttl)})
	sh.mu.Unlock()
	return nil
}

// Ping implements Store; the embedded store is always reachable.
func (s *MemoryStore) Ping(context.Context) error { return nil }

// Len returns the number of keys held, expired ones not yet replaced
// included.
func (s *MemoryStore) Len() int {
	n := 0
	for i := range s.shards {
		s.shards[i].mu.Lock()
		n += s.shards[i].keys.Len()
		s.shards[i].mu.Unlock()
	}
	return n
}

var _ Store = (*MemoryStore)(nil)
