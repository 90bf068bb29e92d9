package forward

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/olp-edu/borda/redisconn"
)

// TestForward_NotReadyWhileRedisIsUnreachable (issue 23, item 4): `borda
// forward` reported ready with its Redis unreachable until a delivery
// failed. The store's health probe makes /readyz name Redis within its
// bound with no delivery at all, and the forwarder does not consume.
func TestForward_NotReadyWhileRedisIsUnreachable(t *testing.T) {
	end := newLegacy(t, always(action{status: 200}))
	h := newHarness(t, end, nil)
	dead, err := redisconn.New(redisconn.Options{URL: "redis://127.0.0.1:1/0", DialTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dead.Close() })
	opts := h.options()
	opts.Redis = dead
	opts.Reconnect = 100 * time.Millisecond
	f, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	bound := storeHealthEvery + storeHealthTimeout + 3*time.Second
	eventually(t, bound, "readiness to name the unreachable Redis", func() bool {
		return slices.ContainsFunc(f.Readiness(), func(p string) bool { return strings.HasPrefix(p, "redis: the idempotency store does not answer") })
	})
	if f.consuming.Load() {
		t.Error("consuming with the idempotency store unreachable")
	}
}

// TestForward_ReadyOnceRedisAnswersAProbe: with a Redis that answers, the
// probe clears the "not probed yet" problem and the worker becomes ready.
func TestForward_ReadyOnceRedisAnswersAProbe(t *testing.T) {
	end := newLegacy(t, always(action{status: 200}))
	h := newHarness(t, end, nil)
	f := h.start(nil)
	eventually(t, 10*time.Second, "ready", func() bool { return len(f.Readiness()) == 0 })
}
