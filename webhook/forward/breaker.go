package forward

import (
	"errors"
	"log/slog"
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
}

func newBreaker(failures int, openFor time.Duration, gauge prometheus.Gauge, log *slog.Logger) *Breaker {
	b := &Breaker{opened: make(chan struct{}, 1)}
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        "legacy-endpoint",
		MaxRequests: 1,
		Timeout:     openFor,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= uint32(failures) },
		IsExcluded:  func(err error) bool { return errors.Is(err, errSkipped) },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			gauge.Set(stateValue(to))
			log.Warn("forward breaker state changed", "from", from.String(), "to", to.String())
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
