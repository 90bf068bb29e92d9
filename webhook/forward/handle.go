package forward

import (
	"context"
	"errors"
	"log/slog"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/webhook/envelope"
)

// storeErrorPause is the first wait before a republish the broker did not
// confirm is tried again (doubling up to maxHoldPause), so a broker
// failure does not spin (nor re-POST an event in a loop).
const (
	storeErrorPause = time.Second
	maxHoldPause    = 10 * time.Second
)

// handle takes one delivery to its outcome and acks, nacks or republishes
// it. It never returns before the delivery is settled.
func (w *worker) handle(ctx context.Context, d amqp.Delivery) {
	f := w.f
	env, err := envelope.Decode(d.Body)
	if err != nil {
		class, reason := "malformed", "undecodable envelope"
		if errors.Is(err, envelope.ErrDigestMismatch) {
			class, reason = "digest", "sha256 mismatch"
		}
		f.log.Warn("dead-lettering a bad envelope", "message_id", d.MessageId, "err", err)
		w.deadLetter(ctx, d, env, letter{reason: reason, class: class, excerpt: safeExcerpt([]byte(err.Error()))}, Lease{})
		return
	}
	f.observeTaken(env.ReceivedAt)
	log := f.log.With("event_id", env.ID)
	failures := int(IntHeader(d.Headers, HeaderAttempt))

	done, err := f.breaker.allow()
	if err != nil { // open, or half-open with its probe taken
		f.m.outcomes.WithLabelValues("requeued", "breaker_open").Inc()
		w.giveBack(ctx, d)
		return
	}
	claim, lease, held, err := f.store.Acquire(ctx, env.Source, env.ID, newToken(), forcedReplay(d.Headers), replayID(d.Headers))
	if err != nil {
		// Without the key a POST could duplicate: do not decide, give the
		// delivery back without spending a delivery and pause consuming
		// until the store answers (awaitStore).
		done(errSkipped)
		log.Error("reading the idempotency key; giving the delivery back and pausing", "err", err)
		f.m.outcomes.WithLabelValues("requeued", "store_error").Inc()
		f.storeFailed(err)
		w.giveBack(ctx, d)
		return
	}
	switch claim {
	case AlreadyForwarded:
		done(errSkipped)
		f.duplicate(env, lease, stateForwarded, log)
		_ = d.Ack(false)
		return
	case AlreadyDead:
		done(errSkipped)
		f.duplicate(env, lease, stateDead, log)
		_ = d.Ack(false)
		return
	case Held:
		done(errSkipped)
		w.deferHeld(ctx, d, held, log)
		return
	}

	start := time.Now()
	res := f.poster.post(ctx, env, f.now())
	f.m.postTime.Observe(time.Since(start).Seconds())
	switch res.Kind {
	case Delivered:
		f.breaker.answered()
		done(nil)
		var wasDead bool
		ok, err := w.settle(ctx, "forwarded", env.ID, func(ctx context.Context) (bool, error) {
			ok, dead, err := f.store.markForwarded(ctx, lease)
			wasDead = dead
			return ok, err
		})
		switch {
		case err != nil:
			// The POST succeeded: ack anyway. A later copy may POST again;
			// the receiver deduplicates by Idempotency-Key.
			log.Error("could not mark the event forwarded; a later copy of it may be POSTed again", "err", err)
			f.storeFailed(err)
		case !ok:
			log.Warn("could not mark the event forwarded: another worker holds its key (this lease expired during the POST)")
		case wasDead:
			log.Warn("event delivered after another copy of it was dead-lettered (this lease expired during the POST); its key says forwarded, so a replay of that letter is absorbed")
		}
		if f.afterMark != nil {
			f.afterMark(w.ch)
		}
		if err := d.Ack(false); err != nil {
			log.Warn("acking a delivered event", "err", err)
		}
		f.m.outcomes.WithLabelValues("delivered", res.Class).Inc()
		f.m.attempts.Observe(float64(failures + 1))
		log.Debug("event delivered", "status", res.Status, "attempt", failures+1)
	case Permanent:
		f.breaker.answered()
		done(nil) // the endpoint is up; it refused this event
		log.Warn("legacy endpoint rejected the event", "status", res.Status)
		w.deadLetter(ctx, d, env, letter{reason: "rejected by the legacy endpoint", class: res.Class, status: res.Status, excerpt: res.Excerpt, failures: failures + 1}, lease)
	default:
		f.breaker.failed(breakerReason(res), f.now())
		done(f.breaker.outcome(res, f.breaker.senders.ofEnvelope(env)))
		w.retry(ctx, d, env, failures+1, res, lease)
	}
}

