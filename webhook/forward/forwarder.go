// Package forward implements `borda forward` (docs/forwarder.md): it consumes the
// forward queue, POSTs each event's original bytes to the legacy endpoint
// with an HMAC signature, and retries through a ladder of TTL queues,
// dead-lettering what cannot be delivered. A Redis idempotency key per event
// keeps two workers (or a redelivery) from POSTing the same event twice, and
// a circuit breaker stops consuming while the endpoint is down.
//
// See docs/forwarder.md for the ladder, the outcomes, the breaker and the
// receiver's verification recipe (Verify).
package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/amqpaddr"
	"github.com/olp-edu/borda/internal/backoff"
	"github.com/olp-edu/borda/internal/breaker"
	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/internal/egress"
	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/startstop"
	"github.com/olp-edu/borda/keyspace"
	"github.com/olp-edu/borda/webhook/publish"
	"github.com/olp-edu/borda/webhook/topology"
)

// Options configure a Forwarder. Topology, AMQPURL, Redis, Keys, URL,
// HMACSecret, Scrub, Prefetch, Timeout, LeaseTTL (longer than Timeout),
// RetentionTTL and Breaker are required.
type Options struct {
	// URL is the legacy endpoint (LEGACY_WEBHOOK_URL) and HMACSecret the
	// key that signs each POST (LEGACY_WEBHOOK_HMAC_SECRET).
	URL        string
	HMACSecret []byte
	// SignatureVersions are the signatures each POST carries: SignatureV1
	// (X-Webhook-Signature, timestamp and body) and/or SignatureV2
	// (X-Webhook-Signature-V2, which also covers Idempotency-Key and
	// Content-Type). Empty: both, so receivers that check v1 keep working.
	SignatureVersions []string
	// Scrub returns text the endpoint or the transport wrote (a reply
	// excerpt, an error) with URL's secrets and the HMAC secret removed and
	// every URL redacted: the excerpt goes to logs and to a dead letter's
	// headers (docs/forwarder.md).
	Scrub func(text string) string
	// Prefetch is the number of unacked deliveries (and of POSTs at once).
	Prefetch int
	// Timeout bounds one POST.
	Timeout time.Duration
	// LeaseTTL is how long an event's idempotency key is held while it is
	// POSTed; RetentionTTL how long "forwarded" is remembered.
	LeaseTTL, RetentionTTL time.Duration
	// Breaker opens after Failures consecutive failed POSTs, for OpenFor.
	Breaker BreakerOptions
	// Topology names the queues (the forward queue is consumed) and the
	// retry and dead-letter exchanges.
	Topology topology.Topology
	// AMQPURL is the broker; the forwarder opens its own connection.
	AMQPURL string
	// Redis holds the idempotency keys; Keys builds them.
	Redis redis.Scripter
	Keys  keyspace.Keyspace
	// LegacySource is the source whose events the source-less idempotency
	// keys of earlier versions ({prefix}wh:fwd:{id}) still deduplicate
	// until they expire: the only source configured (cmd/borda sets it
	// when there is one). "": those keys are ignored, an event they would
	// have dropped is POSTed (docs/forwarder.md, "Idempotency keys").
	LegacySource string
	// BareKeySource is the source whose events keep the bare event id as
	// the POST's Idempotency-Key, as before sources existed (the
	// contract's receiver deduplicates by it); every other source's key
	// is "{source}:{id}", so two sources sharing an id never share a key
	// at the receiver. "": every key names its source.
	BareKeySource string
	// Sources are the names of every source configured. A bare-key
	// source's id that starts with one of them and ':' is sent as
	// "{source}:{id}" too, so no sender can mint another source's key.
	Sources []string
	// Senders maps a source's name to its sender: the group of sources
	// that accept the same credential (configs.Webhook.CredentialGroups),
	// which one holder can post as. The breaker counts an answered
	// failure only once two senders failed (failure.go). nil: each source
	// is its own sender.
	Senders map[string]string
	// Logger (nil: discard) and Registerer (nil: a private registry).
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// HTTPClient POSTs (nil: a client that follows no redirects).
	HTTPClient *http.Client
	// Clock decides the breaker's open period, the recorded failure and
	// duplicate times and the sampled queue-head age (nil: the wall
	// clock).
	Clock clock.Clock
	// PublishTimeout bounds a republish's confirm (0: 5s).
	PublishTimeout time.Duration
	// PublishRegisterer receives the metrics of the republishing
	// connection (webhook/publish; nil: not exported).
	PublishRegisterer prometheus.Registerer
	// SampleEvery is how often queue depths and the head's age are sampled
	// (0: 15s).
	SampleEvery time.Duration
	// Reconnect is the first wait before reconnecting after the broker
	// connection is lost (0: 2s): internal/backoff's policy doubles it
	// after each attempt that does not connect, up to backoff.DefaultMax
	// (5 s; Reconnect itself when larger), each wait drawn from [half,
	// all] of that, and starts from it again once a session connected.
	Reconnect time.Duration
}

