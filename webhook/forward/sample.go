package forward

import (
	"context"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// sample refreshes the queue gauges every SampleEvery on its own channel:
// the DLQ's and the forward queue's depths (passive declare) and the
// forward queue's lag (see sampleOnce).
func (f *Forwarder) sample(ctx context.Context, conn *amqp.Connection) {
	t := time.NewTicker(f.opts.SampleEvery)
	defer t.Stop()
	var ch *amqp.Channel
	defer func() {
		if ch != nil {
			ch.Close()
		}
	}()
	for {
		if ch == nil || ch.IsClosed() {
			var err error
			if ch, err = conn.Channel(); err != nil {
				ch = nil
			}
		}
		if ch != nil {
			f.sampleOnce(ch)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sampleOnce reads the depths and sets the lag: while messages wait in
// the forward queue, the age of the newest event this worker has taken
// from it (its received_at); 0 when none waits. The queue is FIFO, so the
// waiting head is at most that old (a conservative lag); a retried event
// coming back with an old received_at does not raise it. The head is not
// peeked: basic.get + nack(requeue) puts a message behind the others on a
// quorum queue (and counts towards its delivery limit), so peeking rotated
// the queue on every sample.
func (f *Forwarder) sampleOnce(ch *amqp.Channel) {
	if q, err := ch.QueueDeclarePassive(f.top.DLQ, true, false, false, false, nil); err == nil {
		f.m.dlqDepth.Set(float64(q.Messages))
	} else {
		f.log.Debug("sampling the DLQ", "err", err)
		return
	}
	q, err := ch.QueueDeclarePassive(f.top.ForwardQueue, true, false, false, false, nil)
	if err != nil {
		return
	}
	f.m.queueDepth.Set(float64(q.Messages))
	f.sampledAt.Store(f.now().UnixNano())
	if q.Messages == 0 {
		f.m.oldestAge.Set(0)
	} else if newest := f.newestTaken.Load(); newest != 0 {
		f.m.oldestAge.Set(max(0, f.now().Sub(time.Unix(0, newest)).Seconds()))
	}
	// Last: a missing events queue closes the channel (reopened next time).
	if f.top.EventsQueue == "" {
		return
	}
	if q, err := ch.QueueDeclarePassive(f.top.EventsQueue, true, false, false, false, nil); err == nil {
		f.m.eventsDepth.Set(float64(q.Messages))
		f.m.eventsConsumers.Set(float64(q.Consumers))
	}
}

// observeTaken records the received_at of an event taken from the forward
// queue, keeping the newest.
func (f *Forwarder) observeTaken(at time.Time) {
	if at.IsZero() {
		return
	}
	n := at.UnixNano()
	for {
		cur := f.newestTaken.Load()
		if n <= cur || f.newestTaken.CompareAndSwap(cur, n) {
			return
		}
	}
}
