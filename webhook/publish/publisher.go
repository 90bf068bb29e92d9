// Package publish is Borda's one confirm publisher (docs/webhooks.md,
// docs/reliability.md): one long-lived AMQP connection with its reconnect
// loop, a small pool of confirm-mode channels, the exact correlation of
// basic.ack/basic.nack and basic.return to each publish, and the
// coalescing socket. The webhook ingress publishes envelopes through it;
// the forwarder's retries, dead letters and give-backs and `borda dlq`
// republish through it too.
package publish

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/internal/startstop"
	"github.com/olp-edu/borda/webhook/envelope"
	"github.com/olp-edu/borda/webhook/topology"
)

// Message is one envelope to publish on Options.Exchange.
type Message struct {
	// ID is the event id, sent as the AMQP message_id.
	ID string
	// RoutingKey on the exchange; empty: Options.RoutingKey.
	RoutingKey string
	// Body is the encoded envelope (envelope.ContentType). It is valid only
	// until Publish returns: the ingress reuses the buffer for its next
	// request, so a publisher that keeps it must copy it.
	Body []byte
	// Timestamp is the AMQP timestamp (the time the request was read).
	Timestamp time.Time
}

// Publisher publishes persistent, mandatory messages over ONE long-lived
// connection and a small pool of confirm-mode channels, and tells each
// caller whether the broker took responsibility (ack without return) or
// not.
//
// Start runs its reconnect loop: it connects in the background and
// reconnects with capped exponential backoff (100 ms … 5 s, jittered),
// declaring Options.Topology (when set) on every connection and
// re-entering confirm mode on every channel. While the broker has the
// connection blocked (memory or disk alarm, connection.blocked) a publish
// fails at once with ErrBrokerBlocked without touching the socket. When a
// channel or the connection closes, every publish waiting for a confirm on
// it fails at once with ErrBrokerUnavailable. At most Options.MaxInFlight
// publishes are unconfirmed at a time; beyond that a publish fails at
// once. Before Start and after Stop every publish fails with
// ErrBrokerUnavailable.
type Publisher struct {
	url            string
	connName       string
	exchange       string
	routingKey     string
	topo           *topology.Topology
	channels       int
	confirmTimeout time.Duration
	logger         *slog.Logger
	metrics        *publisherMetrics
	qcheck         *queueCheck // nil: no queue checked
	guard          Guard       // nil: none

	slots     chan struct{} // in-flight cap; one token per unconfirmed publish
	seq       atomic.Uint64 // per-publish correlation ids
	blocked   atomic.Bool
	closing   atomic.Bool
	declaring atomic.Bool

	blockMu sync.Mutex
	blockCh chan struct{} // closed while the broker blocks the connection

	redeclare chan struct{}
	// clock reads the time of the topology declares, which paces the
	// redeclares a basic.return asks for (redeclareEvery); the wall
	// clock, a Manual one in tests.
	clock clock.Clock
	dead  chan *confirmChannel
	// retire receives channels the broker nacked a publish on (S04);
	// the session replaces them, at most one per confirm timeout.
	retire chan *confirmChannel

	// nackFirst and nackLast are the unix nanoseconds of the first and the
	// last nack of the current run of nacks (0: none; an ack ends the run):
	// Ready fails while nacks have persisted for nackReadyAfter and the
	// last one is recent (nackStreak).
	nackFirst, nackLast atomic.Int64

	// topoMu guards what the last topology declare found.
	topoMu     sync.Mutex
	unguarded  []string // queues kept with the previous release's arguments
	declareErr error    // the last declare's failure; nil once one succeeds

	mu      sync.RWMutex
	conn    *amqp.Connection
	chans   []*confirmChannel
	lastErr error
	upCh    chan struct{} // closed while a connection with its channels is up

	runner startstop.Runner
}

