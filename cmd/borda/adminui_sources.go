package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/amqpaddr"
	"github.com/olp-edu/borda/internal/redact"

	"github.com/olp-edu/borda/adminui"
	"github.com/olp-edu/borda/adminui/promwindow"
	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/keyspace"
	"github.com/olp-edu/borda/ratelimit"
	"github.com/olp-edu/borda/telemetry"
	"github.com/olp-edu/borda/webhook/deadletter"
	"github.com/olp-edu/borda/webhook/forwardstatus"
	"github.com/olp-edu/borda/webhook/publish"
	"github.com/olp-edu/borda/webhook/topology"
)

// The adapters below turn the running components of `borda serve` into
// the operator page's sources (adminui.Sources).

// opsRoutes are the routes and rules of the configuration in effect.
type opsRoutes struct {
	cfg *atomic.Pointer[configs.Config]
}

func (r opsRoutes) Routes() []adminui.Route {
	cfg := r.cfg.Load()
	out := make([]adminui.Route, 0, len(cfg.Routes))
	for i, rc := range cfg.Routes {
		name := rc.Name
		if name == "" {
			name = fmt.Sprintf("route%d", i)
		}
		rt := adminui.Route{Name: name, Hosts: rc.Hosts, PathPrefix: rc.PathPrefix, Upstream: redact.URL(rc.Upstream)}
		for _, rule := range cfg.RateLimits.Rules {
			if slices.Contains(rule.Routes, "*") || slices.Contains(rule.Routes, rc.Name) || slices.Contains(rc.RateLimits, rule.Name) {
				rt.Rules = append(rt.Rules, adminui.Rule{Name: rule.Name, Scope: rule.Scope, Algorithm: cmp.Or(rule.Algorithm, "fixed_window"),
					Mode: cmp.Or(rule.Mode, "enforce"), Limit: rule.Limit, Window: rule.Window.D(), ObserveLimit: rule.ObserveLimit})
			}
		}
		if rc.CORS != "" {
			rt.CORS = corsSummary(rc.CORS, cfg.CORS.Policies[rc.CORS])
		}
		for _, f := range rc.Cookies.Forward { // Validate set the default when the key is absent
			if f.As == "authorization" {
				rt.Cookies = append(rt.Cookies, f.Cookie+" → Authorization: Bearer")
			} else {
				rt.Cookies = append(rt.Cookies, f.Cookie)
			}
		}
		out = append(out, rt)
	}
	return out
}

func corsSummary(name string, p configs.CORSPolicy) string {
	s := name + ": origins " + strings.Join(p.AllowedOrigins, ", ")
	if len(p.AllowedMethods) > 0 {
		s += "; methods " + strings.Join(p.AllowedMethods, ", ")
	}
	if p.AllowCredentials {
		s += "; credentials"
	}
	return s
}

// opsLimiter reads the limiter's breaker, the relax keys, the decision
// counters over the last minutes and the telemetry's would-block counters.
type opsLimiter struct {
	cfg     *atomic.Pointer[configs.Config]
	limiter *ratelimit.Limiter
	store   ratelimit.Store
	redis   redis.UniversalClient // nil: no telemetry counters
	ks      keyspace.Keyspace
	window  *promwindow.Window
}

// topWouldBlock is how many endpoints the page lists.
const topWouldBlock = 10

