package forward

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// settle tries a failing mark markTries times in all, waiting 100, 200,
// 400 and 800 ms between (1.5 s), and returns the last answer; a mark
// that answers stops it at once.
func TestSettleTriesTheMarkAtMostMarkTriesTimes(t *testing.T) {
	t.Parallel()
	w := &worker{f: &Forwarder{log: slog.New(slog.DiscardHandler)}}
	for _, tc := range []struct {
		name     string
		failures int // before the mark answers; markTries or more: never
		calls    int
		ok       bool
	}{
		{"answers at once", 0, 1, true},
		{"answers at the third try", 2, 3, true},
		{"never answers", markTries + 10, markTries, false},
	} {
		calls := 0
		mark := func(context.Context) (bool, error) {
			calls++
			if calls <= tc.failures {
				return false, errors.New("redis: connection reset")
			}
			return true, nil
		}
		type answer struct {
			ok  bool
			err error
		}
		done := make(chan answer, 1)
		go func() {
			ok, err := w.settle(context.Background(), "forwarded", "ev-1", mark)
			done <- answer{ok, err}
		}()
		select {
		case a := <-done:
			if a.ok != tc.ok || (a.err == nil) != tc.ok || calls != tc.calls {
				t.Errorf("%s: settle = %v, %v after %d calls; want ok %v after %d", tc.name, a.ok, a.err, calls, tc.ok, tc.calls)
			}
		case <-time.After(10 * time.Second): // the waits add up to 1.5 s
			t.Fatalf("%s: settle still trying after 10 s", tc.name)
		}
	}
}

// The replay headers of a delivery (what `borda dlq replay` sets) name the
// replay that may take over a key: the replay id, forced or not; a forced
// replay without an id is "force"; no header, no replay.
func TestReplayIDAndForcedReplayReadTheReplayHeaders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		h              amqp.Table
		replay, forced string
	}{
		{"no replay", amqp.Table{}, "", ""},
		{"a replay", amqp.Table{HeaderReplay: "r-7"}, "r-7", ""},
		{"a forced replay", amqp.Table{HeaderReplay: "r-7", HeaderReplayForce: true}, "r-7", "r-7"},
		{"forced without an id", amqp.Table{HeaderReplayForce: true}, "force", "force"},
		{"force false", amqp.Table{HeaderReplay: "r-7", HeaderReplayForce: false}, "r-7", ""},
	} {
		if got := replayID(tc.h); got != tc.replay {
			t.Errorf("%s: replayID = %q, want %q", tc.name, got, tc.replay)
		}
		if got := forcedReplay(tc.h); got != tc.forced {
			t.Errorf("%s: forcedReplay = %q, want %q", tc.name, got, tc.forced)
		}
	}
}
