package startstop

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// List is a command's services in start order: Start starts them in
// order, Stop stops the started ones in reverse (docs/architecture.md,
// "Lifecycle"). Its zero value is empty and ready; safe for concurrent
// use.
type List struct {
	mu      sync.Mutex
	entries []entry
	started int // how many entries, from the first, were started
}

type entry struct {
	name string
	svc  Service
}

// Add appends svc under name (the name in Start's and Stop's errors).
// Add after Start is refused with an error.
func (l *List) Add(name string, svc Service) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started > 0 {
		return fmt.Errorf("startstop: adding %s after Start", name)
	}
	l.entries = append(l.entries, entry{name, svc})
	return nil
}

// Start starts every service in order. On the first error it stops the
// ones it started, in reverse, and returns "starting NAME: err". A second
// Start starts nothing.
func (l *List) Start(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := l.started; i < len(l.entries); i++ {
		e := l.entries[i]
		if err := e.svc.Start(ctx); err != nil {
			_ = l.stopLocked(context.WithoutCancel(ctx))
			return fmt.Errorf("starting %s: %w", e.name, err)
		}
		l.started = i + 1
	}
	return nil
}

// Stop stops the started services in reverse order, each within ctx,
// and returns their errors joined ("stopping NAME: err"). A second Stop
// stops nothing.
func (l *List) Stop(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopLocked(ctx)
}

func (l *List) stopLocked(ctx context.Context) error {
	var errs []error
	for i := l.started - 1; i >= 0; i-- {
		e := l.entries[i]
		if err := e.svc.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stopping %s: %w", e.name, err))
		}
	}
	l.started = 0
	l.entries = nil // a stopped service is not restarted
	return errors.Join(errs...)
}

// Funcs makes a Service of two functions (an admin listener, a pair
// of a command's own): a nil function does nothing. It has no state of
// its own: start and stop must give the Service semantics themselves.
type Funcs struct {
	StartFunc func(ctx context.Context) error
	StopFunc  func(ctx context.Context) error
}

// Start calls StartFunc.
func (f Funcs) Start(ctx context.Context) error {
	if f.StartFunc == nil {
		return nil
	}
	return f.StartFunc(ctx)
}

// Stop calls StopFunc.
func (f Funcs) Stop(ctx context.Context) error {
	if f.StopFunc == nil {
		return nil
	}
	return f.StopFunc(ctx)
}

// Loop is a Service that runs run(ctx) in a Runner: a loop that needs
// nothing but its context (a periodic summary line).
func Loop(run func(ctx context.Context)) Service { return &loop{run: run} }

type loop struct {
	Runner
	run func(ctx context.Context)
}

func (l *loop) Start(ctx context.Context) error { return l.Runner.Start(ctx, l.run) }

// Unbounded makes svc's Stop wait for its work however long it takes,
// whatever the deadline of the List's Stop: for a service that must end
// before what follows it closes (the limiter's loops before the Redis
// pool), where the deadline budgets another service's drain.
func Unbounded(svc Service) Service { return unbounded{svc} }

type unbounded struct{ Service }

func (u unbounded) Stop(ctx context.Context) error { return u.Service.Stop(context.WithoutCancel(ctx)) }

// Task is the Service shape of a blocking run(ctx) error (a consumer, a
// periodic job): StartTask launches it in a Runner, Stop ends its
// context and waits, Done is closed once run returned and Err is then
// its error. A component keeps a Task in a field and calls StartTask
// from its own Start.
type Task struct {
	Runner
	mu  sync.Mutex
	err error
}

// StartTask runs run(ctx') in a new goroutine with Runner.Start's
// semantics, keeping its error for Err.
func (t *Task) StartTask(ctx context.Context, run func(ctx context.Context) error) error {
	return t.Runner.Start(ctx, func(ctx context.Context) {
		err := run(ctx)
		t.mu.Lock()
		t.err = err
		t.mu.Unlock()
	})
}

// Done is closed when run has returned, or when the Task was stopped
// without having run; before Start it is nil (never ready).
func (t *Task) Done() <-chan struct{} {
	t.Runner.mu.Lock()
	defer t.Runner.mu.Unlock()
	switch {
	case t.Runner.done != nil:
		return t.Runner.done
	case t.Runner.stopped:
		return closed
	}
	return nil // never ready: ask after Start
}

// closed is the Done of a Task stopped before it ran.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Err is what run returned (nil while it runs).
func (t *Task) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}