func (l *opsLimiter) Limiter(ctx context.Context) adminui.LimiterState {
	cfg := l.cfg.Load()
	st := adminui.LimiterState{Store: cfg.StoreKind(), Breaker: l.limiter.BreakerState(), RelaxPoll: cfg.RateLimits.RelaxPoll.D()}
	byRule := map[string]*adminui.RuleCounts{}
	for _, r := range cfg.RateLimits.Rules {
		byRule[r.Name] = &adminui.RuleCounts{Rule: r.Name}
	}
	for _, outcome := range []string{"allow", "block", "would_block", "error", "skip"} {
		counts, span := l.window.DeltaBy("borda_ratelimit_decisions_total", "rule", map[string]string{"decision": outcome}, opsSpan)
		st.Span = span
		for rule, n := range counts {
			rc := byRule[rule]
			if rc == nil {
				rc = &adminui.RuleCounts{Rule: rule}
				byRule[rule] = rc
			}
			rc.Decisions += int64(n)
			switch outcome {
			case "block":
				rc.Blocks += int64(n)
			case "would_block":
				rc.WouldBlocks += int64(n)
			case "error":
				rc.FailOpens += int64(n)
			case "skip":
				rc.Skips += int64(n)
			}
		}
	}
	for _, r := range cfg.RateLimits.Rules {
		st.Rules = append(st.Rules, *byRule[r.Name])
		delete(byRule, r.Name)
	}
	for _, rc := range byRule { // a rule removed by a reload still counted
		st.Rules = append(st.Rules, *rc)
	}
	errs, _ := l.window.DeltaBy("borda_ratelimit_store_errors_total", "reason", nil, opsSpan)
	failing := 0.0
	for reason, n := range errs {
		if n > 0 {
			st.FailOpens = append(st.FailOpens, adminui.ReasonCount{Reason: reason, Count: int64(n)})
			failing += n
		}
	}
	slices.SortFunc(st.FailOpens, func(a, b adminui.ReasonCount) int { return strings.Compare(a.Reason, b.Reason) })
	switch {
	case st.Breaker == "open" || st.Breaker == "half-open":
		st.StoreState = "failing"
	case failing > 0:
		st.StoreState = fmt.Sprintf("%d fail-opens in %s", int64(failing), promwindowSpan(st.Span))
	default:
		st.StoreState = "ok"
	}
	if st.Store == "memory" {
		st.StoreState += " (this instance only)"
	}
	l.relaxes(ctx, cfg, &st)
	l.top(ctx, cfg, &st)
	return st
}

func promwindowSpan(d time.Duration) string { return d.Round(time.Second).String() }

func (l *opsLimiter) relaxes(ctx context.Context, cfg *configs.Config, st *adminui.LimiterState) {
	if st.Store == "memory" {
		st.RelaxNote = "none: relaxes live in Redis (borda limits relax), and this gateway runs the embedded store"
		return
	}
	names := make([]string, len(cfg.RateLimits.Rules))
	for i, r := range cfg.RateLimits.Rules {
		names[i] = r.Name
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	vals, err := ratelimit.ReadRelaxes(cctx, l.store, l.ks, names)
	if err != nil {
		st.RelaxNote = "unknown: the store did not answer (" + redact.URLs(err.Error()) + ")"
		return
	}
	now := time.Now()
	for i, v := range vals {
		if v.Factor >= 1 {
			st.Relaxes = append(st.Relaxes, adminui.Relax{Rule: names[i], Factor: v.Factor, Until: now.Add(v.TTL)})
		}
	}
}

// top sums the would-block counters of the last opsSpan minutes by
// endpoint (a bounded SCAN per minute).
func (l *opsLimiter) top(ctx context.Context, cfg *configs.Config, st *adminui.LimiterState) {
	switch {
	case l.redis == nil:
		st.TopNote = "unknown: the would-block counters are telemetry counters, kept in the shared store (redis.url or the Upstash REST URL), and this gateway has none (embedded store)"
		return
	case !cfg.Telemetry.Enabled:
		st.TopNote = "unknown: telemetry counters are off (telemetry.enabled: false)"
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	sums := map[string]int64{}
	var mu sync.Mutex // a cluster's masters are walked concurrently
	minute := time.Now().UTC().Truncate(time.Minute)
	minutes := int(opsSpan / time.Minute)
	for i := range minutes {
		m := minute.Add(-time.Duration(i) * time.Minute)
		err := telemetry.ScanCounters(cctx, l.redis, l.ks.MetricKindPattern(string(telemetry.KindWouldBlock), m), func(keys []string, vals []any) error {
			mu.Lock()
			defer mu.Unlock()
			for j, k := range keys {
				dim, _, ok := l.ks.MetricDimension(k)
				if !ok {
					continue
				}
				_, endpoint, ok := telemetry.ParseDimension(dim)
				s, _ := vals[j].(string)
				if n, err := strconv.ParseInt(s, 10, 64); ok && err == nil {
					sums[endpoint] += n
				}
			}
			return nil
		})
		if err != nil {
			st.TopNote = "unknown: Redis did not answer (" + redact.URLs(err.Error()) + ")"
			return
		}
	}
	st.TopSpan = time.Duration(minutes) * time.Minute
	for e, n := range sums {
		st.TopWouldBlock = append(st.TopWouldBlock, adminui.EndpointCount{Endpoint: e, Count: n})
	}
	slices.SortFunc(st.TopWouldBlock, func(a, b adminui.EndpointCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Endpoint, b.Endpoint))
	})
	if len(st.TopWouldBlock) > topWouldBlock {
		st.TopWouldBlock = st.TopWouldBlock[:topWouldBlock]
	}
}

