package forward

import (
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestBreakerStatusSaysWhichFailureOpenedIt(t *testing.T) {
	b := newBreaker(2, time.Hour, senderSet{}, nil, prometheus.NewGauge(prometheus.GaugeOpts{Name: "g", Help: "h"}), slog.New(slog.DiscardHandler))
	if st := b.Status(); st.State != "closed" || st.OpenedBy != "" || st.Since.IsZero() {
		t.Fatalf("new breaker: %+v", st)
	}
	fail := func(reason string) {
		done, err := b.allow()
		if err != nil {
			t.Fatal(err)
		}
		b.failed(reason, time.Now())
		done(errFailed)
	}
	fail("timeout")
	if st := b.Status(); st.State != "closed" || st.LastFailure != "timeout" || st.OpenedBy != "" {
		t.Fatalf("after one failure: %+v", st)
	}
	before := time.Now()
	fail(breakerReason(Result{Class: "5xx", Status: 503, Excerpt: "down for maintenance"}))
	st := b.Status()
	if st.State != "open" || st.OpenedBy != "5xx (HTTP 503): down for maintenance" || st.Since.Before(before) {
		t.Fatalf("after the second failure: %+v", st)
	}
}
