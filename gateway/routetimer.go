package gateway

import (
	"sync"
	"sync/atomic"
	"time"
)

// routeTimer is the route timeout of one proxied request (docs/edge.md,
// "Routes": timeout): from the moment the proxy takes the request until
// the upstream's response headers arrive, the upload of the body
// included. When it fires it cancels the exchange's context with
// errUpstreamTimeout, which ends the transport's round trip and the
// body's read (proxy.go).
//
// It is a runtime timer (time.AfterFunc), so it fires at its deadline
// like any Go timer, not on a coarser tick; what it saves is the timer
// and its closure per request: timers are kept in a pool and re-armed. A
// timer goes back to the pool only when Stop reported that its function
// did not start for this arming, so a late firing can never reach the
// next request that uses it; a timer that expired (or lost the race with
// the response) is left to the garbage collector.
type routeTimer struct {
	t *time.Timer
	// ex is the armed exchange; fire and disarm take it with Swap, so
	// exactly one of them acts on an arming.
	ex atomic.Pointer[exchange]
}

var routeTimers = sync.Pool{New: func() any {
	rt := &routeTimer{}
	rt.t = time.AfterFunc(time.Hour, rt.fire)
	rt.t.Stop()
	return rt
}}

// armRouteTimer starts the route timeout d of ex; release it with
// disarm (response headers) or finish (the request left the proxy).
func armRouteTimer(ex *exchange, d time.Duration) *routeTimer {
	rt := routeTimers.Get().(*routeTimer)
	rt.ex.Store(ex)
	rt.t.Reset(d)
	return rt
}

// fire runs on the timer's goroutine at the deadline.
func (rt *routeTimer) fire() {
	if ex := rt.ex.Swap(nil); ex != nil {
		ex.cancel(errUpstreamTimeout)
	}
}

// disarm stops the timeout and reports whether it passed first: then the
// exchange's context is (or is being) cancelled with errUpstreamTimeout.
// It returns the timer to the pool when it safely can. Call it once.
func (rt *routeTimer) disarm() (timedOut bool) {
	stopped := rt.t.Stop()
	ex := rt.ex.Swap(nil)
	if !stopped {
		// Expired: fire started (or starts) on its own goroutine. When
		// it has not taken the exchange yet, cancel here so the cause is
		// the same; the timer is not reused either way.
		if ex != nil {
			ex.cancel(errUpstreamTimeout)
		}
		return true
	}
	routeTimers.Put(rt)
	return false
}
