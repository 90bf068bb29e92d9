package publish

import (
	"context"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// confirmChannel is one confirm-mode publishing channel (RabbitMQ publisher
// confirms, https://www.rabbitmq.com/docs/confirms).
//
// amqp091-go delivers basic.return and basic.ack on two Go channels; read
// separately, the ack of an unroutable mandatory message can be seen
// before its return (amqp091-go#45). Here ONE goroutine (run) owns both:
// the broker sends basic.return before the basic.ack of the same message,
// and amqp091-go's reader hands the return to our buffered Go channel
// before it processes the ack, so draining the returns buffer before
// resolving each confirm sees every return that precedes it. Returns are
// matched to their publish by a per-publish correlation id (the AMQP
// message_id stays the event id), confirms by delivery tag.
//
// Both buffers hold at least the in-flight cap: amqp091-go drops a
// notification it cannot deliver within 5 s (since v1.13), which would turn
// a return into a false ack or lose a confirm.
type confirmChannel struct {
	ch       *amqp.Channel
	lock     chan struct{} // one slot: serialises tag assignment and publish
	confirms chan amqp.Confirmation
	returns  chan amqp.Return
	closes   chan *amqp.Error
	done     chan struct{} // closed when run returns

	// onUnroutable is called (from run) when a return resolves a publish.
	onUnroutable func()

	mu      sync.Mutex
	closed  error // non-nil once the channel is gone
	byTag   map[uint64]*waiter
	byCorID map[string]*waiter
}

// waiter is one publish waiting for its confirm.
type waiter struct {
	corID    string
	returned bool
	done     chan struct{} // closed when err is set
	err      error         // nil: acked without a return
	release  func()        // frees the in-flight slot, once
	sentAt   time.Time
}

func (w *waiter) resolve(err error) {
	w.err = err
	close(w.done)
	w.release()
}

// openConfirmChannel opens a channel on conn, puts it in confirm mode and
// starts its owner goroutine. buffer is the size of the confirm and return
// buffers (≥ the in-flight cap).
func openConfirmChannel(conn *amqp.Connection, buffer int, onUnroutable func()) (*confirmChannel, error) {
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
		lock:         make(chan struct{}, 1),
		confirms:     ch.NotifyPublish(make(chan amqp.Confirmation, buffer)),
		returns:      ch.NotifyReturn(make(chan amqp.Return, buffer)),
		closes:       ch.NotifyClose(make(chan *amqp.Error, 1)),
		done:         make(chan struct{}),
		onUnroutable: onUnroutable,
		byTag:        make(map[uint64]*waiter),
		byCorID:      make(map[string]*waiter),
	}
	go c.run()
	return c, nil
}

// publish sends one mandatory message and registers its waiter. The
// returned waiter's done closes when the broker acks, nacks or returns it,
// when the write fails, or when the channel closes. release is called
// exactly once: when the waiter resolves, or before publish returns an
// error.
//
// The write itself runs on its own goroutine, which holds the channel's
// lock until it completes: amqp091-go's Publish ignores ctx once it starts
// writing, and a broker that stops reading the socket (connection.blocked
// after a memory alarm, flow control, a stalled link) would otherwise hold
// the caller past its deadline (docs/reliability.md). A write that starts
// after ctx has ended is skipped.
func (c *confirmChannel) publish(ctx context.Context, exchange, key string, msg amqp.Publishing, release func()) (*waiter, error) {
	select {
	case c.lock <- struct{}{}:
	case <-ctx.Done():
		release()
		return nil, fmt.Errorf("%w: waiting for a publishing channel: %w", ErrConfirmTimeout, ctx.Err())
	case <-c.done:
		release()
		return nil, fmt.Errorf("%w: publishing channel closed", ErrBrokerUnavailable)
	}

	w := &waiter{corID: msg.CorrelationId, done: make(chan struct{}), release: release, sentAt: time.Now()}
	c.mu.Lock()
	if c.closed != nil {
		err := c.closed
		c.mu.Unlock()
		<-c.lock
		release()
		return nil, err
	}
	tag := c.ch.GetNextPublishSeqNo()
	c.byTag[tag] = w
	c.byCorID[w.corID] = w
	c.mu.Unlock()

	go c.write(ctx, tag, w, exchange, key, msg)
	return w, nil
}

