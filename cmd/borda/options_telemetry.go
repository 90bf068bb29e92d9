package main

import (
	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/gateway"
	"github.com/olp-edu/borda/internal/startstop"
	"github.com/olp-edu/borda/telemetry"
)

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
)
