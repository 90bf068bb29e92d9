package ratelimit

import (
	"context"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Start runs the background work until ctx ends or Stop is called: the
// relax poller (every rate_limits.relax_poll) and the breaker probe, which
// pings the store while the breaker is half-open so no request ever pays
// for a probe. Calling Start twice is a no-op.
func (l *Limiter) Start(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		return
	}
	ctx, l.cancel = context.WithCancel(ctx)
	l.done = make(chan struct{})
	l.probing.Store(!l.memory)
	go l.run(ctx, l.done)
}

// Stop ends the background work started by Start and waits for it.
func (l *Limiter) Stop() {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.cancel, l.done = nil, nil
	l.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	l.probing.Store(false)
}

func (l *Limiter) run(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	relaxTick := time.NewTicker(l.relaxPoll)
	defer relaxTick.Stop()
	probeTick := time.NewTicker(probeInterval)
	defer probeTick.Stop()
	l.pollRelax(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-relaxTick.C:
			l.pollRelax(ctx)
		case <-probeTick.C:
			l.probe(ctx)
		}
	}
}

// probeInterval is how often the background loop checks whether the
// breaker is half-open and probes the store.
const probeInterval = 100 * time.Millisecond

// probe pings the store through the breaker when it is half-open: success
// closes it, failure opens it for another breaker.open_for.
func (l *Limiter) probe(ctx context.Context) {
	if l.memory || l.breaker.State() != gobreaker.StateHalfOpen {
		return
	}
	_, _ = l.breaker.Execute(func() (time.Time, error) {
		pctx, cancel := context.WithTimeout(ctx, max(l.timeout, 100*time.Millisecond))
		defer cancel()
		return time.Time{}, l.store.Ping(pctx)
	})
}
