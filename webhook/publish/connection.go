package publish

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/amqpaddr"
	"github.com/olp-edu/borda/internal/backoff"
	"github.com/olp-edu/borda/webhook/topology"
)

const (
	minBackoff     = 100 * time.Millisecond
	maxBackoff     = 5 * time.Second
	dialTimeout    = 5 * time.Second
	heartbeat      = 10 * time.Second
	closeTimeout   = time.Second
	redeclareEvery = 2 * time.Second
	// topologyEvery is how often the topology is redeclared while
	// connected, so a queue deleted under the gateway comes back (a
	// deleted forward queue does not make publishes unroutable while the
	// events queue still matches the routing key).
	topologyEvery = 5 * time.Second
)

// supervise is the reconnect loop: it keeps one connection up until ctx
// ends, waiting between sessions by internal/backoff's policy (100 ms
// doubling up to 5 s, jittered; from 100 ms again after a session that
// got connected).
func (p *Publisher) supervise(ctx context.Context) {
	backoff.Supervise(ctx, backoff.Policy{First: minBackoff, Max: maxBackoff}, p.session, func(err error, wait time.Duration) {
		p.setDown(err)
		p.logger.Warn("webhook broker connection down; reconnecting", "error", err, "backoff", wait)
	})
}

// session dials, declares the topology, opens the confirm channels and
// serves until the connection closes or ctx ends. connected reports
// whether the session got as far as being ready.
func (p *Publisher) session(ctx context.Context) (connected bool, err error) {
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(p.connName)
	stopHandshake := func() bool { return true }
	var sock *coalescingConn
	conn, err := amqpaddr.DialConfig(p.url, amqp.Config{
		Properties: props,
		Heartbeat:  heartbeat,
		Dial: func(network, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: dialTimeout}
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// Bound the AMQP handshake like amqp.DefaultDial; amqp091-go
			// clears the deadline once the connection is open. Close
			// (ctx) cuts the handshake short.
			if err := c.SetDeadline(time.Now().Add(dialTimeout)); err != nil {
				c.Close()
				return nil, err
			}
			stopHandshake = context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
			sock = newCoalescingConn(c)
			return sock, nil
		},
	})
	stopHandshake()
	if err != nil {
		return false, fmt.Errorf("dialing broker: %w", err)
	}
	// Close (ctx) closes the connection at once, whatever the session is
	// doing: declaring the topology or opening channels are RPCs that ignore
	// ctx and hang on a slow or half-open broker. The session returns only
	// once the connection is closed, so nothing outlives Close.
	closed := make(chan struct{})
	stopClose := context.AfterFunc(ctx, func() {
		defer close(closed)
		closeConn(conn)
	})
	defer func() {
		if stopClose() {
			closeConn(conn)
		} else {
			<-closed
		}
	}()
	connCloses := conn.NotifyClose(make(chan *amqp.Error, 1))
	blockings := conn.NotifyBlocked(make(chan amqp.Blocking, 4))
	p.setBlocked(false)

	if err := p.declare(conn); err != nil {
		return false, err
	}
	chans := make([]*confirmChannel, 0, p.channels)
	for range p.channels {
		c, err := p.openChannel(conn, sock)
		if err != nil {
			return false, err // closing the connection closes the channels
		}
		chans = append(chans, c)
	}
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	p.checkQueue(conn) // queuecheck.go: before the first publish
	p.setUp(conn, chans)
	p.logger.Info("webhook broker connected", "channels", len(chans), "connection_name", p.connName)

	lastDeclare := p.clock.Now()
	var lastRetire time.Time
	tick := time.NewTicker(topologyEvery)
	defer tick.Stop()
	qtick := p.queueCheckTicker()
	defer qtick.Stop()
	for {
		select {
		case <-qtick.C:
			p.checkQueueAsync(conn)
		case <-tick.C:
			// A half-open connection (a partition that keeps TCP up) is
			// detected by heartbeats only after 2-3 intervals; confirms
			// stalled for 3 × confirm_timeout while not blocked start a
			// fresh connection sooner.
			since := p.stalled()
			if since > 3*p.confirmTimeout && !p.blocked.Load() {
				return true, fmt.Errorf("confirms stalled for %s; recycling the connection", since.Round(time.Millisecond))
			}
			if since <= p.confirmTimeout { // a stalled connection would hang the declare
				lastDeclare = p.clock.Now()
				p.declareAsync(conn)
			}
		case <-ctx.Done():
			p.shutdownSession(conn)
			return true, ctx.Err()
		case e, ok := <-connCloses:
			if !ok || e == nil {
				return true, errors.New("connection closed")
			}
			return true, fmt.Errorf("connection closed by broker: %s (%d)", e.Reason, e.Code)
		case b := <-blockings:
			p.setBlocked(b.Active)
			if b.Active {
				p.logger.Warn("webhook broker blocked the connection; answering 503 BROKER_BLOCKED", "reason", b.Reason)
			} else {
				p.logger.Info("webhook broker unblocked the connection")
			}
		case <-p.redeclare:
			if p.clock.Now().Sub(lastDeclare) < redeclareEvery {
				continue
			}
			lastDeclare = p.clock.Now()
			p.declareAsync(conn)
		case nacked := <-p.retire:
			// At most one channel per confirm timeout: under a real
			// overflow every publish is nacked, and the replacement
			// must not become a channel-open storm. A retirement asked
			// for during the pause is asked again by the next nack on
			// that channel (pick uses a nacked channel only when every
			// other is nacked too).
			if conn.IsClosed() || !p.current(nacked) || time.Since(lastRetire) < p.confirmTimeout {
				continue
			}
			lastRetire = time.Now()
			p.retireChannel(conn, sock, nacked)
		case gone := <-p.dead:
			if conn.IsClosed() || !p.current(gone) {
				continue // connCloses follows, or a channel of an earlier session
			}
			p.replaceChannel(conn, sock, gone)
		}
	}
}

