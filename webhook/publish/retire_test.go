package publish

import (
	"context"
	"errors"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// onlyChannel returns the publisher's one channel (cfg.Channels = 1).
func onlyChannel(t *testing.T, p *Publisher) *confirmChannel {
	t.Helper()
	p.mu.RLock()
	defer p.mu.RUnlock()
	if len(p.chans) != 1 {
		t.Fatalf("%d channels, want 1", len(p.chans))
	}
	return p.chans[0]
}

// A publish that picked a channel just before its retirement and ran only
// after the retired channel closed (nothing pending: at once) was answered
// "channel closed" and 503, the replacement open (fresh attack pass on the
// retirement, R1). It is now told the channel is retiring, with its slot,
// so PublishTo publishes on the replacement.
func TestPublishThatPickedARetiredChannelAfterItClosedIsSentToTheReplacement(t *testing.T) {
	t.Parallel()
	cfg := testOptions(t)
	cfg.Channels = 1
	p := newTestPublisher(t, cfg)
	p.mu.RLock()
	c := pick(p.chans) // PublishTo's pick
	p.mu.RUnlock()

	c.nacked.Store(true) // another publish's nack retires it, as settle does
	p.nacked(c)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the retired channel was not closed")
	}

	d := newDeadline(context.Background(), cfg.ConfirmTimeout)
	defer d.stop()
	p.slots <- struct{}{}
	w := newWaiter("late", p.slots)
	if _, err := c.publish(d, cfg.Exchange, cfg.RoutingKey, amqp.Publishing{Body: []byte(`{}`)}, w); !errors.Is(err, errChannelRetiring) {
		t.Errorf("publish on the channel it picked before the retirement = %v, want errChannelRetiring (PublishTo picks again on that alone)", err)
	}
	if len(p.slots) != 1 {
		t.Errorf("%d slots taken, want the publish's own still held for the retry", len(p.slots))
	}
	w.release()
}

// A publish waiting for a channel's lock (held by a publish that has not
// registered yet, one waiting for room on the socket) when the channel is
// retired and closed was answered 503 "publishing channel closed" (R2 of
// the same pass). It is now published on the replacement.
func TestPublishWaitingForARetiringChannelsLockIsSentToTheReplacement(t *testing.T) {
	t.Parallel()
	cfg := testOptions(t)
	cfg.Channels = 1
	p := newTestPublisher(t, cfg)
	old := onlyChannel(t, p)
	old.lock <- struct{}{} // held by another publish, not registered yet
	defer func() { <-old.lock }()

	res := make(chan error, 1)
	go func() {
		res <- p.PublishTo(context.Background(), cfg.Exchange, cfg.RoutingKey, amqp.Publishing{Body: []byte(`{}`), DeliveryMode: amqp.Persistent})
	}()
	// PublishTo takes its in-flight slot, picks the old channel (the only
	// one) and waits for its lock. Should the retirement below come
	// between the slot and the pick, it picks the replacement: the test
	// cannot fail falsely, only miss the interleaving.
	waitFor(t, "PublishTo holding its in-flight slot", func() bool { return len(p.slots) == 1 })
	old.nacked.Store(true)
	p.nacked(old)

	select {
	case err := <-res:
		if err != nil {
			t.Errorf("PublishTo during the retirement = %v, want nil (the replacement is open)", err)
		}
	case <-time.After(2 * cfg.ConfirmTimeout):
		t.Fatal("PublishTo did not return")
	}
	if len(p.slots) != 0 {
		t.Errorf("%d in-flight slots still taken", len(p.slots))
	}
}

// With every channel retiring and no replacement (a session ending
// meanwhile), a publish tries maxRetiringTries picks and answers
// unavailable at once, without sending and without waiting for its
// deadline; its slot is given back.
func TestPublishWithEveryChannelRetiringAnswersUnavailableAtOnce(t *testing.T) {
	t.Parallel()
	cfg := testOptions(t)
	cfg.Channels = 2
	cfg.ConfirmTimeout = 30 * time.Second
	p := newTestPublisher(t, cfg)
	p.mu.RLock()
	for _, c := range p.chans {
		c.retire()
	}
	p.mu.RUnlock()
	err := p.PublishTo(context.Background(), cfg.Exchange, cfg.RoutingKey, amqp.Publishing{Body: []byte(`{}`)})
	if !errors.Is(err, ErrBrokerUnavailable) || !errors.Is(err, errChannelRetiring) {
		t.Errorf("PublishTo with every channel retiring = %v, want ErrBrokerUnavailable wrapping errChannelRetiring", err)
	}
	if len(p.slots) != 0 {
		t.Errorf("%d in-flight slots still taken", len(p.slots))
	}
}
