// Package clock is the one clock type Borda's packages take where time
// decides (windows, expiries, breakers, event-time bounds, summaries):
// each constructor's options have a Clock field, nil meaning the wall
// clock. Network deadlines, timers and latency metrics stay on the wall
// clock (the kernel and the runtime keep those), except a wait a test
// must drive (the reconnect waits of internal/backoff): After waits on
// a Manual clock's Advance, and on a wall-clock timer otherwise.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time. Implementations are safe for concurrent use.
type Clock interface {
	Now() time.Time
}

// Wall is the process's clock (time.Now, monotonic reading included).
var Wall Clock = wall{}

type wall struct{}

func (wall) Now() time.Time { return time.Now() }

// Or returns c, or Wall when c is nil: what a constructor does with its
// options' Clock.
func Or(c Clock) Clock {
	if c == nil {
		return Wall
	}
	return c
}

// Func adapts a function to a Clock (a test's closure over a variable).
type Func func() time.Time

// Now returns f().
func (f Func) Now() time.Time { return f() }

// Manual is a clock that moves only when told: tests drive it with
// Advance and Set instead of sleeping. The zero value reads the zero
// time; NewManual starts it elsewhere. Safe for concurrent use.
type Manual struct {
	mu      sync.Mutex
	t       time.Time
	waiters []waiter // After's, fired by Advance and Set
}

// waiter is one After: ch receives once the clock reads at or after at.
type waiter struct {
	at time.Time
	ch chan time.Time
}

// NewManual returns a Manual clock reading t.
func NewManual(t time.Time) *Manual { return &Manual{t: t} }

// Now returns the clock's time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.t
}

// Advance moves the clock forward by d (backwards when d < 0) and
// returns the new time.
func (m *Manual) Advance(d time.Duration) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.t = m.t.Add(d)
	m.fire()
	return m.t
}

// Set makes the clock read t.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	m.t = t
	m.fire()
	m.mu.Unlock()
}

// After returns a channel that receives the clock's time once Advance
// or Set has moved it to Now()+d or later; at once when d ≤ 0. The
// channel is buffered: nobody needs to be receiving when it fires.
func (m *Manual) After(d time.Duration) <-chan time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := waiter{at: m.t.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		w.ch <- m.t
		return w.ch
	}
	m.waiters = append(m.waiters, w)
	return w.ch
}

// Waiters is the number of After channels that have not fired yet, so a
// test can tell that a wait has begun before it advances the clock.
func (m *Manual) Waiters() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.waiters)
}

// fire sends the time to every waiter that is due; m.mu is held.
func (m *Manual) fire() {
	kept := m.waiters[:0]
	for _, w := range m.waiters {
		if m.t.Before(w.at) {
			kept = append(kept, w)
			continue
		}
		w.ch <- m.t
	}
	clear(m.waiters[len(kept):])
	m.waiters = kept
}

// After returns a channel that receives once d has passed on c, and a
// stop that releases a wall-clock timer (call it when the wait is
// abandoned). On a clock with its own After (Manual) the wait follows
// that clock; on any other, it is a wall-clock timer.
func After(c Clock, d time.Duration) (ch <-chan time.Time, stop func()) {
	if a, ok := Or(c).(interface {
		After(time.Duration) <-chan time.Time
	}); ok {
		return a.After(d), func() {}
	}
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}