// replaceChannel reopens a channel the broker closed (a channel error
// such as a deleted exchange), redeclaring the topology first.
func (p *Publisher) replaceChannel(conn *amqp.Connection, sock *coalescingConn, gone *confirmChannel) {
	if err := p.declare(conn); err != nil {
		p.logger.Warn("redeclaring webhook topology for a new channel", "error", err)
	}
	c, err := p.openChannel(conn, sock)
	p.checkQueueAsync(conn)
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := make([]*confirmChannel, 0, p.channels)
	for _, x := range p.chans {
		if x != gone {
			kept = append(kept, x)
		}
	}
	if err != nil {
		p.logger.Warn("reopening a webhook publishing channel", "error", err)
	} else {
		kept = append(kept, c)
	}
	p.chans = kept
	if len(kept) == 0 {
		p.lastErr = errors.New("no publishing channel open")
		go closeConn(conn) // start over with a fresh connection
	}
}

// retireChannel replaces a channel the broker nacked a publish on with a
// fresh one (attack S04: RabbitMQ 3.10 keeps a quorum queue's
// reject-publish state in the publishing channel's queue client, and a
// channel nacked during an overflow may go on being nacked after the
// queue has room again, while a fresh channel is accepted). The old
// channel leaves the pool at once and is closed once its outstanding
// confirms are answered (at most one confirm timeout later). When the
// new channel cannot be opened the old one is kept.
func (p *Publisher) retireChannel(conn *amqp.Connection, sock *coalescingConn, old *confirmChannel) {
	c, err := p.openChannel(conn, sock)
	if err != nil {
		p.logger.Warn("replacing a nacked webhook publishing channel", "error", err)
		return
	}
	p.mu.Lock()
	replaced := false
	for i, x := range p.chans {
		if x == old {
			chans := slices.Clone(p.chans)
			chans[i] = c
			p.chans = chans
			replaced = true
			break
		}
	}
	p.mu.Unlock()
	if !replaced { // the session ended meanwhile
		_ = c.ch.Close()
		return
	}
	p.metrics.retired.Inc()
	p.logger.Info("webhook publishing channel replaced after a broker nack")
	// A publish that picked old before the swap and has not registered
	// yet now picks the replacement, so an empty pending means no publish
	// is on its way into old (a loaded machine closed it under one: 503).
	old.retire()
	go func() {
		deadline := time.Now().Add(p.confirmTimeout)
		for !old.oldestPending().IsZero() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		_ = old.ch.Close()
	}()
}

func (p *Publisher) stalled() time.Duration {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return stalledFor(p.chans)
}

func (p *Publisher) current(c *confirmChannel) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, x := range p.chans {
		if x == c {
			return true
		}
	}
	return false
}

