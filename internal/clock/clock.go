// Package clock is the one clock type Borda's packages take where time
// decides (windows, expiries, breakers, event-time bounds, summaries):
// each constructor's options have a Clock field, nil meaning the wall
// clock. Network deadlines, timers and latency metrics stay on the wall
// clock (the kernel and the runtime keep those).
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
	mu sync.Mutex
	t  time.Time
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
	return m.t
}

// Set makes the clock read t.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	m.t = t
	m.mu.Unlock()
}
