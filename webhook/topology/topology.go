// Package topology declares Borda's RabbitMQ exchanges and queues
// (docs/forwarder.md) idempotently, for the ingress, the forwarder, the status
// consumer and the DLQ tools alike.
//
//	yzex.events        topic   ← ingress publishes (routing key …legacy_forward)
//	  ├─ <forward queue>      bound to the forward routing key
//	  └─ <events queue>       bound to forward.events_binding (default: the
//	                          routing key's last word replaced by #,
//	                          yzex.events.connect.whatsapp.#)
//	yzex.events.retry  topic   ← forwarder republishes a failed delivery
//	  └─ <forward queue>-retry-<delay>  fixed TTL, dead-letters through the
//	                                    default exchange straight back to the
//	                                    forward queue (no other consumer sees it)
//	yzex.events.dlx    direct  ← forwarder dead-letters
//	  └─ <dlq>
//
// The forward queue and the DLQ are quorum queues by default (replicated on
// a cluster); retry queues are quorum queues with at-least-once
// dead-lettering (RabbitMQ ≥ 3.10), so a message is not lost when its TTL
// fires during a leader change. With queue_type classic they are classic
// queues and TTL dead-lettering is at-most-once (docs/forwarder.md).
//
// The forward queue, the events queue and the DLQ are declared with
// `x-overflow: reject-publish`: a max-length or max-length-bytes limit (a
// policy's) makes the broker nack a publish instead of dropping a
// confirmed event (attack A25); the quorum forward queue dead-letters at
// least once, so a full DLQ keeps a dead letter in it.
//
// Declaring a queue that exists with other arguments fails with
// PRECONDITION_FAILED (406): the error names the queue; delete it or keep
// the old queue_type. DeclareCompatible keeps a queue declared with the
// previous release's arguments and names it (Declared.Unguarded).
package topology