// Options configure a Publisher. URL is required.
type Options struct {
	// URL is the broker (amqp:// or amqps://, credentials included).
	URL string
	// ConnectionName is the client-provided connection name the broker
	// shows (rabbitmqctl list_connections client_properties); empty:
	// "borda-webhook-publisher/<hostname>/<pid>".
	ConnectionName string
	// Exchange and RoutingKey are where Publish sends a Message (the
	// webhook exchange and its routing key); PublishTo names its own.
	Exchange, RoutingKey string
	// Topology, when set, is declared on every connection, before a
	// channel that the broker closed is reopened, and every 5 s while
	// connected (so a queue deleted under the gateway comes back).
	Topology *topology.Topology
	// CheckQueue, when set, is passively declared when a connection's
	// channels open, when one is reopened, and every second while
	// connected; while it does not exist, publishes on Exchange whose
	// routing key matches CheckBinding fail with ErrQueueMissing and Ready
	// fails (the ingress sets the forward queue and its routing key:
	// docs/reliability.md, "A deleted forward queue").
	CheckQueue, CheckBinding string
	// Guard, when set, admits or refuses each publish before it is sent
	// (webhook/queueguard: a queue that a broker policy lets drop at its
	// length limit); its unguarded queues count in
	// borda_webhook_queues_unguarded and Degraded names them.
	Guard Guard
	// Channels is the number of confirm-mode channels (< 1: 1).
	Channels int
	// MaxInFlight caps unconfirmed publishes across all channels (< 1: 1).
	MaxInFlight int
	// ConfirmTimeout bounds each publish's wait for its confirm (> 0).
	ConfirmTimeout time.Duration
	// Logger (nil: discard) and Registerer (nil: a private registry, the
	// metrics are not exported).
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// New returns a Publisher for opts; it does not connect (Start does), so
// start-up never depends on the broker; Ready reports the state. It fails
// when URL is empty, ConfirmTimeout is not positive, or its metrics cannot
// be registered.
func New(opts Options) (*Publisher, error) {
	if opts.URL == "" {
		return nil, errors.New("publish: the broker URL is required")
	}
	if opts.ConfirmTimeout <= 0 {
		return nil, fmt.Errorf("publish: the confirm timeout must be positive (got %s)", opts.ConfirmTimeout)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	name := opts.ConnectionName
	if name == "" {
		host, _ := os.Hostname()
		name = "borda-webhook-publisher/" + host + "/" + strconv.Itoa(os.Getpid())
	}
	p := &Publisher{
		url:            opts.URL,
		connName:       name,
		exchange:       opts.Exchange,
		routingKey:     opts.RoutingKey,
		topo:           opts.Topology,
		channels:       max(opts.Channels, 1),
		confirmTimeout: opts.ConfirmTimeout,
		logger:         opts.Logger.With("component", "webhook-publisher"),
		slots:          make(chan struct{}, max(opts.MaxInFlight, 1)),
		redeclare:      make(chan struct{}, 1),
		clock:          clock.Wall,
		lastErr:        errors.New("not connected yet"),
		blockCh:        make(chan struct{}),
		upCh:           make(chan struct{}),
		guard:          opts.Guard,
	}
	p.dead = make(chan *confirmChannel, p.channels)
	p.retire = make(chan *confirmChannel, p.channels)
	if opts.CheckQueue != "" {
		p.qcheck = &queueCheck{queue: opts.CheckQueue, binding: opts.CheckBinding, every: queueCheckEvery}
	}
	m, err := newPublisherMetrics(opts.Registerer, func() float64 { return float64(len(p.slots)) }, p.unguardedCount, p.staleCount)
	if err != nil {
		return nil, err
	}
	p.metrics = m
	return p, nil
}

// Start runs the reconnect loop until Stop or until ctx ends; it returns
// at once. A second Start is a no-op; a Start after Stop returns
// startstop.ErrStopped.
func (p *Publisher) Start(ctx context.Context) error {
	return p.runner.Start(ctx, p.supervise)
}

// WaitReady returns nil once Ready does, or ctx's error when ctx ends
// first (the last Ready error wrapped).
func (p *Publisher) WaitReady(ctx context.Context) error {
	for {
		err := p.Ready()
		if err == nil {
			return nil
		}
		p.mu.RLock()
		up := p.upCh
		p.mu.RUnlock()
		select {
		case <-up:
			// a session is up; Ready may still fail (blocked, stalled):
			// look again shortly rather than spin.
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w: %w", ctx.Err(), err)
			case <-time.After(10 * time.Millisecond):
			}
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ctx.Err(), err)
		}
	}
}