// Forwarder is one `borda forward` worker. Build it with New; Start and
// Stop it (internal/startstop's shape), or Run it in the caller's
// goroutine.
type Forwarder struct {
	task    startstop.Task // Start's Run
	opts    Options
	top     topology.Topology
	store   *Store
	poster  *poster
	policy  Policy
	breaker *Breaker
	pub     *publish.Publisher // retries, dead letters, give-backs
	m       *metrics
	dups    duplicates
	log     *slog.Logger
	now     func() time.Time

	// newestTaken is the newest received_at (Unix ns) of an event taken
	// from the forward queue: the sampler's lag reference.
	newestTaken atomic.Int64
	// sampledAt is when the queue depths were last sampled (Unix ns; 0:
	// never), so a reader can tell a depth's age (Status.SampledAt).
	sampledAt atomic.Int64

	// afterMark, when set (tests), runs between marking an event forwarded
	// and acking its delivery, with the consuming channel.
	afterMark func(*amqp.Channel)

	// What the worker is waiting for (Readiness): connected and consuming
	// are set by the session; storeDown while the idempotency store does
	// not answer (consuming paused until a probe succeeds); publishHeld
	// counts handlers holding a delivery whose republish the broker does
	// not confirm.
	connected   atomic.Bool
	consuming   atomic.Bool
	storeDown   atomic.Bool
	storeProbed atomic.Bool // a health probe of the store has answered
	publishHeld atomic.Int32
	// paused is signalled when a handler finds a dependency down, so the
	// consumer stops taking deliveries (see pause).
	paused chan struct{}
}

// BreakerOptions configure the circuit breaker in front of the endpoint.
type BreakerOptions struct {
	Failures int
	OpenFor  time.Duration
}

