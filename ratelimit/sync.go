package ratelimit

import (
	"context"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/internal/clock"
)

// SyncKeys bounds the keys a synchronizing Limiter remembers: its view of
// each key and the key's synchronization state (sync_round.go). Past it the
// least recently used key is forgotten, by the view and the syncer
// together; its count was sent already unless it was hit within the last
// interval (then the loss is counted in borda_ratelimit_sync_dropped_total).
// About 450 bytes a key (BenchmarkSync_MemoryPerKey): 60 MB at the bound,
// which a proxy pod's 256 MiB holds beside its connections.
const SyncKeys = 1 << 17

// syncer decides on a local view of the store and sends the view's
// pending counts every interval in one round trip (Options.Sync,
// docs/rate-limiting.md "Synchronization"). The view is a MemoryStore: its
// arithmetic is the scripts' (the conformance suite proves it), so a
// replica alone decides exactly as the per-request round trip would.
type syncer struct {
	view     *MemoryStore
	store    Syncer
	interval time.Duration
	timeout  time.Duration
	wake     chan struct{} // a full key map asks for a round now
	perKey   bool          // a Redis Cluster: one script call per key

	mu   sync.Mutex
	keys *syncTable
	// dirty lists the keys counted since the last round, in the order
	// they became dirty (a key at most once per round: count appends it
	// when its dirty flag rises).
	dirty []string

	// flight serializes the exchanges with the store (rounds and asks):
	// two concurrent merges of one key from one replica would count its
	// view twice. A one-slot semaphore, so that an ask waits for it
	// within its own deadline (fresh attack pass 14 R-SLOW-2: a mutex
	// queued asks behind rounds and other asks, and requests waited
	// 110-340 ms with a 30 ms timeout).
	flight chan struct{}
	// asking holds, per key, the channel of the request asking the store
	// for it now, closed when it has its answer (hitOnce): concurrent
	// requests of a spent key wait for that one ask instead of queueing
	// one each on flight (fresh attack pass 19: with the store 60 ms away
	// and the timeout 30 ms, eight asks of one key at a time held flight
	// for the whole timeout each, the rounds barely ran, and a replica
	// heard nothing for a second). Under mu.
	asking map[string]chan struct{}
	// roundTimeout bounds each chunk of a round, an early exchange and
	// the idle registration, which run off the request path:
	// max(timeout, 4 × interval). An ask, on the request path, has
	// timeout in all (fresh attack pass 14 R-SLOW-1: with rounds under
	// the request timeout, a store answering in 25 ms of a 30 ms timeout
	// failed most rounds, and each replica decided on its own counts).
	roundTimeout time.Duration
	// reg registers this replica with every exchange; replicas is how
	// many the last exchange counted (1 until then, and on a store that
	// does not register: the lease is then the whole remaining budget).
	reg      Registration
	regStore RegisteringSyncer
	replicas atomic.Int64
	lastReg  atomic.Int64 // the last registration, a moment on the Limiter's clock
	// roundsFailing: the last exchange run under roundTimeout (a round,
	// an early exchange, an idle registration) failed, and none has
	// succeeded since: the store is down, not slow, and a failed ask lets
	// the view decide (holdToLease). An ask's own failures do not set it.
	roundsFailing atomic.Bool
	// failingSince is when the first call of the exchanges failing now
	// failed (a moment on the Limiter's clock; 0: the store answered the
	// last call): failures for less than outageAfter are a slow store, not
	// an outage (outage). Measured from the first failure, not from the
	// last answer: a replica that sent nothing for a while (its keys
	// refused locally until their window's end) heard nothing because it
	// asked nothing (fresh attack pass 18 R01: measured from the last
	// answer, the first lost answer after a second of quiet was taken for
	// an outage, and one replica passed 49 on its own view of a window of
	// 50 with half the answers lost).
	failingSince atomic.Int64
	failedCalls  atomic.Int64 // the calls failed since the store last answered
	asks         prometheus.Counter

	// spawn runs an early exchange (sync_early.go) off the request path:
	// by default on a goroutine earlyRun tracks; a test drives it.
	spawn    func(func())
	earlyRun earlyRuns
	earlies  prometheus.Counter
	// commands counts the store commands of the exchanges the syncer
	// starts itself (asks, early exchanges; the rounds' are the
	// Limiter's).
	commands prometheus.Counter

	rounds  [2]prometheus.Counter // ok, error
	dropped prometheus.Counter

	// exchanges prefixes the markers of this replica's calls
	// (keyspace.RateLimitExchange; empty: calls are not marked), seq
	// numbers them. parked holds the marked calls whose answer was lost,
	// oldest first, to be sent again (sync_replay.go), and parkedKeys
	// counts the parked calls of each key; both under mu.
	exchanges   string
	seq         atomic.Uint64
	parked      []*chunkCall
	parkedKeys  map[string]int
	replays     [3]prometheus.Counter // merged, failed, given up
	parkedGauge prometheus.Gauge

	// ownNow is the Limiter's own clock (without the store's offset), and
	// learnClock, when set, takes each answer's store clock (at) with when
	// its call was sent on ownNow (Limiter.learnSkew).
	ownNow     func() time.Time
	learnClock func(at, sent time.Time)
}

