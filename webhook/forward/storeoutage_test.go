package forward

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
)

// A short Redis outage pauses consuming and resumes it on the same
// session once a probe answers: every event is delivered exactly once,
// the worker is ready again, and the consuming connection was not
// dropped and redialled for it (the 2-minute version under a delivery
// limit is TestForward_TwoMinuteRedisOutageUnderADeliveryLimitLosesNothing).
func TestForward_ShortRedisOutagePausesAndResumesOnTheSameSession(t *testing.T) {
	t.Parallel()
	proxy, viaProxy := redisBehindProxy(t)
	end := newLegacy(t, always(action{status: 200}))
	h := newHarness(t, end, viaProxy)
	var tape servicetest.LogBuffer
	f := h.start(func(f *Forwarder) { f.log = slog.New(slog.NewTextHandler(&tape, nil)) })

	const before, during = 3, 5
	for i := range before {
		h.publish(jsonEnvelope(fmt.Sprintf("so-up-%d", i), `{}`))
	}
	eventually(t, 10*time.Second, "the first events delivered", func() bool { return len(end.delivered()) == before })
	proxy.SetDown(true)
	for i := range during {
		h.publish(jsonEnvelope(fmt.Sprintf("so-out-%d", i), `{}`))
	}
	eventually(t, 15*time.Second, "readiness to name Redis", func() bool {
		r := f.Readiness()
		return len(r) > 0 && strings.HasPrefix(r[0], "redis:")
	})
	proxy.SetDown(false)
	eventually(t, 30*time.Second, "every event delivered after Redis came back", func() bool {
		return len(end.delivered()) == before+during
	})
	eventually(t, 10*time.Second, "ready again", func() bool { return len(f.Readiness()) == 0 })
	for id, c := range end.delivered() {
		if c != 1 {
			t.Errorf("%s delivered %d times, want exactly once", id, c)
		}
	}
	eventually(t, 5*time.Second, "the resumption logged", func() bool { return strings.Contains(tape.String(), "consuming resumes") })
	if log := tape.String(); strings.Contains(log, "forward session ended") {
		t.Errorf("the outage was not met by pausing and resuming the same session:\n%s", log)
	}
}
