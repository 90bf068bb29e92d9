package publish

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// confirmChannel is one confirm-mode publishing channel (RabbitMQ publisher
// confirms, https://www.rabbitmq.com/docs/confirms).
//
// Each publish waits on the DeferredConfirmation amqp091-go creates for it:
// amqp091-go's reader closes it when the basic.ack or basic.nack of its
// delivery tag arrives (or every one at once when the channel closes), so
// the confirm reaches the publishing goroutine with no hand-off through a
// listener goroutine and no NotifyPublish timer per confirm
// (docs/performance.md, the ingress hot path).
//
// basic.return: the broker sends the return of an unroutable mandatory
// message before its basic.ack, and amqp091-go's one reader goroutine
// delivers the return to our buffered Go channel before it processes the
// ack. So when a publish's confirmation is done, every return that precedes
// it is already in the buffer: settle drains the buffer, marking each
// returned publish by its per-publish correlation id (the AMQP message_id
// stays the event id), before it reads its own mark (amqp091-go#45: read
// separately, the ack can be seen before the return).
//
// The returns buffer holds at least the in-flight cap: amqp091-go drops a
// notification it cannot deliver within 5 s (since v1.13), which would turn
// a return into a false ack; every settle drains it, and at most the
// in-flight cap of publishes are unsettled.
type confirmChannel struct {
	ch      *amqp.Channel
	sock    *coalescingConn // the connection's socket; nil in unit tests
	lock    chan struct{}   // one slot: serialises tag assignment and publish
	returns chan amqp.Return
	closes  chan *amqp.Error
	done    chan struct{} // closed when the AMQP channel has closed

	// onUnroutable is called (from settle) when a return resolves a publish.
	onUnroutable func()
	// onNack is called (from settle) when the broker nacks a publish on
	// the open channel; nacked is set first. A nacked channel is retired
	// (attack S04: RabbitMQ 3.10 keeps a quorum queue's reject-publish
	// state per publishing channel, so it may go on nacking after the
	// queue has room again) and pick avoids it meanwhile.
	onNack func(*confirmChannel)
	nacked atomic.Bool

	mu      sync.Mutex
	closed  error              // non-nil once the channel is gone
	pending map[string]*waiter // unsettled publishes by correlation id
	// retiring is set once the channel's replacement is in the pool
	// (retireChannel): no publish enters it any more (publish answers
	// errChannelRetiring and the caller picks again), so when pending is
	// empty nothing is on its way in and the channel can close.
	retiring bool
}

// errChannelRetiring is publish's answer on a channel being retired: it
// sent nothing and kept the waiter's slot, for the caller to publish on
// the channel that replaced it.
var errChannelRetiring = errors.New("publish: the channel is being retired")

// retire marks c retiring (see confirmChannel.retiring).
func (c *confirmChannel) retire() {
	c.mu.Lock()
	c.retiring = true
	c.mu.Unlock()
}

// waiter is one publish waiting for its confirm.
type waiter struct {
	corID    string
	dc       *amqp.DeferredConfirmation // done when the broker answered or the channel closed
	returned bool                       // a basic.return named it (guarded by confirmChannel.mu)
	slots    chan struct{}              // the in-flight cap; release takes one token back
	released atomic.Bool
	sentAt   time.Time
}

// newWaiter returns the waiter of a publish that took one token of slots.
func newWaiter(corID string, slots chan struct{}) *waiter {
	return &waiter{corID: corID, slots: slots}
}

// release frees the publish's in-flight slot; only the first call does.
func (w *waiter) release() {
	if w.released.CompareAndSwap(false, true) {
		<-w.slots
	}
}

// openConfirmChannel opens a channel on conn, puts it in confirm mode and
// starts the goroutine that watches it close. buffer is the size of the
// returns buffer (≥ the in-flight cap).
func openConfirmChannel(conn *amqp.Connection, sock *coalescingConn, buffer int, onUnroutable func()) (*confirmChannel, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("opening publishing channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("entering confirm mode: %w", err)
	}
	c := &confirmChannel{
		ch:           ch,
		sock:         sock,
		lock:         make(chan struct{}, 1),
		returns:      ch.NotifyReturn(make(chan amqp.Return, buffer)),
		closes:       ch.NotifyClose(make(chan *amqp.Error, 1)),
		done:         make(chan struct{}),
		onUnroutable: onUnroutable,
		pending:      make(map[string]*waiter),
	}
	go c.watch()
	return c, nil
}

