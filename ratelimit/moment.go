package ratelimit

import "time"

// moment is an instant as nanoseconds since momentEpoch, on the monotonic
// clock when the time read has a monotonic reading (time.Now) and on the
// wall clock otherwise (a test's manual clock). Unlike time.Time it holds
// no pointer (time.Time's *Location), so the per-key tables of a replica
// (the view's entries, the sync table) are pointer-free: the garbage
// collector neither scans them nor follows a pointer per key into them
// (docs/performance.md, "Rate-limit key space").
type moment int64

// momentEpoch is a century before the process started, so that the zero
// moment (a field never set) is before every clock a Limiter is given:
// "now is before the zero moment" is false, as with the zero time.Time.
// Moments reach about 190 years past the start.
var momentEpoch = time.Now().Add(-100 * 365 * 24 * time.Hour)

// momentOf returns t as a moment.
func momentOf(t time.Time) moment { return moment(t.Sub(momentEpoch)) }

// add returns m + d.
func (m moment) add(d time.Duration) moment { return m + moment(d) }

// sub returns m − o.
func (m moment) sub(o moment) time.Duration { return time.Duration(m - o) }

// before reports whether m is before o.
func (m moment) before(o moment) bool { return m < o }