// retry republishes a failed delivery to its next rung (with a confirm)
// and only then acks it; after the last rung it dead-letters it.
func (w *worker) retry(ctx context.Context, d amqp.Delivery, env envelope.Envelope, failures int, res Result, lease Lease) {
	f := w.f
	rung, ok := f.policy.Next(failures, res.RetryAfter)
	if !ok {
		w.deadLetter(ctx, d, env, letter{reason: "retries exhausted", class: res.Class, status: res.Status, excerpt: res.Excerpt, failures: failures}, lease)
		return
	}
	if err := f.store.Release(ctx, lease); err != nil {
		f.log.Warn("releasing the lease before a retry", "event_id", env.ID, "err", err) // it expires
	}
	msg := Republishing(d)
	msg.Headers[HeaderAttempt] = int64(failures)
	markFirstFailure(msg.Headers, f.now(), failureReason(res))
	if err := w.publishHolding(ctx, w.f.top.RetryExchange, w.f.top.RetryRoutingKey(rung), msg, env.ID); err != nil {
		f.log.Error("republishing for a retry; requeueing", "event_id", env.ID, "err", err)
		f.m.outcomes.WithLabelValues("requeued", res.Class).Inc()
		_ = d.Nack(false, true)
		return
	}
	_ = d.Ack(false)
	f.log.Info("event scheduled for retry", "event_id", env.ID, "attempt", failures, "class", res.Class,
		"status", res.Status, "rung", w.f.top.Retry[rung].Name, "reply", res.Excerpt)
	f.m.outcomes.WithLabelValues("retried", res.Class).Inc()
	f.m.retries.WithLabelValues(w.f.top.Retry[rung].Name).Inc()
}

// deferHeld sends a delivery whose key another worker holds to the first
// rung at least as long as the remaining lease, without spending an
// attempt: by then the holder has forwarded it or its lease has expired.
func (w *worker) deferHeld(ctx context.Context, d amqp.Delivery, held time.Duration, log *slog.Logger) {
	rung := w.f.policy.AtLeast(0, held)
	if err := w.publishHolding(ctx, w.f.top.RetryExchange, w.f.top.RetryRoutingKey(rung), Republishing(d), d.MessageId); err != nil {
		log.Warn("deferring a held event; requeueing", "err", err)
		_ = d.Nack(false, true)
		return
	}
	_ = d.Ack(false)
	w.f.m.outcomes.WithLabelValues("deferred", "none").Inc()
}

// letter describes why a delivery is dead-lettered.
type letter struct {
	reason   string
	class    string
	status   int
	excerpt  string
	failures int
}

// deadLetter publishes d to the DLX (with a confirm) with the headers
// `borda dlq` reads, marks the idempotency key "dead" (so a later copy of
// the event is a duplicate, not a second dead letter or a POST after one;
// only a `borda dlq replay`, whose x-borda-replay header authorises it,
// takes the key over) and then acks it. A crash after the confirm and
// before the mark leaves the lease to expire: a redelivery is then
// dead-lettered again (two letters, one event; at-least-once).
func (w *worker) deadLetter(ctx context.Context, d amqp.Delivery, env envelope.Envelope, l letter, lease Lease) {
	f := w.f
	now := f.now()
	msg := Republishing(d)
	msg.Headers[HeaderDLQReason] = l.reason
	msg.Headers[HeaderDLQStatus] = int64(l.status)
	msg.Headers[HeaderDLQExcerpt] = f.poster.scrub(l.excerpt) // the poster scrubbed it already; no URL secret in a header either way
	msg.Headers[HeaderAttempt] = int64(l.failures)
	msg.Headers[HeaderDeadLetteredAt] = formatTime(now)
	msg.Headers[HeaderSource] = env.Source
	first := l.reason
	if l.status != 0 {
		first = failureReason(Result{Class: l.class, Status: l.status})
	}
	markFirstFailure(msg.Headers, now, first)
	delete(msg.Headers, HeaderReplayForce)
	if msg.MessageId == "" {
		msg.MessageId = env.ID
	}
	if err := w.publishHolding(ctx, f.top.DLXExchange, f.top.DLQRoutingKey(), msg, env.ID); err != nil {
		f.log.Error("dead-lettering; requeueing", "event_id", env.ID, "err", err)
		f.m.outcomes.WithLabelValues("requeued", l.class).Inc()
		_ = d.Nack(false, true)
		return
	}
	if ok, err := w.settle(ctx, "dead", env.ID, func(ctx context.Context) (bool, error) { return f.store.MarkDead(ctx, lease) }); err != nil {
		f.log.Error("could not mark the event dead-lettered; a later copy of it may be processed again", "event_id", env.ID, "err", err)
		f.storeFailed(err)
	} else if !ok {
		f.log.Warn("could not mark the event dead-lettered: its key moved on (this lease expired)", "event_id", env.ID)
	}
	_ = d.Ack(false)
	f.log.Warn("event dead-lettered", "event_id", env.ID, "reason", l.reason, "status", l.status, "attempts", l.failures)
	f.m.outcomes.WithLabelValues("dead_lettered", l.class).Inc()
	if l.failures > 0 {
		f.m.attempts.Observe(float64(l.failures))
	}
}

