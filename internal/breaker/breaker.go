// Package breaker is the circuit breaker of the rate-limit store and of
// the forwarder's legacy endpoint, on an injected clock (internal/clock),
// so its open period is driven in tests instead of slept through.
//
// Its semantics are sony/gobreaker v2's for the settings Borda used
// (MaxRequests 1, Interval 0, a consecutive-failures trip): closed, it
// counts consecutive failures (a success resets them) and opens at
// Failures; open, it refuses every request until OpenFor has passed on
// the clock; then it is half-open and admits one request at a time, which
// closes it on success and opens it again on failure. A result that
// IsExcluded calls excluded counts as neither and frees the half-open
// slot. A result reported after the state changed is ignored.
package breaker

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/olp-edu/borda/internal/clock"
)

// State is a breaker's state.
type State int

// The states, in the order of the forwarder's gauge (0, 1, 2).
const (
	StateClosed State = iota
	StateHalfOpen
	StateOpen
)

// String returns "closed", "half-open" or "open" (the operator page's
// and the logs' words).
func (s State) String() string {
	switch s {
	case StateClosed:
		return "closed"
	case StateHalfOpen:
		return "half-open"
	case StateOpen:
		return "open"
	}
	return fmt.Sprintf("unknown state: %d", int(s))
}

var (
	// ErrOpen is Allow's refusal while the breaker is open.
	ErrOpen = errors.New("circuit breaker is open")
	// ErrTooManyRequests is Allow's refusal while half-open with its
	// probe under way.
	ErrTooManyRequests = errors.New("too many requests")
)

// defaultOpenFor is the open period when Options.OpenFor is not positive
// (gobreaker's default).
const defaultOpenFor = 60 * time.Second

// Options configures a Breaker.
type Options struct {
	// Failures consecutive failures open it (values below 1 mean 1).
	Failures int
	// OpenFor is how long it stays open (not positive: 60 s).
	OpenFor time.Duration
	// IsExcluded tells a result that counts neither as a success nor as
	// a failure (nil: none does). A nil error is a success.
	IsExcluded func(error) bool
	// OnStateChange is called on every transition, under the breaker's
	// lock: it must not call the breaker.
	OnStateChange func(from, to State)
	// Clock decides when the open period ends (nil: the wall clock).
	Clock clock.Clock
}

// Breaker is a circuit breaker; safe for concurrent use. Build it with New.
type Breaker struct {
	opts  Options
	clock clock.Clock

	mu         sync.Mutex
	state      State
	generation uint64
	openUntil  time.Time
	failures   int // consecutive failures while closed
	inFlight   int // half-open requests admitted and not excluded since
}

// New returns a closed Breaker.
func New(o Options) *Breaker {
	o.Failures = max(o.Failures, 1)
	if o.OpenFor <= 0 {
		o.OpenFor = defaultOpenFor
	}
	return &Breaker{opts: o, clock: clock.Or(o.Clock)}
}

// State returns the current state, moving open to half-open when OpenFor
// has passed on the clock.
func (b *Breaker) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.current(b.clock.Now())
}

// Allow asks for a slot: ErrOpen or ErrTooManyRequests when refused;
// otherwise done must be called once with the request's result.
func (b *Breaker) Allow() (done func(error), err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.current(b.clock.Now()) {
	case StateOpen:
		return nil, ErrOpen
	case StateHalfOpen:
		if b.inFlight >= 1 {
			return nil, ErrTooManyRequests
		}
		b.inFlight++
	}
	gen := b.generation
	return func(err error) { b.done(gen, err) }, nil
}

// Execute runs fn if the breaker allows it and reports its result; a
// refusal is returned without running fn. A panic in fn counts as a
// failure and is re-raised.
func (b *Breaker) Execute(fn func() error) error {
	done, err := b.Allow()
	if err != nil {
		return err
	}
	defer func() {
		if e := recover(); e != nil {
			done(fmt.Errorf("%v", e))
			panic(e)
		}
	}()
	err = fn()
	done(err)
	return err
}

func (b *Breaker) done(gen uint64, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	state := b.current(b.clock.Now())
	if gen != b.generation {
		return
	}
	excluded := b.opts.IsExcluded != nil && b.opts.IsExcluded(err)
	switch {
	case state == StateHalfOpen && excluded:
		b.inFlight-- // the slot is free for another probe
	case excluded:
	case state == StateHalfOpen && err == nil:
		b.set(StateClosed)
	case state == StateHalfOpen:
		b.set(StateOpen)
	case err == nil:
		b.failures = 0
	default:
		b.failures++
		if b.failures >= b.opts.Failures {
			b.set(StateOpen)
		}
	}
}

// current moves open to half-open once the open period has passed.
func (b *Breaker) current(now time.Time) State {
	if b.state == StateOpen && now.After(b.openUntil) {
		b.set(StateHalfOpen)
	}
	return b.state
}

// set moves to a new state and a new generation; the counts start over.
func (b *Breaker) set(to State) {
	if b.state == to {
		return
	}
	from := b.state
	b.state = to
	b.generation++
	b.failures, b.inFlight = 0, 0
	if to == StateOpen {
		b.openUntil = b.clock.Now().Add(b.opts.OpenFor)
	}
	if b.opts.OnStateChange != nil {
		b.opts.OnStateChange(from, to)
	}
}
