// Package outagelog logs an outage as a person on call reads one: its
// start once at warn, then at most one summary line every Every while it
// lasts (how long, how many), and its end with the same totals; the
// repeats in between go to debug. A dependency that is down for ten
// minutes used to write a warn line per probe or per dropped batch
// (about 60 a minute each).
//
// An Outage is safe for concurrent use.
package outagelog

import (
	"log/slog"
	"sync"
	"time"

	"github.com/olp-edu/borda/internal/clock"
)

// Outage tracks one dependency's outage. The zero value is not usable:
// build it with New.
type Outage struct {
	log  *slog.Logger
	opts Options

	mu      sync.Mutex
	since   time.Time // zero: no outage
	count   int       // Repeat calls since Begin
	summary time.Time // the last summary (or Begin)
}

// Options configure an Outage.
type Options struct {
	// Every is the shortest time between two summary lines (0: no
	// summary line; the caller reports the outage itself, as the
	// forwarder's periodic summary does).
	Every time.Duration
	// ForKey and CountKey name the attributes of a summary and of the
	// end: how long the outage has lasted (a Go duration) and how many
	// Repeat calls it had (defaults "for" and "count"; a breaker says
	// "open_for" and "probes").
	ForKey, CountKey string
	// Clock is the clock (nil: the wall clock).
	Clock clock.Clock
}

// New returns an Outage logging to log.
func New(log *slog.Logger, opts Options) *Outage {
	opts.Clock = clock.Or(opts.Clock)
	if opts.ForKey == "" {
		opts.ForKey = "for"
	}
	if opts.CountKey == "" {
		opts.CountKey = "count"
	}
	return &Outage{log: log, opts: opts}
}

// Begin starts an outage: it logs msg at warn with attrs and returns true,
// or, when one is already on, logs msg at debug and returns false.
func (o *Outage) Begin(msg string, attrs ...any) bool {
	o.mu.Lock()
	first := o.since.IsZero()
	if first {
		now := o.opts.Clock.Now()
		o.since, o.count, o.summary = now, 0, now
	}
	o.mu.Unlock()
	if first {
		o.log.Warn(msg, attrs...)
	} else {
		o.log.Debug(msg, attrs...)
	}
	return first
}

// Repeat counts one more event of the outage (a failed probe, a dropped
// batch): msg at debug, and at most every Every a summary line at warn,
// msg with ForKey (how long it has lasted, a Go duration) and CountKey.
// Without an outage on it begins one, as Begin does, with this event
// counted (a dropped batch is the outage's first; a breaker's Begin, its
// opening, is not a probe).
func (o *Outage) Repeat(msg string, attrs ...any) {
	o.mu.Lock()
	if o.since.IsZero() {
		now := o.opts.Clock.Now()
		o.since, o.count, o.summary = now, 1, now
		o.mu.Unlock()
		o.log.Warn(msg, attrs...)
		return
	}
	o.count++
	now := o.opts.Clock.Now()
	due := o.opts.Every > 0 && now.Sub(o.summary) >= o.opts.Every
	if due {
		o.summary = now
	}
	d, n := now.Sub(o.since), o.count
	o.mu.Unlock()
	if due {
		o.log.Warn(msg, append(attrs, o.opts.ForKey, round(d).String(), o.opts.CountKey, n)...)
	} else {
		o.log.Debug(msg, attrs...)
	}
}

// End ends the outage: msg at warn with ForKey and CountKey (the Repeat
// calls) and attrs; nothing when no outage is on.
func (o *Outage) End(msg string, attrs ...any) {
	o.mu.Lock()
	if o.since.IsZero() {
		o.mu.Unlock()
		return
	}
	d, n := o.opts.Clock.Now().Sub(o.since), o.count
	o.since, o.count = time.Time{}, 0
	o.mu.Unlock()
	o.log.Warn(msg, append([]any{o.opts.ForKey, round(d).String(), o.opts.CountKey, n}, attrs...)...)
}

// State reports the outage on: since when and how many Repeat calls; ok
// is false when none is on.
func (o *Outage) State() (since time.Time, count int, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.since, o.count, !o.since.IsZero()
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