// publish sends one mandatory message and registers its waiter. On nil
// error the waiter's dc is done when the broker acks or nacks it or when
// the channel closes; settle then gives the publish's outcome. On error
// w's slot is released.
//
// The write runs on the caller's goroutine: no hand-off per publish.
// amqp091-go's Publish ignores ctx once it starts writing, so it must
// never wait on the socket: the socket's Write only queues
// (coalescingConn), and publish first waits, within ctx, for room in that
// queue. A broker that stops reading the socket (connection.blocked after
// a memory alarm, flow control, a stalled link) therefore holds a publish
// back only until its deadline (docs/reliability.md). A write that would
// start after ctx has ended is skipped.
func (c *confirmChannel) publish(d deadline, exchange, key string, msg amqp.Publishing, w *waiter) (*waiter, error) {
	waited := false
	select {
	case c.lock <- struct{}{}: // the common case: the channel is free
	default:
		waited = true
		if err := c.waitLock(d, w); err != nil {
			return nil, err
		}
	}
	unlock := func() { <-c.lock }
	if c.sock != nil && !c.sock.room() {
		waited = true
		ctx, cancel := d.context()
		err := c.sock.waitRoom(ctx)
		cancel()
		if err != nil {
			unlock()
			w.release()
			if d.passed() {
				return nil, fmt.Errorf("%w: waiting for the socket: %w", ErrConfirmTimeout, err)
			}
			return nil, fmt.Errorf("%w: publishing: %w", ErrBrokerUnavailable, err)
		}
	}

	w.sentAt = d.start
	c.mu.Lock()
	if c.retiring { // before closed: the retirement may have closed it already
		c.mu.Unlock()
		unlock()
		return nil, errChannelRetiring // the slot stays the caller's
	}
	if c.closed != nil {
		err := c.closed
		c.mu.Unlock()
		unlock()
		w.release()
		return nil, err
	}
	c.pending[w.corID] = w
	c.mu.Unlock()

	var err error
	// A write that would start after the deadline is skipped; with no
	// wait since the deadline was set, only the caller's ctx can have
	// ended (no clock read).
	if (waited && d.passed()) || d.ctx.Err() != nil {
		err = d.err()
	} else {
		w.dc, err = c.ch.PublishWithDeferredConfirmWithContext(d.ctx, exchange, key, true, false, msg)
		if err == nil && w.dc == nil {
			err = errors.New("the channel is not in confirm mode")
		}
	}
	unlock()
	if err != nil {
		c.forget(w)
		w.release()
		if d.passed() && errors.Is(err, d.err()) {
			return nil, fmt.Errorf("%w: the deadline passed before the write: %w", ErrConfirmTimeout, err)
		}
		if closed := c.closedErr(); closed != nil {
			return nil, closed
		}
		return nil, fmt.Errorf("%w: publishing: %w", ErrBrokerUnavailable, err)
	}
	return w, nil
}

// waitLock waits for the channel's publish slot within d; on error w's
// slot is released.
func (c *confirmChannel) waitLock(d deadline, w *waiter) error {
	select {
	case c.lock <- struct{}{}:
		return nil
	case <-d.ctx.Done():
		w.release()
		return fmt.Errorf("%w: waiting for a publishing channel: %w", ErrConfirmTimeout, d.err())
	case <-d.timer.C:
		w.release()
		return fmt.Errorf("%w: waiting for a publishing channel: %w", ErrConfirmTimeout, d.err())
	case <-c.done:
		if c.isRetiring() {
			return errChannelRetiring // the slot stays the caller's
		}
		w.release()
		return fmt.Errorf("%w: publishing channel closed", ErrBrokerUnavailable)
	}
}

// isRetiring reports whether retire was called on c.
func (c *confirmChannel) isRetiring() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.retiring
}

// settle gives the outcome of a publish whose dc is done and frees its
// slot: nil when the broker acked it with no return before the ack,
// ErrUnroutable when a return named it, ErrBrokerUnavailable when the
// channel closed before the broker answered (amqp091-go then resolves every
// outstanding confirmation as a nack), ErrNack for the broker's own nack.
func (c *confirmChannel) settle(w *waiter) error {
	acked := w.dc.Acked()
	c.mu.Lock()
	c.drainReturnsLocked()
	returned := w.returned
	delete(c.pending, w.corID)
	c.mu.Unlock()
	w.release()
	if !acked && c.ch.IsClosed() { // amqp091-go marks the channel closed before it resolves the rest
		if err := c.closedErr(); err != nil {
			return err
		}
		return fmt.Errorf("%w: channel closed with the confirm outstanding", ErrBrokerUnavailable)
	}
	if returned {
		if c.onUnroutable != nil {
			c.onUnroutable()
		}
		return ErrUnroutable
	}
	if !acked {
		c.nacked.Store(true)
		if c.onNack != nil {
			c.onNack(c)
		}
		return ErrNack
	}
	return nil
}

// abandon is called when w's caller stopped waiting (its deadline, a
// blocked connection): the slot stays taken until the broker answers or
// the channel closes, then it is settled with no one to tell.
func (c *confirmChannel) abandon(w *waiter) {
	go func() {
		<-w.dc.Done()
		_ = c.settle(w)
	}()
}

// forget drops a publish that was never written.
func (c *confirmChannel) forget(w *waiter) {
	c.mu.Lock()
	delete(c.pending, w.corID)
	c.mu.Unlock()
}

// drainReturnsLocked marks the publish of every return buffered so far;
// c.mu is held.
func (c *confirmChannel) drainReturnsLocked() {
	for {
		select {
		case r, ok := <-c.returns:
			if !ok {
				return
			}
			if w := c.pending[r.CorrelationId]; w != nil {
				w.returned = true
			}
		default:
			return
		}
	}
}

// watch waits for the AMQP channel to close, records why, and closes done.
// amqp091-go resolves every outstanding confirmation itself (as a nack,
// which settle reports as ErrBrokerUnavailable on a closed channel).
func (c *confirmChannel) watch() {
	e := <-c.closes // nil when the channel closed normally (the list is closed)
	err := fmt.Errorf("%w: channel closed with the confirm outstanding", ErrBrokerUnavailable)
	if e != nil {
		err = fmt.Errorf("%w: channel closed with the confirm outstanding: %s", ErrBrokerUnavailable, e.Reason)
	}
	c.mu.Lock()
	c.closed = err
	c.mu.Unlock()
	close(c.done)
}

// closedErr is why the channel closed, nil while it is open.
func (c *confirmChannel) closedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// oldestPending returns when the oldest unsettled publish was sent (zero
// when none is outstanding).
func (c *confirmChannel) oldestPending() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var oldest time.Time
	for _, w := range c.pending {
		if oldest.IsZero() || w.sentAt.Before(oldest) {
			oldest = w.sentAt
		}
	}
	return oldest
}
