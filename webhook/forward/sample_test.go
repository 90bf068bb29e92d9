package forward

import (
	"fmt"
	"testing"
	"time"

	"github.com/olp-edu/borda/webhook/topology"
)

// TestForward_SamplingKeepsTheHeadOfTheQueue: the sampler reported the
// forward queue's lag by peeking at its head with basic.get +
// nack(requeue); on a quorum queue (the default) that puts the message
// behind the others, so every sample rotated the queue (and, on RabbitMQ
// 4, counted towards the delivery limit). Sampling must leave the head in
// place and still report the lag while messages wait.
func TestForward_SamplingKeepsTheHeadOfTheQueue(t *testing.T) {
	end := newLegacy(t, always(action{status: 200}))
	h := newHarness(t, end, func(c *harnessConfig) { c.Topology.QueueType = topology.QueueType("quorum") })
	old := time.Now().Add(-time.Hour)
	for i := range 3 {
		env := jsonEnvelope(fmt.Sprintf("head-%d", i), `{}`)
		env.ReceivedAt = old.Add(time.Duration(i) * time.Minute)
		h.publish(env)
	}
	f, err := New(h.options())
	if err != nil {
		t.Fatal(err)
	}
	ch, err := h.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	eventually(t, 5*time.Second, "3 ready messages", func() bool { return h.depth(h.top.ForwardQueue) == 3 })
	for range 3 {
		f.sampleOnce(ch)
	}
	// Nothing taken yet: the lag is unknown, and not made up.
	if age := value(f.m.oldestAge); age != 0 {
		t.Errorf("lag = %.0fs before the worker took any event, want 0", age)
	}
	// The events queue (bound to the same key) is sampled too.
	if d, c := value(f.m.eventsDepth), value(f.m.eventsConsumers); d != float64(h.depth(h.top.EventsQueue)) || d < 3 || c != 0 {
		t.Errorf("events queue gauges: depth %v, consumers %v; want its %d messages and no consumer", d, c, h.depth(h.top.EventsQueue))
	}
	f.observeTaken(old) // the worker took an event received an hour ago
	f.sampleOnce(ch)
	if age := value(f.m.oldestAge); age < 3590 || age > 3700 {
		t.Errorf("lag = %.0fs while messages wait, want about 3600s", age)
	}
	if age := f.Status().OldestAge; age < 59*time.Minute || age > 62*time.Minute {
		t.Errorf("Status().OldestAge = %v, want about an hour", age)
	}
	d, ok, err := ch.Get(h.top.ForwardQueue, true)
	if err != nil || !ok || d.MessageId != "head-0" {
		t.Fatalf("head after sampling = %q (%v, %v), want head-0", d.MessageId, ok, err)
	}
}

// TestForward_StatusSaysWhenTheDepthsWereSampled: the operator page showed
// a worker's forward queue depth sampled up to 15 s before (36) beside the
// fresh one (0), both as current. Status carries when they were sampled.
func TestForward_StatusSaysWhenTheDepthsWereSampled(t *testing.T) {
	end := newLegacy(t, always(action{status: 200}))
	h := newHarness(t, end, nil)
	f, err := New(h.options())
	if err != nil {
		t.Fatal(err)
	}
	if at := f.Status().SampledAt; !at.IsZero() {
		t.Fatalf("SampledAt before any sample = %v, want zero", at)
	}
	ch, err := h.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	before := time.Now()
	f.sampleOnce(ch)
	if at := f.Status().SampledAt; at.Before(before) || at.After(time.Now()) {
		t.Errorf("SampledAt = %v, want the sample's time (after %v)", at, before)
	}
}