// syncKey is one key's synchronization: the last hit's parameters, the
// store's state as last read (base, valid until baseUntil), and whether
// the view counted since the last round. It holds no pointer (syncTable).
type syncKey struct {
	hit       hitShape
	base      KeyState
	baseUntil moment
	dirty     bool
	// spent is what the view passed since the store's state was last
	// read, lease what it may pass before asking again (quota leasing,
	// lease.go).
	spent, lease int64
	inFlight     int64 // spent when the exchange in flight took its snapshot
	// resEnd is, on a fixed window, the end (KeyState.End) of the window
	// the lease is reserved in (the store added it to that window's count
	// at the ask); 0: the lease is not reserved. While the view counts in
	// that window, what is left of the lease is sent with the view.
	resEnd float64
	// resUntil is when, on this replica's clock, that window ends: the
	// lease left then is not reserved in the next window, so the key
	// starts afresh there, as a key not seen (fresh).
	resUntil moment
	// fresh: the lease was given without the store (a key not seen, or
	// whose reserved window ended with some of its lease left); the next
	// exchange reserves what is left of it in the window it counts into,
	// so the others read it.
	fresh bool
	// held is, on a sliding window or GCRA, that the lease is reserved in
	// the store (by an ask, or a round that sent a fresh lease): every
	// exchange sends what is left of it with the view, in the view's
	// current window (a sliding window: the part reserved in a window
	// that has become the previous one is given back there) or past its
	// TAT, so the store's state always holds what this replica passed or
	// may still pass.
	held bool
	// early: an early exchange of the fresh share was started
	// (sync_early.go); once per fresh share.
	early bool
	// epoch is the syncTable's epoch when the lease was last cut to the
	// replicas counted (syncTable.cutLeases).
	epoch uint32
	// refuseUntil: an ask left this replica no lease; its hits are
	// refused without asking again until then (a fixed window: the
	// window's end; otherwise the time one request takes to come back).
	refuseUntil moment
	// wants: an ask of the key failed while the store answered
	// (holdToLease); the next exchange of the key, a round's included,
	// asks for its lease, so the rounds, which run under the longer
	// roundTimeout, renew a lease the asks cannot.
	wants bool
	// ownTAT is the theoretical arrival time of this replica's own
	// passes of the key, as a GCRA of its share of the limit
	// (floor(limit / replicas) per window, that burst): what the replica
	// may pass on its own while its ask cannot reach the store
	// (ownShareRoom).
	ownTAT moment
}

func newSyncer(store Syncer, interval, timeout time.Duration, now clock.Clock, m *metrics, reg Registration) *syncer {
	s := &syncer{
		store:    store,
		interval: interval,
		timeout:  timeout,
		wake:     make(chan struct{}, 1),
		flight:   make(chan struct{}, 1),
		asking:   make(map[string]chan struct{}),

		roundTimeout: max(timeout, 4*interval),
		keys:         newSyncTable(),
		rounds:       [2]prometheus.Counter{m.syncRounds.WithLabelValues("ok"), m.syncRounds.WithLabelValues("error")},
		dropped:      m.syncDropped,
		asks:         m.syncAsks,
		earlies:      m.syncEarly,
		commands:     m.rlCommands,
		replays:      [3]prometheus.Counter{m.syncReplays.WithLabelValues("merged"), m.syncReplays.WithLabelValues("failed"), m.syncReplays.WithLabelValues("given_up")},
		parkedGauge:  m.syncParked,
	}
	s.spawn = s.earlyRun.goRun
	if rs, ok := store.(RegisteringSyncer); ok && reg.ID != "" {
		s.reg, s.regStore = reg, rs
	}
	s.view = newMemoryStoreEvicting(SyncKeys, s.forget)
	s.view.SetClock(now)
	s.replicas.Store(1)
	return s
}

// hit decides hits on the view and marks their keys for the next round.
// With more than one replica registered, a hit whose key's lease is spent
// (and that the view would pass) first asks the store: its key alone is
// exchanged at once, within the timeout, then the hit is decided on the
// merged view; when the new lease is 0 (the store leaves less than one
// request per replica) the hit is refused. A failed ask, while the rounds
// reach the store (it is slow, not down), lets the view decide only within
// the replica's own share of the limit and refuses past it, and the next
// round asks for the lease (holdToLease); in an outage the view decides.
// Otherwise it never waits on the store. One request at a time asks for
// a key (syncKey's single flight, s.asking): a request that finds the key
// asked by another waits for that ask's answer (within the timeout) and is
// decided on what it brought, without an ask of its own.
func (s *syncer) hit(ctx context.Context, hits []Hit, out []Count) time.Time {
	p := s.prepareHit(ctx, hits, out)
	if p.done {
		return p.at
	}
	return s.commit(hits, out, p)
}

// prepared is a request's decision up to the view's: done when it is
// refused already (out holds its answer, at the view's time), else what
// commit needs to decide it on the view.
type prepared struct {
	done     bool
	at       time.Time
	replicas int64
	// taken marks the hits that took their share of the lease (bit j).
	taken uint64
	// refusals are the hits refused for want of a lease; none of them is
	// enforced when the request goes on (observed rules would-block) and
	// the view decides the others.
	refusals []refusal
}

// prepareHit is hit's decision up to the view's: the leases, the asks, the
// wait for another request's ask.
func (s *syncer) prepareHit(ctx context.Context, hits []Hit, out []Count) prepared {
	p, wait := s.prepareOnce(ctx, hits, out, false)
	if wait != nil {
		s.await(ctx, wait)
		p, _ = s.prepareOnce(ctx, hits, out, true)
	}
	return p
}

// commit decides a prepared request on the view, counts it there, and
// returns the view's time.
func (s *syncer) commit(hits []Hit, out []Count, p prepared) time.Time {
	at := s.viewHit(hits, out, p.refusals)
	s.count(hits, out, p.replicas, p.taken)
	return at
}

