package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/webhook/envelope"
	"github.com/olp-edu/borda/webhook/topology"
)

// Message is one envelope to publish.
type Message struct {
	// ID is the event id, sent as the AMQP message_id.
	ID string
	// RoutingKey on the webhook exchange; empty: webhook.routing_key.
	RoutingKey string
	// Body is the encoded envelope (envelope.ContentType).
	Body []byte
	// Timestamp is the AMQP timestamp (the time the request was read).
	Timestamp time.Time
}

// Publisher publishes persistent, mandatory messages to the webhook
// exchange over ONE long-lived connection and a small pool of confirm-mode
// channels, and tells each caller whether the broker took responsibility
// (ack without return) or not.
//
// It connects in the background and reconnects with capped exponential
// backoff (100 ms … 5 s, jittered), declaring the topology of
// webhook/topology on every connection and re-entering confirm mode on
// every channel. While the broker has the connection blocked (memory or
// disk alarm, connection.blocked) Publish fails at once with
// ErrBrokerBlocked without touching the socket. When a channel or the
// connection closes, every publish waiting for a confirm on it fails at
// once with ErrBrokerUnavailable. At most webhook.max_in_flight publishes
// are unconfirmed at a time; beyond that Publish fails at once.
type Publisher struct {
	url            string
	connName       string
	exchange       string
	routingKey     string
	topo           topology.Topology
	channels       int
	confirmTimeout time.Duration
	logger         *slog.Logger
	metrics        *publisherMetrics

	slots     chan struct{} // in-flight cap; one token per unconfirmed publish
	seq       atomic.Uint64 // per-publish correlation ids
	blocked   atomic.Bool
	closing   atomic.Bool
	declaring atomic.Bool

	blockMu sync.Mutex
	blockCh chan struct{} // closed while the broker blocks the connection

	redeclare chan struct{}
	dead      chan *confirmChannel

	mu      sync.RWMutex
	conn    *amqp.Connection
	chans   []*confirmChannel
	lastErr error

	cancel context.CancelFunc
	done   chan struct{}
}

// PublisherOption adjusts a Publisher built by NewPublisher.
type PublisherOption func(*Publisher)

// WithConnectionName sets the client-provided connection name shown by
// the broker (rabbitmqctl list_connections client_properties); the default
// is "borda-webhook-publisher/<hostname>/<pid>".
func WithConnectionName(name string) PublisherOption {
	return func(p *Publisher) { p.connName = name }
}

// NewPublisher returns a Publisher for cfg.AMQP.URL and cfg.Webhook and
// starts connecting in the background: it never blocks on the broker, so
// start-up does not depend on RabbitMQ; Ready reports the state. It fails
// only when its metrics cannot be registered on reg.
func NewPublisher(cfg configs.Config, logger *slog.Logger, reg prometheus.Registerer, opts ...PublisherOption) (*Publisher, error) {
	host, _ := os.Hostname()
	w := cfg.Webhook
	p := &Publisher{
		url:            cfg.AMQP.URL.Reveal(),
		connName:       "borda-webhook-publisher/" + host + "/" + strconv.Itoa(os.Getpid()),
		exchange:       w.Exchange,
		routingKey:     w.RoutingKey,
		topo:           topology.FromConfig(cfg),
		channels:       max(w.PublishChannels, 1),
		confirmTimeout: w.ConfirmTimeout.D(),
		logger:         logger.With("component", "webhook-publisher"),
		slots:          make(chan struct{}, max(w.MaxInFlight, 1)),
		redeclare:      make(chan struct{}, 1),
		lastErr:        errors.New("not connected yet"),
		blockCh:        make(chan struct{}),
		done:           make(chan struct{}),
	}
	for _, o := range opts {
		o(p)
	}
	p.dead = make(chan *confirmChannel, p.channels)
	m, err := newPublisherMetrics(reg, func() float64 { return float64(len(p.slots)) })
	if err != nil {
		return nil, err
	}
	p.metrics = m
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go p.supervise(ctx)
	return p, nil
}

