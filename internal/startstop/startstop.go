// Package startstop provides the one lifecycle shape of Borda's background
// components (docs/architecture.md, "Lifecycle"): Start(ctx) error and
// Stop(ctx) error, no goroutine started by a constructor, a Stop without a
// Start and a second Stop both harmless, as River's startstop package does.
//
// A component embeds a Runner and calls Runner.Start with its loop:
//
//	type Poller struct{ startstop.Runner; … }
//	func (p *Poller) Start(ctx context.Context) error { return p.Runner.Start(ctx, p.run) }
//
// and inherits Stop and Stopped.
package startstop

import (
	"context"
	"errors"
	"sync"
)

// Service is anything Borda runs in the background: the limiter's relax
// poller and breaker probe, the telemetry recorder, the webhook publisher,
// the JWKS refresher, the consumers.
type Service interface {
	// Start launches the service's work and returns at once; the work
	// runs until Stop is called or ctx ends. A second Start is a no-op.
	Start(ctx context.Context) error
	// Stop ends the work and waits for it, at most until ctx ends (then it
	// returns ctx's error and the work finishes in the background). A Stop
	// before any Start, and a second Stop, return nil.
	Stop(ctx context.Context) error
}

// ErrStopped is returned by Runner.Start after Stop: a stopped Runner is
// not restarted, as a closed server is not reopened.
var ErrStopped = errors.New("startstop: already stopped")

// Runner runs one loop in one goroutine with the Service semantics. Its
// zero value is ready to use; it must not be copied after first use.
type Runner struct {
	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	stopped bool
}

// Start runs run(ctx') in a new goroutine, where ctx' ends when ctx ends or
// Stop is called. A second Start while running is a no-op (nil); a Start
// after Stop returns ErrStopped.
func (r *Runner) Start(ctx context.Context, run func(ctx context.Context)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return ErrStopped
	}
	if r.cancel != nil {
		return nil
	}
	ctx, r.cancel = context.WithCancel(ctx)
	r.done = make(chan struct{})
	go func(done chan<- struct{}) {
		defer close(done)
		run(ctx)
	}(r.done)
	return nil
}

// Stop cancels the loop and waits for it to return, at most until ctx
// ends, in which case it returns ctx.Err(). A Stop before Start, or a
// second Stop, returns nil at once.
func (r *Runner) Stop(ctx context.Context) error {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.stopped = true
	r.cancel = nil
	r.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stopped returns a channel closed when the loop has returned, or nil if
// the Runner was never started (a nil channel never becomes ready).
func (r *Runner) Stopped() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done
}