// write sends the message registered as tag and releases the channel's
// lock; when the write fails it resolves the waiter (unless the channel's
// shutdown already did).
func (c *confirmChannel) write(ctx context.Context, tag uint64, w *waiter, exchange, key string, msg amqp.Publishing) {
	defer func() { <-c.lock }()
	err := c.ch.PublishWithContext(ctx, exchange, key, true, false, msg)
	if err == nil {
		return
	}
	c.mu.Lock()
	mine := c.byTag[tag] == w
	if mine {
		delete(c.byTag, tag)
		delete(c.byCorID, w.corID)
	}
	c.mu.Unlock()
	if mine { // else the channel closed and shutdown resolved it already
		w.resolve(fmt.Errorf("%w: publishing: %w", ErrBrokerUnavailable, err))
	}
}

// run owns both notification channels until the AMQP channel closes, then
// fails every outstanding publish at once.
func (c *confirmChannel) run() {
	defer close(c.done)
	for {
		select {
		case r, ok := <-c.returns:
			if !ok {
				c.shutdown(nil)
				return
			}
			c.markReturned(r)
		case cf, ok := <-c.confirms:
			if !ok {
				c.shutdown(nil)
				return
			}
			c.drainReturns()
			c.resolve(cf)
		case e := <-c.closes:
			c.shutdown(e)
			return
		}
	}
}

func (c *confirmChannel) drainReturns() {
	for {
		select {
		case r, ok := <-c.returns:
			if !ok {
				return
			}
			c.markReturned(r)
		default:
			return
		}
	}
}

func (c *confirmChannel) markReturned(r amqp.Return) {
	c.mu.Lock()
	if w := c.byCorID[r.CorrelationId]; w != nil {
		w.returned = true
	}
	c.mu.Unlock()
}

func (c *confirmChannel) resolve(cf amqp.Confirmation) {
	c.mu.Lock()
	w := c.byTag[cf.DeliveryTag]
	if w != nil {
		delete(c.byTag, cf.DeliveryTag)
		delete(c.byCorID, w.corID)
	}
	c.mu.Unlock()
	if w == nil {
		return
	}
	switch {
	case w.returned:
		w.resolve(ErrUnroutable)
		if c.onUnroutable != nil {
			c.onUnroutable()
		}
	case !cf.Ack:
		w.resolve(ErrNack)
	default:
		w.resolve(nil)
	}
}

// shutdown resolves the confirms already delivered, then fails every
// waiter left: their messages may or may not be stored, and the provider
// will retry.
func (c *confirmChannel) shutdown(cause *amqp.Error) {
	for {
		c.drainReturns()
		select {
		case cf, ok := <-c.confirms:
			if ok {
				c.resolve(cf)
				continue
			}
		default:
		}
		break
	}
	err := fmt.Errorf("%w: channel closed with the confirm outstanding", ErrBrokerUnavailable)
	if cause != nil {
		err = fmt.Errorf("%w: channel closed with the confirm outstanding: %s", ErrBrokerUnavailable, cause.Reason)
	}
	c.mu.Lock()
	c.closed = err
	waiters := c.byTag
	c.byTag = map[uint64]*waiter{}
	c.byCorID = map[string]*waiter{}
	c.mu.Unlock()
	for _, w := range waiters {
		w.resolve(err)
	}
}

// oldestPending returns when the oldest unconfirmed publish was sent (zero
// when none is outstanding).
func (c *confirmChannel) oldestPending() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var oldest time.Time
	for _, w := range c.byTag {
		if oldest.IsZero() || w.sentAt.Before(oldest) {
			oldest = w.sentAt
		}
	}
	return oldest
}
