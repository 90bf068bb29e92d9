package ratelimit

import (
	"context"
	"hash/maphash"
	"math"
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

// Hit implements Store, on the store's clock.
func (s *MemoryStore) Hit(_ context.Context, hits []Hit, out []Count) (time.Time, error) {
	if len(hits) == 0 {
		return time.Time{}, nil
	}
	now := s.now()
	for i, h := range hits {
		sh := s.shard(h.Key)
		sh.mu.Lock()
		switch h.Algorithm {
		case GCRA:
			out[i] = sh.gcra(h, now)
		case SlidingWindow:
			out[i] = sh.slidingWindow(h, now)
		default:
			ttl := max(h.TTL.Truncate(time.Millisecond), time.Millisecond)
			e, _ := sh.entry(h.Key, now, ttl)
			if limit := momentOf(now).add(ttl); limit.before(e.expires) {
				e.expires = limit // as the script: never longer than the window
			}
			e.n++
			out[i] = Count{N: e.n, TTL: e.expires.sub(momentOf(now)).Truncate(time.Millisecond)}
		}
		sh.mu.Unlock()
	}
	return now, nil
}

// slidingWindow is the script's sliding-window branch, in unix
// milliseconds, with the same float64 arithmetic in the same order.
func (sh *memoryShard) slidingWindow(h Hit, now time.Time) Count {
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
		cur++
		ttl := max(1, (idx+2)*w-nowMS)
		e, _ := sh.entry(h.Key, now, 0)
		e.sliding = slidingState{window: w, index: idx, cur: cur, prev: prev}
		e.expires = momentOf(now).add(time.Duration(ttl) * time.Millisecond)
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
func (sh *memoryShard) gcra(h Hit, now time.Time) Count {
	nowMS := float64(now.UnixMilli())
	period := float64(h.Period.Milliseconds())
	interval := period / float64(h.Limit)
	tat := nowMS
	if e, ok := sh.keys.Get(h.Key); ok && momentOf(now).before(e.expires) && e.tat > tat {
		tat = e.tat
		if tat > nowMS+period { // as the script: capped at now + period
			tat = nowMS + period
			e.tat, e.expires = tat, momentOf(now).add(h.Period)
		}
	}
	newTAT := tat + interval
	diff := nowMS - (newTAT - period)
	if diff < 0 {
		return Count{
			RetryAfter: time.Duration(math.Ceil(-diff)) * time.Millisecond,
			ResetAfter: time.Duration(math.Ceil(tat-nowMS)) * time.Millisecond,
		}
	}
	reset := time.Duration(math.Ceil(newTAT-nowMS)) * time.Millisecond
	e, _ := sh.entry(h.Key, now, reset)
	e.tat, e.expires = newTAT, momentOf(now).add(reset)
	return Count{Allowed: true, Remaining: int64(math.Floor(diff / interval)), ResetAfter: reset}
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
