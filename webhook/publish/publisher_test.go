package publish

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/olp-edu/borda/webhook/internal/brokertest"
	"github.com/olp-edu/borda/webhook/topology"
)

func TestPublisherPublishesPersistentConfirmed(t *testing.T) {
	t.Parallel()
	cfg := testOptions(t)
	p := newTestPublisher(t, cfg)
	a := brokertest.NewAdmin(t)

	err := p.Publish(context.Background(), Message{ID: "evt-1", Body: []byte(`{"a":1}`), Timestamp: time.Now()})
	if err != nil {
		t.Fatalf("Publish = %v, want nil", err)
	}
	got := a.Drain(cfg.Topology.ForwardQueue)
	if len(got) != 1 {
		t.Fatalf("forward queue has %d messages, want 1", len(got))
	}
	d := got[0]
	if d.MessageId != "evt-1" || d.DeliveryMode != 2 || d.ContentType != "application/json" || string(d.Body) != `{"a":1}` {
		t.Errorf("message = id %q mode %d type %q body %q", d.MessageId, d.DeliveryMode, d.ContentType, d.Body)
	}
}

func TestPublisherQuorumQueueByDefault(t *testing.T) {
	t.Parallel()
	cfg := testOptions(t)
	cfg.Topology.QueueType = topology.Quorum
	p := newTestPublisher(t, cfg)
	if err := p.Publish(context.Background(), Message{ID: "q", Body: []byte(`{}`)}); err != nil {
		t.Fatalf("Publish = %v", err)
	}
	if n := brokertest.NewAdmin(t).Count(cfg.Topology.ForwardQueue); n != 1 {
		t.Fatalf("quorum forward queue has %d, want 1", n)
	}
}

// An unroutable mandatory message gets basic.return then basic.ack; under
// load, not one of them may be reported as success, and routable messages
// interleaved with them on the same channels must be.
func TestAckAfterAReturnIsAFailureUnderLoad(t *testing.T) {
	t.Parallel()
	cfg := testOptions(t)
	cfg.Channels = 2
	p := newTestPublisher(t, cfg)
	a := brokertest.NewAdmin(t)

	const n = 400
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "" // bound
			if i%2 == 1 {
				key = "webhook.unknown"
			}
			errs[i] = p.Publish(context.Background(), Message{ID: fmt.Sprint(i), RoutingKey: key, Body: []byte(`{}`)})
		}()
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		if i%2 == 1 {
			if !errors.Is(err, ErrUnroutable) {
				t.Fatalf("unroutable publish %d = %v, want ErrUnroutable", i, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("routable publish %d = %v, want nil", i, err)
		}
		ok++
	}
	if got := a.Count(cfg.Topology.ForwardQueue); got != ok {
		t.Fatalf("forward queue has %d, want the %d confirmed", got, ok)
	}
}

func TestPublisherNotReadyWhenBrokerRefuses(t *testing.T) {
	t.Parallel()
	p, err := New(Options{URL: "amqp://guest:guest@127.0.0.1:1/", ConfirmTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(context.Background())
	brokertest.Eventually(t, 5*time.Second, "the first dial to fail", func() bool {
		err := p.Ready()
		return err != nil && strings.Contains(err.Error(), "dialing broker")
	})
	if err := p.Ready(); !errors.Is(err, ErrBrokerUnavailable) {
		t.Fatalf("Ready = %v, want ErrBrokerUnavailable", err)
	}
	// "At once": the broker never comes up, so a Publish that waited for
	// a connection would return only at its context's deadline (30 s);
	// it returns ErrBrokerUnavailable, not the deadline, and not a
	// confirm timeout (it never published).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err = p.Publish(ctx, Message{ID: "x", Body: []byte(`{}`)})
	if !errors.Is(err, ErrBrokerUnavailable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrConfirmTimeout) {
		t.Fatalf("Publish = %v after %s, want ErrBrokerUnavailable at once", err, time.Since(start))
	}
}

func TestPublisherStopDrainsAndRefuses(t *testing.T) {
	t.Parallel()
	cfg := testOptions(t)
	p := newTestPublisher(t, cfg)
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- p.Publish(context.Background(), Message{ID: fmt.Sprint(i), Body: []byte(`{}`)})
		}()
	}
	brokertest.Eventually(t, 5*time.Second, "publishes in flight", func() bool { return len(p.slots) > 0 || len(errs) > 0 })
	if err := p.Stop(context.Background()); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && !errors.Is(err, ErrBrokerUnavailable) {
			t.Errorf("publish during close = %v", err)
		}
	}
	if err := p.Publish(context.Background(), Message{ID: "late", Body: []byte(`{}`)}); !errors.Is(err, ErrBrokerUnavailable) {
		t.Fatalf("Publish after Stop = %v, want ErrBrokerUnavailable", err)
	}
	if err := p.Ready(); err == nil {
		t.Fatal("Ready after Stop = nil")
	}
}

