package publish

import (
	"context"
	"time"
)

// deadline is how long one publish may wait: until at (the confirm
// timeout from its start, or the caller's deadline if sooner), on one
// timer, or until the caller's ctx ends. A context per publish
// (context.WithTimeout) cost three allocations and a cancel on every
// event; the timer is one.
type deadline struct {
	ctx   context.Context // the caller's
	start time.Time       // when the publish began
	at    time.Time
	timer *time.Timer
}

func newDeadline(ctx context.Context, timeout time.Duration) deadline {
	start := time.Now()
	at := start.Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(at) {
		at = d
	}
	return deadline{ctx: ctx, start: start, at: at, timer: time.NewTimer(at.Sub(start))}
}

// stop releases the timer.
func (d deadline) stop() { d.timer.Stop() }

// passed reports whether the wait is over.
func (d deadline) passed() bool { return d.ctx.Err() != nil || !time.Now().Before(d.at) }

// err is why the wait ended: the caller's ctx's error, else
// context.DeadlineExceeded.
func (d deadline) err() error {
	if err := d.ctx.Err(); err != nil {
		return err
	}
	return context.DeadlineExceeded
}

// context returns a context that ends with the wait, for the rare waits
// that need one (the caller cancels it).
func (d deadline) context() (context.Context, context.CancelFunc) {
	return context.WithDeadline(d.ctx, d.at)
}
