package publish

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrQueueMissing: the queue the publisher checks (Options.CheckQueue,
// the forward queue) does not exist. With the contract's topology the
// events queue also matches the forward routing key, so the broker still
// routes and confirms a mandatory publish: without this check the ingress
// would answer 200 for events that never reach the forwarder. Publishes
// whose routing key matches Options.CheckBinding fail with it until a
// check finds the queue again; Ready fails meanwhile.
var ErrQueueMissing = errors.New("the forward queue does not exist")

// ErrForwardUnbound: the publisher could not bind the checked queue
// (Options.CheckQueue, the forward queue) to Options.Exchange with
// Options.CheckBinding: the broker refused queue.bind (the publisher's
// user lacks the write permission on the queue or the read permission on
// the exchange; the exchange is gone). A removed binding leaves the
// publish routed to the events queue alone and confirmed, so without a
// binding the publisher can assert, a 200 could name an event the
// forwarder never sees (attack A48). Publishes whose routing key matches
// Options.CheckBinding fail with it until a check binds again; Ready
// fails meanwhile.
var ErrForwardUnbound = errors.New("the forward queue's binding cannot be asserted")

// queueCheckEvery is how often the checked queue is passively declared
// while connected: the bound on how long a deleted forward queue goes
// unnoticed (docs/reliability.md, "A deleted forward queue").
const queueCheckEvery = time.Second

// queueCheck is the state of the passive declare of Options.CheckQueue
// and of the assertion of its binding.
type queueCheck struct {
	queue, binding string
	every          time.Duration
	missing        atomic.Bool
	unbound        atomic.Bool
	running        atomic.Bool
}

// checkQueue passively declares the checked queue on a short-lived
// channel and records whether it exists. Only a 404 NOT_FOUND marks it
// missing; any other failure (the connection is going away) leaves the
// state as it was. When the queue is missing and the publisher declares a
// topology, it is declared at once (the queue comes back) and checked
// again.
func (p *Publisher) checkQueue(conn *amqp.Connection) {
	qc := p.qcheck
	if qc == nil || qc.queue == "" {
		return
	}
	missing, err := queueMissing(conn, qc.queue)
	if err != nil {
		return
	}
	if missing && p.topo != nil {
		if derr := p.declare(conn); derr != nil {
			p.logger.Warn("redeclaring the topology for a missing forward queue", "queue", qc.queue, "error", derr)
		} else if missing, err = queueMissing(conn, qc.queue); err != nil {
			return
		}
	}
	if was := qc.missing.Swap(missing); was != missing {
		if missing {
			p.logger.Error("the forward queue does not exist; answering 503 FORWARD_QUEUE_MISSING and not ready until it is back", "queue", qc.queue)
		} else {
			p.logger.Info("the forward queue exists again; publishing resumes", "queue", qc.queue)
		}
	}
	p.metrics.queueMissing.Set(boolGauge(missing))
	if !missing {
		p.assertBinding(conn)
	}
}

// assertBinding binds the checked queue to the exchange with the checked
// binding (queue.bind is idempotent: a binding that exists is left as it
// is, a removed one comes back) and records whether the broker took it.
// It needs the write permission on the queue and the read permission on
// the exchange, not the configure permission. A refusal is tried once
// more after declaring the topology (a deleted exchange); any failure
// that is not the broker's answer (the connection is going away) leaves
// the state as it was.
func (p *Publisher) assertBinding(conn *amqp.Connection) {
	qc := p.qcheck
	if qc.binding == "" || p.exchange == "" {
		return
	}
	refused, err := bindQueue(conn, qc.queue, qc.binding, p.exchange)
	if err != nil {
		return
	}
	if refused != nil && p.topo != nil {
		if derr := p.declare(conn); derr == nil {
			if refused, err = bindQueue(conn, qc.queue, qc.binding, p.exchange); err != nil {
				return
			}
		}
	}
	unbound := refused != nil
	if was := qc.unbound.Swap(unbound); was != unbound {
		if unbound {
			p.logger.Error("the forward queue's binding cannot be asserted; answering 503 FORWARD_UNBOUND and not ready until it can",
				"queue", qc.queue, "exchange", p.exchange, "routing_key", qc.binding, "error", refused)
		} else {
			p.logger.Info("the forward queue's binding is asserted again; publishing resumes", "queue", qc.queue)
		}
	}
	p.metrics.unbound.Set(boolGauge(unbound))
}

// bindQueue binds queue to exchange with key on a short-lived channel.
// refused is the broker's refusal (an AMQP channel error); err any other
// failure.
func bindQueue(conn *amqp.Connection, queue, key, exchange string) (refused, err error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	err = ch.QueueBind(queue, key, exchange, false, nil)
	var aerr *amqp.Error
	if errors.As(err, &aerr) {
		return aerr, nil // the broker closed the channel
	}
	_ = ch.Close()
	return nil, err
}

// checkQueueAsync runs checkQueue off the session loop (a passive declare
// is an RPC that hangs on a half-open connection), one at a time.
func (p *Publisher) checkQueueAsync(conn *amqp.Connection) {
	if p.qcheck == nil || !p.qcheck.running.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer p.qcheck.running.Store(false)
		p.checkQueue(conn)
	}()
}

// queueMissing reports whether queue does not exist (a passive declare
// answered 404); err is any other failure.
func queueMissing(conn *amqp.Connection, queue string) (bool, error) {
	ch, err := conn.Channel()
	if err != nil {
		return false, err
	}
	_, err = ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	var aerr *amqp.Error
	if errors.As(err, &aerr) && aerr.Code == amqp.NotFound {
		return true, nil // the broker closed the channel
	}
	_ = ch.Close()
	return false, err
}

// queueRefusal returns ErrQueueMissing (wrapped) when the checked queue is
// missing and key reaches it, ErrForwardUnbound when its binding could
// not be asserted, else nil.
func (p *Publisher) queueRefusal(exchange, key string) error {
	qc := p.qcheck
	if qc == nil || exchange != p.exchange {
		return nil
	}
	missing, unbound := qc.missing.Load(), qc.unbound.Load()
	if !missing && !unbound || !TopicMatch(qc.binding, key) {
		return nil
	}
	if missing {
		return fmt.Errorf("%w: %s", ErrQueueMissing, qc.queue)
	}
	return fmt.Errorf("%w: %s to %s (%s)", ErrForwardUnbound, qc.queue, p.exchange, qc.binding)
}

// TopicMatch reports whether routing key key matches the topic binding
// pattern (words separated by '.', '*' one word, '#' zero or more), as a
// RabbitMQ topic exchange decides.
func TopicMatch(pattern, key string) bool {
	return topicWords(strings.Split(pattern, "."), strings.Split(key, "."))
}

func topicWords(p, k []string) bool {
	for len(p) > 0 {
		switch p[0] {
		case "#":
			for i := 0; i <= len(k); i++ {
				if topicWords(p[1:], k[i:]) {
					return true
				}
			}
			return false
		case "*":
			if len(k) == 0 {
				return false
			}
		default:
			if len(k) == 0 || k[0] != p[0] {
				return false
			}
		}
		p, k = p[1:], k[1:]
	}
	return len(k) == 0
}

// queueCheckTicker ticks every queueCheckEvery when a queue is checked,
// never otherwise.
func (p *Publisher) queueCheckTicker() *time.Ticker {
	if p.qcheck == nil {
		t := time.NewTicker(time.Hour)
		t.Stop()
		return t
	}
	return time.NewTicker(p.qcheck.every)
}
