package forward

import (
	"context"
	"encoding/json"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// sample refreshes the queue gauges every SampleEvery on its own channel:
// the DLQ's and the forward queue's depths (passive declare) and the age
// of the forward queue's head, peeked with basic.get and returned at once
// with basic.nack(requeue) (both classic and quorum queues put it back at
// the head; no attempt is spent).
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

func (f *Forwarder) sampleOnce(ch *amqp.Channel) {
	if q, err := ch.QueueDeclarePassive(f.top.DLQ, true, false, false, false, nil); err == nil {
		f.m.dlqDepth.Set(float64(q.Messages))
	} else {
		f.log.Debug("sampling the DLQ", "err", err)
		return
	}
	if q, err := ch.QueueDeclarePassive(f.top.ForwardQueue, true, false, false, false, nil); err == nil {
		f.m.queueDepth.Set(float64(q.Messages))
	} else {
		return
	}
	d, ok, err := ch.Get(f.top.ForwardQueue, false)
	if err != nil || !ok {
		f.m.oldestAge.Set(0)
		return
	}
	_ = d.Nack(false, true)
	var head struct {
		ReceivedAt time.Time `json:"received_at"`
	}
	at := d.Timestamp
	if json.Unmarshal(d.Body, &head) == nil && !head.ReceivedAt.IsZero() {
		at = head.ReceivedAt
	}
	if at.IsZero() {
		return
	}
	f.m.oldestAge.Set(max(0, f.now().Sub(at).Seconds()))
}