// Ready returns nil when a connection with its channels is up, the broker
// is not blocking it and no confirm has been outstanding for longer than
// confirm_timeout; else an error wrapping ErrBrokerBlocked or
// ErrBrokerUnavailable (with the last connection error).
func (p *Publisher) Ready() error {
	if p.closing.Load() {
		return fmt.Errorf("%w: publisher closed", ErrBrokerUnavailable)
	}
	if p.blocked.Load() {
		return ErrBrokerBlocked
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if len(p.chans) == 0 {
		return fmt.Errorf("%w: %w", ErrBrokerUnavailable, p.lastErr)
	}
	if since := stalledFor(p.chans); since > p.confirmTimeout {
		return fmt.Errorf("%w: a confirm has been outstanding for %s", ErrBrokerUnavailable, since.Round(time.Millisecond))
	}
	return nil
}

// stalledFor returns how long the oldest unconfirmed publish has waited.
func stalledFor(chans []*confirmChannel) time.Duration {
	var d time.Duration
	for _, c := range chans {
		if t := c.oldestPending(); !t.IsZero() {
			d = max(d, time.Since(t))
		}
	}
	return d
}

// Publish sends m persistent and mandatory and waits for the broker's
// answer, at most webhook.confirm_timeout (or ctx's deadline if sooner).
// It returns nil only when the broker acked the message with no return;
// otherwise an error wrapping ErrBrokerUnavailable, ErrBrokerBlocked,
// ErrConfirmTimeout, ErrNack or ErrUnroutable (see Reason). A caller whose
// ctx ends stops waiting; the in-flight slot is kept until the broker
// answers or the channel closes.
func (p *Publisher) Publish(ctx context.Context, m Message) error {
	if p.closing.Load() {
		return fmt.Errorf("%w: publisher closing", ErrBrokerUnavailable)
	}
	blocked := p.blockedSignal()
	if p.blocked.Load() {
		return ErrBrokerBlocked
	}
	ctx, cancel := context.WithTimeout(ctx, p.confirmTimeout)
	defer cancel()
	select {
	case p.slots <- struct{}{}:
	default:
		return fmt.Errorf("%w: %d publishes awaiting confirms", ErrBrokerUnavailable, cap(p.slots))
	}
	var once sync.Once
	release := func() { once.Do(func() { <-p.slots }) }

	p.mu.RLock()
	chans := p.chans
	lastErr := p.lastErr
	p.mu.RUnlock()
	if len(chans) == 0 {
		release()
		return fmt.Errorf("%w: %w", ErrBrokerUnavailable, lastErr)
	}
	c := pick(chans)
	key := m.RoutingKey
	if key == "" {
		key = p.routingKey
	}
	w, err := c.publish(ctx, p.exchange, key, amqp.Publishing{
		ContentType:   envelope.ContentType,
		DeliveryMode:  amqp.Persistent,
		MessageId:     m.ID,
		CorrelationId: strconv.FormatUint(p.seq.Add(1), 36),
		Timestamp:     m.Timestamp,
		AppId:         "borda",
		Body:          m.Body,
	}, release)
	if err != nil {
		return err
	}
	select {
	case <-w.done:
		return w.err
	case <-blocked:
		// RabbitMQ blocks a connection when it next publishes during an
		// alarm, so the publish that triggers connection.blocked would
		// otherwise wait for its whole deadline. The slot stays taken
		// until the broker answers.
		return fmt.Errorf("%w while awaiting the confirm", ErrBrokerBlocked)
	case <-ctx.Done():
		return fmt.Errorf("%w after %s: %w", ErrConfirmTimeout, p.confirmTimeout, ctx.Err())
	}
}

// pick returns the first channel still open: publishes share one channel
// while it lives, and the others stand by, so one closed by the broker
// (a channel error, its replacement on the way) fails over at once. One
// busy channel beats a round robin: the broker acks its publishes in
// fewer, larger batches (with the coalescing socket: +16 % over four
// channels in turn, bench/cmd/ingress, docs/performance.md). Every
// channel's notification buffers hold the whole in-flight cap, so one
// channel can carry it all. When every channel is closed it returns the
// first, whose publish then fails as unavailable.
func pick(chans []*confirmChannel) *confirmChannel {
	for _, c := range chans {
		select {
		case <-c.done:
			continue
		default:
			return c
		}
	}
	return chans[0]
}

// setBlocked records connection.blocked / connection.unblocked.
func (p *Publisher) setBlocked(active bool) {
	p.blockMu.Lock()
	defer p.blockMu.Unlock()
	if p.blocked.Swap(active) == active {
		return
	}
	if active {
		close(p.blockCh)
	} else {
		p.blockCh = make(chan struct{})
	}
	p.metrics.blocked.Set(boolGauge(active))
}

func (p *Publisher) blockedSignal() <-chan struct{} {
	p.blockMu.Lock()
	defer p.blockMu.Unlock()
	return p.blockCh
}

// Close stops new publishes (they fail with ErrBrokerUnavailable), waits
// until every outstanding confirm is answered or ctx ends, then closes the
// channels and the connection. It returns ctx.Err() when confirms were
// still outstanding at the deadline (their callers get
// ErrBrokerUnavailable).
func (p *Publisher) Close(ctx context.Context) error {
	if !p.closing.CompareAndSwap(false, true) {
		<-p.done
		return nil
	}
	var err error
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for len(p.slots) > 0 && err == nil {
		select {
		case <-ctx.Done():
			err = fmt.Errorf("draining %d outstanding confirms: %w", len(p.slots), ctx.Err())
		case <-tick.C:
		}
	}
	p.cancel()
	<-p.done
	return err
}
