// Package loadgen drives HTTP load for the bench commands: a closed-loop
// generator that finds the saturation throughput, and an open-loop one that
// keeps a fixed rate and measures latency from each request's intended
// start (so a stall is charged to every request it delayed, avoiding
// coordinated omission).
package loadgen

import (
	"slices"
	"time"
)

// Latencies is a set of recorded request durations.
type Latencies []time.Duration

// Quantile returns the q-quantile (0 ≤ q ≤ 1) by the nearest-rank method,
// or 0 when empty. It sorts l in place.
func (l Latencies) Quantile(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	slices.Sort(l)
	i := int(q*float64(len(l)) + 0.5)
	if i >= len(l) {
		i = len(l) - 1
	}
	if i > 0 && q < 1 {
		i--
	}
	return l[max(i, 0)]
}
