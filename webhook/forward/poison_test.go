package forward

import (
	"fmt"
	"testing"
	"time"

	"github.com/olp-edu/borda/webhook/envelope"
	"github.com/olp-edu/borda/webhook/topology"
)

// TestForward_OneSourcesPoisonEventsDoNotPauseTheOtherSources is fresh
// attack pass 8's F01 against the real broker: one token holder sends
// events the legacy endpoint answers 500 to (it crashes on their payload);
// they opened the shared breaker and every other source's deliveries
// waited. Now they walk the retry ladder to the dead-letter queue while
// the other source's events are delivered, and the breaker never opens.
func TestForward_OneSourcesPoisonEventsDoNotPauseTheOtherSources(t *testing.T) {
	const poison, good = 12, 6
	poisonKeys := map[string]bool{}
	for i := range poison {
		poisonKeys[IdempotencyKey(fmt.Sprintf("hostile:p-%d", i))] = true
	}
	end := newLegacy(t, func(_ int, key string) action {
		if poisonKeys[key] {
			return action{status: 500, body: "Fatal error: Undefined index: text"}
		}
		return action{status: 200}
	})
	h := newHarness(t, end, func(c *harnessConfig) {
		c.Options.Breaker = BreakerOptions{Failures: 3, OpenFor: time.Hour}
		c.Options.Sources = []string{"evolution", "hostile"}
		c.Options.Prefetch = 1
		c.Topology.Retry = []topology.Delay{{Name: "100ms", TTL: 100 * time.Millisecond}}
	})
	f := h.start(nil)
	for i := range poison {
		h.publish(envelope.New(fmt.Sprintf("p-%d", i), "hostile", "application/json", nil, []byte(`{"boom":1}`), time.Now()))
	}
	for i := range good {
		h.publish(jsonEnvelope(fmt.Sprintf("g-%d", i), `{}`))
	}
	// Every poison event is tried twice (the first POST and its one rung)
	// and dead-lettered; every good one is delivered.
	h.dlq(poison, 20*time.Second)
	eventually(t, 20*time.Second, "the other source's events delivered", func() bool { return len(end.delivered()) == good })
	tried := 0
	for _, hit := range end.all() {
		if poisonKeys[hit.header.Get(HeaderIdempotencyKey)] {
			tried++
		}
	}
	if tried != 2*poison {
		t.Errorf("%d POSTs of poison events, want %d (each tried on every rung: the failures under test happened)", tried, 2*poison)
	}
	if st := f.breaker.Status(); st.OpenedBy != "" || st.State != "closed" {
		t.Errorf("breaker %s, opened by %q: one source's answered failures opened it", st.State, st.OpenedBy)
	}
}
