package publish

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/servicetest"
)

// stalledSocket returns a coalescing socket whose flusher is stuck in a
// write (the broker stopped reading), with nothing queued behind it.
func stalledSocket(t *testing.T) *coalescingConn {
	t.Helper()
	c := newCoalescingConn(&stalledConn{closed: make(chan struct{})})
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the flusher inside its stalled write", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.writing && len(c.pending) == 0
	})
	return c
}

// fullSocket is a stalledSocket with coalesceLimit bytes queued: no room.
func fullSocket(t *testing.T) *coalescingConn {
	t.Helper()
	c := stalledSocket(t)
	if _, err := c.Write(make([]byte, coalesceLimit)); err != nil {
		t.Fatal(err)
	}
	return c
}

// A publish meets a socket whose queue is full: it waits for room within
// its deadline and answers ErrConfirmTimeout, never queueing its message
// (the queue's bound: coalesceLimit plus one message per channel) and
// never reaching the AMQP channel; its in-flight slot is given back.
func TestPublishWaitsForRoomInTheSocketQueueAndNeverGrowsIt(t *testing.T) {
	t.Parallel()
	sock := fullSocket(t)
	c := &confirmChannel{sock: sock, lock: make(chan struct{}, 1), pending: map[string]*waiter{}, done: make(chan struct{})}
	slots, w := heldWaiter()
	d := newDeadline(context.Background(), 30*time.Millisecond)
	defer d.stop()
	_, err := c.publish(d, "x", "k", msgPublishing(), w)
	if !errors.Is(err, ErrConfirmTimeout) || !strings.Contains(err.Error(), "waiting for the socket") {
		t.Fatalf("publish into a full socket queue = %v, want ErrConfirmTimeout waiting for the socket", err)
	}
	sock.mu.Lock()
	queued := len(sock.pending)
	sock.mu.Unlock()
	if queued != coalesceLimit {
		t.Errorf("%d bytes queued after the refused publish, want %d (it must not queue)", queued, coalesceLimit)
	}
	if len(slots) != 0 {
		t.Error("the refused publish kept its in-flight slot")
	}
	if len(c.pending) != 0 {
		t.Error("the refused publish is still registered as pending")
	}
}

// A deadline says why a wait ended: the caller's ctx's own error when it
// ended (a request gone away is not a timeout), else DeadlineExceeded;
// passed is true from its instant on, or once the ctx ended.
func TestDeadlineSaysWhyTheWaitEnded(t *testing.T) {
	d := newDeadline(context.Background(), -time.Second)
	defer d.stop()
	if !d.passed() || !errors.Is(d.err(), context.DeadlineExceeded) {
		t.Errorf("a deadline in the past: passed %v, err %v; want true, DeadlineExceeded", d.passed(), d.err())
	}
	ctx, cancel := context.WithCancel(context.Background())
	d = newDeadline(ctx, time.Hour)
	defer d.stop()
	if d.passed() {
		t.Error("a deadline an hour away has passed")
	}
	cancel()
	if !d.passed() || !errors.Is(d.err(), context.Canceled) {
		t.Errorf("the caller's ctx cancelled: passed %v, err %v; want true, Canceled", d.passed(), d.err())
	}
	soon, cancelSoon := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancelSoon()
	d = newDeadline(soon, time.Hour)
	defer d.stop()
	if !d.at.Equal(mustDeadline(t, soon)) {
		t.Errorf("the caller's earlier deadline was not kept: at %v", d.at)
	}
}

func mustDeadline(t *testing.T, ctx context.Context) time.Time {
	t.Helper()
	at, ok := ctx.Deadline()
	if !ok {
		t.Fatal("no deadline")
	}
	return at
}

// settle's outcomes on a channel that is still open: a return that named
// the publish makes it ErrUnroutable and asks for a redeclare (the queue
// may have been deleted under the gateway); a broker nack makes it
// ErrNack, marks the channel nacked and hands it to the retirement; both
// give the in-flight slot back.
func TestSettleReportsAReturnAndANackAndTellsThePublisher(t *testing.T) {
	t.Parallel()
	unroutable := 0
	var nackedOn *confirmChannel
	c := &confirmChannel{
		ch:           &amqp.Channel{}, // never closed
		returns:      make(chan amqp.Return, 2),
		pending:      map[string]*waiter{},
		onUnroutable: func() { unroutable++ },
		onNack:       func(n *confirmChannel) { nackedOn = n },
	}
	slots := make(chan struct{}, 2)
	slots <- struct{}{}
	slots <- struct{}{}
	returned := &waiter{corID: "r", dc: &amqp.DeferredConfirmation{}, slots: slots}
	nacked := &waiter{corID: "n", dc: &amqp.DeferredConfirmation{}, slots: slots}
	c.pending["r"], c.pending["n"] = returned, nacked
	c.returns <- amqp.Return{CorrelationId: "r"}

	if err := c.settle(returned); !errors.Is(err, ErrUnroutable) {
		t.Errorf("settle of a returned publish = %v, want ErrUnroutable", err)
	}
	if unroutable != 1 {
		t.Errorf("a return asked for %d redeclares, want 1", unroutable)
	}
	if c.nacked.Load() || nackedOn != nil {
		t.Error("a return marked the channel nacked")
	}
	if err := c.settle(nacked); !errors.Is(err, ErrNack) {
		t.Errorf("settle of a nacked publish = %v, want ErrNack", err)
	}
	if !c.nacked.Load() || nackedOn != c {
		t.Errorf("a nack: channel nacked = %v, handed to the retirement = %v", c.nacked.Load(), nackedOn == c)
	}
	if unroutable != 1 {
		t.Errorf("a nack asked for a redeclare (%d)", unroutable)
	}
	if len(slots) != 0 || len(c.pending) != 0 {
		t.Errorf("after settling both: %d slots taken, %d pending", len(slots), len(c.pending))
	}
}