// prepareOnce is prepareHit's decision. When a key it must ask for is being
// asked by another request it returns that ask's channel, deciding
// nothing, unless followed (it waited for one already): then the request
// is held as a failed ask holds it (within the replica's own share the
// view decides; past it, refused to be retried at once).
func (s *syncer) prepareOnce(ctx context.Context, hits []Hit, out []Count, followed bool) (prepared, []chan struct{}) {
	replicas := s.replicas.Load()
	var taken uint64 // hits that took their share of the lease (bit j)
	var refusals []refusal
	if replicas > 1 {
		var ask []int
		now := s.view.now()
		nowM := momentOf(now)
		refused := false
		s.mu.Lock()
		for j, h := range hits {
			k, ok := s.keys.get(h.Key)
			held, holds := heldRefusal(h, k, ok, now, replicas)
			switch {
			case ok && nowM.before(k.refuseUntil) && !holds:
				// Waiting for the lease its failed ask wanted, within
				// its own share: the view decides, no ask meanwhile.
			case holds:
				refused = refused || !h.Observe
				refusals = append(refusals, refusal{j, held})
			case ok && k.resEnd != 0 && !nowM.before(k.resUntil) && k.spent < k.lease:
				// The window the lease was reserved in is over, with some
				// of it left (a key not flooding: a flood spends its lease
				// and asks): the key starts afresh, as one not seen, its
				// share reserved by its next exchange; no ask per window.
				k.resEnd, k.spent, k.lease, k.fresh, k.early = 0, 0, leaseOf(h, KeyState{}, 0, replicas), true, false
				if k.lease == 0 {
					ask = append(ask, j)
				}
			case ok && k.spent >= k.lease:
				ask = append(ask, j)
			case !ok && leaseOf(h, KeyState{}, 0, replicas) == 0:
				ask = append(ask, j)
			}
		}
		var mine chan struct{}
		if !refused && len(ask) > 0 {
			var wait []chan struct{}
			for _, j := range ask {
				if ch, ok := s.asking[hits[j].Key]; ok {
					wait = append(wait, ch)
				}
			}
			switch {
			case len(wait) > 0 && !followed:
				s.mu.Unlock()
				return prepared{}, wait
			case len(wait) > 0:
				var held []refusal
				for _, j := range ask {
					if k, ok := s.keys.get(hits[j].Key); !ok || !ownShareRoom(hits[j], k, nowM, replicas) {
						held = append(held, refusal{j, leaseRefusal(hits[j])})
					}
				}
				if refusesRequest(hits, held) {
					s.mu.Unlock()
					s.refuse(hits, out, held)
					return prepared{done: true, at: now}, nil
				}
				refusals = append(refusals, held...)
				ask = nil // within its own share: the view decides
			default:
				mine = make(chan struct{})
				for _, j := range ask {
					s.asking[hits[j].Key] = mine
				}
			}
		}
		if !refused && len(ask) == 0 {
			// Within their leases: each hit takes its share now, so
			// concurrent requests cannot all pass on the same one (count
			// gives back the share of a hit the view refuses).
			for j, h := range hits {
				if k, ok := s.keys.get(h.Key); ok && j < 64 {
					k.spent++
					taken |= 1 << j
				}
			}
		}
		s.mu.Unlock()
		if refused {
			s.refuse(hits, out, refusals)
			s.countRefused(hits)
			return prepared{done: true, at: now}, nil
		}
		if len(ask) > 0 {
			more, took := s.ask(ctx, hits, ask)
			s.asked(hits, ask, mine)
			refusals = append(refusals, more...)
			if refusesRequest(hits, refusals) {
				s.refuse(hits, out, refusals)
				s.countRefused(hits)
				return prepared{done: true, at: s.view.now()}, nil
			}
			taken = took
		}
	}
	return prepared{replicas: replicas, taken: taken, refusals: refusals}, nil
}

// heldRefusal returns the refusal of h when its key k (ok: known) is
// held refused until refuseUntil: past its lease (the store left this
// replica none), or its ask failed and its own share is spent (a key
// whose ask failed, within its own share, is not held: the view decides).
// s.mu is held.
func heldRefusal(h Hit, k *syncKey, ok bool, now time.Time, replicas int64) (Count, bool) {
	nowM := momentOf(now)
	switch {
	case !ok || !nowM.before(k.refuseUntil):
		return Count{}, false
	case k.wants && ownShareRoom(h, k, nowM, replicas):
		return Count{}, false
	case k.wants:
		return leaseRefusal(h), true
	}
	return spentCount(h, KeyState{TTL: k.refuseUntil.sub(nowM)}, now), true
}

// refusesLocally reports whether the view refuses hits without asking
// the store: a key held refused (heldRefusal), or the view's own counts.
// It answers them in out, counted nowhere (hitSplit's first step).
func (s *syncer) refusesLocally(hits []Hit, out []Count) bool {
	now := s.view.now()
	replicas := s.replicas.Load()
	var refusals []refusal
	s.mu.Lock()
	for j, h := range hits {
		k, ok := s.keys.get(h.Key)
		if c, holds := heldRefusal(h, k, ok, now, replicas); holds {
			refusals = append(refusals, refusal{j, c})
		}
	}
	s.mu.Unlock()
	s.refuse(hits, out, refusals)
	return refusesRequest(hits, refusals) || requestRefused(hits, out)
}

// refusal is a hit refused for want of a lease: j, its index in the
// request's hits, and its Count.
type refusal struct {
	j int
	c Count
}

// refusesRequest reports whether refusals refuse their request: one of
// them is of an enforced rule (an observed one would-blocks only).
func refusesRequest(hits []Hit, refusals []refusal) bool {
	for _, r := range refusals {
		if !hits[r.j].Observe {
			return true
		}
	}
	return false
}

// refuse answers a request refused for want of a lease: each refused hit
// gets its refusal, every other hit the view's answer as it stands, with
// nothing counted (Store.Hit's contract: a rule that had room is not
// reported refusing, so the deny cache never keeps its key, and the
// request counts into none of them).
func (s *syncer) refuse(hits []Hit, out []Count, refusals []refusal) {
	s.view.peek(hits, out)
	for _, r := range refusals {
		out[r.j] = r.c
	}
}

