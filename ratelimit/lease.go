package ratelimit

import (
	"math"
	"time"
)

// Quota leasing (docs/rate-limiting.md "Quota leasing"): between two reads
// of a key from the store, a synchronizing replica passes at most its
// lease, floor(remaining / replicas), where remaining is what the store's
// state allowed at the last read (the whole limit for a key it has not
// read yet). A hit past the lease asks the store: the key alone is
// synchronized at once (the hit included) and the hit passes only if the
// merged state is within the limit. Envoy's global + local limits,
// Gubernator's GLOBAL behaviour and Kong's sync_rate are the designs
// this follows; the lease is Gubernator's "share of what is left".

// remaining is how many more hits h's rule lets pass on state s at now
// (unix ms); it is negative when s is past the limit.
func remaining(h Hit, s KeyState, nowMS float64) int64 {
	limit := h.Limit
	switch h.Algorithm {
	case GCRA:
		if !s.present() || s.TAT <= nowMS {
			return limit
		}
		period := float64(h.Period.Milliseconds())
		interval := period / float64(limit)
		return int64(math.Floor((nowMS + period - s.TAT + gcraSlack(period, float64(limit))) / interval))
	case SlidingWindow:
		if !s.present() {
			return limit
		}
		w := float64(h.Period.Milliseconds())
		idx := math.Floor(nowMS / w)
		cur, prev := slidingAt(s, idx), slidingAt(s, idx-1)
		rate := prev*(w-max(0, nowMS-idx*w))/w + cur
		return int64(math.Floor(float64(limit) - rate))
	default:
		if !s.present() {
			return limit
		}
		return limit - s.N
	}
}

// leaseOf is a replica's share of what s leaves: floor(remaining /
// replicas), at least 0; 1 while anything remains for a limit below the
// replicas, a share no request spends: such a rule's hits are decided by
// the store (sync_direct.go).
func leaseOf(h Hit, s KeyState, nowMS float64, replicas int64) int64 {
	return leaseShare(h.Limit, remaining(h, s, nowMS), replicas)
}

// allowed reports whether c, a store's answer to h, found room for the
// hit in h's key (counted or not: Count.Counted).
func allowed(h Hit, c Count) bool {
	if h.Algorithm == GCRA || h.Algorithm == SlidingWindow {
		return c.Allowed
	}
	return h.Limit <= 0 || c.N <= h.Limit
}

// requestRefused reports whether out, a store's answers to one request's
// hits, refuse the request: a hit not Observe found no room.
func requestRefused(hits []Hit, out []Count) bool {
	for i, h := range hits {
		if !h.Observe && !allowed(h, out[i]) {
			return true
		}
	}
	return false
}

// spentCount is the refusal of a hit whose replica's share of s (the
// store's state as just read) is 0: for a sliding window or GCRA the wait
// is the time one request takes to come back (period / limit), after
// which the next ask may be leased it; for a fixed window, the window's
// end.
func spentCount(h Hit, s KeyState, now time.Time) Count {
	step := max(h.Period/time.Duration(max(h.Limit, 1)), time.Millisecond)
	switch h.Algorithm {
	case GCRA, SlidingWindow:
		return Count{RetryAfter: step, ResetAfter: max(s.TTL, step)}
	default:
		return Count{N: h.Limit + 1, TTL: max(s.TTL, time.Millisecond)}
	}
}

// unreserve is got, the store's answer to an exchange of a sliding window
// or GCRA whose view went as sent (reserve: the view plus reserved
// requests of this replica's lease), less this replica's reservation: the
// reserved requests (in sent's current window) and the lease the store
// granted (got.Leased, in got's current window or TAT). A view counts
// its own passes, not its lease.
func unreserve(h Hit, got, sent KeyState, reserved int64) KeyState {
	n := reserved + got.Leased
	if n <= 0 || !got.present() {
		return got
	}
	period := float64(h.Period.Milliseconds())
	if h.Algorithm == GCRA {
		got.TAT -= float64(n) * period / float64(max(h.Limit, 1))
		got.Leased = 0
		return got
	}
	take := func(idx, k float64) {
		switch idx {
		case got.Index:
			got.Cur = max(0, got.Cur-k)
		case got.Index - 1:
			got.Prev = max(0, got.Prev-k)
		}
	}
	if reserved > 0 {
		take(sent.Index, float64(reserved))
	}
	take(got.Index, float64(got.Leased))
	got.Leased = 0
	return got
}