// Ready returns nil when a connection with its channels is up, the broker
// is not blocking it and no confirm has been outstanding for longer than
// Options.ConfirmTimeout; else an error wrapping ErrBrokerBlocked or
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
	if p.qcheck != nil && p.qcheck.missing.Load() {
		return fmt.Errorf("%w: %s", ErrQueueMissing, p.qcheck.queue)
	}
	if p.qcheck != nil && p.qcheck.unbound.Load() {
		return fmt.Errorf("%w: %s to %s (%s)", ErrForwardUnbound, p.qcheck.queue, p.exchange, p.qcheck.binding)
	}
	if run := p.nackStreak(time.Now()); run > 0 {
		return fmt.Errorf("%w: every publish nacked by the broker for %s (the queue is full or refuses this publisher)", ErrNack, run.Round(time.Millisecond))
	}
	if since := stalledFor(p.chans); since > p.confirmTimeout {
		return fmt.Errorf("%w: a confirm has been outstanding for %s", ErrBrokerUnavailable, since.Round(time.Millisecond))
	}
	if g, ok := p.guard.(unreadGuard); ok {
		if qs := g.Unread(); len(qs) > 0 {
			return fmt.Errorf("%w: the queue guard never read the effective settings of %s", ErrQueueMayDrop, strings.Join(qs, ", "))
		}
	}
	return nil
}

// unreadGuard is a Guard that can name the queues whose settings it never
// read (webhook/queueguard): while one is, the publisher is not ready.
type unreadGuard interface {
	Unread() []string
}

// staleGuard is a Guard that can name the queues whose settings it has
// not read again for a while (webhook/queueguard): the publisher is
// degraded and counts them in borda_webhook_queue_guard_stale.
type staleGuard interface {
	Stale() []string
}

// staleCount is borda_webhook_queue_guard_stale.
func (p *Publisher) staleCount() float64 {
	if g, ok := p.guard.(staleGuard); ok {
		return float64(len(g.Stale()))
	}
	return 0
}

// Degraded returns nil when the last topology declare succeeded with the
// current arguments; else a *DegradedError naming what is wrong while
// publishing goes on: queues kept with an earlier release's arguments
// (no `x-overflow: reject-publish`: a max-length policy on them drops
// confirmed events), or a declare the broker refused (the configure
// permission; the forward queue's existence and binding are still checked
// every second). /readyz/webhook stays 200 and shows it (the gateway
// reads DegradedError).
func (p *Publisher) Degraded() error {
	p.topoMu.Lock()
	defer p.topoMu.Unlock()
	var notes []string
	if len(p.unguarded) > 0 {
		notes = append(notes, fmt.Sprintf("queues without x-overflow: reject-publish (declared by an earlier release; a max-length policy on them drops confirmed events; docs/upgrading.md): %s", strings.Join(p.unguarded, ", ")))
	}
	if p.guard != nil {
		if qs := p.guard.Unguarded(); len(qs) > 0 {
			notes = append(notes, fmt.Sprintf("queues a broker policy lets drop confirmed events at a length limit (its overflow overrides x-overflow: reject-publish; publishes near the limit answer 503 QUEUE_MAY_DROP; docs/reliability.md): %s", strings.Join(qs, ", ")))
		}
	}
	if g, ok := p.guard.(staleGuard); ok {
		if qs := g.Stale(); len(qs) > 0 {
			notes = append(notes, fmt.Sprintf("the queue guard decides on old settings (the management API has not answered since; a drop-head policy set since would not be seen; docs/reliability.md): %s", strings.Join(qs, ", ")))
		}
	}
	if p.declareErr != nil {
		notes = append(notes, fmt.Sprintf("the topology could not be declared: %v", p.declareErr))
	}
	if len(notes) == 0 {
		return nil
	}
	return &DegradedError{Notes: notes}
}

// Guard admits or refuses a publish before it is sent (Options.Guard;
// webhook/queueguard implements it).
type Guard interface {
	// Admit returns nil to send a publish of size body bytes to exchange
	// with routing key key (and counts it), or an error wrapping
	// ErrQueueMayDrop.
	Admit(exchange, key string, size int) error
	// Unguarded names the queues whose effective settings drop messages
	// at a length limit.
	Unguarded() []string
}