// viewHit decides hits on the view, together, but for the observed hits
// refusals already refused: their Count is the refusal; the view counts
// those of a fixed window as the request passed (a passed request counts
// into every fixed window, an observed one past its limit too: the
// distribution), the others not (GCRA and sliding windows count what
// they let pass).
func (s *syncer) viewHit(hits []Hit, out []Count, refusals []refusal) time.Time {
	if len(refusals) == 0 {
		at, _ := s.view.Hit(context.Background(), hits, out) // the embedded store does not fail
		return at
	}
	sub := make([]Hit, 0, len(hits))
	idx := make([]int, 0, len(hits))
	for j, h := range hits {
		switch refused := slices.ContainsFunc(refusals, func(r refusal) bool { return r.j == j }); {
		case !refused:
			sub, idx = append(sub, h), append(idx, j)
		case h.Algorithm == FixedWindow:
			sub, idx = append(sub, countingOnly(h)), append(idx, j)
		}
	}
	rc := make([]Count, len(sub))
	at, _ := s.view.Hit(context.Background(), sub, rc)
	for n, j := range idx {
		out[j] = rc[n]
	}
	for _, r := range refusals {
		if hits[r.j].Algorithm == FixedWindow {
			out[r.j].N = max(out[r.j].N, hits[r.j].Limit+1) // refused: spends no lease
			continue
		}
		out[r.j] = r.c
	}
	if at.IsZero() {
		at = s.view.now()
	}
	return at
}

// countingOnly is h as a hit that only counts: a fixed window of limit 0
// never refuses (Hit.Limit), so the view counts it whatever the others.
func countingOnly(h Hit) Hit {
	h.Limit = 0
	return h
}

// asked ends the single flight of the keys of hits[ask] that mine holds
// (prepareOnce): the requests waiting for it decide on what the ask brought.
func (s *syncer) asked(hits []Hit, ask []int, mine chan struct{}) {
	s.mu.Lock()
	for _, j := range ask {
		if s.asking[hits[j].Key] == mine {
			delete(s.asking, hits[j].Key)
		}
	}
	s.mu.Unlock()
	close(mine)
}

