// Package ratelimit decides whether a request passes the rate-limit rules of
// docs/rate-limiting.md: rules per scope (ip, user, escola, route), fixed_window or
// GCRA, enforce/observe/off, all rules of a request in ONE store round trip,
// a local deny cache, fail-open under a hard deadline with a circuit
// breaker, incident relax factors, and the 429 of RFC 6585 with the
// draft-ietf-httpapi-ratelimit-headers fields and an RFC 9457 problem body.
//
// Stores: RedisStore (go-redis), RESTStore (Upstash REST) and MemoryStore
// (embedded). See docs/rate-limiting.md.
package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/internal/breaker"
	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/internal/outagelog"
	"github.com/olp-edu/borda/internal/startstop"
	"github.com/olp-edu/borda/keyspace"
)

// Limiter decides requests against the configured rules. It is safe for
// concurrent use; Reload swaps the rules atomically.
type Limiter struct {
	ks        keyspace.Keyspace
	store     Store
	memory    bool         // store is the embedded store: no deadline, no breaker
	local     *MemoryStore // the local limits of on_store_error (fallback)
	onError   Fallback
	timeout   time.Duration
	relaxPoll time.Duration
	breaker   *breaker.Breaker
	rules     atomic.Pointer[ruleset]
	relax     atomic.Pointer[relaxState]
	deny      *denyCache
	m         *metrics
	errs      [3]prometheus.Counter // store errors: timeout, error, breaker_open
	log       *slog.Logger
	now       func() time.Time
	// skew is the store's clock minus ours (ns), as the store's replies
	// showed (learnSkew): it names clock-aligned keys and their reset on
	// the store's time, so a replica whose clock is off counts into the
	// same minute. skewAt is when (our clock, unix ns) that sample came.
	skew, skewAt atomic.Int64

	probing atomic.Bool // Start runs the breaker probe off the request path
	// failOpen is fallback's budget of requests let through unchecked on
	// a failed call (failOpenBudget).
	failOpen failOpenBudget
	lastLog  atomic.Int64 // unix ns of the last store-error log line

	bg startstop.Runner // the relax poller, the breaker probe and the sync rounds (background.go)

	// sync decides on a local view synchronized every Options.Sync; nil:
	// every decision is a store round trip.
	sync *syncer
	// syncOutage logs failing sync rounds (one every rate_limits.sync, 50
	// ms in production) once, then a summary a minute, then their end.
	syncOutage *outagelog.Outage

	dists distributions // the distribution counters by rule (dist.go)
}

const (
	errTimeout = iota
	errStore
	errBreakerOpen
)

// errBreakerOpenState is returned by the store call while the breaker is
// open (the store is not called).
var errBreakerOpenState = errors.New("ratelimit: store breaker open")

