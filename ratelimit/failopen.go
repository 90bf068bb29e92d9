package ratelimit

import (
	"sync"
	"time"
)

// failOpenBudget is how many requests a failed store call may let through
// unchecked under local_while_open: a bucket of size tokens (breaker.failures)
// refilled at size per per (breaker.open_for, at least 1 s). A sporadic
// failure always passes, as design.md's fail-open asks; a burst of failed
// calls in flight at once passes at most size, the rest decided in
// process (fresh attack pass 8 R01: 20 concurrent requests on a cold
// connection pool each failed open past a limit of 1, and a budget reset
// by every successful call between them still let 11 through).
type failOpenBudget struct {
	size float64
	per  time.Duration

	mu     sync.Mutex
	tokens float64
	at     time.Time // when tokens was last refilled; zero: full
}

// take spends one token at now and reports whether there was one.
func (b *failOpenBudget) take(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.at.IsZero() {
		b.tokens, b.at = b.size, now
	}
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(b.size, b.tokens+b.size*float64(d)/float64(b.per))
		b.at = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
