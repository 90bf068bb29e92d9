package forward

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Policy is the retry ladder: after the n-th failed attempt a delivery
// waits Delays[n-1] in that rung's retry queue; after a failure that
// follows the last rung it is dead-lettered. Policy is pure: no clock, no
// I/O.
type Policy struct {
	// Delays are the rungs in order (1m, 5m, 15m, 60m in production).
	Delays []time.Duration
}

// Next returns the rung (index into Delays) a delivery goes to after its
// failures-th failed attempt (failures ≥ 1), or ok false when the ladder is
// exhausted and the delivery must be dead-lettered. When the endpoint asked
// for a longer wait (retryAfter, 0 when absent) than the rung gives, the
// first later rung at least that long is chosen, or the last rung when none
// is.
func (p Policy) Next(failures int, retryAfter time.Duration) (rung int, ok bool) {
	if failures < 1 {
		failures = 1
	}
	if failures > len(p.Delays) {
		return 0, false
	}
	return p.AtLeast(failures-1, retryAfter), true
}

// AtLeast returns the first rung from `from` on whose delay is ≥ d, or the
// last rung when none is.
func (p Policy) AtLeast(from int, d time.Duration) int {
	for i := from; i < len(p.Delays); i++ {
		if p.Delays[i] >= d {
			return i
		}
	}
	return len(p.Delays) - 1
}

// ParseRetryAfter parses a Retry-After header value (RFC 9110 §10.2.3):
// delay-seconds or an HTTP-date, relative to now. It returns 0 for an empty,
// malformed, negative or past value.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 || n > int64(365*24*time.Hour/time.Second) {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	if d := t.Sub(now); d > 0 {
		return d
	}
	return 0
}
