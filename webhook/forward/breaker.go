package forward

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"
)

// errSkipped marks a breaker slot that made no POST (duplicate, lease held,
// store error): it counts neither as a success nor as a failure.
var errSkipped = errors.New("forward: no POST made")

// errFailed marks a retryable POST failure for the breaker.
var errFailed = errors.New("forward: POST failed")

// Breaker guards the legacy endpoint (sony/gobreaker): Failures consecutive
// retryable failures open it for OpenFor; then it is half-open and lets one
// probe through, which closes it on success or reopens it on failure.
// Every transition sets the state gauge and is logged; a transition to open
// is signalled on opened so the consumer can stop.
type Breaker struct {
	cb     *gobreaker.TwoStepCircuitBreaker[struct{}]
	opened chan struct{}

	// mu guards what Status reports beyond the state: when the state last
	// changed, the last retryable failure and the one that opened it.
	mu            sync.Mutex
	since         time.Time
	lastFailure   string
	lastFailureAt time.Time
	openedBy      string
	// flapSince is when the breaker first opened in the current outage
	// (zero while closed); probes counts the half-open probes since.
	// Only the first open and the close are logged at warn; the
	// open/half-open pairs in between at debug, summarized by the
	// forwarder's summary line (summary.go) and the closing line.
	flapSince time.Time
	probes    int
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

func newBreaker(failures int, openFor time.Duration, gauge prometheus.Gauge, log *slog.Logger) *Breaker {
	b := &Breaker{opened: make(chan struct{}, 1), since: time.Now()}
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        "legacy-endpoint",
		MaxRequests: 1,
		Timeout:     openFor,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= uint32(failures) },
		IsExcluded:  func(err error) bool { return errors.Is(err, errSkipped) },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			gauge.Set(stateValue(to))
			b.mu.Lock()
			b.since = time.Now()
			if to == gobreaker.StateOpen {
				b.openedBy = b.lastFailure
			}
			first, closedAfter, probes, openedBy := false, time.Duration(0), 0, b.openedBy
			switch to {
			case gobreaker.StateOpen:
				if b.flapSince.IsZero() {
					b.flapSince, b.probes, first = b.since, 0, true
				}
			case gobreaker.StateHalfOpen:
				b.probes++
			case gobreaker.StateClosed:
				if !b.flapSince.IsZero() {
					closedAfter, probes = b.since.Sub(b.flapSince), b.probes
				}
				b.flapSince, b.probes = time.Time{}, 0
			}
			b.mu.Unlock()
			switch {
			case first:
				log.Warn("forward breaker opened", "from", from.String(), "reason", openedBy)
			case to == gobreaker.StateClosed:
				log.Warn("forward breaker closed", "open_for", closedAfter.Round(time.Millisecond).String(), "probes", probes)
			default:
				log.Debug("forward breaker state changed", "from", from.String(), "to", to.String())
			}
			if to == gobreaker.StateOpen {
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
func (b *Breaker) State() gobreaker.State { return b.cb.State() }

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

func stateValue(s gobreaker.State) float64 {
	switch s {
	case gobreaker.StateHalfOpen:
		return 1
	case gobreaker.StateOpen:
		return 2
	}
	return 0
}

// flapping returns, while the breaker has been open at least once since
// it was last closed, how long ago it first opened and how many half-open
// probes it has let through since; ok is false while it is closed.
func (b *Breaker) flapping(now time.Time) (d time.Duration, probes int, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.flapSince.IsZero() {
		return 0, 0, false
	}
	return now.Sub(b.flapSince), b.probes, true
}
