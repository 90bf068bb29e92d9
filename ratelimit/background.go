package ratelimit

import (
	"context"
	"time"

	"github.com/olp-edu/borda/internal/breaker"
)

// Start runs the background work until ctx ends or Stop is called: the
// relax poller (every Options.RelaxPoll) and the breaker probe, which
// pings the store while the breaker is half-open so no request ever pays
// for a probe. It returns at once; a second Start is a no-op, a Start
// after Stop returns startstop.ErrStopped.
func (l *Limiter) Start(ctx context.Context) error {
	if l.sync != nil && l.sync.regStore != nil {
		// Register before the first request, so the first window is
		// already shared (bounded by the sync timeout; a failure leaves
		// it to the first round).
		rctx, cancel := context.WithTimeout(ctx, l.sync.timeout)
		l.syncRound(rctx)
		cancel()
	}
	if err := l.bg.Start(ctx, l.run); err != nil {
		return err
	}
	l.probing.Store(!l.memory)
	return nil
}

// Stop ends the background work started by Start and waits for it and
// for the early exchanges on the wire (sync_early.go), at most until ctx
// ends (then it returns ctx's error). A Stop without Start and a second
// Stop return nil.
func (l *Limiter) Stop(ctx context.Context) error {
	err := l.bg.Stop(ctx)
	l.probing.Store(false)
	if l.sync != nil && err == nil {
		// The early exchanges on the wire (each within the sync timeout).
		err = l.sync.earlyRun.wait(ctx)
	}
	return err
}

func (l *Limiter) run(ctx context.Context) {
	relaxTick := time.NewTicker(l.relaxPoll)
	defer relaxTick.Stop()
	probeTick := time.NewTicker(probeInterval)
	defer probeTick.Stop()
	var syncTick <-chan time.Time
	var wake <-chan struct{}
	if l.sync != nil {
		t := time.NewTicker(l.sync.interval)
		defer t.Stop()
		syncTick, wake = t.C, l.sync.wake
	}
	l.pollRelax(ctx)
	for {
		select {
		case <-ctx.Done():
			if l.sync != nil { // the counts of the last interval reach the store
				fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.sync.timeout)
				l.syncRound(fctx)
				cancel()
			}
			return
		case <-relaxTick.C:
			l.pollRelax(ctx)
		case <-probeTick.C:
			l.probe(ctx)
		case <-syncTick:
			l.syncRound(ctx)
		case <-wake:
			l.syncRound(ctx)
		}
	}
}

// syncRound runs one synchronization round (each of its calls teaches
// the store's clock: learnSkew); a failure is counted and logged (an outage once, then a
// summary a minute), and decisions stay local.
func (l *Limiter) syncRound(ctx context.Context) {
	_, calls, err := l.sync.round(ctx)
	l.m.rlCommands.Add(float64(calls))
	if err != nil {
		l.logSyncRoundError(err)
		return
	}
	l.syncOutage.End(syncRoundsResumed)
}

// probeInterval is how often the background loop checks whether the
// breaker is half-open and probes the store.
const probeInterval = 100 * time.Millisecond

// probe pings the store through the breaker when it is half-open: success
// closes it, failure opens it for another breaker.open_for.
func (l *Limiter) probe(ctx context.Context) {
	if l.memory || l.breaker.State() != breaker.StateHalfOpen {
		return
	}
	_ = l.breaker.Execute(func() error {
		pctx, cancel := context.WithTimeout(ctx, max(l.timeout, 100*time.Millisecond))
		defer cancel()
		return l.store.Ping(pctx)
	})
}