// New validates opts and builds a Forwarder. It does not connect.
func New(opts Options) (*Forwarder, error) {
	f := opts
	switch {
	case opts.AMQPURL == "":
		return nil, errors.New("forward: AMQPURL is required")
	case opts.Redis == nil:
		return nil, errors.New("forward: Redis is required (redis.url)")
	case f.URL == "":
		return nil, errors.New("forward: forward.url is required (LEGACY_WEBHOOK_URL)")
	case len(f.HMACSecret) == 0:
		return nil, errors.New("forward: the HMAC secret is required (LEGACY_WEBHOOK_HMAC_SECRET)")
	case !validVersions(f.SignatureVersions):
		return nil, fmt.Errorf("forward: signature versions %q: each must be %q or %q", f.SignatureVersions, SignatureV1, SignatureV2)
	case f.LeaseTTL <= f.Timeout:
		return nil, fmt.Errorf("forward: lease TTL %s must exceed the POST timeout %s", f.LeaseTTL, f.Timeout)
	case len(opts.Topology.Retry) == 0:
		return nil, errors.New("forward: the topology has no retry ladder")
	case opts.Scrub == nil:
		return nil, errors.New("forward: Scrub is required (the reply excerpts reach logs and headers)")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	opts.Clock = clock.Or(opts.Clock)
	if opts.PublishTimeout == 0 {
		opts.PublishTimeout = 5 * time.Second
	}
	if opts.SampleEvery == 0 {
		opts.SampleEvery = 15 * time.Second
	}
	if opts.Reconnect == 0 {
		opts.Reconnect = 2 * time.Second
	}
	client := opts.HTTPClient
	if client == nil {
		client = egress.Client(nil, 0)
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("registering forward metrics: %w", err)
	}
	log := opts.Logger.With("component", "forward")
	pub, err := publish.New(republishOptions(opts))
	if err != nil {
		return nil, fmt.Errorf("forward: %w", err)
	}
	delays := make([]time.Duration, len(opts.Topology.Retry))
	for i, d := range opts.Topology.Retry {
		delays[i] = d.TTL
	}
	return &Forwarder{
		opts:    opts,
		top:     opts.Topology,
		store:   NewStore(opts.Redis, opts.Keys, f.LeaseTTL, f.RetentionTTL, opts.LegacySource),
		poster:  newPoster(client, f),
		policy:  Policy{Delays: delays},
		breaker: newBreaker(f.Breaker.Failures, f.Breaker.OpenFor, senders(f.Sources, f.Senders), opts.Clock, m.breaker, log),
		pub:     pub,
		m:       m,
		log:     log,
		now:     opts.Clock.Now,
		paused:  make(chan struct{}, 1),
	}, nil
}

// Breaker returns the forwarder's circuit breaker (for health reporting).
func (f *Forwarder) Breaker() *Breaker { return f.breaker }

// Start runs Run in the background until ctx ends or Stop is called, and
// returns at once; a second Start is a no-op, a Start after Stop returns
// startstop.ErrStopped. Done is closed when Run returned, Err is then its
// error.
func (f *Forwarder) Start(ctx context.Context) error { return f.task.StartTask(ctx, f.Run) }

// Stop ends Start's Run and waits for it (the deliveries in flight
// finish, as when Run's ctx ends), at most until ctx ends. A Stop without
// a Start, and a second Stop, return nil.
func (f *Forwarder) Stop(ctx context.Context) error { return f.task.Stop(ctx) }

// Done is closed when Start's Run has returned.
func (f *Forwarder) Done() <-chan struct{} { return f.task.Done() }

// Err is what Start's Run returned (nil while it runs).
func (f *Forwarder) Err() error { return f.task.Err() }

// Run consumes until ctx ends, reconnecting after a lost broker
// connection. On ctx's end it stops consuming, requeues the deliveries not
// yet started, waits for the in-flight ones to finish (each bounded by the
// POST and publish timeouts) and returns nil. No delivery is acked before
// its outcome is durable (delivered, republished with a confirm, or
// dead-lettered with a confirm), so a crash loses nothing. Republishes go
// through one webhook/publish Publisher with its own connection and
// reconnect loop, started here and stopped when Run returns.
func (f *Forwarder) Run(ctx context.Context) error {
	if err := f.pub.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	var health sync.WaitGroup
	hctx, stopHealth := context.WithCancel(ctx)
	health.Go(func() { f.watchStore(hctx) })
	defer func() { stopHealth(); health.Wait() }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), f.opts.PublishTimeout)
		defer cancel()
		if err := f.pub.Stop(sctx); err != nil {
			f.log.Warn("stopping the republishing connection", "err", err)
		}
	}()
	backoff.Supervise(ctx, backoff.Policy{First: f.opts.Reconnect}, f.session, func(err error, wait time.Duration) {
		f.log.Error("forward session ended; reconnecting", "err", err, "in", wait)
	})
	return nil
}

// republishOptions are the republishing connection's options (New's
// opts, defaults applied): one channel, its own copy of the topology, and
// at most max(2 × prefetch, 64) publishes awaiting their confirms.
func republishOptions(opts Options) publish.Options {
	top := opts.Topology
	return publish.Options{
		URL:            opts.AMQPURL,
		ConnectionName: "borda-forward-publisher",
		Topology:       &top,
		Channels:       1,
		MaxInFlight:    max(2*opts.Prefetch, 64),
		ConfirmTimeout: opts.PublishTimeout,
		Logger:         opts.Logger,
		Registerer:     opts.PublishRegisterer,
	}
}

