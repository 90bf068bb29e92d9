package ratelimit

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Purposes of Redis commands, the label of borda_redis_commands_total.
const (
	purposeRateLimit = "ratelimit"
	purposeRelax     = "relax"
)

const outcomeCount = 5

var outcomeNames = [outcomeCount]Outcome{OutcomeAllow, OutcomeBlock, OutcomeWouldBlock, OutcomeError, OutcomeSkip}

func outcomeIndex(o Outcome) int {
	switch o {
	case OutcomeAllow:
		return 0
	case OutcomeBlock:
		return 1
	case OutcomeWouldBlock:
		return 2
	case OutcomeError:
		return 3
	default:
		return 4
	}
}

type metrics struct {
	decisions     *prometheus.CounterVec
	storeDuration prometheus.Histogram
	storeErrors   *prometheus.CounterVec
	commands      *prometheus.CounterVec
	rlCommands    prometheus.Counter
	relaxCommands prometheus.Counter
	syncRounds    *prometheus.CounterVec
	syncDropped   prometheus.Counter
	syncAsks      prometheus.Counter
	syncEarly     prometheus.Counter
	syncReplays   *prometheus.CounterVec
	syncParked    prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{}
	var err error
	if m.decisions, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "borda_ratelimit_decisions_total",
		Help: "Rate-limit decisions per rule: allow, block, would_block, error (store failed: fail-open), skip (no identity).",
	}, []string{"rule", "decision"})); err != nil {
		return nil, err
	}
	if m.storeDuration, err = register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "borda_ratelimit_store_duration_seconds",
		Help:    "Duration of one rate-limit store round trip (all rules of a request).",
		Buckets: []float64{.0002, .0005, .001, .002, .005, .01, .02, .03, .05, .1, .25},
	})); err != nil {
		return nil, err
	}
	if m.storeErrors, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "borda_ratelimit_store_errors_total",
		Help: "Rate-limit store calls that failed open, by reason: timeout, error, breaker_open.",
	}, []string{"reason"})); err != nil {
		return nil, err
	}
	if m.syncRounds, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "borda_ratelimit_sync_rounds_total",
		Help: "Synchronization rounds of rate_limits.sync, by result: ok, error (decisions stay local; the counts go with the next round).",
	}, []string{"result"})); err != nil {
		return nil, err
	}
	if m.syncDropped, err = register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "borda_ratelimit_sync_dropped_total",
		Help: "Hits decided locally whose counts were not sent to the store: more keys than a round holds (rate_limits.sync).",
	})); err != nil {
		return nil, err
	}
	if m.syncAsks, err = register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "borda_ratelimit_sync_asks_total",
		Help: "Hits past the replica's lease that asked the store at once (rate_limits.sync with several replicas).",
	})); err != nil {
		return nil, err
	}
	if m.syncEarly, err = register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "borda_ratelimit_sync_early_total",
		Help: "Keys exchanged with the store in the background (one command for the keys of one request) because a replica spent half of the share it gave itself of a key before any exchange of it (rate_limits.sync with several replicas).",
	})); err != nil {
		return nil, err
	}
	if m.syncReplays, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "borda_ratelimit_sync_replays_total",
		Help: "Sync calls sent again because their answer was lost, by result: merged (answered), failed (no answer again; sent again by the next round), given_up (no answer for a second: its keys go unmarked with the next round) (rate_limits.sync with several replicas).",
	}, []string{"result"})); err != nil {
		return nil, err
	}
	if m.syncParked, err = register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "borda_ratelimit_sync_parked",
		Help: "Sync calls whose answer was lost, waiting to be sent again (rate_limits.sync with several replicas).",
	})); err != nil {
		return nil, err
	}
	if m.commands, err = redisCommands(reg); err != nil {
		return nil, err
	}
	m.rlCommands = m.commands.WithLabelValues(purposeRateLimit)
	m.relaxCommands = m.commands.WithLabelValues(purposeRelax)
	return m, nil
}

// redisCommands returns borda_redis_commands_total{purpose}, registering
// it on reg the first time and returning the registered one afterwards,
// so every Limiter on one registry counts into the same series and an
// operator can project a per-command bill (purposes ratelimit and relax).
func redisCommands(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	return register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "borda_redis_commands_total",
		Help: "Redis commands sent by the rate limiter, by purpose (ratelimit, relax).",
	}, []string{"purpose"}))
}

// register registers c on reg, or returns the collector already registered
// under the same description.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}
