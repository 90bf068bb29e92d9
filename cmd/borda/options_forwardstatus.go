package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/startstop"
	"github.com/olp-edu/borda/keyspace"
	"github.com/olp-edu/borda/webhook/forward"
	"github.com/olp-edu/borda/webhook/forwardstatus"
)

// forwardInstance names this `borda forward` worker in its status
// snapshot: the host name (the pod's name under Kubernetes) and the PID.
func forwardInstance() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "forward"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// forwardStatus is the service that writes f's status snapshot to Redis
// for the operator page of `borda serve` (docs/operations.md) from Start
// to Stop; its Stop waits 2 s at most. A Redis that does not answer only
// costs the snapshot.
func forwardStatus(rdb redis.Cmdable, ks keyspace.Keyspace, f *forward.Forwarder, log *slog.Logger) (startstop.Service, error) {
	w, err := forwardstatus.NewWriter(rdb, ks, forwardInstance(), 0, 0, func() forwardstatus.Snapshot {
		return forwardSnapshot(f.Status())
	}, log)
	if err != nil {
		return nil, err
	}
	return startstop.Funcs{StartFunc: w.Start, StopFunc: func(ctx context.Context) error {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_ = w.Stop(sctx)
		return nil
	}}, nil
}

func forwardSnapshot(s forward.Status) forwardstatus.Snapshot {
	return forwardstatus.Snapshot{
		Breaker: s.Breaker.State, BreakerSince: s.Breaker.Since.UTC(),
		LastFailure: s.Breaker.LastFailure, LastFailureAt: s.Breaker.LastFailureAt.UTC(), OpenedBy: s.Breaker.OpenedBy,
		Connected: s.Connected, Consuming: s.Consuming, Problems: s.Problems,
		QueueDepth: s.QueueDepth, DLQDepth: s.DLQDepth, OldestAgeSeconds: s.OldestAge.Seconds(), SampledAt: s.SampledAt.UTC(),
		Duplicates: s.Duplicates, LastDuplicateKey: s.LastDuplicate.Key, LastDuplicateAt: s.LastDuplicate.At,
	}
}