// New returns a Limiter deciding opts.Rules, keys built by ks, counting
// in store, metrics registered on reg (collectors already registered
// there are reused). Errors: a nil store, a keyspace without prefix, a
// registration conflict, a Timeout or RelaxPoll that is not positive
// (their defaults are the configuration's: rate_limits.timeout and
// rate_limits.relax_poll), or a Rule with an impossible value (unknown
// scope, algorithm or mode; a limit or window that is not positive). The
// rules of a file are validated by configs, which names each field. Call
// Start for the relax poller and the breaker probe, and Stop at shutdown.
func New(opts Options, ks keyspace.Keyspace, store Store, reg prometheus.Registerer, logger *slog.Logger) (*Limiter, error) {
	if store == nil {
		return nil, errors.New("creating the rate limiter: store is nil")
	}
	if ks.Prefix() == "" {
		return nil, errors.New("creating the rate limiter: keyspace has no prefix")
	}
	if opts.Timeout <= 0 || opts.RelaxPoll <= 0 {
		return nil, fmt.Errorf("creating the rate limiter: Timeout (%s) and RelaxPoll (%s) must be positive", opts.Timeout, opts.RelaxPoll)
	}
	if opts.OnStoreError > LocalIP {
		return nil, fmt.Errorf("creating the rate limiter: unknown on_store_error %v", opts.OnStoreError)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("registering rate-limit metrics: %w", err)
	}
	rs, err := compile(opts.Rules, m)
	if err != nil {
		return nil, fmt.Errorf("creating the rate limiter: %w", err)
	}
	_, memory := store.(*MemoryStore)
	l := &Limiter{
		ks:        ks,
		store:     store,
		memory:    memory,
		local:     NewMemoryStore(0),
		onError:   opts.OnStoreError,
		failOpen:  failOpenBudget{size: float64(max(opts.BreakerFailures, 1)), per: max(opts.BreakerOpenFor, time.Second)},
		timeout:   opts.Timeout,
		relaxPoll: opts.RelaxPoll,
		deny:      newDenyCache(opts.DenyCacheSize),
		m:         m,
		log:       logger.With("component", "ratelimit"),
		now:       clock.Or(opts.Clock).Now,
	}
	clk := clock.Or(opts.Clock)
	l.syncOutage = outagelog.New(l.log, outagelog.Options{Every: breakerSummaryEvery, CountKey: "rounds", Clock: clk})
	l.local.SetClock(clk)
	if opts.Sync > 0 {
		syncStore, ok := store.(Syncer)
		if !ok {
			return nil, fmt.Errorf("creating the rate limiter: store %T cannot synchronize (rate_limits.sync)", store)
		}
		timeout := max(l.timeout, min(opts.Sync, time.Second))
		reg := Registration{ID: replicaID(), Key: ks.RateLimitReplicas(), TTL: max(10*opts.Sync, 2*time.Second)}
		l.sync = newSyncer(syncStore, opts.Sync, timeout, clock.Func(l.storeNow), m, reg)
		l.sync.ownNow, l.sync.learnClock = l.now, l.learnSkew
		l.sync.exchanges = ks.RateLimitExchange(reg.ID)
		if rs, ok := store.(*RedisStore); ok && rs.cluster {
			l.sync.perKey = true
		}
	}
	l.errs = [3]prometheus.Counter{
		m.storeErrors.WithLabelValues("timeout"),
		m.storeErrors.WithLabelValues("error"),
		m.storeErrors.WithLabelValues("breaker_open"),
	}
	outage := outagelog.New(l.log, outagelog.Options{Every: breakerSummaryEvery, ForKey: "open_for", CountKey: "probes", Clock: clk})
	l.breaker = breaker.New(breaker.Options{
		Failures: max(opts.BreakerFailures, 1),
		OpenFor:  max(opts.BreakerOpenFor, time.Millisecond),
		Clock:    clk,
		OnStateChange: func(from, to breaker.State) {
			// An outage of the store flaps the breaker open/half-open every
			// open_for (2 s): that logged a warn pair per probe, about 60
			// lines a minute. The first open, a summary a minute and the
			// close are warned; the pairs between go to debug.
			switch to {
			case breaker.StateOpen:
				outage.Begin(breakerOpenedMsg(l.onError.decidesLocally(true)), "from", from.String())
			case breaker.StateHalfOpen:
				outage.Repeat("rate-limit store breaker still open; probing the store")
			case breaker.StateClosed:
				outage.End("rate-limit store breaker closed: decisions resume")
			}
		},
	})
	l.dists.attach(rs)
	l.rules.Store(rs)
	return l, nil
}

// Reload swaps the rules for rules (on SIGHUP). Rules with an impossible
// value are refused with the error of New and the current rules stay.
// The store, timeout and breaker settings are not reloaded. The deny cache
// is cleared, so a raised limit applies at once.
func (l *Limiter) Reload(rules []Rule) error {
	rs, err := compile(rules, l.m)
	if err != nil {
		return fmt.Errorf("reloading rate-limit rules: %w", err)
	}
	l.dists.attach(rs)
	l.rules.Store(rs)
	l.deny.purge()
	l.log.Info("rate-limit rules reloaded", "rules", len(rs.rules))
	return nil
}

