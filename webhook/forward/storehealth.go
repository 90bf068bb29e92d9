package forward

import (
	"context"
	"time"
)

// storeHealthEvery is the interval of the idempotency store's health
// probe while the forwarder runs, and storeHealthTimeout bounds one probe:
// a Redis that stops answering makes `borda forward` not ready within
// about their sum, whether or not a delivery is in hand.
const (
	storeHealthEvery   = 2 * time.Second
	storeHealthTimeout = 2 * time.Second
)

// watchStore probes the idempotency store at once and every
// storeHealthEvery until ctx ends. A failed probe marks the store down
// (storeFailed: Readiness says so and consuming pauses, since no delivery
// could be decided without its key); a probe that answers clears it, as
// awaitStore does.
func (f *Forwarder) watchStore(ctx context.Context) {
	t := time.NewTicker(storeHealthEvery)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, storeHealthTimeout)
		err := f.store.Ping(pctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			f.storeFailed(err)
		default:
			f.storeProbed.Store(true)
			if f.storeDown.Swap(false) {
				f.log.Info("the idempotency store answers again; consuming resumes")
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
