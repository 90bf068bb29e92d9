package forward

import (
	"log/slog"
	"sync"
	"time"

	"github.com/olp-edu/borda/webhook/envelope"
)

// Duplicate is the last event the forwarder acked without a POST because
// its idempotency key said it was forwarded already (Status).
type Duplicate struct {
	// Key is the idempotency key that decided it (the source and the
	// event id; never the body); Legacy, when set, the source-less key of
	// an earlier version that did.
	Key    string
	Legacy string
	Source string
	// State is what the key said: "forwarded" or "dead" (the event was
	// dead-lettered before and this copy is no replay).
	State string
	At    time.Time
}

// States a duplicate's key can be in.
const (
	stateForwarded = "forwarded"
	stateDead      = "dead"
)

// duplicates counts the events acked as duplicates and keeps the last one.
type duplicates struct {
	mu    sync.Mutex
	count int64
	last  Duplicate
}

func (d *duplicates) add(x Duplicate) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.count++
	d.last = x
}

func (d *duplicates) read() (int64, Duplicate) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.count, d.last
}

// duplicate records an event acked without a POST because its key says
// state (forwarded, or dead: dead-lettered before, and this copy is no
// replay): a log line with its key (Info: a redelivery is normal; a steady
// stream of them for new events means two sources share ids, or a fixed
// id is being reused), borda_forward_duplicates_total{source},
// borda_forward_outcomes_total{duplicate,none|dead} and the operator
// page's count.
func (f *Forwarder) duplicate(env envelope.Envelope, l Lease, state string, log *slog.Logger) {
	class, msg := "none", "event already forwarded; acked without a POST (duplicate)"
	if state == stateDead {
		class, msg = "dead", "event already dead-lettered; acked without a POST (duplicate; replay its letter with borda dlq replay)"
	}
	f.m.outcomes.WithLabelValues("duplicate", class).Inc()
	f.m.duplicates.WithLabelValues(f.m.sourceLabel(env.Source)).Inc()
	f.dups.add(Duplicate{Key: l.Key(), Legacy: l.Legacy(), Source: env.Source, State: state, At: f.now().UTC()})
	args := []any{"source", env.Source, "key", l.Key()}
	if l.Legacy() != "" {
		args = append(args, "legacy_key", l.Legacy())
	}
	log.Info(msg, args...)
}