// Decide counts one request of s against every rule that applies to
// s.Route and returns one Decision per rule, in configuration order. It
// never returns an error: a store call that fails or passes
// rate_limits.timeout yields OutcomeError decisions (the request passes)
// unless on_store_error is local; while the breaker is open every rule is
// decided in process on its local limit (unless on_store_error is allow,
// where it fails open too). A route
// no rule covers costs no store call; so does a request refused from the
// local deny cache (its Verdict then lists the refusing rules and the
// skipped ones only).
func (l *Limiter) Decide(ctx context.Context, s Subject) Verdict {
	rs := l.rules.Load()
	rules := rs.forRoute(s.Route)
	if len(rules) == 0 {
		return Verdict{}
	}
	now := l.now()
	storeNow := now.Add(time.Duration(l.skew.Load()))
	relax := l.relax.Load()
	ds := make([]Decision, len(rules))
	hits := make([]Hit, 0, len(rules))
	pending := make([]int, 0, len(rules))
	denied := false
	for i, r := range rules {
		d := &ds[i]
		d.Rule, d.Scope, d.Window = r.name, r.scope, r.window
		d.Limit = relax.apply(r.name, r.limit, now)
		if r.algorithm == GCRA {
			d.Limit = gcraLimit(d.Limit, r.limit, r.window)
		}
		subject := r.subject(s)
		if subject == "" {
			d.Outcome = OutcomeSkip
			continue
		}
		h, reset := r.hit(l.ks, subject, d.Limit, storeNow)
		if !r.observe {
			if until, ok := l.deny.get(h.Key, now); ok {
				d.Outcome, d.RetryAfter, d.ResetAfter = OutcomeBlock, until.Sub(now), until.Sub(now)
				denied = true
				continue
			}
		}
		d.ResetAfter = reset
		hits = append(hits, h)
		pending = append(pending, i)
	}
	switch {
	case denied:
		kept := ds[:0]
		for _, d := range ds {
			if d.Outcome == OutcomeSkip || d.Outcome == OutcomeBlock {
				kept = append(kept, d)
			}
		}
		ds = kept
	case len(hits) > 0:
		counts := make([]Count, len(hits))
		var at time.Time
		var err error
		if direct := l.sync.direct(hits); direct != nil {
			// A rule whose limit is below the replicas has no share to
			// spend locally: its hits take the store's round trip, as
			// with sync: 0, the others the local view (syncDirect).
			at, err = l.hitSplit(ctx, rules, ds, hits, pending, counts, direct)
			hits, pending, counts = keepUnfailed(hits, pending, counts, direct, err)
			err = nil
		} else if l.sync != nil {
			// Decided on the local view, on the estimate of the store's
			// clock: the sync rounds correct the estimate, not this.
			l.sync.hit(ctx, hits, counts)
		} else {
			at, err = l.hitStore(ctx, hits, counts)
			if err == nil {
				observeHits(hits, counts) // the sync rounds count theirs (observeSync)
			}
		}
		if err != nil {
			l.fallback(rules, ds, hits, pending, breakerRefused(err))
		} else {
			// The store's clock decided; a clock-aligned window's reset was
			// computed on the estimate of it: correct both by what it said.
			corr := time.Duration(0)
			if !at.IsZero() { // a Store that does not say its time keeps the estimate
				l.learnSkew(at, now)
				corr = storeNow.Sub(at)
			}
			for j, i := range pending {
				if rules[i].aligned {
					ds[i].ResetAfter = max(ds[i].ResetAfter+corr, time.Millisecond)
				}
				rules[i].evaluate(&ds[i], counts[j], relax.apply(rules[i].name, rules[i].observeLimit, now))
			}
		}
	}
	for i := range ds {
		d := &ds[i]
		if d.Outcome == "" {
			continue // undecided: hitSplit's direct rules of a request the view refused
		}
		r := ruleNamed(rules, d.Rule)
		r.outcomes[outcomeIndex(d.Outcome)].Inc()
		if d.Outcome == OutcomeBlock {
			d.Message = expandMessage(r.message, d.RetryAfter)
			if !denied && d.RetryAfter > 0 {
				l.deny.add(hitKeyOf(hits, pending, i), now.Add(d.RetryAfter))
			}
		}
	}
	return Verdict{Decisions: slices.DeleteFunc(ds, func(d Decision) bool { return d.Outcome == "" })}
}

// replicaID returns a random id naming this replica in the replica
// registry (16 hex digits).
func replicaID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// skewHold is how long the least offset sample stands against larger
// ones (learnSkew).
const skewHold = 10 * time.Second

// learnSkew takes the store's clock at (the time a script read) from a
// call sent at sent (the Limiter's own clock). The store read its clock
// somewhere within the round trip; a sample, at − sent, assumes it read it
// on arrival, so it is the true offset plus the request's way: never
// behind the store's clock. The offset kept is the least sample of the
// last skewHold (a later sample replaces it only when it is not larger,
// or once the kept one is that old), so a call that queued on its way (a
// busy store, a round held behind another) does not move the estimate
// ahead by its wait, and the estimate does not jump with each sample.
// Behind is the unsafe side: taking the answer's arrival (at − answered)
// put a synchronizing replica's view a one-way latency behind the store,
// and with a store 25 ms away a sliding window's view counted the first
// passes of each window into the window before, where they weigh less
// (58-80 of a limit of 50 passed); the midpoint of the round trip
// (Cristian's algorithm) is exact only when both ways take as long, and
// passed 58-59 when the answer's way took it all. Ahead, a pass late in a
// window counts into the next: the limit holds (44-48 of 50 in the same
// runs). A store clock stepped forward is followed within skewHold (the
// estimate is behind meanwhile); stepped back, at once. Safe for
// concurrent use (two samples racing keep one of them).
func (l *Limiter) learnSkew(at, sent time.Time) {
	sample, when := int64(at.Sub(sent)), sent.UnixNano()
	if last := l.skewAt.Load(); last == 0 || sample <= l.skew.Load() || when-last > int64(skewHold) {
		l.skew.Store(sample)
		l.skewAt.Store(when)
	}
}

