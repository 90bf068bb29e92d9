package ratelimit

// BreakerState is the store breaker's state for the operator page
// (docs/operations.md): "closed", "half-open" or "open", and "none" on
// the embedded store, which has no breaker.
func (l *Limiter) BreakerState() string {
	if l.memory {
		return "none"
	}
	return l.breaker.State().String()
}