// unguardedCount is borda_webhook_queues_unguarded: the queues kept with
// an earlier release's arguments and those the guard names, once each.
func (p *Publisher) unguardedCount() float64 {
	p.topoMu.Lock()
	names := append([]string(nil), p.unguarded...)
	p.topoMu.Unlock()
	if p.guard != nil {
		for _, q := range p.guard.Unguarded() {
			if !slices.Contains(names, q) {
				names = append(names, q)
			}
		}
	}
	return float64(len(names))
}

// DegradedError is Degraded's answer: the component works, with Notes,
// one sentence each.
type DegradedError struct{ Notes []string }

func (e *DegradedError) Error() string { return strings.Join(e.Notes, "; ") }

// Degraded is true: the component still answers.
func (e *DegradedError) Degraded() bool { return true }

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

// Publish sends m persistent and mandatory to Options.Exchange and waits
// for the broker's answer, at most Options.ConfirmTimeout (or ctx's
// deadline if sooner). It returns nil only when the broker acked the
// message with no return; otherwise an error wrapping
// ErrBrokerUnavailable, ErrBrokerBlocked, ErrConfirmTimeout, ErrNack or
// ErrUnroutable. A caller whose ctx ends stops waiting; the in-flight slot
// is kept until the broker answers or the channel closes. Publish keeps no
// reference to m.Body once it returns (its frames were copied to the
// socket's queue), so the caller may reuse the buffer.
func (p *Publisher) Publish(ctx context.Context, m Message) error {
	key := m.RoutingKey
	if key == "" {
		key = p.routingKey
	}
	return p.PublishTo(ctx, p.exchange, key, amqp.Publishing{
		ContentType:  envelope.ContentType,
		DeliveryMode: amqp.Persistent,
		MessageId:    m.ID,
		Timestamp:    m.Timestamp,
		AppId:        "borda",
		Body:         m.Body,
	})
}

// PublishTo sends msg mandatory to exchange ("" is the default exchange)
// with routing key key, as it is but for its CorrelationId (replaced by the
// publisher's own, which matches a basic.return to its publish), and waits
// for the broker's answer as Publish does, with the same errors.
func (p *Publisher) PublishTo(ctx context.Context, exchange, key string, msg amqp.Publishing) error {
	if p.closing.Load() {
		return fmt.Errorf("%w: publisher closing", ErrBrokerUnavailable)
	}
	blocked := p.blockedSignal()
	if p.blocked.Load() {
		return ErrBrokerBlocked
	}
	if err := p.queueRefusal(exchange, key); err != nil {
		return err
	}
	if p.guard != nil {
		if err := p.guard.Admit(exchange, key, len(msg.Body)); err != nil {
			return err
		}
	}
	d := newDeadline(ctx, p.confirmTimeout)
	defer d.stop()
	select {
	case p.slots <- struct{}{}:
	default:
		return fmt.Errorf("%w: %d publishes awaiting confirms", ErrBrokerUnavailable, cap(p.slots))
	}
	p.mu.RLock()
	chans := p.chans
	lastErr := p.lastErr
	p.mu.RUnlock()
	if len(chans) == 0 {
		<-p.slots
		return fmt.Errorf("%w: %w", ErrBrokerUnavailable, lastErr)
	}
	c := pick(chans)
	msg.CorrelationId = strconv.FormatUint(p.seq.Add(1), 36)
	waiting := newWaiter(msg.CorrelationId, p.slots)
	w, err := c.publish(d, exchange, key, msg, waiting)
	// The channel picked was retired meanwhile (its replacement is in the
	// pool already): nothing was sent, publish on the pool as it is now.
	for tries := 1; errors.Is(err, errChannelRetiring); tries++ {
		p.mu.RLock()
		chans = p.chans
		p.mu.RUnlock()
		if len(chans) == 0 || tries == maxRetiringTries {
			waiting.release()
			return fmt.Errorf("%w: %w", ErrBrokerUnavailable, err)
		}
		if d.passed() { // the first try waited (for the lock or the socket): never send past the deadline
			waiting.release()
			return fmt.Errorf("%w after %s: %w", ErrConfirmTimeout, p.confirmTimeout, d.err())
		}
		c = pick(chans)
		w, err = c.publish(d, exchange, key, msg, waiting)
	}
	if err != nil {
		return err
	}
	select {
	case <-w.dc.Done():
		err := c.settle(w)
		if err == nil {
			p.nackFirst.Store(0)
		}
		return err
	case <-blocked:
		// RabbitMQ blocks a connection when it next publishes during an
		// alarm, so the publish that triggers connection.blocked would
		// otherwise wait for its whole deadline. The slot stays taken
		// until the broker answers.
		c.abandon(w)
		return fmt.Errorf("%w while awaiting the confirm", ErrBrokerBlocked)
	case <-ctx.Done():
		c.abandon(w)
		return fmt.Errorf("%w after %s: %w", ErrConfirmTimeout, p.confirmTimeout, d.err())
	case <-d.timer.C:
		c.abandon(w)
		return fmt.Errorf("%w after %s: %w", ErrConfirmTimeout, p.confirmTimeout, d.err())
	}
}

