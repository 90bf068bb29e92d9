package main

import (
	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/gateway"
	"github.com/olp-edu/borda/internal/startstop"
	"github.com/olp-edu/borda/ratelimit"
	"github.com/olp-edu/borda/telemetry"
)

// limiterDistribution gives the limiter's distribution counters to the
// telemetry recorder, which writes them with each batch.
type limiterDistribution struct{ l *ratelimit.Limiter }

func (d limiterDistribution) TakeDistribution(fn func(rule string, at, past int64)) {
	for _, c := range d.l.TakeDistribution() {
		fn(c.Rule, c.At, c.Past)
	}
}

// recorderOptions maps the telemetry section to the recorder's options.
func recorderOptions(t configs.Telemetry) telemetry.Options {
	return telemetry.Options{
		QueueSize:            t.QueueSize,
		FlushEvery:           t.FlushEvery.D(),
		MaxEndpointsPerRoute: t.MaxEndpointsPerRoute,
	}
}

// The gateway and the lifecycle rely on these shapes.
var (
	_ gateway.Recorder  = (*telemetry.Recorder)(nil)
	_ startstop.Service = (*telemetry.Recorder)(nil)

	_ telemetry.DistributionSource = limiterDistribution{}
)