// opsBroker is the page's own AMQP connection, dialled when first needed
// and again after it is lost, for queue depths and the DLQ.
type opsBroker struct {
	url  string
	mu   sync.Mutex
	conn *amqp.Connection
}

func (b *opsBroker) connection() (*amqp.Connection, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn != nil && !b.conn.IsClosed() {
		return b.conn, nil
	}
	conn, err := amqpaddr.DialConfig(b.url, amqp.Config{
		Heartbeat: 10 * time.Second, Dial: amqp.DefaultDial(3 * time.Second),
		Properties: amqp.Table{"connection_name": "borda-serve-operator-page"},
	})
	if err != nil {
		return nil, redact.Error(err)
	}
	b.conn = conn
	return conn, nil
}

func (b *opsBroker) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn != nil {
		_ = b.conn.Close()
		b.conn = nil
	}
}

// opsPipeline reads the publisher's gauges and confirm latency, the
// queues (passive declares, cached a few seconds) and the forwarders'
// snapshots in Redis.
type opsPipeline struct {
	top       topology.Topology
	publisher *publish.Publisher // nil: the ingress is not configured
	redis     redis.UniversalClient
	ks        keyspace.Keyspace
	window    *promwindow.Window
	broker    *opsBroker

	mu       sync.Mutex
	queuesAt time.Time
	queues   []adminui.Queue
}

const queueCacheFor = 5 * time.Second

