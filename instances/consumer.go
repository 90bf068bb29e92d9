package instances

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/amqpaddr"
	"github.com/olp-edu/borda/internal/backoff"
	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/internal/startstop"
	"github.com/olp-edu/borda/webhook/envelope"
)

// Options configure a Consumer. AMQPURL, Queue, Prefetch and DB are required.
type Options struct {
	AMQPURL string
	// Queue is the events queue (forward.events_queue).
	Queue string
	// Prefetch is the number of unacked deliveries (≥ 1; forward.prefetch
	// holds the default).
	Prefetch int
	// DB is a *pgxpool.Pool.
	DB execer
	// Logger (nil: discard) and Registerer (nil: a private registry).
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Reconnect is the first wait after a lost connection (0: 2s):
	// internal/backoff's policy doubles it after each attempt that does
	// not connect, up to backoff.DefaultMax (5 s; Reconnect itself when
	// larger), each wait drawn from [half, all] of that, and starts from
	// it again once a session consumed. It is also the first wait before
	// a delivery the database refused is tried again (doubling up to
	// MaxHold).
	Reconnect time.Duration
	// MaxHold caps the wait between tries of a held delivery (0: 30s).
	MaxHold time.Duration
	// Clock is the clock event times are bounded by (nil: the wall clock).
	Clock clock.Clock
}

// An event's date_time orders it against the instance's stored state, but
// never past the moment the ingress received it (the envelope's
// received_at; the consumer's clock for an envelope without one): a
// claimed date after that is the sender's word about the future, and
// trusting it for any skew let a token holder date a forged
// connection.update ahead and outrank every genuine event that arrived
// after it for that long, renewable for ever (fresh attack pass A57; a
// date of 9999-12-31 pinned the state for good before that). An event
// dated before its receipt keeps its own date, so genuine events that
// arrive out of order are still ordered by when they happened.

// Consumer is `borda consume-events`.
type Consumer struct {
	task   startstop.Task // Start's Run
	opts   Options
	store  *Store
	log    *slog.Logger
	events *prometheus.CounterVec

	consuming atomic.Bool
	dbDown    atomic.Bool
}

// Readiness names what the consumer is waiting for ("amqp: …",
// "database: …"); empty when it consumes and the database answers.
// `borda consume-events` serves it on /readyz.
func (c *Consumer) Readiness() []string {
	var out []string
	if !c.consuming.Load() {
		out = append(out, "amqp: not consuming "+c.opts.Queue)
	}
	if c.dbDown.Load() {
		out = append(out, "database: whatsapp_instances cannot be written; the delivery in hand is held")
	}
	return out
}

// New builds a Consumer; it does not connect.
func New(opts Options) (*Consumer, error) {
	if opts.AMQPURL == "" || opts.Queue == "" || opts.DB == nil || opts.Prefetch < 1 {
		return nil, errors.New("instances: AMQPURL, Queue, DB and a Prefetch of at least 1 are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	if opts.Reconnect == 0 {
		opts.Reconnect = 2 * time.Second
	}
	if opts.MaxHold == 0 {
		opts.MaxHold = 30 * time.Second
	}
	opts.Clock = clock.Or(opts.Clock)
	events := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "borda_instances_events_total",
		Help: "Events read by consume-events, by result: applied, skipped (older than the stored state), ignored (not connection.update), malformed.",
	}, []string{"result"})
	if err := opts.Registerer.Register(events); err != nil {
		return nil, fmt.Errorf("registering instances metrics: %w", err)
	}
	return &Consumer{opts: opts, store: NewStore(opts.DB), log: opts.Logger.With("component", "consume-events"), events: events}, nil
}

// Result of handling one event.
type Result string

// Results.
const (
	Applied   Result = "applied"
	Skipped   Result = "skipped"
	Ignored   Result = "ignored"
	Malformed Result = "malformed"
)

// Handle applies one message body (an envelope). An error means the
// database failed and the message must be retried; every other case is
// final (ack), including an update whose values the database refuses
// (SQLSTATE class 22 or 23: Malformed, logged at error).
func (c *Consumer) Handle(ctx context.Context, body []byte) (Result, error) {
	env, err := envelope.Decode(body)
	if err != nil {
		return Malformed, nil
	}
	u, ok, err := Parse(env.ContentType, env.Body)
	switch {
	case !ok:
		return Ignored, nil
	case err != nil:
		c.log.Warn("malformed connection.update", "event_id", env.ID, "err", err)
		return Malformed, nil
	}
	limit := env.ReceivedAt
	if limit.IsZero() {
		limit = c.opts.Clock.Now()
	}
	if u.EventTime.After(limit) {
		c.log.Warn("connection.update dated after its receipt; ordered at its receipt", "event_id", env.ID, "instance", u.Instance,
			"event_time", u.EventTime, "ordered_at", limit)
		u.EventTime = limit
	}
	applied, err := c.store.Apply(ctx, u)
	if errors.Is(err, errUnstorable) {
		c.log.Error("connection.update the database refuses; acknowledged as malformed", "event_id", env.ID, "err", err)
		return Malformed, nil
	}
	if err != nil {
		return "", err
	}
	if !applied {
		c.log.Info("stale connection.update skipped", "event_id", env.ID, "instance", u.Instance, "event_time", u.EventTime)
		return Skipped, nil
	}
	return Applied, nil
}