func (p *Publisher) openChannel(conn *amqp.Connection, sock *coalescingConn) (*confirmChannel, error) {
	c, err := openConfirmChannel(conn, sock, cap(p.slots)+1, p.requestRedeclare)
	if err != nil {
		return nil, err
	}
	c.onNack = p.nacked
	go func() {
		<-c.done
		select {
		case p.dead <- c:
		default:
		}
	}()
	return c, nil
}

// declare declares the topology on short-lived channels
// (topology.DeclareCompatible: a queue an earlier release declared is
// kept, and named by Degraded) and records the outcome. A failure that
// is the broker's answer (ACCESS_REFUSED, a queue declared by hand with
// other arguments) is kept for Degraded until a declare succeeds.
func (p *Publisher) declare(conn *amqp.Connection) error {
	if p.topo == nil {
		return nil
	}
	d, err := p.topo.DeclareCompatible(func() (topology.ClosableDeclarer, error) {
		ch, err := conn.Channel()
		if err != nil {
			return nil, fmt.Errorf("opening topology channel: %w", err)
		}
		return ch, nil
	})
	if err != nil {
		err = fmt.Errorf("declaring topology: %w", err)
		var aerr *amqp.Error
		if errors.As(err, &aerr) {
			p.setDeclared(nil, err, false)
		}
		return err
	}
	p.setDeclared(d.Unguarded, nil, true)
	return nil
}

// setDeclared records a declare's outcome (unguarded only when ok), and
// logs a change.
func (p *Publisher) setDeclared(unguarded []string, err error, ok bool) {
	p.topoMu.Lock()
	defer p.topoMu.Unlock()
	if ok {
		if strings.Join(unguarded, ",") != strings.Join(p.unguarded, ",") && len(unguarded) > 0 {
			p.logger.Error("queues kept with an earlier release's arguments, without x-overflow: reject-publish: a max-length or max-length-bytes policy on them drops events the broker confirmed; migrate them (docs/upgrading.md, \"Queues refuse instead of dropping\")",
				"queues", strings.Join(unguarded, ","))
		}
		p.unguarded = unguarded
	}
	if (err == nil) != (p.declareErr == nil) && err == nil {
		p.logger.Info("webhook topology declared again")
	}
	p.declareErr = err
	p.metrics.declareFailed.Set(boolGauge(err != nil))
}

// declareAsync redeclares the topology off the session loop (a declare is
// a synchronous RPC that hangs on a half-open connection until heartbeats
// give up), one at a time.
func (p *Publisher) declareAsync(conn *amqp.Connection) {
	if !p.declaring.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer p.declaring.Store(false)
		if err := p.declare(conn); err != nil && !conn.IsClosed() {
			p.logger.Warn("redeclaring webhook topology", "error", err)
		}
	}()
}

// requestRedeclare asks the session to redeclare the topology (a queue
// deleted under us makes publishes unroutable); rate-limited there.
func (p *Publisher) requestRedeclare() {
	select {
	case p.redeclare <- struct{}{}:
	default:
	}
}

func (p *Publisher) setUp(conn *amqp.Connection, chans []*confirmChannel) {
	p.mu.Lock()
	p.conn, p.chans, p.lastErr = conn, chans, nil
	close(p.upCh)
	p.mu.Unlock()
	p.metrics.connected.Set(1)
}

func (p *Publisher) setDown(err error) {
	p.mu.Lock()
	wasUp := p.conn != nil
	if wasUp {
		p.upCh = make(chan struct{})
	}
	p.conn, p.chans, p.lastErr = nil, nil, err
	p.mu.Unlock()
	p.setBlocked(false)
	p.metrics.connected.Set(0)
	if wasUp {
		p.metrics.reconnects.Inc()
	}
}

// shutdownSession closes the connection (and so its channels, failing
// what is outstanding), at Close.
func (p *Publisher) shutdownSession(conn *amqp.Connection) {
	p.mu.Lock()
	if p.conn != nil {
		p.upCh = make(chan struct{})
	}
	p.conn, p.chans, p.lastErr = nil, nil, errors.New("publisher closed")
	p.mu.Unlock()
	closeConn(conn)
	p.metrics.connected.Set(0)
}

// closeConn closes conn, bounding the close handshake: on a half-open
// connection Close would wait for a close-ok that never comes.
func closeConn(conn *amqp.Connection) {
	_ = conn.CloseDeadline(time.Now().Add(closeTimeout))
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
