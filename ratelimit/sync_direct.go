package ratelimit

import (
	"context"
	"errors"
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

// hitSplit decides the hits the view decides first, then hits[direct] by
// the store's round trip (hitStore, under the breaker and the deadline;
// on an error they fall back as every store error does, and are reported
// failed). counts receives every hit's count. When the view refuses the
// request, the direct hits are not sent (errDecidedOnView): a request
// counts into no key with room (Store.Hit), and their rules are left
// out of its Verdict, as a deny-cache refusal leaves out the rules it did
// not ask. The view first: a direct rule's limit is the tightest (one
// login a minute), and a request refused by another rule must not spend
// it; a direct hit the store refuses after the view passed the others
// has counted one request into their view (docs/rate-limiting.md,
// "Decided together").
func (l *Limiter) hitSplit(ctx context.Context, rules []*rule, ds []Decision, hits []Hit, pending []int, counts []Count, direct []int) (time.Time, error) {
	if len(direct) < len(hits) {
		rest, rc, isDirect := make([]Hit, 0, len(hits)-len(direct)), make([]Count, 0, len(hits)-len(direct)), make(map[int]bool, len(direct))
		for _, j := range direct {
			isDirect[j] = true
		}
		var restIdx []int
		for j, h := range hits {
			if !isDirect[j] {
				rest, restIdx = append(rest, h), append(restIdx, j)
				rc = append(rc, Count{})
			}
		}
		l.sync.hit(ctx, rest, rc)
		for n, j := range restIdx {
			counts[j] = rc[n]
		}
		if requestRefused(rest, rc) {
			return time.Time{}, errDecidedOnView
		}
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
		return at, err
	}
	observeHits(dh, dc)
	for n, j := range direct {
		counts[j] = dc[n]
	}
	return at, nil
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
