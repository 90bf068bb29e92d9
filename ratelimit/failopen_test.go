package ratelimit

import (
	"testing"
	"time"
)

// The fail-open budget is breaker.failures tokens refilled at that many
// per breaker.open_for: a burst spends it, a sporadic failure always finds
// one.
func TestFailOpenBudgetRefillsPerOpenPeriod(t *testing.T) {
	t.Parallel()
	b := failOpenBudget{size: 5, per: 10 * time.Second}
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for i := range 5 {
		if !b.take(now) {
			t.Fatalf("take %d of a full budget of 5 refused", i+1)
		}
	}
	if b.take(now) {
		t.Fatal("a sixth take at once passed")
	}
	if b.take(now.Add(time.Second)) {
		t.Fatal("a take 1 s later passed: half a token refilled (5 per 10 s)")
	}
	if !b.take(now.Add(2 * time.Second)) {
		t.Fatal("a take 2 s later refused: one token refilled")
	}
	for range 10 { // one failure a minute always passes
		now = now.Add(time.Minute)
		if !b.take(now) {
			t.Fatal("a sporadic failure was refused")
		}
	}
}