// publishHolding publishes msg with a confirm; while the broker does not
// confirm it (nack, return, timeout) the delivery in hand is held, unacked,
// and the publish tried again after storeErrorPause, doubling up to
// maxHoldPause, with consuming paused: the outcome is decided, and a nack
// with requeue would spend one of the event's deliveries per try
// (docs/forwarder.md, "RabbitMQ 4"). It gives up, returning the last
// error, only when the forwarder shuts down or the consuming channel is
// closed (the broker has requeued the delivery; the session reconnects);
// the caller then requeues. The publisher reconnects on its own.
func (w *worker) publishHolding(ctx context.Context, exchange, key string, msg amqp.Publishing, id string) error {
	err := w.pub.PublishTo(ctx, exchange, key, msg)
	if err == nil {
		return nil
	}
	w.f.publishHeld.Add(1)
	defer w.f.publishHeld.Add(-1)
	w.f.pause()
	wait := storeErrorPause
	for tries := 1; ; tries++ {
		if w.ch.IsClosed() || w.run.Err() != nil {
			return err
		}
		w.f.log.Error("the broker did not confirm a republish; holding the delivery and trying again",
			"event_id", id, "exchange", exchange, "routing_key", key, "tries", tries, "in", wait, "err", err)
		select {
		case <-w.run.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, maxHoldPause)
		if err = w.pub.PublishTo(ctx, exchange, key, msg); err == nil {
			return nil
		}
	}
}

// Marking a key after the outcome (forwarded, dead) is tried markTries
// times, waiting markRetryFirst then doubling, before the delivery is
// acked without it: a transient Redis error (a reset connection, a
// failover) does not lose the mark, and the attempts are bounded (about
// 1.5 s of waits plus each command's timeout) so a Redis outage does not
// hold the delivery longer.
const (
	markTries      = 5
	markRetryFirst = 100 * time.Millisecond
)

// settle runs mark until it answers (ok or not) or markTries attempts
// failed with an error; it returns the last answer.
func (w *worker) settle(ctx context.Context, state, id string, mark func(context.Context) (bool, error)) (bool, error) {
	wait := markRetryFirst
	for try := 1; ; try++ {
		ok, err := mark(ctx)
		if err == nil || try == markTries {
			return ok, err
		}
		w.f.log.Warn("marking the idempotency key failed; trying again before acking", "event_id", id, "state", state, "try", try, "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return false, err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// replayID returns the id of the `dlq replay` (forced or not) a delivery
// carries ("" when it is no replay): it authorises taking over a "dead"
// key once per replay.
func replayID(h amqp.Table) string {
	if id := StringHeader(h, HeaderReplay); id != "" {
		return id
	}
	return forcedReplay(h)
}

// forcedReplay returns the id of the `dlq replay --force` a delivery
// carries ("" when not forced; "force" when forced without a replay id).
func forcedReplay(h amqp.Table) string {
	if !BoolHeader(h, HeaderReplayForce) {
		return ""
	}
	if id := StringHeader(h, HeaderReplay); id != "" {
		return id
	}
	return "force"
}