// A publish unanswered when its channel closed is never an ack: settle
// reports ErrBrokerUnavailable, with the reason the channel closed when
// watch has recorded it, and without it in the instant before (amqp091-go
// marks the channel closed before it resolves the confirmations).
func TestSettleOnAClosedChannelIsUnavailableEvenBeforeItsReasonIsKnown(t *testing.T) {
	t.Parallel()
	_, ch := servicetest.AMQPChannel(t, servicetest.AMQPURL(t))
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	for _, reason := range []error{nil, fmt.Errorf("%w: channel closed with the confirm outstanding: NOT_FOUND", ErrBrokerUnavailable)} {
		c := &confirmChannel{ch: ch, returns: make(chan amqp.Return, 1), pending: map[string]*waiter{}, closed: reason}
		slots := make(chan struct{}, 1)
		slots <- struct{}{}
		w := &waiter{corID: "1", dc: &amqp.DeferredConfirmation{}, slots: slots}
		c.pending["1"] = w
		err := c.settle(w)
		if !errors.Is(err, ErrBrokerUnavailable) {
			t.Errorf("closed channel, reason %v: settle = %v, want ErrBrokerUnavailable", reason, err)
		}
		if reason != nil && err != reason {
			t.Errorf("settle = %v, want the recorded reason %v", err, reason)
		}
		if len(slots) != 0 {
			t.Error("the slot was kept")
		}
	}
}

// A publish that reaches a channel being retired (its replacement in the
// pool already) sends nothing, registers nothing and keeps its in-flight
// slot, for the publisher to publish on the replacement: closing the old
// channel once its pending publishes settled can then never cut one that
// was on its way in (a loaded machine answered such a publish 503).
func TestPublishIntoARetiringChannelSendsNothingAndKeepsItsSlot(t *testing.T) {
	t.Parallel()
	c := &confirmChannel{lock: make(chan struct{}, 1), pending: map[string]*waiter{}, done: make(chan struct{})}
	c.retire()
	slots, w := heldWaiter()
	d := newDeadline(context.Background(), time.Second)
	defer d.stop()
	if _, err := c.publish(d, "x", "k", msgPublishing(), w); !errors.Is(err, errChannelRetiring) {
		t.Fatalf("publish into a retiring channel = %v, want errChannelRetiring", err)
	}
	if len(slots) != 1 {
		t.Error("the publish gave its in-flight slot back: the retry on the replacement would run uncounted")
	}
	if len(c.pending) != 0 {
		t.Error("the publish is registered as pending on the retiring channel")
	}
	if !c.oldestPending().IsZero() {
		t.Error("the retiring channel reports a pending publish")
	}
	select {
	case c.lock <- struct{}{}:
	default:
		t.Error("the publish kept the channel's lock")
	}
}

// A publish whose write fails on a channel that closed before its reason
// was recorded answers ErrBrokerUnavailable, with its slot given back and
// nothing pending (never a nil error without a confirmation to wait on).
func TestPublishOnAClosedChannelBeforeItsReasonIsKnownIsUnavailable(t *testing.T) {
	t.Parallel()
	_, ch := servicetest.AMQPChannel(t, servicetest.AMQPURL(t))
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	c := &confirmChannel{ch: ch, lock: make(chan struct{}, 1), returns: make(chan amqp.Return, 1), pending: map[string]*waiter{}, done: make(chan struct{})}
	slots, w := heldWaiter()
	d := newDeadline(context.Background(), 5*time.Second)
	defer d.stop()
	got, err := c.publish(d, "x", "k", msgPublishing(), w)
	if !errors.Is(err, ErrBrokerUnavailable) || got != nil {
		t.Fatalf("publish on a closed channel = %v, %v; want ErrBrokerUnavailable and no waiter", got, err)
	}
	if len(slots) != 0 {
		t.Error("the failed publish kept its slot")
	}
	if len(c.pending) != 0 {
		t.Error("the failed publish is still pending")
	}
}

// heldWaiter returns a one-slot in-flight cap and the waiter of a publish
// holding its only token.
func heldWaiter() (chan struct{}, *waiter) {
	slots := make(chan struct{}, 1)
	slots <- struct{}{}
	return slots, newWaiter("1", slots)
}