// session runs one consuming connection: a channel with the prefetch and
// the sampler. It consumes once the republishing connection is ready: a
// delivery is never taken that could not be given back, and the topology
// exists (the publisher declares it, the forward queue and its retry
// ladder included, before it is ready; `borda forward` declares nothing
// else). connected reports whether the consuming channel was set up.
func (f *Forwarder) session(ctx context.Context) (connected bool, err error) {
	conn, err := amqpaddr.DialConfig(f.opts.AMQPURL, amqp.Config{
		Heartbeat:  10 * time.Second,
		Properties: amqp.Table{"connection_name": "borda-forward"},
	})
	if err != nil {
		return false, fmt.Errorf("dialing amqp: %w", err)
	}
	defer conn.Close()
	f.connected.Store(true)
	defer f.connected.Store(false)
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	ch, err := conn.Channel()
	if err != nil {
		return false, fmt.Errorf("opening consume channel: %w", err)
	}
	if err := ch.Qos(f.opts.Prefetch, 0, false); err != nil {
		return false, fmt.Errorf("setting prefetch: %w", err)
	}
	sctx, stopSampler := context.WithCancel(ctx)
	var sampler sync.WaitGroup
	sampler.Go(func() { f.sample(sctx, conn) })
	defer func() { stopSampler(); sampler.Wait() }()
	if err := f.pub.WaitReady(ctx); err != nil {
		return true, nil // ctx ended
	}

	w := &worker{f: f, ch: ch, pub: f.pub, run: ctx}
	poll := min(f.opts.Breaker.OpenFor/10, 250*time.Millisecond)
	for {
		if ctx.Err() != nil {
			return true, nil
		}
		if f.storeDown.Load() {
			if err := w.awaitStore(ctx, closed); err != nil {
				return true, err
			}
			continue
		}
		switch f.breaker.State() {
		case breaker.StateOpen:
			select {
			case <-ctx.Done():
			case e := <-closed:
				return true, fmt.Errorf("amqp connection closed: %v", e)
			case <-time.After(poll):
			}
		case breaker.StateHalfOpen:
			if err := w.probe(ctx, closed, poll); err != nil {
				return true, err
			}
		default:
			if err := w.consume(ctx, closed); err != nil {
				return true, err
			}
		}
	}
}

// worker is one session's channels.
type worker struct {
	f   *Forwarder
	ch  *amqp.Channel
	pub *publish.Publisher
	// run ends when the forwarder shuts down (handlers themselves run on
	// a context without its cancellation, so in-flight deliveries finish).
	run context.Context
}

// consume subscribes and dispatches each delivery to its own goroutine
// (at most prefetch at once) until ctx ends, the breaker opens or a
// handler finds a dependency down (pause); it then cancels the consumer,
// gives back what was buffered (giveBack: no delivery count is spent) and
// waits for the in-flight handlers.
func (w *worker) consume(ctx context.Context, closed <-chan *amqp.Error) error {
	select { // drop a stale "opened" signal from an earlier probe
	case <-w.f.breaker.opened:
	default:
	}
	select { // and a stale pause already acted on
	case <-w.f.paused:
	default:
	}
	tag := "borda-forward-" + newToken()
	deliveries, err := w.ch.Consume(w.f.opts.Topology.ForwardQueue, tag, false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("consuming %s: %w", w.f.opts.Topology.ForwardQueue, err)
	}
	hctx := context.WithoutCancel(ctx) // in-flight deliveries finish on shutdown
	w.f.consuming.Store(true)
	defer w.f.consuming.Store(false)
	var inflight sync.WaitGroup
	defer inflight.Wait()
	stop := func(why string) {
		w.f.consuming.Store(false)
		if err := w.ch.Cancel(tag, false); err != nil {
			w.f.log.Warn("cancelling consumer", "err", err)
			return
		}
		n := 0
		for d := range deliveries {
			w.giveBack(hctx, d)
			n++
		}
		w.f.log.Info("consumer stopped", "why", why, "given_back", n)
	}
	for {
		select {
		case <-ctx.Done():
			stop("shutdown")
			return nil
		case <-w.f.breaker.opened:
			stop("breaker open") // the session loop then waits, or probes
			return nil
		case <-w.f.paused:
			stop("a dependency is down") // the session loop waits for it
			return nil
		case e := <-closed:
			return fmt.Errorf("amqp connection closed: %v", e)
		case d, ok := <-deliveries:
			if !ok {
				return errors.New("consumer cancelled by the broker")
			}
			inflight.Go(func() { w.handle(hctx, d) })
		}
	}
}