import (
	"errors"
	"fmt"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Exchange names fixed by the contract.
const (
	RetryExchange = "yzex.events.retry"
	DLXExchange   = "yzex.events.dlx"
)

// EventsBindingFor is the events queue's binding for routing key rk when
// none is set (forward.events_binding empty): rk with its last
// dot-separated word replaced by "#" ("#" alone when rk has no dot), so
// the queue gets every event of the routing key's family
// ("yzex.events.connect.whatsapp.#" for the default routing key).
func EventsBindingFor(rk string) string {
	i := strings.LastIndexByte(rk, '.')
	if i < 0 {
		return "#"
	}
	return rk[:i] + ".#"
}

// EffectiveEventsBinding is the pattern Declare binds EventsQueue with:
// EventsBinding, else EventsBindingFor(RoutingKey).
func (t Topology) EffectiveEventsBinding() string {
	if t.EventsBinding != "" {
		return t.EventsBinding
	}
	return EventsBindingFor(t.RoutingKey)
}

// QueueType is the type of the forward queue, the events queue, the DLQ
// and the retry queues.
type QueueType string

// Queue types.
const (
	Quorum  QueueType = "quorum"
	Classic QueueType = "classic"
)

// Delay is one rung of the retry ladder: its queue is named
// "<forward queue>-retry-<Name>" and holds a message for TTL.
type Delay struct {
	Name string
	TTL  time.Duration
}

// Topology names every exchange and queue. Every field is required but
// EventsBinding (empty: EventsBindingFor(RoutingKey)).
type Topology struct {
	Exchange     string // topic, where the ingress publishes
	RoutingKey   string // the forward queue's binding
	ForwardQueue string
	// EventsQueue is the queue `borda consume-events` reads; "" declares
	// and binds none (forward.events_queue: "").
	EventsQueue string
	// EventsBinding binds EventsQueue to Exchange (forward.events_binding;
	// empty: derived from the routing key, EffectiveEventsBinding;
	// docs/forwarder.md).
	EventsBinding string
	DLQ           string
	Retry         []Delay
	QueueType     QueueType
	RetryExchange string
	DLXExchange   string
}

// RetryQueue is the name of rung i's queue: "<forward queue>-retry-<delay>".
func (t Topology) RetryQueue(i int) string {
	return t.ForwardQueue + "-retry-" + t.Retry[i].Name
}

// RetryRoutingKey is the routing key, on RetryExchange, of rung i (the
// queue's own name).
func (t Topology) RetryRoutingKey(i int) string { return t.RetryQueue(i) }

// DLQRoutingKey is the routing key, on DLXExchange, of the DLQ.
func (t Topology) DLQRoutingKey() string { return t.DLQ }

// Declarer is the part of *amqp.Channel that Declare uses.
type Declarer interface {
	ExchangeDeclare(name, kind string, durable, autoDelete, internal, noWait bool, args amqp.Table) error
	QueueDeclare(name string, durable, autoDelete, exclusive, noWait bool, args amqp.Table) (amqp.Queue, error)
	QueueBind(name, key, exchange string, noWait bool, args amqp.Table) error
}

var _ Declarer = (*amqp.Channel)(nil)

// Declared is what DeclareCompatible found.
type Declared struct {
	// Unguarded names each queue that exists with the previous release's
	// arguments, without `x-overflow: reject-publish` (and, for a quorum
	// forward queue, without at-least-once dead-lettering): it was kept
	// as it is, so a max-length or max-length-bytes policy on it drops
	// events the broker already confirmed (docs/upgrading.md, "Queues
	// refuse instead of dropping"). Empty when every queue has the
	// current arguments.
	Unguarded []string
}

// Declare declares every exchange, queue and binding. It is idempotent. An
// error names the object that failed; after an error the channel is closed
// by the broker and must not be reused. A queue that exists with other
// arguments fails with PRECONDITION_FAILED (406), including one declared
// by an earlier release (DeclareCompatible keeps those).
func (t Topology) Declare(ch Declarer) error {
	_, err := t.declare(ch, nil)
	return err
}

// DeclareCompatible declares as Declare does, but a queue that exists
// with the previous release's arguments (the broker answers
// PRECONDITION_FAILED to the current ones) is declared again with those on
// a fresh channel from open, kept as it is and named in
// Declared.Unguarded. Any other PRECONDITION_FAILED (another queue type,
// arguments set by hand) still fails. open returns the channel to start
// with too; DeclareCompatible closes every channel it opened.
func (t Topology) DeclareCompatible(open func() (ClosableDeclarer, error)) (Declared, error) {
	var opened []ClosableDeclarer
	defer func() {
		for _, c := range opened {
			_ = c.Close()
		}
	}()
	reopen := func() (Declarer, error) {
		c, err := open()
		if err != nil {
			return nil, err
		}
		opened = append(opened, c)
		return c, nil
	}
	ch, err := reopen()
	if err != nil {
		return Declared{}, err
	}
	return t.declare(ch, reopen)
}

// ClosableDeclarer is a Declarer that can be closed (*amqp.Channel).
type ClosableDeclarer interface {
	Declarer
	Close() error
}

var _ ClosableDeclarer = (*amqp.Channel)(nil)

// declare is Declare; with reopen non-nil a queue refused with
// PRECONDITION_FAILED is declared again, on a fresh channel, with its
// previous release's arguments.
func (t Topology) declare(ch Declarer, reopen func() (Declarer, error)) (Declared, error) {
	var d Declared
	for _, ex := range []struct{ name, kind string }{
		{t.Exchange, amqp.ExchangeTopic},
		{t.RetryExchange, amqp.ExchangeTopic},
		{t.DLXExchange, amqp.ExchangeDirect},
	} {
		if err := ch.ExchangeDeclare(ex.name, ex.kind, true, false, false, false, nil); err != nil {
			return d, fmt.Errorf("declaring exchange %s: %w", ex.name, err)
		}
	}
	queue := func(name string, args, previous amqp.Table, bindings ...[2]string) error {
		_, err := ch.QueueDeclare(name, true, false, false, false, args)
		if err != nil && previous != nil && reopen != nil && isPreconditionFailed(err) {
			// The broker closed the channel; the queue exists with other
			// arguments. Those of the previous release are accepted.
			c, rerr := reopen()
			if rerr != nil {
				return fmt.Errorf("declaring queue %s: %w (reopening a channel: %w)", name, err, rerr)
			}
			ch = c
			if _, perr := ch.QueueDeclare(name, true, false, false, false, previous); perr == nil {
				d.Unguarded = append(d.Unguarded, name)
				err = nil
			}
		}
		if err != nil {
			return fmt.Errorf("declaring queue %s: %w", name, err)
		}
		for _, b := range bindings {
			if err := ch.QueueBind(name, b[1], b[0], false, nil); err != nil {
				return fmt.Errorf("binding queue %s to %s (%s): %w", name, b[0], b[1], err)
			}
		}
		return nil
	}
	// A message the broker itself gives up on in the forward queue (a
	// quorum queue's delivery limit, which RabbitMQ 4 sets to 20 by
	// default and every requeue counts toward) is dead-lettered to the DLQ,
	// never dropped; at least once on a quorum queue, so a full DLQ keeps
	// it in the forward queue rather than dropping it.
	forwardPrevious := amqp.Table{
		"x-dead-letter-exchange":    t.DLXExchange,
		"x-dead-letter-routing-key": t.DLQRoutingKey(),
	}
	if err := queue(t.ForwardQueue, t.args(t.guarded(forwardPrevious, true)), t.args(forwardPrevious), [2]string{t.Exchange, t.RoutingKey}); err != nil {
		return d, err
	}
	binding := t.EffectiveEventsBinding()
	// No events queue (forward.events_queue: ""): nothing declared or
	// bound, so each event is written once, to the forward queue.
	if t.EventsQueue != "" {
		if err := queue(t.EventsQueue, t.args(t.guarded(nil, false)), t.args(nil), [2]string{t.Exchange, binding}); err != nil {
			return d, err
		}
	}
	if err := queue(t.DLQ, t.args(t.guarded(nil, false)), t.args(nil), [2]string{t.DLXExchange, t.DLQRoutingKey()}); err != nil {
		return d, err
	}
	for i, dl := range t.Retry {
		args := amqp.Table{
			"x-message-ttl":             dl.TTL.Milliseconds(),
			"x-dead-letter-exchange":    "",
			"x-dead-letter-routing-key": t.ForwardQueue,
		}
		if t.QueueType == Quorum {
			args["x-dead-letter-strategy"] = "at-least-once"
			args["x-overflow"] = "reject-publish"
		}
		if err := queue(t.RetryQueue(i), t.args(args), nil, [2]string{t.RetryExchange, t.RetryRoutingKey(i)}); err != nil {
			return d, err
		}
	}
	return d, nil
}

// guarded returns extra with `x-overflow: reject-publish`: a queue over a
// max-length or max-length-bytes limit (a policy's or an argument's)
// refuses a publish with basic.nack, which the ingress answers 503 NACK
// and the forwarder holds, instead of dropping its oldest message, an
// event the broker had confirmed (attack A25). deadLetters adds
// at-least-once dead-lettering on a quorum queue (it requires
// reject-publish): what the queue dead-letters stays in it until the
// target (the DLQ) takes it.
func (t Topology) guarded(extra amqp.Table, deadLetters bool) amqp.Table {
	a := amqp.Table{"x-overflow": "reject-publish"}
	for k, v := range extra {
		a[k] = v
	}
	if deadLetters && t.QueueType == Quorum {
		a["x-dead-letter-strategy"] = "at-least-once"
	}
	return a
}

// isPreconditionFailed reports whether err is the broker's 406
// PRECONDITION_FAILED (a queue that exists with other arguments).
func isPreconditionFailed(err error) bool {
	var aerr *amqp.Error
	return errors.As(err, &aerr) && aerr.Code == amqp.PreconditionFailed
}

func (t Topology) args(extra amqp.Table) amqp.Table {
	a := amqp.Table{"x-queue-type": string(t.QueueType)}
	for k, v := range extra {
		a[k] = v
	}
	return a
}
