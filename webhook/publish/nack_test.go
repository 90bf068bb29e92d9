package publish

import (
	"context"
	"errors"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/servicetest"
)

// TestBrokerNackIsANackNotAnOutage: RabbitMQ nacks a publish to a full
// queue with x-overflow reject-publish while the channel stays open. The
// publisher waits on amqp091-go's DeferredConfirmation, which a closing
// channel also resolves as a nack: a real nack must come back as ErrNack
// (503 NACK), not as ErrBrokerUnavailable, and the publishes around it
// still succeed on the same channel.
func TestBrokerNackIsANackNotAnOutage(t *testing.T) {
	t.Parallel()
	cfg := testOptions(t)
	cfg.Channels = 1
	p := newTestPublisher(t, cfg)

	conn, ch := servicetest.AMQPChannel(t, cfg.URL)
	queue := cfg.Topology.ForwardQueue + "-full"
	exchange := cfg.Exchange + "-full"
	servicetest.DeleteAtCleanup(t, conn, []string{queue}, []string{exchange})
	if err := ch.ExchangeDeclare(exchange, "direct", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(queue, false, true, false, false, amqp.Table{
		"x-max-length": int32(1), "x-overflow": "reject-publish",
	}); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(queue, "k", exchange, false, nil); err != nil {
		t.Fatal(err)
	}

	msg := func() amqp.Publishing { return amqp.Publishing{Body: []byte(`{}`), DeliveryMode: amqp.Persistent} }
	if err := p.PublishTo(context.Background(), exchange, "k", msg()); err != nil {
		t.Fatalf("first publish into the empty queue = %v, want nil", err)
	}
	for i := range 3 {
		err := p.PublishTo(context.Background(), exchange, "k", msg())
		if !errors.Is(err, ErrNack) {
			t.Fatalf("publish %d into the full queue = %v, want ErrNack", i, err)
		}
		if errors.Is(err, ErrBrokerUnavailable) {
			t.Fatalf("publish %d: a nack reported as an outage: %v", i, err)
		}
	}
	if err := p.Publish(context.Background(), Message{ID: "after-nack", Body: []byte(`{}`)}); err != nil {
		t.Fatalf("publish after the nacks = %v, want nil (the channel stays open)", err)
	}
	if err := p.Ready(); err != nil {
		t.Fatalf("Ready after the nacks = %v", err)
	}
}