// giveBack returns a delivery the worker will not handle now to the tail
// of the forward queue without spending one of its deliveries: a copy
// (same body, message id and headers) is published through the default
// exchange with a confirm, then the original is acked. A nack with requeue
// would count towards the queue's delivery limit (RabbitMQ 4 sets 20 on
// every quorum queue), so an outage of Redis or the endpoint would
// dead-letter every waiting event (docs/forwarder.md, "RabbitMQ 4"). A
// crash between the confirm and the ack leaves two copies; the
// idempotency key absorbs the second. When the copy cannot be published
// (the broker refuses it) the delivery is nacked with requeue after all.
func (w *worker) giveBack(ctx context.Context, d amqp.Delivery) {
	if err := w.pub.PublishTo(ctx, "", w.f.top.ForwardQueue, Republishing(d)); err != nil {
		w.f.log.Warn("giving a delivery back by republish failed; requeueing it (this spends a delivery)",
			"message_id", d.MessageId, "err", err)
		_ = d.Nack(false, true)
		return
	}
	if err := d.Ack(false); err != nil {
		w.f.log.Warn("acking a delivery given back", "message_id", d.MessageId, "err", err)
	}
}

// pause signals the consumer to stop taking deliveries.
func (f *Forwarder) pause() {
	select {
	case f.paused <- struct{}{}:
	default:
	}
}

// storeFailed records that the idempotency store did not answer: the
// consumer pauses until awaitStore's probe succeeds.
func (f *Forwarder) storeFailed(err error) {
	if !f.storeDown.Swap(true) {
		f.log.Error("the idempotency store (Redis) does not answer; consuming paused until it does", "err", err)
	}
	f.pause()
}

// storeProbeEvery is the wait between probes of a store that is down.
const storeProbeEvery = time.Second

// awaitStore probes the idempotency store every storeProbeEvery until it
// answers (then consuming resumes), ctx ends or the connection closes.
// Nothing is consumed meanwhile: the events wait in the forward queue
// and spend no delivery.
func (w *worker) awaitStore(ctx context.Context, closed <-chan *amqp.Error) error {
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := w.f.store.Ping(pctx)
		cancel()
		if err == nil {
			w.f.storeDown.Store(false)
			w.f.log.Info("the idempotency store answers again; consuming resumes")
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case e := <-closed:
			return fmt.Errorf("amqp connection closed: %v", e)
		case <-time.After(storeProbeEvery):
		}
	}
}

// Readiness names what the worker is waiting for, one entry per condition
// ("amqp: …", "redis: …", "breaker: …", "publish: …", "consumer: …"); empty
// when it is consuming and can deliver. `borda forward` serves it on
// /readyz (docs/forwarder.md).
func (f *Forwarder) Readiness() []string {
	var out []string
	if !f.connected.Load() {
		out = append(out, "amqp: not connected to the broker")
	}
	if f.storeDown.Load() {
		out = append(out, "redis: the idempotency store does not answer; consuming paused")
	} else if !f.storeProbed.Load() {
		out = append(out, "redis: the idempotency store has not answered a probe yet")
	}
	switch f.breaker.State() {
	case breaker.StateOpen:
		out = append(out, "breaker: open, the legacy endpoint keeps failing; consuming paused")
	case breaker.StateHalfOpen:
		out = append(out, "breaker: half-open, probing the legacy endpoint")
	}
	if f.pub.Ready() != nil { // its error may name the broker's address: not served
		out = append(out, "publish: the republishing connection to the broker is not ready")
	}
	if n := f.publishHeld.Load(); n > 0 {
		out = append(out, fmt.Sprintf("publish: the broker does not confirm republishes (%d deliveries held)", n))
	}
	if len(out) == 0 && !f.consuming.Load() {
		out = append(out, "consumer: not consuming "+f.opts.Topology.ForwardQueue)
	}
	return out
}

// probe fetches one message (basic.get) while the breaker is half-open and
// handles it synchronously: the breaker's single trial request.
func (w *worker) probe(ctx context.Context, closed <-chan *amqp.Error, poll time.Duration) error {
	d, ok, err := w.ch.Get(w.f.opts.Topology.ForwardQueue, false)
	if err != nil {
		return fmt.Errorf("getting a probe from %s: %w", w.f.opts.Topology.ForwardQueue, err)
	}
	if ok {
		w.handle(context.WithoutCancel(ctx), d)
		return nil
	}
	select {
	case <-ctx.Done():
	case e := <-closed:
		return fmt.Errorf("amqp connection closed: %v", e)
	case <-time.After(poll):
	}
	return nil
}
