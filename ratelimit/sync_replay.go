package ratelimit

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"
)

// A lost answer (docs/rate-limiting.md, "A lost answer"). A sync call
// whose answer does not arrive (a connection reset, a deadline passed
// while the store ran it, a slow store behind an ask's timeout) may have
// merged: the store may hold the view it sent and the lease it reserved.
// Sent again as a new call from the same base, the view would be counted
// twice, and the lease reserved but never spent (fresh attack pass 17:
// with a fifth of the store's answers lost, a client at 60 % of its limit
// was refused 47-49 of 121 requests). So every call of a replica that
// registers is marked (chunkCall.marker, Registration.Exchange), and a
// failed one is parked: its keys are not exchanged again until a later
// exchange (not an ask) has resolved it, by sending it again with
// Registration.Resolve. Resolved, a call that ran answers its keys' state
// now and what it leased, merged as if the answer had come the first time;
// a call that never ran answers so (KeyState.Leased -1) and can no longer
// run, and its keys' views go with the next exchange from the base they
// had.

// errCallLate: a sync call reached the store past its last moment
// (chunkCall.notAfter) and did not run.
var errCallLate = errors.New("the rate-limit sync call reached the store past its last moment and did not run")

// markerTTL is how long the store keeps a call's marker: past the last
// time the call may be resolved (replayFor after it was sent, each try
// under roundTimeout), with a round timeout to spare. A first call that
// reaches the store later than replayFor after it was sent does not run
// (chunkCall.notAfter), so no marker needs to outlive that.
func (s *syncer) markerTTL() time.Duration {
	return s.replayFor() + 2*s.roundTimeout
}

// replayFor is how long a failed call is sent again before it is given
// up: as long as the store may be slow rather than down (outageAfter).
// Given up, its keys go with the next round as an unmarked failure's do
// (their view may then count twice: the store was down for a second).
func (s *syncer) replayFor() time.Duration {
	return s.outageAfter()
}

// fail handles a call that got no answer: a marked one is parked for a
// later round to send again (an ask's, without the ask: the round
// merges it and ends the key's wait when it leased); an unmarked one's
// keys are dirty again, their view going with the next round. Either way
// the keys are dirty, so that what the view counts meanwhile is sent.
func (s *syncer) fail(c *chunkCall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, op := range c.ops {
		if k, ok := s.keys.get(op.Hit.Key); ok {
			s.markDirty(op.Hit.Key, k)
		}
	}
	if c.marker == "" || c.parked {
		return
	}
	c.ask = false
	s.parked = append(s.parked, c)
	if s.parkedKeys == nil {
		s.parkedKeys = make(map[string]int)
	}
	for _, op := range c.ops {
		s.parkedKeys[op.Hit.Key]++
	}
	s.parkedGauge.Set(float64(len(s.parked)))
}

// unpark forgets c's keys as parked. s.mu is held.
func (s *syncer) unpark(c *chunkCall) {
	for _, op := range c.ops {
		if s.parkedKeys[op.Hit.Key]--; s.parkedKeys[op.Hit.Key] <= 0 {
			delete(s.parkedKeys, op.Hit.Key)
		}
	}
}

// replay resolves the parked calls, all of them each time, up to
// syncInFlight on the wire at once, each under the round timeout, and
// merges their answers; a call that fails again stays parked for the
// next exchange. Tried one at a time until the first failure, the parked
// calls piled up when answers were lost at random, their keys stayed out
// of the rounds for up to a second, and the passes a replica made on its
// own share meanwhile were not in the store while the others leased the
// whole limit (fresh attack pass 18 R01: a fixed window passed 65-98 of
// 50 with half the answers lost, and calls were given up). Calls parked
// longer than replayFor are given up. It returns the store calls sent and
// the first error. Exchanges are serialized (flight), so nothing parks a
// call or sends a parked key meanwhile (collect skips them).
func (s *syncer) replay(ctx context.Context) (int, error) {
	now := momentOf(s.view.now())
	s.mu.Lock()
	var live []*chunkCall
	for _, c := range s.parked {
		if now.sub(c.since) > s.replayFor() {
			s.unpark(c)
			s.replays[replayGivenUp].Inc()
			continue
		}
		live = append(live, c)
	}
	s.parked = live
	s.parkedGauge.Set(float64(len(live)))
	s.mu.Unlock()
	if len(live) == 0 {
		return 0, nil
	}
	var (
		mu       sync.Mutex
		calls    int
		firstErr error
		wg       sync.WaitGroup
	)
	done := make([]bool, len(live))
	slots := make(chan struct{}, syncInFlight)
	for i, c := range live {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			c.parked = true // a failed try leaves c parked (fail)
			_, n, err := s.send(ctx, c, nil, nil)
			mu.Lock()
			defer mu.Unlock()
			calls += n
			if err != nil {
				s.replays[replayFailed].Inc()
				firstErr = cmp.Or(firstErr, err)
				return
			}
			s.replays[replayMerged].Inc()
			done[i] = true
		})
	}
	wg.Wait()
	s.mu.Lock()
	kept := s.parked[:0]
	for i, c := range live {
		if done[i] {
			s.unpark(c)
			continue
		}
		kept = append(kept, c)
	}
	s.parked = kept
	s.parkedGauge.Set(float64(len(kept)))
	s.mu.Unlock()
	return calls, firstErr
}

// ranOnly keeps the ops (and what goes with each) of a resolved call
// whose answer says they ran (KeyState.Leased not -1).
func ranOnly(ops []SyncOp, local []KeyState, reserved []int64, leasing []bool, got []KeyState) ([]SyncOp, []KeyState, []int64, []bool, []KeyState) {
	var (
		o  []SyncOp
		l  []KeyState
		r  []int64
		le []bool
		g  []KeyState
	)
	for i := range ops {
		if got[i].Leased >= 0 {
			o, l, r, le, g = append(o, ops[i]), append(l, local[i]), append(r, reserved[i]), append(le, leasing[i]), append(g, got[i])
		}
	}
	return o, l, r, le, g
}

// The outcomes of sending a parked call again
// (borda_ratelimit_sync_replays_total{result}).
const (
	replayMerged  = iota // answered: merged
	replayFailed         // no answer again: parked still
	replayGivenUp        // parked past replayFor: dropped
)