// await waits until every ask of wait has been answered, or for the
// timeout, or for ctx.
func (s *syncer) await(ctx context.Context, wait []chan struct{}) {
	t := time.NewTimer(s.timeout)
	defer t.Stop()
	for _, ch := range wait {
		select {
		case <-ch:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// countRefused counts, in the view, the fixed-window hits of a request
// refused for want of a lease whose own key refused it (held past its
// lease until refuseUntil): a refused request counts only into the fixed
// windows that refused it, as a full window counts it with sync: 0
// (Store.Hit; GCRA and sliding windows count passed hits only). Nothing
// is spent from the leases. The
// request's other keys are not counted, so one client's refusals never
// fill a window it shares with others (fresh attack pass 20: a
// route-wide fixed window filled by one IP's refusals refused a client
// at 5 % of it 23 times in 41). A key whose ask failed (syncKey.wants) is
// not counted either: the store did not say its window was full, and
// counting refusals into it would spend the budget the other replicas
// pass (27 of 50 in a window, TestSync_AFailedAskHolds…).
func (s *syncer) countRefused(hits []Hit) {
	var fixed []Hit
	nowM := momentOf(s.view.now())
	s.mu.Lock()
	for _, h := range hits {
		k, ok := s.keys.get(h.Key)
		if !ok || k.wants || !nowM.before(k.refuseUntil) {
			continue
		}
		if h.Algorithm != GCRA && h.Algorithm != SlidingWindow {
			fixed = append(fixed, h)
		}
	}
	s.mu.Unlock()
	if len(fixed) == 0 {
		return
	}
	out := make([]Count, len(fixed))
	counting := make([]Hit, len(fixed))
	for j, h := range fixed {
		counting[j] = countingOnly(h)
	}
	_, _ = s.view.Hit(context.Background(), counting, out)
	for j := range out {
		out[j].N = max(out[j].N, fixed[j].Limit+1) // refused: spends no lease
	}
	s.count(fixed, out, s.replicas.Load(), 0)
}

// count marks the keys of hits for the next round and spends the passed
// ones from their leases; taken marks the hits (bit j) that took their
// share before the view decided (given back when it refused them).
func (s *syncer) count(hits []Hit, out []Count, replicas int64, taken uint64) {
	full := false
	var early []string
	var nowM moment
	if replicas > 1 {
		nowM = momentOf(s.view.now())
	}
	s.mu.Lock()
	for j, h := range hits {
		k, ok := s.keys.get(h.Key)
		if !ok {
			if s.keys.len() >= 2*SyncKeys { // the view forgets first: a guard
				full = true
				continue
			}
			k = s.keys.add(h.Key)
			k.lease, k.fresh = leaseOf(h, KeyState{}, 0, replicas), replicas > 1
		}
		k.hit = s.keys.shape(h)
		s.markDirty(h.Key, k)
		passed := out[j].Counted && allowed(h, out[j])
		switch took := taken&(1<<j) != 0; {
		case passed && !took:
			k.spent++
		case !passed && took:
			k.spent = max(0, k.spent-1)
		}
		if passed && replicas > 1 {
			if step, ok := ownShare(h, replicas); ok {
				k.ownTAT = max(k.ownTAT, nowM).add(step)
			}
		}
		if replicas > 1 && earlyDue(k) {
			k.early = true
			early = append(early, h.Key)
		}
	}
	s.mu.Unlock()
	if len(early) > 0 {
		s.spawn(func() { s.exchangeEarly(early) })
	}
	if full {
		s.dropped.Inc()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// ask exchanges the keys of hits[idx] with the store now, if the view
// would still pass them. It returns the refusals of the keys whose new
// lease is 0 (refused until one more request could be leased; when one
// is enforced the request is refused, nothing counted). Otherwise the
// hits take their share of the new leases before the requests waiting on
// this ask are let go (taken, bit j as hitOnce marks it): the asker's own
// hit is the first of the lease, so the waiting requests cannot spend the
// whole lease and the asker pass on the view past it (the burst of 40
// over two replicas that passed 17 of a GCRA limit of 10, 10 of them on
// one replica).
func (s *syncer) ask(ctx context.Context, hits []Hit, idx []int) (refusals []refusal, taken uint64) {
	start := s.view.now()
	nowMS := float64(start.UnixMilli())
	sel := make([]Hit, len(idx))
	for i, j := range idx {
		sel[i] = hits[j]
	}
	views := make([]KeyState, len(sel))
	s.view.snapshot(sel, views)
	keys := make(map[string]bool, len(idx))
	for i, h := range sel {
		if remaining(h, views[i], nowMS) > 0 {
			keys[h.Key] = true
		}
	}
	if len(keys) == 0 {
		return nil, 0 // the view refuses them anyway
	}
	s.asks.Add(float64(len(keys)))
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancel()
	only := make([]string, 0, len(keys))
	for key := range keys {
		only = append(only, key)
	}
	got, at, calls, err := s.exchange(ctx, only, true)
	s.commands.Add(float64(calls))
	if err != nil || at.IsZero() {
		return s.holdToLease(hits, keys), 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, j := range idx {
		h := hits[j]
		if k, ok := s.keys.get(h.Key); ok && keys[h.Key] && k.lease <= k.spent {
			// Refused locally until one more request could be leased
			// (spentCount's wait): no ask per request meanwhile. From
			// when the ask was sent, so that a late answer never makes
			// the replica refuse (and, a fixed window, count) requests
			// past the store's window's end: those ask again.
			c := spentCount(h, got[h.Key], at)
			k.refuseUntil = momentOf(start).add(max(c.RetryAfter, c.TTL))
			refusals = append(refusals, refusal{j, c})
		}
	}
	if refusesRequest(hits, refusals) {
		return refusals, 0
	}
	for j, h := range hits {
		if k, ok := s.keys.get(h.Key); ok && j < 64 {
			k.spent++
			taken |= 1 << j
		}
	}
	return refusals, taken
}

// holdToLease decides the hits of a request whose ask (of keys) failed.
// While the rounds reach the store (roundsFailing unset), it is slow, not
// down, and the replica is held to its lease, or to its own share of the
// limit (ownShareRoom), whichever is more: a key whose lease is spent and
// whose own share is spent is refused (returned: its refusal refuses the
// request unless its rule is observed); within its own share the view
// decides. Either way the key
// asks no more for one interval (its hits decided so meanwhile), and the
// next round asks for its lease (syncKey.wants) under the rounds' longer
// timeout and ends the wait when it grants one (fresh attack
// pass 14 R-SLOW-1: with a store answering in 25 ms of a 30 ms timeout
// most asks failed, the view decided on counts a round trip old on every
// replica, and three replicas passed about 150 of a limit of 50 per
// window). In an outage (the last round failed too, and every call has
// failed for outageAfter) it returns none and the view decides: a replica
// limits on its own counts rather than refusing every key past its share
// until the store is back. The first failed asks of an outage are taken
// for a slow store until then: at most outageAfter (1 s by default), and
// within its own share a client passes meanwhile.
func (s *syncer) holdToLease(hits []Hit, keys map[string]bool) []refusal {
	now := s.view.now()
	nowM := momentOf(now)
	if s.outage(nowM) {
		return nil
	}
	var refusals []refusal
	replicas := s.replicas.Load()
	s.mu.Lock()
	for j, h := range hits {
		if k, ok := s.keys.get(h.Key); ok && keys[h.Key] && k.lease <= k.spent {
			k.refuseUntil, k.wants = nowM.add(s.interval), true
			s.markDirty(h.Key, k)
			if !ownShareRoom(h, k, nowM, replicas) {
				refusals = append(refusals, refusal{j, leaseRefusal(h)})
			}
		}
	}
	s.mu.Unlock()
	return refusals
}

// outage reports whether the store is taken for down at now: the last
// round failed, and every call (asks aside) has failed for outageAfter,
// outageCalls of them at least. One failed
// round of a store that still answers (a chunk past redis.read_timeout
// behind a queue of asks) is not an outage (fresh attack pass 16 R1: with
// the store 60 ms away, a round timing out now and then flipped the
// replicas to their own counts for 184-444 ms at a time, and a window
// passed 93-121 of 50).
func (s *syncer) outage(now moment) bool {
	if !s.roundsFailing.Load() {
		return false
	}
	since := moment(s.failingSince.Load())
	return since != 0 && now.sub(since) > s.outageAfter() && s.failedCalls.Load() >= outageCalls
}

// outageCalls is how many calls in a row, at least, must have failed for
// the store to be taken for down (besides outageAfter): a second of
// failures is a few calls when each waits out its deadline (a store 60 ms
// away and loaded makes about five a second), and a store that loses some
// answers fails a few in a row now and then (fresh attack pass 19: with
// three answers in ten lost and the store 60 ms away, a run of four or
// five lost answers made a replica decide alone, and a window passed 117
// of 50). Eight in a row: 0.3^8 < 10^-4 of a store losing three answers in
// ten; a store that is down fails eight within one to two seconds (the
// rounds' calls, their parked calls and the idle registration each count).
const outageCalls = 8

// answered records that the store answered a call: the failures, if
// any, have ended (failingSince).
func (s *syncer) answered() {
	s.failingSince.Store(0)
	s.failedCalls.Store(0)
}

// unanswered records a call run under the round timeout (a round's, a
// parked call's, an early exchange's, an idle registration; not an ask)
// that the store did not answer: the first of a run of failures starts
// failingSince.
func (s *syncer) unanswered() {
	s.failedCalls.Add(1)
	s.failingSince.CompareAndSwap(0, max(int64(momentOf(s.view.now())), 1))
}

// outageAfter is how long without an answer makes a failed round an
// outage: two rounds' worth (interval + roundTimeout each), at least a
// second.
func (s *syncer) outageAfter() time.Duration {
	return max(time.Second, 2*(s.interval+s.roundTimeout))
}

// ownShare is, for h among replicas, the emission interval (step) of this
// replica's own share of the limit, floor(limit / replicas) per window, as
// a GCRA; ok is false when that share is 0 (a limit below the replicas:
// the store decides those hits, sync_direct.go).
func ownShare(h Hit, replicas int64) (step time.Duration, ok bool) {
	share := h.Limit / max(replicas, 1)
	if share < 1 {
		return 0, false
	}
	return max(h.Period, h.TTL, time.Millisecond) / time.Duration(share), true
}

// ownShareRoom reports whether the replica may pass one more hit of k on
// its own share (ownShare): its own passes of the key, lease-backed or
// not, as a GCRA of floor(limit / replicas) per window, a burst of
// ownBurst.
// A key whose ask failed while the store answered (holdToLease) passes
// on the view within that share, and is refused past it: a client under
// its limit spread over the replicas (each sees at most its share) is not
// refused because its store is slow (fresh attack pass 15 R01: a client
// at 60 % of a sliding window's limit was refused 36 of 121 requests with
// a store 60 ms away), while a flood, whose own passes spend the share at
// the window's start (the fresh share), is held to the lease. s.mu is
// held.
func ownShareRoom(h Hit, k *syncKey, now moment, replicas int64) bool {
	step, ok := ownShare(h, replicas)
	if !ok {
		return false
	}
	return k.ownTAT.sub(now) <= (ownBurst-1)*step
}

// ownBurst is how many of its own share's hits a replica may pass at once
// on the view while its asks fail (ownShareRoom).
const ownBurst = 2

// leaseRefusal is the refusal of a hit held to its replica's lease
// (holdToLease): to be retried at once, a round may grant a lease at any
// moment, so the deny cache, which keeps a refused key for the refusal's
// RetryAfter, does not keep it (a fixed window's TTL, or a GCRA's or
// sliding window's RetryAfter, of 1 ms).
func leaseRefusal(h Hit) Count {
	if h.Algorithm == GCRA || h.Algorithm == SlidingWindow {
		return Count{RetryAfter: time.Millisecond, ResetAfter: time.Millisecond}
	}
	return Count{N: h.Limit + 1, TTL: time.Millisecond}
}

// round sends every dirty key's view in one round trip, merges the
// store's answer into the view (keeping what the view counted meanwhile)
// and forgets keys whose state has expired. On failure the keys stay
// dirty (their counts go with the next round) and decisions stay local.
// It returns the store's clock (zero on failure) and the store calls
// sent.
func (s *syncer) round(ctx context.Context) (time.Time, int, error) {
	_, at, calls, err := s.exchange(ctx, nil, false)
	return at, calls, err
}

// setReplicas records how many replicas the store counts (at least 1).
// When more have joined, every key's lease is cut to what this replica
// already spent of it: a lease taken while fewer replicas shared the key
// (the whole limit, alone) is not a share of the new count, and the next
// hit of each key asks the store for one (fresh attack pass 8 R02: a
// replica that had been alone kept its whole lease when a second joined,
// and the window passed 18 of a limit of 10). Fewer replicas keep their
// leases: they are smaller than the new share. The caller holds no s.mu.
func (s *syncer) setReplicas(n int64) {
	n = max(n, 1)
	if old := s.replicas.Swap(n); n <= old {
		return
	}
	s.mu.Lock()
	s.keys.cutLeases()
	s.mu.Unlock()
}

// exchange sends the view of every dirty key (only: nil, or the keys
// listed, dirty or not) and merges the answer, as round says; ask leases
// anew (an ask's keys only). It returns the merged states by key (an
// ask's; nil otherwise). The keys go in chunks of syncChunk, up to
// syncInFlight chunks on the wire at once, each under the round timeout (an ask: within its own deadline):
// a round of any size streams, and a failed chunk keeps only its own keys
// dirty (sync_round.go).
func (s *syncer) exchange(ctx context.Context, only []string, ask bool) (map[string]KeyState, time.Time, int, error) {
	select {
	case s.flight <- struct{}{}:
	case <-ctx.Done():
		return nil, time.Time{}, 0, ctx.Err()
	}
	defer func() { <-s.flight }()
	replayed := 0
	if !ask {
		// Calls whose answer was lost first (sync_replay.go): their keys'
		// views go after them.
		n, err := s.replay(ctx)
		replayed = n
		if err != nil {
			s.roundsFailing.Store(true)
		}
	}
	ops := s.collect(only)
	if len(ops) == 0 {
		if only != nil || s.regStore == nil || momentOf(s.view.now()).sub(moment(s.lastReg.Load())) < s.reg.TTL/2 {
			return nil, time.Time{}, replayed, nil
		}
		// Idle: registration alone, every half lifetime, so the others
		// keep counting this replica (and it learns their number).
		ctx, cancel := context.WithTimeout(ctx, s.roundTimeout)
		sent := s.own()
		at, replicas, err := s.regStore.SyncRegister(ctx, nil, nil, s.reg)
		s.learn(at, sent, err)
		cancel()
		s.roundsFailing.Store(err != nil)
		if err != nil {
			s.unanswered()
			return nil, time.Time{}, replayed + 1, err
		}
		s.answered()
		s.lastReg.Store(int64(momentOf(s.view.now())))
		s.setReplicas(replicas)
		return nil, at, replayed + 1, nil
	}
	merged, at, calls, err := s.stream(ctx, ops, ask)
	calls += replayed
	if !ask {
		s.roundsFailing.Store(err != nil)
	}
	if err != nil {
		s.rounds[1].Inc()
	} else {
		s.rounds[0].Inc()
	}
	return merged, at, calls, err
}

// own reads the Limiter's own clock (the view's clock without the store's
// offset when ownNow is unset: tests that build a syncer alone).
func (s *syncer) own() time.Time {
	if s.ownNow != nil {
		return s.ownNow()
	}
	return s.view.now()
}

// learn passes a successful call's store clock to learnClock with when
// the call was sent (on own).
func (s *syncer) learn(at, sent time.Time, err error) {
	if err == nil && !at.IsZero() && s.learnClock != nil {
		s.learnClock(at, sent)
	}
}

// windowRolled reports whether a sliding window's current window at
// nowMS (unix ms, the view's clock) is later than the one base (the
// store's state as last read) was counting in.
func windowRolled(h Hit, base KeyState, nowMS float64) bool {
	w := float64(max(h.Period, time.Millisecond).Milliseconds())
	return base.present() && math.Floor(nowMS/w) > base.Index
}

// sameWindow reports whether got is the fixed window that ends at end
// (store clock, unix ms): ends within half a window (mergeFixed).
func sameWindow(h Hit, end float64, got KeyState) bool {
	w := float64(max(h.TTL.Truncate(time.Millisecond), time.Millisecond).Milliseconds())
	return got.present() && end != 0 && math.Abs(got.End-end) <= w/2
}

// exchangeChunk sends one chunk of ops (registering this replica when
// register), merges the answer into the view and the keys' states (an
// ask also leases anew), and writes the merged states into merged. On
// failure a marked chunk is parked, to be sent again (replay); an
// unmarked one's keys are dirty again.
func (s *syncer) exchangeChunk(ctx context.Context, ops []SyncOp, register, ask bool, merged map[string]KeyState, mergedMu *sync.Mutex) (time.Time, int, error) {
	return s.send(ctx, s.prepare(ops, register, ask), merged, mergedMu)
}

// chunkCall is one chunk of an exchange as it was sent: its ops (the view
// with what is left of a lease, and the leases asked), the view's
// snapshot they were taken from, and what its answer is merged with.
type chunkCall struct {
	ops      []SyncOp
	local    []KeyState // the view's snapshot of each key
	reserved []int64    // what is left of a lease, sent with the view
	leasing  []bool     // the op asks for a lease
	register bool
	ask      bool
	// marker names the call in the store (Registration.Exchange): sent
	// again with it, the call merges nothing twice. Empty: not marked.
	marker string
	since  moment // when it was first sent (view clock)
	parked bool   // parked once (fail): sent again by replay
	// notAfter is the call's last moment to run in the store (the view's
	// clock, the store's as estimated: never behind it): replayFor after
	// it was sent, when a parked call is given up.
	notAfter time.Time
}

// prepare snapshots the view of ops' keys and builds the chunk's call.
func (s *syncer) prepare(ops []SyncOp, register, ask bool) *chunkCall {
	hits := make([]Hit, len(ops))
	for i := range ops {
		hits[i] = ops[i].Hit
	}
	s.mu.Lock()
	for _, h := range hits {
		if k, ok := s.keys.get(h.Key); ok {
			k.inFlight = k.spent
		}
	}
	s.mu.Unlock()
	local := make([]KeyState, len(ops))
	s.view.snapshot(hits, local)
	// A fixed-window view knows its window by the store's end
	// (KeyState.End): one that restarted on its own (End 0) joins or
	// starts the store's window, one still counting in a window the store
	// has ended has its counts dropped (mergeFixed). What is left of a
	// lease reserved in the view's window is sent with the view: the
	// store holds it already. An ask of a fixed window asks the store for
	// the lease, which the store reserves.
	reserved := make([]int64, len(ops))
	replicas := s.replicas.Load()
	viewMS := float64(s.view.now().UnixMilli())
	// leasing: the op asks for a lease (an ask, or a key whose ask failed
	// while the store answered: syncKey.wants).
	leasing := make([]bool, len(ops))
	s.mu.Lock()
	for i := range ops {
		ops[i].Local = local[i]
		k, ok := s.keys.get(ops[i].Hit.Key)
		if replicas > 1 && (ask || (ok && k.wants)) {
			leasing[i] = true
			ops[i].LeaseAmong = replicas
		}
		if a := ops[i].Hit.Algorithm; a == GCRA || a == SlidingWindow {
			// A sliding window's or GCRA's lease: what is left of it goes
			// with the view (reserve), the view counting its passes as
			// they come (lease.go).
			if ok && (k.held || k.fresh) && replicas > 1 {
				reserved[i] = max(0, k.lease-k.inFlight)
				if a == SlidingWindow && k.held && windowRolled(ops[i].Hit, k.base, viewMS) {
					// The window the lease was reserved in has ended:
					// what is left of it is carried into the new window
					// only up to this replica's share of what that window
					// leaves (fresh attack pass 15 R15: carried whole, the
					// replicas' leases and the old window, which still
					// weighs, left a client at 60 % of the limit refused
					// 3-8 requests in a row after the edge).
					if c := leaseOf(ops[i].Hit, local[i], viewMS, replicas); reserved[i] > c {
						k.lease -= reserved[i] - c
						reserved[i] = c
					}
				}
				ops[i].Local = reserve(ops[i].Hit, local[i], reserved[i], viewMS)
			}
			continue
		}
		// The lease's window and the view's are told apart by their ends
		// within half a window (sameWindow), never by equality: the store
		// derives a window's end from its TTL at each answer, so one
		// window's end moves by a millisecond between two answers, and an
		// exact test sent the view without its reservation and put it
		// back later (fresh attack pass 13 R10: 8-16 of 20 passed).
		if ok && local[i].present() && (sameWindow(ops[i].Hit, k.resEnd, local[i]) || (k.fresh && replicas > 1)) {
			reserved[i] = max(0, k.lease-k.inFlight)
			ops[i].Local.N += reserved[i]
		}
	}
	s.mu.Unlock()
	now := s.view.now()
	c := &chunkCall{ops: ops, local: local, reserved: reserved, leasing: leasing, register: register, ask: ask, since: momentOf(now)}
	if s.regStore != nil && s.exchanges != "" {
		c.marker = s.exchanges + strconv.FormatUint(s.seq.Add(1), 36)
		c.notAfter = now.Add(s.replayFor())
	}
	return c
}

// send sends c (a parked call: to resolve it) and merges its answer, as
// exchangeChunk says.
func (s *syncer) send(ctx context.Context, c *chunkCall, merged map[string]KeyState, mergedMu *sync.Mutex) (time.Time, int, error) {
	ops, local, reserved, leasing, ask := c.ops, c.local, c.reserved, c.leasing, c.ask
	calls := 1
	if s.perKey {
		calls = len(ops)
	}
	var replicas int64
	got := make([]KeyState, len(ops))
	// An ask's ctx carries its own deadline (timeout, from before it
	// waited for the exchange in flight), which this does not extend.
	ctx, cancel := context.WithTimeout(ctx, s.roundTimeout)
	var at time.Time
	var err error
	registered := int64(0)
	sent := s.own()
	if s.regStore != nil {
		reg := Registration{Exchange: c.marker, ExchangeTTL: s.markerTTL(), Resolve: c.parked, NotAfter: c.notAfter}
		if c.register {
			reg.ID, reg.Key, reg.TTL = s.reg.ID, s.reg.Key, s.reg.TTL
		}
		at, registered, err = s.regStore.SyncRegister(ctx, ops, got, reg)
	} else {
		at, err = s.store.Sync(ctx, ops, got)
	}
	s.learn(at, sent, err)
	cancel()
	if err != nil {
		if !c.ask {
			// An ask's failure says the store is slower than the
			// request's timeout, not that it is down.
			s.unanswered()
		}
		s.fail(c)
		return time.Time{}, calls, err
	}
	switch {
	case c.parked:
		// Resolved: the keys whose call never ran merge nothing (their
		// view goes with the next exchange, from the base they had).
		ops, local, reserved, leasing, got = ranOnly(ops, local, reserved, leasing, got)
	case slices.ContainsFunc(got, func(g KeyState) bool { return g.Leased < 0 }):
		// The call reached the store past its last moment and did not
		// run: a failure of the call, not of the store, which answered.
		s.answered()
		s.fail(c)
		return time.Time{}, calls, errCallLate
	}
	s.answered()
	if registered > 0 {
		replicas = registered
		s.lastReg.Store(int64(momentOf(s.view.now())))
		s.setReplicas(replicas)
	} else {
		replicas = s.replicas.Load()
	}
	// The view becomes the store's state plus what it counted since the
	// snapshot: the same merge, with the snapshot as the base.
	// A fixed window adopts the store's window, its end included, so the
	// replicas reset together (adoptFixed).
	back := make([]SyncOp, 0, len(ops))
	for i, op := range ops {
		if a := op.Hit.Algorithm; a != GCRA && a != SlidingWindow {
			// The reservation sent is in the answer unless the store
			// dropped the view's counts (their window was over there),
			// or, a call sent again, the window it counted in is over.
			if reserved[i] > 0 && (got[i].Ended || op.Local.End != 0 && !sameWindow(op.Hit, op.Local.End, got[i])) {
				reserved[i] = 0
			}
			s.view.adoptFixed(op.Hit, local[i], got[i], reserved[i]+got[i].Leased)
			continue
		}
		// The view does not count this replica's reservation: the answer
		// less it (sent, and granted by an ask), merged with what the view
		// counted since its snapshot.
		back = append(back, SyncOp{Hit: op.Hit, Base: local[i], Local: unreserve(op.Hit, got[i], op.Local, reserved[i])})
	}
	_, _ = s.view.Sync(ctx, back, make([]KeyState, len(back)))
	now := s.view.now()
	atMS := float64(at.UnixMilli())
	if at.IsZero() {
		atMS = float64(now.UnixMilli())
	}
	observeSync(ops, got)
	if merged != nil {
		mergedMu.Lock()
		for i, op := range ops {
			merged[op.Hit.Key] = got[i]
		}
		mergedMu.Unlock()
	}
	s.mu.Lock()
	for i, op := range ops {
		if k, ok := s.keys.get(op.Hit.Key); ok {
			k.base, k.baseUntil = got[i], momentOf(now).add(got[i].TTL)
			// An ask leases anew (what the view passed while it was on
			// the wire is spent from the new lease); a round only sends
			// counts, so a replica's spending between two asks stays
			// within one lease whatever the rounds.
			if k.fresh && reserved[i] > 0 && !leasing[i] {
				k.fresh, k.resEnd, k.resUntil = false, got[i].End, k.baseUntil
			}
			refilling := op.Hit.Algorithm == GCRA || op.Hit.Algorithm == SlidingWindow
			if refilling && (reserved[i] > 0 || got[i].Leased > 0) {
				k.fresh, k.held = false, true
			}
			if leasing[i] {
				k.fresh = false
				k.spent = max(0, k.spent-k.inFlight)
				k.lease = leaseOf(op.Hit, got[i], atMS, replicas)
				if refilling && op.LeaseAmong > 0 {
					// The lease the store reserved, and what was left of
					// the one held before (sent with the view).
					k.lease = reserved[i] + got[i].Leased
				}
				if !refilling {
					// The lease the store reserved, and what was left of
					// the one reserved before (sent with the view).
					k.lease, k.resEnd, k.resUntil = reserved[i]+got[i].Leased, got[i].End, k.baseUntil
					if k.lease == 0 {
						k.resEnd = 0
					}
				}
				switch {
				case ask:
					k.wants = false
				case k.lease > k.spent:
					// A round granted the lease a failed ask wanted: the
					// wait holdToLease set ends.
					k.refuseUntil, k.wants = 0, false
				}
				// A round that leased nothing leaves the key wanting: the
				// next round asks again, and meanwhile its own share
				// decides (ownShareRoom).
			}
			if got[i].Ended {
				// A call sent again counted, and reserved its lease, in a
				// window that is over: no lease of this replica is
				// reserved in the store's window, so it holds none and
				// its next hit asks (fresh attack pass 18 R01: taken for
				// reserved in the new window, the lease left passed
				// there unreserved while the others leased the whole
				// limit).
				k.lease, k.spent, k.fresh, k.resEnd, k.resUntil = 0, 0, false, 0, 0
			}
		}
	}
	s.mu.Unlock()
	return at, calls, nil
}
