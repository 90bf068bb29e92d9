// Package startstoptest is test support: the start/stop stress test
// every service of internal/startstop's shape passes (after River's
// startstoptest.Stress), under -race.
package startstoptest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/startstop"
)

// Workers and Rounds bound Stress: Workers goroutines each call Start and
// Stop Rounds times, interleaved.
const (
	Workers = 8
	Rounds  = 50
)

// Stress calls svc's Start and Stop from Workers goroutines at once,
// Rounds times each, and fails t when a Start returns anything but nil
// or startstop.ErrStopped (a stopped service is not restarted), when a
// Stop returns an error, or when the last Stop takes more than 10 s.
// Run it with -race: the point is the data races of a concurrent
// Start/Stop.
func Stress(t testing.TB, svc startstop.Service) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2*Workers*Rounds)
	for w := range Workers {
		wg.Go(func() {
			for r := range Rounds {
				if (w+r)%2 == 0 {
					if err := svc.Start(ctx); err != nil && !errors.Is(err, startstop.ErrStopped) {
						errs <- err
					}
					continue
				}
				sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
				if err := svc.Stop(sctx); err != nil {
					errs <- err
				}
				scancel()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("start/stop stress: %v", err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := svc.Stop(sctx); err != nil {
		t.Errorf("the last Stop: %v", err)
	}
	if err := svc.Start(ctx); !errors.Is(err, startstop.ErrStopped) && err != nil {
		t.Errorf("Start after the last Stop = %v, want startstop.ErrStopped or nil", err)
	}
	if err := svc.Stop(sctx); err != nil {
		t.Errorf("a Stop after the last Stop: %v", err)
	}
}