// storeNow is the Limiter's estimate of the store's clock: its own clock
// plus the offset the last store reply showed.
func (l *Limiter) storeNow() time.Time {
	return l.now().Add(time.Duration(l.skew.Load()))
}

// evaluate turns a store Count into d's outcome; observeLimit is the
// (relaxed) observe_limit, 0 when none.
func (r *rule) evaluate(d *Decision, c Count, observeLimit int64) {
	over := OutcomeBlock
	if r.observe {
		over = OutcomeWouldBlock
	}
	if r.algorithm == GCRA || r.algorithm == SlidingWindow {
		d.Remaining, d.ResetAfter = c.Remaining, c.ResetAfter
		d.Outcome = OutcomeAllow
		if !c.Allowed {
			d.Outcome, d.RetryAfter = over, c.RetryAfter
		}
		return
	}
	if !r.aligned {
		d.ResetAfter = c.TTL
	}
	d.Remaining = max(0, d.Limit-c.N)
	switch {
	case c.N > d.Limit:
		d.Outcome, d.RetryAfter = over, d.ResetAfter
	case observeLimit > 0 && c.N > observeLimit:
		d.Outcome, d.RetryAfter = OutcomeWouldBlock, d.ResetAfter
	default:
		d.Outcome = OutcomeAllow
	}
}

// fallback decides the pending rules after a store failure (an error, the
// deadline passed, or breakerOpen: the breaker refused the call): every
// rule in process, on the Limiter's clock, per instance, when the
// Fallback says so (Fallback.decidesLocally), so load that slows the store
// cannot switch limiting off; otherwise every rule fails open.
//
// Under local_while_open, "one failed call passes" is a budget, not a
// rate: at most breaker.failures requests pass unchecked per
// breaker.open_for (failOpenBudget); the rest, however many are in flight
// at once, are decided in process (fresh attack pass 8 R01: 20 concurrent requests
// whose calls all timed out at once passed a limit of 1 before the
// breaker could count 5).
func (l *Limiter) fallback(rules []*rule, ds []Decision, hits []Hit, pending []int, breakerOpen bool) {
	local := l.onError.decidesLocally(breakerOpen)
	if !local && l.onError == LocalWhileOpen && !l.failOpen.take(l.now()) {
		local = true
	}
	if !local {
		for _, i := range pending {
			ds[i].Outcome = OutcomeError
		}
		return
	}
	// decided together, as the store decides them (Store.Hit)
	counts := make([]Count, len(hits))
	_, _ = l.local.Hit(context.Background(), hits, counts) // the embedded store does not fail
	for j, i := range pending {
		rules[i].evaluate(&ds[i], counts[j], 0)
	}
}