// A channel-level error (the exchange deleted under us: 404 on publish)
// fails the waiting publish at once; the channel is replaced on the same
// connection after redeclaring the topology.
func TestPublisherReplacesAChannelClosedByTheBroker(t *testing.T) {
	t.Parallel()
	cfg := testOptions(t)
	cfg.Channels = 1
	tape := &logTape{}
	cfg.Logger = slog.New(slog.NewTextHandler(tape, nil))
	p := newTestPublisher(t, cfg)
	a := brokertest.NewAdmin(t)
	ch := a.Channel()
	if err := ch.ExchangeDelete(cfg.Exchange, false, false); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	p.mu.RLock()
	conn := p.conn
	p.mu.RUnlock()

	// The channel the broker closed answers the publish waiting on it
	// (ErrBrokerUnavailable), not its confirm timeout.
	start := time.Now()
	err := p.Publish(context.Background(), Message{ID: "gone", Body: []byte(`{}`)})
	if !errors.Is(err, ErrBrokerUnavailable) || errors.Is(err, ErrConfirmTimeout) {
		t.Fatalf("Publish to a deleted exchange = %v after %s, want ErrBrokerUnavailable at once", err, time.Since(start))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := p.Publish(context.Background(), Message{ID: "back", Body: []byte(`{}`)})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing 10 s later: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.conn != conn {
		t.Error("the connection was replaced; only the channel should be")
	}
	if len(p.chans) != cfg.Channels {
		t.Errorf("%d channels after the replacement, want %d (the closed one dropped)", len(p.chans), cfg.Channels)
	}
	for _, c := range p.chans {
		if c.closedErr() != nil {
			t.Errorf("a closed channel is still in the pool: %v", c.closedErr())
		}
	}
	if strings.Contains(tape.String(), "redeclaring webhook topology for a new channel") {
		t.Errorf("a successful redeclare was logged as a failure:\n%s", tape)
	}
	if n := a.Count(cfg.Topology.ForwardQueue); n != 1 {
		t.Errorf("forward queue holds %d, want 1", n)
	}
}

// Publishes share the first open channel (the broker batches one
// channel's acks); a closed one is skipped until its replacement arrives.
func TestPickPrefersTheFirstOpenChannel(t *testing.T) {
	t.Parallel()
	ch := func(open bool) *confirmChannel {
		c := &confirmChannel{done: make(chan struct{})}
		if !open {
			close(c.done)
		}
		return c
	}
	a, b, c := ch(true), ch(true), ch(true)
	for range 3 {
		if got := pick([]*confirmChannel{a, b, c}); got != a {
			t.Fatal("pick did not keep to the first open channel")
		}
	}
	closedA := ch(false)
	if got := pick([]*confirmChannel{closedA, b, c}); got != b {
		t.Fatal("pick did not fail over past a closed channel")
	}
	closedB, closedC := ch(false), ch(false)
	if got := pick([]*confirmChannel{closedA, closedB, closedC}); got != closedA {
		t.Fatal("with every channel closed, pick should return the first (its publish fails as unavailable)")
	}
	// A nacked channel is being retired (S04): an open one never nacked
	// comes first; with every open one nacked, the first of those, never
	// a closed one.
	nackedB, nackedC := ch(true), ch(true)
	nackedB.nacked.Store(true)
	nackedC.nacked.Store(true)
	if got := pick([]*confirmChannel{nackedB, c}); got != c {
		t.Fatal("pick chose a nacked channel over an open one never nacked")
	}
	if got := pick([]*confirmChannel{closedA, nackedB, nackedC}); got != nackedB {
		t.Fatal("with every open channel nacked, pick should return the first open one")
	}
}

// Stop waits for the confirms of the publishes already in flight: with
// the broker's answers delayed past the close handshake's bound
// (closeTimeout, 1 s) but well within confirm_timeout, every publish that held
// a slot when Stop was called is acked (nil), not failed as unavailable by
// a connection closed under it.
func TestStopWaitsForTheConfirmsOfPublishesInFlight(t *testing.T) {
	t.Parallel()
	cfg := testOptions(t)
	cfg.ConfirmTimeout = 10 * time.Second // the confirms' 1.5 s delay stays well inside it on a loaded machine
	proxy := withProxy(t, &cfg)
	p := newTestPublisher(t, cfg)
	if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(
		`{"name":"slow-confirms","type":"latency","stream":"downstream","attributes":{"latency":1500}}`)); err != nil {
		t.Fatal(err)
	}
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			errs <- p.Publish(context.Background(), Message{ID: fmt.Sprint("inflight-", i), Body: []byte(`{}`)})
		}()
	}
	brokertest.Eventually(t, 5*time.Second, "every publish in flight", func() bool { return len(p.slots) == n })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("a publish in flight when Stop was called = %v, want its ack", err)
		}
	}
}

// The returns buffer holds the in-flight cap plus one: with a cap of one
// publish, a return still reaches settle before its ack (an unbuffered
// notification would hold amqp091-go's reader until its 5 s drop, then
// the ack would pass for a confirm of a message that reached no queue).
func TestUnroutableWithOneSlotInFlightIsNeverAcked(t *testing.T) {
	t.Parallel()
	cfg := testOptions(t)
	cfg.Channels, cfg.MaxInFlight = 1, 1
	p := newTestPublisher(t, cfg)
	for i := range 3 {
		err := p.Publish(context.Background(), Message{ID: fmt.Sprint("lost-", i), RoutingKey: "webhook.unknown", Body: []byte(`{}`)})
		if !errors.Is(err, ErrUnroutable) {
			t.Fatalf("unroutable publish %d with one slot = %v, want ErrUnroutable", i, err)
		}
	}
}
