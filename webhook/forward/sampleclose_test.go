package forward

import (
	"context"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/amqpaddr"
)

// TestForward_SamplerClosesItsChannelOnExit: the sampler's channel is
// closed when it stops, not left to the connection's close. On a
// connection allowed one channel, that channel is free again once the
// sampler returned.
func TestForward_SamplerClosesItsChannelOnExit(t *testing.T) {
	h := newHarness(t, newLegacy(t, always(action{status: 200})), nil)
	f, err := New(h.options())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := amqpaddr.DialConfig(h.cfg.Options.AMQPURL, amqp.Config{ChannelMax: 1})
	if err != nil {
		t.Fatalf("dialing amqp: %v", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // one sample, then exit
	f.sample(ctx, conn)
	if f.sampledAt.Load() == 0 {
		t.Fatal("the sampler did not sample on its channel")
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("the sampler's channel is still open after it returned: %v", err)
	}
	_ = ch.Close()
}

// TestForward_SamplerWithoutAChannelExitsQuietly: a sampler whose
// channel could not be opened (the connection is gone) returns without
// closing a channel it never had.
func TestForward_SamplerWithoutAChannelExitsQuietly(t *testing.T) {
	h := newHarness(t, newLegacy(t, always(action{status: 200})), nil)
	f, err := New(h.options())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := amqpaddr.DialConfig(h.cfg.Options.AMQPURL, amqp.Config{})
	if err != nil {
		t.Fatalf("dialing amqp: %v", err)
	}
	_ = conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.sample(ctx, conn)
	if f.sampledAt.Load() != 0 {
		t.Fatal("the sampler sampled without a channel")
	}
}
