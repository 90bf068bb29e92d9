package telemetry

import (
	"fmt"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/keyspace"
)

// distCount is one TakeDistribution callback.
type distCount struct {
	rule     string
	at, past int64
}

// distSource hands out its counts once (a DistributionSource).
type distSource []distCount

func (s *distSource) TakeDistribution(fn func(rule string, at, past int64)) {
	for _, d := range *s {
		fn(d.rule, d.at, d.past)
	}
	*s = nil
}

// A flush writes the rate limiter's distribution counts under the flush's
// minute beside the batch's events, keyed "distribution:{rule}:{at}": a
// threshold of 0 counts, and no count is written for a rule that is empty
// or not ValidText, a negative threshold, or no subject-window past it.
func TestFlushWritesTheDistributionCounts(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 4, 5, 6, 30, 0, time.UTC)
	for _, tt := range []struct {
		name   string
		events int
		counts distSource
		want   map[string]int64
	}{
		{"one event and one count", 1, distSource{{"user", 10, 3}}, map[string]int64{
			"olp-dev:t:m:portal:/a:202603040506":            1,
			"olp-dev:t:m:status:200:202603040506":           1,
			"olp-dev:t:m:distribution:user:10:202603040506": 3,
		}},
		{"bounds", 0, distSource{{"user", 0, 2}, {"user", 20, 0}, {"user", -1, 5}, {"", 10, 1}, {"us\x00er", 10, 1}, {"ip", 5, 1}}, map[string]int64{
			"olp-dev:t:m:distribution:user:0:202603040506": 2,
			"olp-dev:t:m:distribution:ip:5:202603040506":   1,
		}},
		{"nothing past", 0, distSource{{"user", 10, 0}}, map[string]int64{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sink := &memSink{}
			cfg := testConfig(100)
			cfg.Clock = clock.Func(func() time.Time { return at })
			r, _ := newTestRecorder(t, cfg, keyspace.MustNew("olp-dev:t:"), sink) // not started: the test flushes
			r.SetDistribution(&tt.counts)
			b := newBatch(r.maxPerRoute)
			for range tt.events {
				r.Record(Event{Served: true, Time: at, Route: "portal", Path: "/a", Status: 200})
			}
			r.fold(t.Context(), b)
			r.flush(t.Context(), b)
			if fmt.Sprint(sink.counts) != fmt.Sprint(tt.want) && !(len(sink.counts) == 0 && len(tt.want) == 0) {
				t.Errorf("written %v, want %v", sink.counts, tt.want)
			}
			if len(tt.want) == 0 && sink.batches != 0 {
				t.Errorf("%d batches written for nothing, want none", sink.batches)
			}
		})
	}
}
