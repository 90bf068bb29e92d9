package forward

import "net/http"

// What the breaker counts (docs/forwarder.md, "What the breaker counts").
//
// A failure that says the endpoint is down or overloaded counts at once:
// no response (network, timeout), 502, 503, 504 (a proxy in front of it
// found no healthy backend: Envoy's "gateway failures"), 408 and 429. Any
// other 5xx is the endpoint answering: the application failed on this
// event, which is as likely the event's fault (a payload it crashes on)
// as the endpoint's. Such answered failures count only once the run of
// them since the last success holds events of two sources, so one
// source's poison events cannot pause every source's deliveries (fresh
// attack pass 8, F01); with one source configured there is nobody else to
// pause, and they count at once. A success (2xx, or a 4xx refusal) ends
// the run.

// answeredRun is the run of answered failures since the last success:
// the source of its first failure and whether a second source failed in it.
type answeredRun struct {
	first   string
	started bool
	mixed   bool
}

// endpointDown reports whether r says the endpoint is down or overloaded,
// rather than that it failed on this event.
func endpointDown(r Result) bool {
	switch r.Status {
	case 0: // no response: network error or timeout
		return true
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout,
		http.StatusRequestTimeout, http.StatusTooManyRequests:
		return true
	}
	return false
}

// outcome is what a retryable failure of an event of source counts as:
// errFailed (the breaker counts it) or errSkipped (it does not). Call it
// after failed, before done.
func (b *Breaker) outcome(r Result, source string) error {
	if endpointDown(r) || b.sources <= 1 {
		return errFailed
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !b.run.started:
		b.run = answeredRun{first: source, started: true}
	case source != b.run.first:
		b.run.mixed = true
	}
	if b.run.mixed {
		return errFailed
	}
	return errSkipped
}

// answered ends the run of answered failures: the endpoint took or
// refused an event.
func (b *Breaker) answered() {
	b.mu.Lock()
	b.run = answeredRun{}
	b.mu.Unlock()
}