// Start runs Run in the background until ctx ends or Stop is called, and
// returns at once; a second Start is a no-op, a Start after Stop returns
// startstop.ErrStopped.
func (c *Consumer) Start(ctx context.Context) error { return c.task.StartTask(ctx, c.Run) }

// Stop ends Start's Run and waits for it (the delivery in hand is
// finished), at most until ctx ends. A Stop without a Start, and a second
// Stop, return nil.
func (c *Consumer) Stop(ctx context.Context) error { return c.task.Stop(ctx) }

// Done is closed when Start's Run has returned; Err is then its error.
func (c *Consumer) Done() <-chan struct{} { return c.task.Done() }

// Err is what Start's Run returned (nil while it runs).
func (c *Consumer) Err() error { return c.task.Err() }

// Run consumes until ctx ends, reconnecting after a lost connection. On
// ctx's end it finishes the delivery in hand and returns nil.
func (c *Consumer) Run(ctx context.Context) error {
	backoff.Supervise(ctx, backoff.Policy{First: c.opts.Reconnect}, c.session, func(err error, _ time.Duration) {
		c.log.Error("consume-events session ended; reconnecting", "err", err)
	})
	return nil
}

// session runs one consuming connection until ctx ends or the broker
// closes it. connected reports whether it got as far as consuming.
func (c *Consumer) session(ctx context.Context) (connected bool, err error) {
	conn, err := amqpaddr.DialConfig(c.opts.AMQPURL, amqp.Config{
		Heartbeat:  10 * time.Second,
		Properties: amqp.Table{"connection_name": "borda-consume-events"},
	})
	if err != nil {
		return false, fmt.Errorf("dialing amqp: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return false, fmt.Errorf("opening channel: %w", err)
	}
	if err := ch.Qos(c.opts.Prefetch, 0, false); err != nil {
		return false, fmt.Errorf("setting prefetch: %w", err)
	}
	deliveries, err := ch.Consume(c.opts.Queue, "", false, false, false, false, nil)
	if err != nil {
		return false, fmt.Errorf("consuming %s: %w", c.opts.Queue, err)
	}
	c.consuming.Store(true)
	defer c.consuming.Store(false)
	hctx := context.WithoutCancel(ctx)
	for {
		select {
		case <-ctx.Done():
			return true, nil
		case d, ok := <-deliveries:
			if !ok {
				return true, errors.New("deliveries closed by the broker")
			}
			res, err := c.hold(ctx, hctx, d)
			if err != nil {
				// Shutting down with the database still refusing: the
				// one requeue this costs is the only delivery spent.
				_ = d.Nack(false, true)
				return true, nil
			}
			c.events.WithLabelValues(string(res)).Inc()
			_ = d.Ack(false)
		}
	}
}

// poisonTries is the number of failed tries after which hold asks the
// database whether it accepts a valid update (Store.Accepts): if it does,
// the event is poison, not the database down. Two, so a transient failure
// of one try (a connection reset) is never taken for poison.
const poisonTries = 2

// hold handles d; while the database refuses it, it keeps d in hand,
// unacked, and tries again after Reconnect, doubling up to MaxHold. The
// other prefetched deliveries wait unacked too. From the poisonTries-th
// try on, a failure while the database accepts a canary update
// (Store.Accepts) ends the hold: the event is acknowledged as malformed.
// A nack with requeue per
// try (as before) spent one delivery per try, and the events queue has
// no dead-letter target: under RabbitMQ 4's default delivery limit of 20
// on quorum queues a database outage of about 40 s dropped every waiting
// event (docs/forwarder.md, "RabbitMQ 4"). It returns an error only when
// ctx ends first. The broker's consumer_timeout (30 min by default) still
// bounds a hold: past it the broker closes the channel, returning the
// deliveries (one delivery each), and the session reconnects.
func (c *Consumer) hold(ctx, hctx context.Context, d amqp.Delivery) (Result, error) {
	wait := c.opts.Reconnect
	for tries := 1; ; tries++ {
		res, err := c.Handle(hctx, d.Body)
		if err == nil {
			if c.dbDown.Swap(false) {
				c.log.Info("the database accepts events again", "tries", tries)
			}
			return res, nil
		}
		if tries >= poisonTries {
			if perr := c.store.Accepts(hctx); perr == nil {
				// The database takes a valid update and refused this one
				// poisonTries times: the event is at fault, and holding it
				// would stall every instance's updates behind it (fresh
				// attack pass A020). The forward queue keeps its own copy.
				c.dbDown.Store(false)
				c.log.Error("the database accepts other updates but refuses this event; acknowledged as malformed",
					"message_id", d.MessageId, "tries", tries, "err", err)
				return Malformed, nil
			}
		}
		c.dbDown.Store(true)
		c.log.Error("applying an event; holding it and trying again", "message_id", d.MessageId, "tries", tries, "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return "", err
		case <-time.After(wait):
		}
		wait = min(2*wait, c.opts.MaxHold)
	}
}
