package telemetry

import (
	"time"

	"github.com/olp-edu/borda/keyspace"
)

// batch folds events into per-counter sums between two flushes.
type batch struct {
	counts map[counter]int64
	events int // events folded since the last reset
	cap    *endpointCap
	incs   []Increment // reused by increments
}

func newBatch(maxPerRoute int) *batch {
	return &batch{counts: make(map[counter]int64), cap: newEndpointCap(maxPerRoute)}
}

func (b *batch) len() int { return len(b.counts) }

// add folds one event: its endpoint, and its school, block, would-block
// and status when it has them.
func (b *batch) add(e Event, now func() time.Time) {
	t := e.Time
	if t.IsZero() {
		t = now()
	}
	minute := t.Unix() / 60
	if t.Unix() < 0 && t.Unix()%60 != 0 {
		minute-- // floor, not truncation toward zero
	}
	route, tmpl := b.cap.endpoint(e.Route, e.Path, minute)
	b.counts[counter{kind: KindEndpoint, a: route, b: tmpl, minute: minute}]++
	if e.Escola != "" {
		b.counts[counter{kind: KindEscola, a: e.Escola, minute: minute}]++
	}
	if e.Blocked {
		b.counts[counter{kind: KindBlocked, a: route, b: tmpl, minute: minute}]++
	}
	if e.WouldBlock {
		b.counts[counter{kind: KindWouldBlock, a: route, b: tmpl, minute: minute}]++
	}
	if e.Status >= 100 && e.Status <= 999 {
		b.counts[counter{kind: KindStatus, status: e.Status, minute: minute}]++
	}
	b.events++
}

// increments returns the batch as Redis increments, keys built by ks. The
// slice is reused by the next call.
func (b *batch) increments(ks keyspace.Keyspace) []Increment {
	b.incs = b.incs[:0]
	for c, n := range b.counts {
		b.incs = append(b.incs, Increment{Key: ks.Metric(c.dimension(), time.Unix(c.minute*60, 0)), Delta: n})
	}
	return b.incs
}

func (b *batch) reset() {
	clear(b.counts)
	b.events = 0
}