// maxRetiringTries bounds how many retiring channels one publish picks
// before it answers unavailable (each retirement puts a replacement in
// the pool first, so the second pick finds it).
const maxRetiringTries = 3

// pick returns the first channel still open: publishes share one channel
// while it lives, and the others stand by, so one closed by the broker
// (a channel error, its replacement on the way) fails over at once. One
// busy channel beats a round robin: the broker acks its publishes in
// fewer, larger batches (with the coalescing socket: +16 % over four
// channels in turn, bench/cmd/ingress, docs/performance.md). Every
// channel's notification buffers hold the whole in-flight cap, so one
// channel can carry it all. When every channel is closed it returns the
// first, whose publish then fails as unavailable.
//
// A channel the broker nacked a publish on is being retired (S04): pick
// prefers an open channel that was never nacked, then an open nacked one.
func pick(chans []*confirmChannel) *confirmChannel {
	var nacked *confirmChannel
	for _, c := range chans {
		select {
		case <-c.done:
			continue
		default:
			if !c.nacked.Load() {
				return c
			}
			if nacked == nil {
				nacked = c
			}
		}
	}
	if nacked != nil {
		return nacked
	}
	return chans[0]
}

// nackReadyAfter is how long every publish must have been nacked (with no
// ack between) before Ready fails, in confirm timeouts: by then the
// nacked channels were replaced (one per confirm timeout), so the nacks
// are the queue's, or the broker's answer to this publisher, for good.
const nackReadyAfter = 3

// nacked records a broker nack on c and asks the session to retire c.
func (p *Publisher) nacked(c *confirmChannel) {
	now := time.Now().UnixNano()
	p.nackFirst.CompareAndSwap(0, now)
	p.nackLast.Store(now)
	select {
	case p.retire <- c:
	default: // a retirement is already asked for
	}
}

// nackStreak returns how long publishes have been nacked with no ack
// between, when that is longer than nackReadyAfter confirm timeouts and
// the last nack is within one confirm timeout of now; else 0. A replica
// that stops getting traffic (not ready) becomes ready again once its
// last nack is older than one confirm timeout, so it is tried again.
func (p *Publisher) nackStreak(now time.Time) time.Duration {
	first, last := p.nackFirst.Load(), p.nackLast.Load()
	if first == 0 || now.Sub(time.Unix(0, last)) > p.confirmTimeout {
		return 0
	}
	run := now.Sub(time.Unix(0, first))
	if run <= nackReadyAfter*p.confirmTimeout {
		return 0
	}
	return run
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

// Stop stops new publishes (they fail with ErrBrokerUnavailable), waits
// until every outstanding confirm is answered or ctx ends, then ends the
// reconnect loop, closing the channels and the connection. It returns
// ctx's error when confirms were still outstanding at the deadline (their
// callers get ErrBrokerUnavailable). A Stop without Start, and a second
// Stop, return nil.
func (p *Publisher) Stop(ctx context.Context) error {
	var err error
	if p.closing.CompareAndSwap(false, true) {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for len(p.slots) > 0 && err == nil {
			select {
			case <-ctx.Done():
				err = fmt.Errorf("draining %d outstanding confirms: %w", len(p.slots), ctx.Err())
			case <-tick.C:
			}
		}
	}
	// The loop closes the connection at once on cancel, whatever it is
	// doing, so this wait is bounded by the close handshake (closeTimeout).
	if serr := p.runner.Stop(context.WithoutCancel(ctx)); err == nil {
		err = serr
	}
	return err
}