func (p *opsPipeline) Pipeline(ctx context.Context) adminui.PipelineState {
	st := adminui.PipelineState{Configured: true}
	b := &st.Broker
	connected, _ := p.window.Current("borda_webhook_broker_connected", nil)
	blocked, _ := p.window.Current("borda_webhook_broker_blocked", nil)
	unconfirmed, _ := p.window.Current("borda_webhook_publish_unconfirmed", nil)
	b.Connected, b.Blocked, b.Unconfirmed = connected == 1, blocked == 1, int64(unconfirmed)
	if p.publisher == nil {
		b.Problem = "the webhook ingress is not configured (no credential): its paths answer 503; /readyz says why"
	} else if err := p.publisher.Ready(); err != nil {
		b.Problem = redact.URLs(err.Error())
		b.Connected = b.Connected && !errors.Is(err, publish.ErrBrokerUnavailable)
	}
	confirm := map[string]string{"type": "amqp_confirm"}
	if p50, n, ok := p.window.Quantile("webhook_ingress_latency_seconds", confirm, 0.5, opsSpan); ok {
		p95, _, _ := p.window.Quantile("webhook_ingress_latency_seconds", confirm, 0.95, opsSpan)
		b.ConfirmP50, b.ConfirmP95, b.Confirms = seconds(p50), seconds(p95), int64(n)
	}
	_, b.ConfirmSpan = p.window.Delta("webhook_ingress_latency_seconds", nil, opsSpan)
	fails, _ := p.window.DeltaBy("borda_webhook_publish_failures_total", "reason", nil, opsSpan)
	for reason, n := range fails {
		if n > 0 {
			b.PublishFailures = append(b.PublishFailures, adminui.ReasonCount{Reason: reason, Count: int64(n)})
		}
	}
	slices.SortFunc(b.PublishFailures, func(x, y adminui.ReasonCount) int { return strings.Compare(x.Reason, y.Reason) })

	st.Forwarders, st.ForwardersNote = p.forwarders(ctx)
	st.Queues = p.queueStates(st.Forwarders)
	return st
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func (p *opsPipeline) forwarders(ctx context.Context) ([]adminui.Forwarder, string) {
	if p.redis == nil {
		return nil, "unknown: the forwarders share their state through the shared store (redis.url or the Upstash REST URL), and this gateway has none (embedded store)"
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	snaps, err := forwardstatus.Read(cctx, p.redis, p.ks)
	if err != nil {
		return nil, "unknown: Redis did not answer (" + redact.URLs(err.Error()) + ")"
	}
	out := make([]adminui.Forwarder, 0, len(snaps))
	for _, s := range snaps {
		// The reasons embed the legacy endpoint's reply: shown as printed.
		problems := make([]string, len(s.Problems))
		for i, pr := range s.Problems {
			problems[i] = deadletter.Printed(pr)
		}
		out = append(out, adminui.Forwarder{
			Instance: deadletter.Printed(s.Instance), Breaker: s.Breaker, BreakerSince: s.BreakerSince, LastFailure: deadletter.Printed(s.LastFailure),
			LastFailureAt: s.LastFailureAt, OpenedBy: deadletter.Printed(s.OpenedBy), Connected: s.Connected, Consuming: s.Consuming,
			Problems: problems, QueueDepth: s.QueueDepth, DLQDepth: s.DLQDepth,
			OldestAge: seconds(s.OldestAgeSeconds), SampledAt: s.SampledAt, SeenAt: s.WrittenAt,
			Duplicates: s.Duplicates, LastDuplicateKey: deadletter.Printed(s.LastDuplicateKey), LastDuplicateAt: s.LastDuplicateAt,
		})
	}
	if len(out) == 0 {
		return nil, fmt.Sprintf("none: no borda forward has reported in the last %s (each writes its state to Redis every %s)",
			forwardstatus.DefaultTTL, forwardstatus.DefaultEvery)
	}
	return out, ""
}

// queueStates reads every queue's depth (cached queueCacheFor); the
// forward queue's oldest age is the largest lag a forwarder reported.
func (p *opsPipeline) queueStates(fwds []adminui.Forwarder) []adminui.Queue {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.queues == nil || time.Since(p.queuesAt) >= queueCacheFor {
		p.queues = p.readQueues()
		p.queuesAt = time.Now()
	}
	out := slices.Clone(p.queues)
	for i := range out {
		if out[i].Role == "forward" && len(fwds) > 0 {
			var lag time.Duration
			for _, f := range fwds {
				lag = max(lag, f.OldestAge)
			}
			out[i].OldestAge, out[i].AgeKnown = lag, true
		}
	}
	return out
}

func (p *opsPipeline) readQueues() []adminui.Queue {
	qs := []adminui.Queue{{Name: p.top.ForwardQueue, Role: "forward", AgeNote: "unknown: no forwarder reports"}}
	for i, d := range p.top.Retry {
		qs = append(qs, adminui.Queue{Name: p.top.RetryQueue(i), Role: "retry " + d.Name, AgeNote: "each waits at most " + d.Name})
	}
	qs = append(qs, adminui.Queue{Name: p.top.DLQ, Role: "dead-letter", AgeNote: "see Dead letters"})
	if p.top.EventsQueue != "" {
		qs = append(qs, adminui.Queue{Name: p.top.EventsQueue, Role: eventsRole, AgeNote: "—"})
	}
	conn, err := p.broker.connection()
	if err != nil {
		for i := range qs {
			qs[i].Depth, qs[i].Err = -1, "broker unreachable"
		}
		return qs
	}
	var ch *amqp.Channel
	defer func() {
		if ch != nil {
			_ = ch.Close()
		}
	}()
	for i := range qs {
		if ch == nil || ch.IsClosed() {
			if ch, err = conn.Channel(); err != nil {
				qs[i].Depth, qs[i].Err = -1, "no channel"
				ch = nil
				continue
			}
		}
		q, err := ch.QueueDeclarePassive(qs[i].Name, true, false, false, false, nil)
		if err != nil {
			qs[i].Depth, qs[i].Err = -1, "not declared"
			continue
		}
		qs[i].Depth = int64(q.Messages)
		qs[i].Warn = queueWarning(qs[i].Role, q)
	}
	return qs
}

// opsDeadLetters lists and replays the DLQ with webhook/deadletter.
type opsDeadLetters struct {
	top    topology.Topology
	broker *opsBroker
	db     *pgxpool.Pool // nil: replay refused (no audit)
	// pub puts listed letters back and replays them: the ingress's
	// publisher (the page exists only with the ingress on).
	pub deadletter.Republisher
}

func (d *opsDeadLetters) List(ctx context.Context, limit int) ([]adminui.DeadLetter, error) {
	if d.pub == nil {
		return nil, errors.New("the webhook publisher is not running on this gateway")
	}
	conn, err := d.broker.connection()
	if err != nil {
		return nil, err
	}
	entries, err := deadletter.ListEntries(ctx, conn, d.pub, d.top.DLQ, limit)
	out := make([]adminui.DeadLetter, 0, len(entries))
	for _, e := range entries {
		// Message data as `borda dlq list` prints it (deadletter.Printed):
		// a bidi override cannot reorder the page, and the id the replay
		// form sends back survives the browser (invalid UTF-8 would come
		// back as U+FFFD); Replay matches it by deadletter.SameID.
		p := deadletter.Printed
		dl := adminui.DeadLetter{
			ID: p(e.ID), Source: p(e.Source), Reason: p(e.Reason), FirstReason: p(e.FirstReason), Status: e.Status,
			Excerpt: p(e.Excerpt), Attempts: e.Attempts, DeadLetteredAt: e.DeadLetteredAt, FirstFailure: e.FirstFailure,
			ReceivedAt: e.ReceivedAt,
		}
		dl.BodyPreview = e.Preview
		out = append(out, dl)
	}
	if err != nil {
		err = redact.Error(err)
	}
	return out, err
}

func (d *opsDeadLetters) Replay(ctx context.Context, req adminui.ReplayRequest) (adminui.ReplayResult, error) {
	if d.db == nil {
		return adminui.ReplayResult{}, errors.New("replays are recorded in webhook_replays: set database.url (DATABASE_URL) on this gateway, or use borda dlq replay")
	}
	if d.pub == nil {
		return adminui.ReplayResult{}, errors.New("the webhook publisher is not running on this gateway")
	}
	conn, err := d.broker.connection()
	if err != nil {
		return adminui.ReplayResult{}, err
	}
	out, err := deadletter.Replay(ctx, conn, d.pub, d.db, deadletter.ReplayOptions{
		DLQ: d.top.DLQ, ForwardQueue: d.top.ForwardQueue, Select: deadletter.Selection{ID: req.ID},
		Operator: req.Operator, Reason: req.Reason,
	})
	if len(out) == 0 {
		if err != nil {
			return adminui.ReplayResult{}, redact.Error(err)
		}
		return adminui.ReplayResult{}, adminui.ErrNotFound
	}
	o := out[0]
	if o.Err != nil {
		return adminui.ReplayResult{AuditID: o.AuditID, Outcome: o.Outcome}, redact.Error(o.Err)
	}
	// err can only be about the other letters of the pass (put back):
	// this one is replayed and recorded.
	return adminui.ReplayResult{AuditID: o.AuditID, Outcome: o.Outcome}, nil
}

// eventsRole is the events queue's role on the operator page.
const eventsRole = "events (consume-events)"

// queueWarning is the operator page's warning for a queue: the events
// queue holding messages with no consumer (`borda consume-events` is not
// running, or forward.events_queue should be "" on a deployment that does
// not consume it; docs/runbooks.md). Alert BordaEventsQueueNoConsumer
// raises the same.
func queueWarning(role string, q amqp.Queue) string {
	if role != eventsRole || q.Consumers > 0 || q.Messages == 0 {
		return ""
	}
	return fmt.Sprintf("no consumer: %d messages wait and grow (is borda consume-events running? or set forward.events_queue: \"\")", q.Messages)
}