// hitStore runs one store round trip under the breaker and the deadline,
// and returns the store's clock at the decision.
func (l *Limiter) hitStore(ctx context.Context, hits []Hit, out []Count) (time.Time, error) {
	if l.memory {
		return l.store.Hit(ctx, hits, out)
	}
	if l.probing.Load() && l.breaker.State() != breaker.StateClosed {
		l.errs[errBreakerOpen].Inc()
		return time.Time{}, errBreakerOpenState
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
	start := time.Now()
	var at time.Time
	err := l.breaker.Execute(func() error {
		var err error
		at, err = l.hitWithin(cctx, hits, out)
		return err
	})
	timedOut := cctx.Err() != nil || isTimeout(err)
	cancel()
	if breakerRefused(err) {
		l.errs[errBreakerOpen].Inc()
		return time.Time{}, err
	}
	l.m.storeDuration.Observe(time.Since(start).Seconds())
	l.m.rlCommands.Inc()
	if err != nil {
		if timedOut {
			l.errs[errTimeout].Inc()
		} else {
			l.errs[errStore].Inc()
		}
		l.logStoreError(err)
	}
	return at, err
}

// hitWithin runs the store call but returns by ctx's deadline whatever the
// store does: a client library that overruns its context (a connection
// handshake, a pool wait) cannot hold the request. The call then finishes
// in the background, bounded by the client's own timeouts, writing into its
// own buffer; hits is never modified after Decide builds it.
func (l *Limiter) hitWithin(ctx context.Context, hits []Hit, out []Count) (time.Time, error) {
	type result struct {
		at  time.Time
		err error
	}
	done := make(chan result, 1)
	buf := make([]Count, len(out))
	go func() {
		at, err := l.store.Hit(ctx, hits, buf)
		done <- result{at, err}
	}()
	select {
	case r := <-done:
		if r.err == nil {
			copy(out, buf)
		}
		return r.at, r.err
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("waiting for the rate-limit store: %w", ctx.Err())
	}
}

// breakerRefused reports whether err is the breaker's refusal: the store
// was not asked (open, or half-open with its probe under way).
func breakerRefused(err error) bool {
	return errors.Is(err, errBreakerOpenState) || errors.Is(err, breaker.ErrOpen) ||
		errors.Is(err, breaker.ErrTooManyRequests)
}

// isTimeout reports whether err is a deadline: the context's, or the
// connection deadline go-redis derives from it (which may fire a moment
// before the context's timer).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// breakerOpenedMsg is what the breaker's opening logs: what requests get
// while it stays open, as on_store_error says (fresh attack pass 8: it
// said "fail-open" under local_while_open too).
func breakerOpenedMsg(local bool) string {
	if local {
		return "rate-limit store breaker opened: every rule decides on this instance's own counts until it closes"
	}
	return "rate-limit store breaker opened: requests pass without a decision (fail-open) until it closes"
}

// breakerSummaryEvery is how often an open store breaker is summarized
// in the log while it stays open (how long, how many probes).
const breakerSummaryEvery = time.Minute

// logStoreError logs at most one line per second: a per-key decision
// that met a store error, which fails open.
func (l *Limiter) logStoreError(err error) {
	l.logStoreErrorAs("rate-limit store failed; failing open", err)
}

// syncRoundFailedMsg is what a failed sync round logs: the replica keeps
// deciding on its local counts (docs/rate-limiting.md), it does not fail
// open.
const syncRoundFailedMsg = "rate-limit sync round failed; deciding on local counts until the store answers"

// logSyncRoundError logs a failed sync round. When the replica decides
// on its own counts (it is alone, or the store is taken for down: the
// syncer's outage), the first failed round of that outage at warn, then a
// summary a minute (it was one line a second, ~60 a minute). Otherwise,
// several replicas still sharing counts through the rounds that succeed
// (a slow or lossy store), the round logs at debug: it said "deciding on
// local counts" at warn for every failure, which was not what the
// replicas did, four lines a second of a flaky store (fresh attack pass
// 20 R07); borda_ratelimit_sync_rounds_total{result="error"} counts them.
func (l *Limiter) logSyncRoundError(err error) {
	if l.sync.replicas.Load() > 1 && !l.sync.outage(momentOf(l.sync.view.now())) {
		l.log.Debug(syncRoundRetriedMsg, "err", err)
		return
	}
	l.syncOutage.Repeat(syncRoundFailedMsg, "err", err)
}

// syncRoundRetriedMsg is what a failed sync round logs (at debug) while
// the replicas still share counts: the counts go with the next round.
const syncRoundRetriedMsg = "rate-limit sync round failed; its counts go with the next round"

// syncRoundsResumed is what the first good round after failed ones logs.
const syncRoundsResumed = "rate-limit sync rounds reach the store again; counts are shared across replicas"

// logStoreErrorAs warns msg with err at most once a second (on the
// Limiter's clock): a store outage fails every request open.
func (l *Limiter) logStoreErrorAs(msg string, err error) {
	now := l.now().UnixNano()
	last := l.lastLog.Load()
	if now-last < int64(time.Second) || !l.lastLog.CompareAndSwap(last, now) {
		return
	}
	l.log.Warn(msg, "err", err)
}

func ruleNamed(rules []*rule, name string) *rule {
	for _, r := range rules {
		if r.name == name {
			return r
		}
	}
	return rules[0] // unreachable: every decision comes from rules
}

// hitKeyOf returns the key of decision i's hit.
func hitKeyOf(hits []Hit, pending []int, i int) string {
	for j, p := range pending {
		if p == i {
			return hits[j].Key
		}
	}
	return ""
}

// KeysIdentity reports whether a rule that applies to route (enforce or
// observe) counts the verified identity: scope user or escola. The gateway
// reads a form body for an access_token only on such routes (docs/edge.md,
// Identity). Safe for concurrent use; follows Reload.
func (l *Limiter) KeysIdentity(route string) bool {
	for _, r := range l.rules.Load().forRoute(route) {
		if r.scope == ScopeUser || r.scope == ScopeEscola {
			return true
		}
	}
	return false
}
