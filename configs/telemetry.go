package configs

import (
	"fmt"
	"time"
)

// ReservedRouteNames cannot name a route: a telemetry counter key
// "{prefix}m:{route}:{path}:{minute}" of such a route would read as the
// school, block, would-block, status or rate-limit distribution counter
// of the same name (docs/telemetry.md), and "unrouted" counts requests no
// route matched.
var ReservedRouteNames = []string{"escola", "blocked", "would_block", "status", "distribution", "unrouted"}

// Telemetry configures per-minute counters in Redis and their aggregation
// into PostgreSQL (docs/telemetry.md).
type Telemetry struct {
	// Enabled turns the Redis counters on (default true; they need a Redis
	// or Upstash store, and are off on the embedded store).
	Enabled bool `yaml:"enabled"`
	// AggregateEvery is the period of the aggregation inside `borda serve`
	// when database.url is set (default 1h).
	AggregateEvery Duration `yaml:"aggregate_every"`
	// QueueSize bounds the events waiting to be folded into the next batch
	// (default 65536); beyond it events are dropped and counted. The queue
	// is emptied every 20 ms, so it must hold 20 ms of peak traffic
	// (65536 holds 3 million requests a second).
	QueueSize int `yaml:"queue_size"`
	// FlushEvery is the longest an event waits before its batch is written
	// (default 1s).
	FlushEvery Duration `yaml:"flush_every"`
	// MaxEndpointsPerRoute caps distinct endpoint templates per route per
	// minute (default 200); the overflow counts as "{route}:other".
	MaxEndpointsPerRoute int `yaml:"max_endpoints_per_route"`
	// RetentionDays is how many days of gateway_metrics rows are kept
	// (default 90, at least 1): each aggregation, in `borda serve` and
	// `borda aggregate`, deletes this environment's rows whose minute is
	// older, so attacker-chosen paths cannot grow the table for ever.
	RetentionDays int `yaml:"retention_days"`
}

// Retention is RetentionDays as a duration.
func (t Telemetry) Retention() time.Duration {
	return time.Duration(t.RetentionDays) * 24 * time.Hour
}

func defaultTelemetry() Telemetry {
	return Telemetry{
		Enabled:              true,
		AggregateEvery:       Duration(3600e9),
		QueueSize:            65536,
		FlushEvery:           Duration(1e9),
		MaxEndpointsPerRoute: 200,
		RetentionDays:        90,
	}
}

func (c *Config) validateTelemetry(p *problems) {
	t := c.Telemetry
	if t.AggregateEvery <= 0 {
		p.addf("telemetry.aggregate_every", "must be positive")
	}
	if t.QueueSize < 1 {
		p.addf("telemetry.queue_size", "must be at least 1")
	}
	if t.FlushEvery <= 0 {
		p.addf("telemetry.flush_every", "must be positive")
	}
	if t.RetentionDays < 1 || t.RetentionDays > 36500 {
		p.addf("telemetry.retention_days", "must be between 1 and 36500 days")
	}
	if t.MaxEndpointsPerRoute < 1 {
		p.addf("telemetry.max_endpoints_per_route", "must be at least 1")
	}
	for i, r := range c.Routes {
		for _, name := range ReservedRouteNames {
			if r.Name == name {
				p.addf(fmt.Sprintf("routes[%d].name", i), "%q is reserved by telemetry counter keys (reserved: %v)", r.Name, ReservedRouteNames)
			}
		}
	}
}
