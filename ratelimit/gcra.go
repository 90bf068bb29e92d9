package ratelimit

import (
	"math"
	"time"
)

// gcraSlack is how far past now + period, in milliseconds, a GCRA hit's
// new arrival time may fall and the hit still pass: the rounding of the
// arithmetic, never a request. Each passed hit moves the arrival time
// by period / limit, which float64 holds inexactly (1000 / 15) and the
// stores keep to the thousandth of a millisecond (the script's "%.3f"),
// so a burst of exactly limit hits in one millisecond ends up to a
// thousandth per hit past now + period: without the slack, a limit of
// 15 per second passed 14 in a burst, of 600 passed 599 (every store).
// It is limit thousandths of a millisecond, at most half an emission
// interval, so a burst of limit + 1 never passes for it. A pass may
// therefore leave the arrival time up to the slack past now + period:
// the caps of a stored arrival time (a window shortened, replicas'
// merged counts) are at now + period + slack, never below, or every
// refusal would cut that debt and a flood pass at up to twice the rate
// (fresh attack pass 25 R01). The hit script's GCRA branch (script.go)
// and the sync script (script_sync.go) compute the same value in Lua.
func gcraSlack(period, limit float64) float64 {
	return math.Min(limit/1000, period/limit/2)
}

// MaxGCRAPerMillisecond is the most a GCRA rule passes per millisecond of
// its window, relaxed or not: 10, an emission interval of 0.1 ms. The
// stores keep the arrival time to the thousandth of a millisecond, so a
// shorter interval is not counted (below 0.0005 ms it rounds away). The
// config check refuses a rule above it (configs.MaxGCRAPerMillisecond,
// the same value); a relax factor (up to 100) never raises a GCRA rule
// past it (fresh attack pass 26 R09: a relaxed rule of 800 a millisecond
// passed 1.25 × its rate).
const MaxGCRAPerMillisecond = 10

// gcraLimit is limit, a GCRA rule's relaxed limit, held to
// MaxGCRAPerMillisecond per millisecond of window, but never below the
// rule's own limit (which the config check keeps within it).
func gcraLimit(limit, own int64, window time.Duration) int64 {
	return max(own, min(limit, MaxGCRAPerMillisecond*window.Milliseconds()))
}
