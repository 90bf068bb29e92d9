package forward

import (
	"net/http"

	"github.com/olp-edu/borda/webhook/envelope"
)

// What the breaker counts (docs/forwarder.md, "What the breaker counts").
//
// A failure that says the endpoint is down or overloaded counts at once:
// no response (network, timeout), 502, 503, 504 (a proxy in front of it
// found no healthy backend: Envoy's "gateway failures"), 408 and 429. Any
// other 5xx is the endpoint answering: the application failed on this
// event, which is as likely the event's fault (a payload it crashes on)
// as the endpoint's. Such answered failures count only once the run of
// them since the last success holds events of two senders, so one
// sender's poison events cannot pause every source's deliveries (fresh
// attack pass 8, F01); with one sender configured there is nobody else to
// pause, and they count at once. A success (2xx, or a 4xx refusal) ends
// the run. A sender is a group of sources that accept the same credential
// (Options.Senders): two sources on one WEBHOOK_TOKENS are one holder's
// (fresh attack pass 10, A05).

// senderSet maps a source to its sender; count is how many senders the
// configured sources have.
type senderSet struct {
	of    map[string]string
	count int
}

// senders builds the senderSet of sources (Options.Sources) grouped by
// groups (Options.Senders; nil or a missing name: the source alone).
func senders(sources []string, groups map[string]string) senderSet {
	set := senderSet{of: make(map[string]string, len(sources))}
	distinct := map[string]bool{}
	for _, s := range sources {
		g := s
		if v, ok := groups[s]; ok && v != "" {
			g = v
		}
		set.of[s] = g
		distinct[g] = true
	}
	set.count = len(distinct)
	return set
}

// sender is source's sender: its group, or the source itself when it is
// not configured (an event from before a configuration change).
func (s senderSet) sender(source string) string {
	if g, ok := s.of[source]; ok {
		return g
	}
	return source
}

// ofEnvelope is env's sender: the one the ingress wrote into it, which it
// computed with the credentials' values (the forwarder may run without
// them: a shared value under two variable names is one sender only to
// the ingress; fresh attack pass 11, A06), else its source's here.
func (s senderSet) ofEnvelope(env envelope.Envelope) string {
	if env.Sender != "" {
		return env.Sender
	}
	return s.sender(env.Source)
}

// answeredRun is the run of answered failures since the last success:
// the sender of its first failure and whether a second sender failed in it.
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

// outcome is what a retryable failure of an event of sender counts as:
// errFailed (the breaker counts it) or errSkipped (it does not). Call it
// after failed, before done.
func (b *Breaker) outcome(r Result, sender string) error {
	if endpointDown(r) || b.senders.count <= 1 {
		return errFailed
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !b.run.started:
		b.run = answeredRun{first: sender, started: true}
	case sender != b.run.first:
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
