package ratelimit

import (
	"context"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Start runs the background work until ctx ends or Stop is called: the
// relax poller (every Options.RelaxPoll) and the breaker probe, which
// pings the store while the breaker is half-open so no request ever pays
// for a probe. It returns at once; a second Start is a no-op, a Start
// after Stop returns startstop.ErrStopped.
func (l *Limiter) Start(ctx context.Context) error {
	if err := l.bg.Start(ctx, l.run); err != nil {
		return err
	}
	l.probing.Store(!l.memory)
	return nil
}

// Stop ends the background work started by Start and waits for it, at
// most until ctx ends (then it returns ctx's error). A Stop without Start
// and a second Stop return nil.
func (l *Limiter) Stop(ctx context.Context) error {
	err := l.bg.Stop(ctx)
	l.probing.Store(false)
	return err
}

func (l *Limiter) run(ctx context.Context) {
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
