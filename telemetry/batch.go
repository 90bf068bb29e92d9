package telemetry

import (
	"time"

	"github.com/olp-edu/borda/keyspace"
)

// eventKey is an event reduced to what its counters need. Folding an
// event is one map operation on it; the counters are expanded per
// distinct eventKey at flush time.
type eventKey struct {
	route, tmpl, escola string
	status              int
	minute              int64 // Unix seconds / 60
	blocked, wouldBlock bool
}

// batch folds events between two flushes. It belongs to the flusher
// goroutine.
type batch struct {
	keys   map[eventKey]int64
	events int // events folded since the last reset
	// invalidEscola counts events whose escola_id was not counted per
	// school (not ValidText or longer than maxEscolaLen), since the last
	// takeInvalid.
	invalidEscola int
	cap           *endpointCap

	// dist holds the distribution counts taken at this flush (counter
	// kind KindDistribution).
	dist map[counter]int64

	counts map[counter]int64 // reused by increments
	incs   []Increment       // reused by increments
}

func newBatch(maxPerRoute int) *batch {
	return &batch{
		keys:   make(map[eventKey]int64),
		cap:    newEndpointCap(maxPerRoute),
		counts: make(map[counter]int64),
		dist:   make(map[counter]int64),
	}
}

// addDistribution adds past subject-windows of rule past threshold at to
// minute's distribution counter. A rule name that is not ValidText (the
// configuration allows none) is left out.
func (b *batch) addDistribution(rule string, at, past int64, minute int64) {
	if past <= 0 || at < 0 || rule == "" || !ValidText(rule) {
		return
	}
	b.dist[counter{kind: KindDistribution, a: rule, status: int(at), minute: minute}] += past
}

// len is the number of distinct event shapes folded; each flush therefore
// covers at least len events.
func (b *batch) len() int { return len(b.keys) + len(b.dist) }

// add folds one event.
func (b *batch) add(e Event, now func() time.Time) {
	t := e.Time
	if t.IsZero() {
		t = now()
	}
	sec := t.Unix()
	minute := sec / 60
	if sec < 0 && sec%60 != 0 {
		minute-- // floor, not truncation toward zero
	}
	route, tmpl := b.cap.endpoint(e.Route, e.Path, e.Status, e.Served, minute)
	status := e.Status
	if status < 100 || status > 999 {
		status = 0 // not counted under status
	}
	escola := e.Escola
	if escola != "" && (len(escola) > maxEscolaLen || !ValidText(escola)) {
		escola = "" // still counted under its endpoint and status
		b.invalidEscola++
	}
	b.keys[eventKey{route: route, tmpl: tmpl, escola: escola, status: status, minute: minute, blocked: e.Blocked, wouldBlock: e.WouldBlock}]++
	b.events++
}

// increments returns the batch as Redis increments, one per counter: the
// endpoint, and the school, block, would-block and status when the event
// had them. Keys are built by ks. The slice is reused by the next call.
func (b *batch) increments(ks keyspace.Keyspace) []Increment {
	clear(b.counts)
	for k, n := range b.keys {
		b.counts[counter{kind: KindEndpoint, a: k.route, b: k.tmpl, minute: k.minute}] += n
		if k.escola != "" {
			b.counts[counter{kind: KindEscola, a: k.escola, minute: k.minute}] += n
		}
		if k.blocked {
			b.counts[counter{kind: KindBlocked, a: k.route, b: k.tmpl, minute: k.minute}] += n
		}
		if k.wouldBlock {
			b.counts[counter{kind: KindWouldBlock, a: k.route, b: k.tmpl, minute: k.minute}] += n
		}
		if k.status != 0 {
			b.counts[counter{kind: KindStatus, status: k.status, minute: k.minute}] += n
		}
	}
	for c, n := range b.dist {
		b.counts[c] += n
	}
	b.incs = b.incs[:0]
	for c, n := range b.counts {
		b.incs = append(b.incs, Increment{Key: ks.Metric(c.dimension(), time.Unix(c.minute*60, 0)), Delta: n})
	}
	return b.incs
}

// takeInvalid returns and zeroes the counts of values replaced since the
// last call: endpoint templates counted as other, escola_ids not counted.
func (b *batch) takeInvalid() (endpoint, escola int) {
	endpoint, escola = b.cap.invalid, b.invalidEscola
	b.cap.invalid, b.invalidEscola = 0, 0
	return endpoint, escola
}

// takeFolded returns and zeroes the counts of events folded since the
// last call: over the per-route cap (as other) and refused (as refused).
func (b *batch) takeFolded() (overflow, refused int) {
	overflow, refused = b.cap.overflow, b.cap.refused
	b.cap.overflow, b.cap.refused = 0, 0
	return overflow, refused
}

func (b *batch) reset() {
	clear(b.keys)
	clear(b.dist)
	b.events = 0
}
