package ratelimit

import (
	"context"
	"errors"
	"slices"
	"time"
)

// A rule whose limit is below the number of synchronizing replicas leaves
// no replica a share of one request (floor(limit / N) = 0). Leasing one
// to each while anything remained let N replicas pass N of a limit of 1
// in every window a client waited out (fresh attack pass 7 R02/R03: 2 of
// 1 with two replicas, burst after burst). Such a rule's hits are decided
// by the store's round trip, exactly as with sync: 0 (docs/rate-limiting.md,
// "Quota leasing"): a login or password-reset limit of 1 a minute is
// exact at the cost of one round trip per request of that rule.

// direct returns the indexes of hits that the store decides directly
// (syncDirect), or nil when none is, or s is nil.
func (s *syncer) direct(hits []Hit) []int {
	if s == nil {
		return nil
	}
	replicas := s.replicas.Load()
	if replicas < 2 {
		return nil
	}
	var idx []int
	for j, h := range hits {
		if h.Limit < replicas {
			idx = append(idx, j)
		}
	}
	return idx
}

// hitSplit decides hits[direct] by the store's round trip (hitStore,
// under the breaker and the deadline; on an error they fall back as every
// store error does, and are reported failed) and the other hits on the
// sync view, together (Store.Hit): a request refused by either part
// counts into no key of the other that had room.
//
//  1. The view, without asking the store (syncer.refusesLocally): when
//     it refuses, the direct hits are not sent (errDecidedOnView: their
//     rules are left out of the Verdict, as a deny-cache refusal leaves
//     out the rules it did not ask).
//  2. The direct hits: when the store (or its fallback) refuses them,
//     the view's hits are answered as the view stands, counted nowhere,
//     and no lease is asked for (fresh attack pass 22 R01: the view
//     counted them first, and one address's refused logins filled a
//     route-wide window of 20 over two replicas; pass 23 RL-02: its
//     concurrent requests asked for leases the store then kept).
//  3. The view, with its leases and asks: when it refuses now, the store
//     takes back the direct hits it counted (uncount.go).
//
// counts receives every hit's count.
func (l *Limiter) hitSplit(ctx context.Context, rules []*rule, ds []Decision, hits []Hit, pending []int, counts []Count, direct []int) (time.Time, error) {
	isDirect := make(map[int]bool, len(direct))
	for _, j := range direct {
		isDirect[j] = true
	}
	rest, rc := make([]Hit, 0, len(hits)-len(direct)), make([]Count, 0, len(hits)-len(direct))
	var restIdx []int
	for j, h := range hits {
		if !isDirect[j] {
			rest, restIdx = append(rest, h), append(restIdx, j)
			rc = append(rc, Count{})
		}
	}
	defer func() {
		for n, j := range restIdx {
			counts[j] = rc[n]
		}
	}()
	if len(rest) > 0 && l.sync.refusesLocally(rest, rc) {
		return time.Time{}, errDecidedOnView
	}
	dh := make([]Hit, len(direct))
	dp := make([]int, len(direct))
	for n, j := range direct {
		dh[n], dp[n] = hits[j], pending[j]
	}
	dc := make([]Count, len(dh))
	at, err := l.hitStore(ctx, dh, dc)
	if err != nil {
		l.fallback(rules, ds, dh, dp, breakerRefused(err))
		if slices.ContainsFunc(dp, func(i int) bool { return ds[i].Outcome == OutcomeBlock }) {
			return at, err
		}
	} else if requestRefused(dh, dc) {
		observeHits(dh, dc)
		for n, j := range direct {
			counts[j] = dc[n]
		}
		return at, nil
	}
	if len(rest) > 0 {
		if p := l.sync.prepareHit(ctx, rest, rc); !p.done {
			l.sync.commit(rest, rc, p)
		}
		if err == nil && requestRefused(rest, rc) {
			l.uncountDirect(dh, dc, at)
		}
	}
	if err == nil {
		observeHits(dh, dc)
		for n, j := range direct {
			counts[j] = dc[n]
		}
	}
	return at, err
}

// uncountDirect takes back, in the store, the direct hits it counted
// with room for a request the view then refused (hitSplit's third step),
// within the request's timeout; a failure leaves them counted (logged as
// a store error).
func (l *Limiter) uncountDirect(dh []Hit, dc []Count, at time.Time) {
	u, ok := l.store.(uncounter)
	if !ok {
		return
	}
	var back []Hit
	var backAt []time.Time
	for n, h := range dh {
		if dc[n].Counted && allowed(h, dc[n]) {
			back, backAt = append(back, h), append(backAt, at)
			dc[n].Counted = false
		}
	}
	if len(back) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	if err := u.uncount(ctx, back, backAt); err != nil {
		l.logStoreError(err)
	}
}

// errDecidedOnView is hitSplit's: the view refused the request, its
// direct hits were not sent, their rules are left undecided.
var errDecidedOnView = errors.New("ratelimit: refused on the view")

// keepUnfailed drops from hits, pending and counts the direct hits when
// err says their round trip failed (fallback decided them already) or
// was not made (errDecidedOnView: they stay undecided).
func keepUnfailed(hits []Hit, pending []int, counts []Count, direct []int, err error) ([]Hit, []int, []Count) {
	if err == nil {
		return hits, pending, counts
	}
	isDirect := make(map[int]bool, len(direct))
	for _, j := range direct {
		isDirect[j] = true
	}
	var h []Hit
	var p []int
	var c []Count
	for j := range hits {
		if !isDirect[j] {
			h, p, c = append(h, hits[j]), append(p, pending[j]), append(c, counts[j])
		}
	}
	return h, p, c
}
