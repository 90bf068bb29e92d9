package publish

import (
	"context"
	"errors"
	"testing"

	"github.com/olp-edu/borda/webhook/internal/brokertest"
)

// TestPublisher_WithoutAnEventsQueueEachEventIsWrittenOnce (issue 23,
// item 4): with forward.events_queue "" the topology binds no events
// queue, so an event is stored once, in the forward queue, and nowhere
// else: with the forward queue gone it is unroutable (503
// UNROUTABLE_MESSAGE), never confirmed into another queue.
func TestPublisher_WithoutAnEventsQueueEachEventIsWrittenOnce(t *testing.T) {
	opts := testOptions(t)
	opts.Topology.EventsQueue = ""
	top := *opts.Topology
	p := newTestPublisher(t, opts)
	admin := brokertest.NewAdmin(t)
	ctx := context.Background()
	if err := p.Publish(ctx, Message{ID: "once-1", Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if n := admin.Count(top.ForwardQueue); n != 1 {
		t.Errorf("forward queue holds %d, want 1", n)
	}
	ch := admin.Channel()
	if _, err := ch.QueueDelete(top.ForwardQueue, false, false, false); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	if err := p.Publish(ctx, Message{ID: "once-2", Body: []byte(`{}`)}); !errors.Is(err, ErrUnroutable) {
		t.Errorf("publish with no forward queue and no events queue = %v, want ErrUnroutable (no other queue takes it)", err)
	}
}
