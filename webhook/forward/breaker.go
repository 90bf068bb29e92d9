package forward

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/internal/breaker"
	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/internal/outagelog"
)

// errSkipped marks a breaker slot that made no POST (duplicate, lease held,
// store error): it counts neither as a success nor as a failure.
var errSkipped = errors.New("forward: no POST made")

// errFailed marks a retryable POST failure for the breaker.
var errFailed = errors.New("forward: POST failed")

// Breaker guards the legacy endpoint (internal/breaker, on the
// forwarder's clock): Failures consecutive retryable failures open it for
// OpenFor; then it is half-open and lets one probe through, which closes
// it on success or reopens it on failure.
// Every transition sets the state gauge and is logged; a transition to open
// is signalled on opened so the consumer can stop.
type Breaker struct {
	cb     *breaker.Breaker
	clock  clock.Clock
	opened chan struct{}

	// mu guards what Status reports beyond the state: when the state last
	// changed, the last retryable failure and the one that opened it.
	mu            sync.Mutex
	since         time.Time
	lastFailure   string
	lastFailureAt time.Time
	openedBy      string
	// outage runs from the first open to the close: only those two are
	// logged at warn, the open/half-open pairs in between at debug, and
	// the forwarder's summary line (summary.go) reports it while it lasts.
	outage *outagelog.Outage

	// run is the current run of answered failures (failure.go); senders
	// are the configured sources' senders (more than one: one sender's
	// answered failures alone do not count).
	run     answeredRun
	senders senderSet
}

// BreakerStatus is what the operator page shows of a Breaker
// (docs/operations.md): State is "closed", "half-open" or "open"; Since
// is when it entered that state (the process start for closed);
// LastFailure is the safe reason of the last retryable failure ("5xx
// (HTTP 503): <reply excerpt>", "timeout", "network"), already redacted
// like the dead letters' excerpts; OpenedBy is LastFailure as it was
// when the breaker last opened (empty if it never did).
type BreakerStatus struct {
	State         string
	Since         time.Time
	LastFailure   string
	LastFailureAt time.Time
	OpenedBy      string
}

// newBreaker builds the forwarder's breaker; senders are the configured
// sources' senders (Options.Sources, Options.Senders), which decide
// whether one source's answered failures count (failure.go).
func newBreaker(failures int, openFor time.Duration, senders senderSet, clk clock.Clock, gauge prometheus.Gauge, log *slog.Logger) *Breaker {
	clk = clock.Or(clk)
	b := &Breaker{opened: make(chan struct{}, 1), clock: clk, since: clk.Now(), senders: senders,
		outage: outagelog.New(log, outagelog.Options{ForKey: "open_for", CountKey: "probes", Clock: clk})}
	b.cb = breaker.New(breaker.Options{
		Failures:   failures,
		OpenFor:    openFor,
		Clock:      clk,
		IsExcluded: func(err error) bool { return errors.Is(err, errSkipped) },
		OnStateChange: func(from, to breaker.State) {
			gauge.Set(stateValue(to))
			b.mu.Lock()
			b.since = clk.Now()
			b.run = answeredRun{}
			if to == breaker.StateOpen {
				b.openedBy = b.lastFailure
			}
			openedBy := b.openedBy
			b.mu.Unlock()
			switch to {
			case breaker.StateOpen:
				b.outage.Begin("forward breaker opened", "from", from.String(), "reason", openedBy)
			case breaker.StateHalfOpen:
				b.outage.Repeat("forward breaker half-open: one probe")
			case breaker.StateClosed:
				b.outage.End("forward breaker closed")
			}
			if to == breaker.StateOpen {
				select {
				case b.opened <- struct{}{}:
				default:
				}
			}
		},
	})
	gauge.Set(0)
	return b
}

// State returns the breaker's current state (moving open to half-open
// when OpenFor has passed).
func (b *Breaker) State() breaker.State { return b.cb.State() }

// Status returns the state, since when, and the failures behind it.
func (b *Breaker) Status() BreakerStatus {
	state := b.cb.State().String()
	b.mu.Lock()
	defer b.mu.Unlock()
	return BreakerStatus{State: state, Since: b.since, LastFailure: b.lastFailure, LastFailureAt: b.lastFailureAt, OpenedBy: b.openedBy}
}

// failed records a retryable failure's safe reason; call it before
// done(errFailed), so a failure that opens the breaker is its OpenedBy.
func (b *Breaker) failed(reason string, at time.Time) {
	b.mu.Lock()
	b.lastFailure, b.lastFailureAt = reason, at
	b.mu.Unlock()
}

// allow asks for a slot; done must be called with nil (the endpoint
// answered), errFailed or errSkipped.
func (b *Breaker) allow() (done func(error), err error) { return b.cb.Allow() }

func stateValue(s breaker.State) float64 {
	switch s {
	case breaker.StateHalfOpen:
		return 1
	case breaker.StateOpen:
		return 2
	}
	return 0
}

// flapping returns, while the breaker has been open at least once since
// it was last closed, how long ago it first opened and how many half-open
// probes it has let through since; ok is false while it is closed.
func (b *Breaker) flapping(now time.Time) (d time.Duration, probes int, ok bool) {
	since, probes, ok := b.outage.State()
	if !ok {
		return 0, 0, false
	}
	return now.Sub(since), probes, true
}
