package main

import (
	"github.com/olp-edu/borda/configs"
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
