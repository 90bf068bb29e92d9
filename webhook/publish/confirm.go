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
	sock     *coalescingConn // the connection's socket; nil in unit tests
	lock     chan struct{}   // one slot: serialises tag assignment and publish
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
	slots    chan struct{} // the in-flight cap; release takes one token back
	released atomic.Bool
	sentAt   time.Time
}

// newWaiter returns the waiter of a publish that took one token of slots.
func newWaiter(corID string, slots chan struct{}) *waiter {
	return &waiter{corID: corID, done: make(chan struct{}), slots: slots}
}

// release frees the publish's in-flight slot; only the first call does.
func (w *waiter) release() {
	if w.released.CompareAndSwap(false, true) {
		<-w.slots
	}
}

func (w *waiter) resolve(err error) {
	w.err = err
	close(w.done)
	w.release()
}

// openConfirmChannel opens a channel on conn, puts it in confirm mode and
// starts its owner goroutine. buffer is the size of the confirm and return
// buffers (≥ the in-flight cap).
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
// when the write fails, or when the channel closes. w's slot is released
// when it resolves, or before publish returns an error.
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
	select {
	case c.lock <- struct{}{}:
	case <-d.ctx.Done():
		w.release()
		return nil, fmt.Errorf("%w: waiting for a publishing channel: %w", ErrConfirmTimeout, d.err())
	case <-d.timer.C:
		w.release()
		return nil, fmt.Errorf("%w: waiting for a publishing channel: %w", ErrConfirmTimeout, d.err())
	case <-c.done:
		w.release()
		return nil, fmt.Errorf("%w: publishing channel closed", ErrBrokerUnavailable)
	}
	unlock := func() { <-c.lock }
	if c.sock != nil && !c.sock.room() {
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

	w.sentAt = time.Now()
	c.mu.Lock()
	if c.closed != nil {
		err := c.closed
		c.mu.Unlock()
		unlock()
		w.release()
		return nil, err
	}
	tag := c.ch.GetNextPublishSeqNo()
	c.byTag[tag] = w
	c.byCorID[w.corID] = w
	c.mu.Unlock()

	var err error
	if d.passed() { // a write that would start after the deadline is skipped
		err = d.err()
	} else {
		err = c.ch.PublishWithContext(d.ctx, exchange, key, true, false, msg)
	}
	unlock()
	if err != nil {
		c.failed(d, tag, w, err)
	}
	return w, nil
}

// failed resolves the waiter of a write that failed or was skipped
// (unless the channel's shutdown already did): ErrConfirmTimeout when the
// wait was over before the write, else ErrBrokerUnavailable.
func (c *confirmChannel) failed(d deadline, tag uint64, w *waiter, err error) {
	c.mu.Lock()
	mine := c.byTag[tag] == w
	if mine {
		delete(c.byTag, tag)
		delete(c.byCorID, w.corID)
	}
	c.mu.Unlock()
	if !mine { // the channel closed and shutdown resolved it already
		return
	}
	if d.passed() && errors.Is(err, d.err()) {
		w.resolve(fmt.Errorf("%w: the deadline passed before the write: %w", ErrConfirmTimeout, err))
		return
	}
	w.resolve(fmt.Errorf("%w: publishing: %w", ErrBrokerUnavailable, err))
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
