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

// queueCheckEvery is how often the checked queue is passively declared
// while connected: the bound on how long a deleted forward queue goes
// unnoticed (docs/reliability.md, "A deleted forward queue").
const queueCheckEvery = time.Second

// queueCheck is the state of the passive declare of Options.CheckQueue.
type queueCheck struct {
	queue, binding string
	every          time.Duration
	missing        atomic.Bool
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
// missing and key reaches it, else nil.
func (p *Publisher) queueRefusal(exchange, key string) error {
	qc := p.qcheck
	if qc == nil || !qc.missing.Load() || exchange != p.exchange || !TopicMatch(qc.binding, key) {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrQueueMissing, qc.queue)
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
