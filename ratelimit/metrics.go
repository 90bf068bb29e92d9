package ratelimit

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Purposes of Redis commands, the label of borda_redis_commands_total.
const (
	PurposeRateLimit = "ratelimit"
	PurposeRelax     = "relax"
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
	if m.commands, err = RedisCommands(reg); err != nil {
		return nil, err
	}
	m.rlCommands = m.commands.WithLabelValues(PurposeRateLimit)
	m.relaxCommands = m.commands.WithLabelValues(PurposeRelax)
	return m, nil
}

// RedisCommands returns borda_redis_commands_total{purpose}, registering it
// on reg the first time and returning the registered one afterwards, so
// every package that sends Redis commands (ratelimit, telemetry, relax,
// aggregate) counts into the same series and an operator can project a
// per-command bill. Add to it directly, or install CommandsHook on a
// go-redis client and tag contexts with WithPurpose.
func RedisCommands(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	return register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "borda_redis_commands_total",
		Help: "Redis commands sent, by purpose (ratelimit, relax, telemetry, aggregate).",
	}, []string{"purpose"}))
}

type purposeKey struct{}

// WithPurpose tags ctx so CommandsHook counts the commands sent with it
// under purpose.
func WithPurpose(ctx context.Context, purpose string) context.Context {
	return context.WithValue(ctx, purposeKey{}, purpose)
}

// CommandsHook returns a go-redis hook that counts every command (each
// command of a pipeline too) sent with a context tagged by WithPurpose
// into counter, labelled with that purpose. Untagged commands are not
// counted: the rate limiter counts its own (ratelimit, relax) without
// tagging, so installing the hook on the client it shares never counts a
// command twice. Install it with client.AddHook.
func CommandsHook(counter *prometheus.CounterVec) redis.Hook {
	return commandsHook{counter}
}

type commandsHook struct{ c *prometheus.CounterVec }

func purposeOf(ctx context.Context) (string, bool) {
	p, ok := ctx.Value(purposeKey{}).(string)
	return p, ok && p != ""
}

func (h commandsHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h commandsHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if p, ok := purposeOf(ctx); ok {
			h.c.WithLabelValues(p).Inc()
		}
		return next(ctx, cmd)
	}
}

func (h commandsHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if p, ok := purposeOf(ctx); ok {
			h.c.WithLabelValues(p).Add(float64(len(cmds)))
		}
		return next(ctx, cmds)
	}
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
