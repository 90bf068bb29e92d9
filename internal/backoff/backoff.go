// Package backoff is Borda's one reconnect policy and loop: the webhook
// publisher (webhook/publish), the forwarder (webhook/forward) and the
// events consumer (instances) each run their broker sessions under
// Supervise.
//
// The policy is a capped exponential backoff with jitter: after a
// session that ends without having connected, the next wait's base
// doubles (First, 2·First, 4·First, …) up to Max; each wait is drawn
// uniformly from [base/2, base], so workers that lost the broker together
// do not come back in step. A session that got connected starts the base
// again from First.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/olp-edu/borda/internal/clock"
)

// DefaultMax caps the waits' base when Policy.Max is 0.
const DefaultMax = 5 * time.Second

// Policy is the reconnect policy Supervise follows.
type Policy struct {
	// First is the base of the first wait, and of the wait after a
	// session that got connected. It must be positive.
	First time.Duration
	// Max caps the base (0: DefaultMax). A Max below First is First: a
	// wait is never drawn from below the first's range.
	Max time.Duration
	// Clock times the waits (nil: the wall clock). On a *clock.Manual a
	// test drives them with Advance instead of sleeping.
	Clock clock.Clock
}

// limit is the cap on the base: Max, DefaultMax, or First if larger.
func (p Policy) limit() time.Duration {
	m := p.Max
	if m == 0 {
		m = DefaultMax
	}
	return max(m, p.First)
}

// jitter draws a wait uniformly from [base/2, base].
func jitter(base time.Duration) time.Duration {
	return base/2 + rand.N(base/2+1)
}

// Supervise runs session until ctx ends: each time session returns while
// ctx has not ended, it calls onDown with session's error and the wait
// it has begun (p's backoff: connected reports whether the session got
// as far as being connected, which starts the backoff again from
// p.First), then waits and runs session again. The wait is already
// running when onDown is called, so onDown's time (logging, metrics)
// does not lengthen it. Supervise returns as soon as ctx ends, during a
// wait too; session itself must return when ctx ends. It panics if
// p.First is not positive.
func Supervise(ctx context.Context, p Policy, session func(context.Context) (connected bool, err error), onDown func(err error, wait time.Duration)) {
	if p.First <= 0 {
		panic("backoff: Policy.First must be positive")
	}
	limit := p.limit()
	base := p.First
	for ctx.Err() == nil {
		connected, err := session(ctx)
		if ctx.Err() != nil {
			return
		}
		if connected {
			base = p.First
		}
		wait := jitter(base)
		elapsed, stop := clock.After(p.Clock, wait)
		onDown(err, wait)
		select {
		case <-ctx.Done():
			stop()
			return
		case <-elapsed:
		}
		base = min(2*base, limit)
	}
}
