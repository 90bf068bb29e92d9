package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// The bounds of what Template takes for an id (Template's doc): every
// digit is a digit, 16 hex digits are an id and 15 a word, 16 token
// characters with a letter and a digit are a token and 15 are not, 32
// without a digit are, 31 are not, 6 digits between separators are a
// document number and 5 are not, and a UUID is hex digits between dashes.
func TestTemplateIDBoundaries(t *testing.T) {
	t.Parallel()
	slug := strings.Repeat("abcdefg-", 4) // 32 token characters, no digit
	for _, tt := range []struct {
		seg string
		id  bool
	}{
		{"0", true}, {"9", true}, {"1029384756", true}, {"90", true},
		{"abcdefabcdefabcd", true}, {"abcdefabcdefabc", false}, // all-hex: 16, 15
		{"ABCDEFABCDEFABCD", true}, {"ABCDEFABCDEFABC", false},
		{"abcdefabcdefabcg", false},                            // 'g' is no hex digit
		{"c4rz9u-2f5a6b7c8", true}, {"c4rz9u-2f5a6b7c", false}, // token: 16, 15
		{slug, true}, {slug[:31], false}, // token without a digit: 32, 31
		{"12.34.56", true}, {"12.34.5", false}, // document number: 6 digits, 5
		{"0b7e5e0e:58a4:4b1c:9a0e:3f1c2d3e4f5a", false}, // UUID-long, not dashes
		{"çççç-çç-çç-çç-çççççç", false},                 // UUID-shaped, not hex
	} {
		want := "/x/" + tt.seg + "/y"
		if tt.id {
			want = "/x/{id}/y"
		}
		if got := Template("/x/" + tt.seg + "/y"); got != want {
			t.Errorf("Template(%q) = %q, want %q", "/x/"+tt.seg+"/y", got, want)
		}
	}
	for _, path := range []string{";x", ";jsessionid=1"} {
		if got := Template(path); got != "/" {
			t.Errorf("Template(%q) = %q, want / (nothing but a parameter)", path, got)
		}
	}
}

// Each end of each character class of a token ('0', '9', 'a', 'z', 'A',
// 'Z') counts as a token character (isToken) and as part of a secret run
// beside a character a token does not hold (hasSecretRun): a class that
// lost its last or first member would split the secret into short words.
func TestTemplateTokenClassesIncludeTheirEnds(t *testing.T) {
	t.Parallel()
	for _, ch := range "09azAZ" {
		c := string(ch)
		for _, seg := range []string{
			"k3j4-h5g" + c + "-f7d8s9a1",  // a token of short runs (isToken)
			"MQ:k3j4h5g" + c + "f7d8s9a1", // a 16-character run beside ':' (hasSecretRun)
			"MQ:" + strings.Repeat(c, 32), // a 32-character run
		} {
			if got := Template("/c/" + seg); got != "/c/{id}" {
				t.Errorf("Template(%q) = %q, want /c/{id}", "/c/"+seg, got)
			}
		}
	}
}

// Replacing ids costs one allocation when the template is no longer than
// the path (Template grows its builder to the path's length once).
func TestTemplateAllocatesOnceWhenReplacing(t *testing.T) {
	for _, path := range []string{
		"/v1/files/0b7e5e0e-58a4-4b1c-9a0e-3f1c2d3e4f5a/raw",
		"/api/alunos/123456/notas/7654321/boletim",
		"/app;jsessionid=9A3F2B7C1D4E/home/relatorios",
	} {
		if len(Template(path)) > len(path) {
			t.Fatalf("Template(%q) is longer than the path", path)
		}
		if n := testing.AllocsPerRun(100, func() { _ = Template(path) }); n != 1 {
			t.Errorf("Template(%q): %v allocs, want 1", path, n)
		}
	}
}

// A template of maxTemplateLen bytes is a key; one byte more is "other"
// and counted invalid.
func TestEndpointCapTemplateLengthBound(t *testing.T) {
	t.Parallel()
	c := newEndpointCap(10)
	at := strings.Repeat("/x", maxTemplateLen/2)
	if _, tmpl := c.endpoint("portal", at, 200, true, 1); tmpl != at {
		t.Errorf("a %d-byte template counted as %q, want itself", len(at), tmpl)
	}
	if _, tmpl := c.endpoint("portal", at+"/", 200, true, 1); tmpl != otherTemplate {
		t.Errorf("a %d-byte template counted as %q, want other", len(at)+1, tmpl)
	}
	if c.invalid != 1 {
		t.Errorf("invalid = %d, want 1", c.invalid)
	}
}

// A template served in two minutes less than three minutes apart is known
// (endpointCap); three minutes apart it is not.
func TestTemplateServedTwoMinutesApartIsKnown(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		gap   int64
		known bool
	}{{1, true}, {2, true}, {3, false}} {
		c := newEndpointCap(4)
		c.endpoint("app", "/k", 200, true, 10)
		c.endpoint("app", "/k", 200, true, 10+tt.gap)
		if _, ok := c.known["app"]["/k"]; ok != tt.known {
			t.Errorf("served %d minutes apart: known = %v, want %v", tt.gap, ok, tt.known)
		}
	}
}

// A template seen in an earlier minute gets a place only while the route
// has one: it does not become known over the cap.
func TestTemplateSeenBeforeDoesNotTakeAPlaceOverTheCap(t *testing.T) {
	t.Parallel()
	c := newEndpointCap(4)
	for _, p := range []string{"/a", "/b", "/c", "/d"} {
		c.endpoint("app", p, 200, true, 1)
	}
	for _, p := range []string{"/a", "/e", "/f", "/g"} { // /a known, three new: the cap is full
		if _, tmpl := c.endpoint("app", p, 200, true, 2); tmpl != p {
			t.Fatalf("%s in minute 2 counted as %q, want itself", p, tmpl)
		}
	}
	if _, tmpl := c.endpoint("app", "/b", 200, true, 2); tmpl != otherTemplate {
		t.Errorf("/b (served in minute 1) over the full cap counted as %q, want other", tmpl)
	}
	if _, ok := c.known["app"]["/b"]; ok {
		t.Error("/b became known over the cap")
	}
}

// Events stamped with an older minute (a batch folded late) count against
// that minute's cap while the newest minute stays the same.
func TestLateEventsShareTheirMinutesCap(t *testing.T) {
	t.Parallel()
	c := newEndpointCap(1)
	c.endpoint("app", "/now", 200, true, 100)
	if _, tmpl := c.endpoint("app", "/a", 200, true, 90); tmpl != "/a" {
		t.Fatalf("late /a counted as %q, want itself", tmpl)
	}
	c.endpoint("app", "/now", 200, true, 100)
	if _, tmpl := c.endpoint("app", "/b", 200, true, 90); tmpl != otherTemplate {
		t.Errorf("a second late template in a minute capped at 1 counted as %q, want other", tmpl)
	}
}

// Generative: for random traffic (served, unserved and refused requests on
// a few routes, minutes moving forward, unserved ones sometimes a minute
// late), no
// route holds more than maxRefusedTemplates refused templates or more than
// maxKnown known templates, new templates never take more than the cap's
// places, and what is counted under its own template is either placed or
// refused in that minute. A route holds at most the cap's places in a
// minute in which no template became known (a template that becomes known
// mid-minute can add one place beyond the cap: noted in docs/testing.md).
func TestEndpointCapInvariantsUnderRandomTraffic(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	for round := range 200 {
		max := 1 + rng.IntN(8)
		c := newEndpointCap(max)
		minute := int64(1000)
		own := map[[2]string]map[string]bool{} // route, minute → own templates
		promoted := map[[2]string]bool{}       // route, minute → a template became known
		for range 400 {
			switch rng.IntN(20) {
			case 0:
				minute += 1 + rng.Int64N(3)
			case 1:
				minute++
			}
			route := []string{"a", "b"}[rng.IntN(2)]
			path := fmt.Sprintf("/p%d", rng.IntN(3*max+20))
			status, served := 200, true
			switch rng.IntN(6) {
			case 0:
				status = 404
			case 1:
				served = false
			}
			m := minute
			if !served && rng.IntN(3) == 0 {
				m-- // an unserved answer folded a minute late
			}
			knownBefore := len(c.known[route])
			r, tmpl := c.endpoint(route, path, status, served, m)
			if r != route {
				t.Fatalf("round %d: route %q counted as %q", round, route, r)
			}
			k := [2]string{route, fmt.Sprint(m)}
			if tmpl != otherTemplate && tmpl != refusedTemplate {
				if own[k] == nil {
					own[k] = map[string]bool{}
				}
				own[k][tmpl] = true
			}
			rm := c.minutes[m][route]
			if len(c.known[route]) > knownBefore {
				promoted[k] = true
			}
			if len(rm.placed) > max && !promoted[k] {
				t.Fatalf("round %d: %d places in a minute, cap %d", round, len(rm.placed), max)
			}
			if rm.fresh > max {
				t.Fatalf("round %d: %d new templates in a minute, cap %d", round, rm.fresh, max)
			}
			if len(rm.refused) > maxRefusedTemplates {
				t.Fatalf("round %d: %d refused templates in a minute", round, len(rm.refused))
			}
			if n := len(c.known[route]); n > c.maxKnown() {
				t.Fatalf("round %d: %d known templates, at most %d", round, n, c.maxKnown())
			}
			for tm := range own[k] {
				_, p := rm.placed[tm]
				_, f := rm.refused[tm]
				if !p && !f {
					t.Fatalf("round %d: %q was counted under itself in minute %d but holds no place", round, tm, m)
				}
			}
		}
	}
}

// The status dimension counts 100-999 (an HTTP status's three digits),
// nothing else.
func TestStatusCountedOnlyWithThreeDigits(t *testing.T) {
	t.Parallel()
	ks := keyspace.MustNew("olp-dev:t:")
	at := time.Date(2026, 3, 4, 5, 6, 30, 0, time.UTC)
	b := newBatch(10)
	for _, s := range []int{99, 100, 999, 1000, -200, 0} {
		b.add(Event{Served: true, Time: at, Route: "portal", Path: "/a", Status: s}, time.Now)
	}
	got := map[string]int64{}
	for _, inc := range b.increments(ks) {
		got[inc.Key] = inc.Delta
	}
	want := map[string]int64{
		"olp-dev:t:m:portal:/a:202603040506":  6,
		"olp-dev:t:m:status:100:202603040506": 1,
		"olp-dev:t:m:status:999:202603040506": 1,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("increments = %v, want %v", got, want)
	}
}

// An escola_id of maxEscolaLen bytes is counted per school; one byte more
// is not (and counted invalid).
func TestEscolaLengthBound(t *testing.T) {
	t.Parallel()
	ks := keyspace.MustNew("olp-dev:t:")
	at := time.Date(2026, 3, 4, 5, 6, 30, 0, time.UTC)
	b := newBatch(10)
	ok := strings.Repeat("9", maxEscolaLen)
	b.add(Event{Served: true, Time: at, Route: "portal", Path: "/a", Status: 200, Escola: ok}, time.Now)
	b.add(Event{Served: true, Time: at, Route: "portal", Path: "/a", Status: 200, Escola: ok + "9"}, time.Now)
	n := 0
	for _, inc := range b.increments(ks) {
		if strings.HasPrefix(inc.Key, "olp-dev:t:m:escola:") {
			n++
			if inc.Key != "olp-dev:t:m:escola:"+ok+":202603040506" || inc.Delta != 1 {
				t.Errorf("escola increment %s %d", inc.Key, inc.Delta)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d escola counters, want 1", n)
	}
	if _, escola := b.takeInvalid(); escola != 1 {
		t.Errorf("invalid escola_ids = %d, want 1", escola)
	}
}

// An event's minute is its Unix time floored to the minute, before 1970
// too (truncating toward zero would put -30 s in minute 0).
func TestEventMinuteIsFloored(t *testing.T) {
	t.Parallel()
	for sec, want := range map[int64]int64{-121: -3, -120: -2, -61: -2, -60: -1, -30: -1, -1: -1, 0: 0, 59: 0, 60: 1, 119: 1} {
		b := newBatch(10)
		b.add(Event{Served: true, Time: time.Unix(sec, 0), Route: "portal", Path: "/a", Status: 200}, time.Now)
		for k := range b.keys {
			if k.minute != want {
				t.Errorf("Unix %d s: minute %d, want %d", sec, k.minute, want)
			}
		}
	}
}

// NewRecorder takes every positive option and refuses zero in each.
func TestNewRecorderBounds(t *testing.T) {
	t.Parallel()
	one := Options{QueueSize: 1, FlushEvery: time.Nanosecond, MaxEndpointsPerRoute: 1}
	if _, err := NewRecorder(one, keyspace.MustNew("olp-dev:"), &memSink{}, prometheus.NewRegistry(), discard()); err != nil {
		t.Errorf("the smallest positive options refused: %v", err)
	}
	for name, o := range map[string]Options{
		"queue_size 0":              {QueueSize: 0, FlushEvery: time.Nanosecond, MaxEndpointsPerRoute: 1},
		"flush_every 0":             {QueueSize: 1, FlushEvery: 0, MaxEndpointsPerRoute: 1},
		"flush_every -1ns":          {QueueSize: 1, FlushEvery: -1, MaxEndpointsPerRoute: 1},
		"max_endpoints_per_route 0": {QueueSize: 1, FlushEvery: time.Nanosecond, MaxEndpointsPerRoute: 0},
	} {
		if _, err := NewRecorder(o, keyspace.MustNew("olp-dev:"), &memSink{}, prometheus.NewRegistry(), discard()); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

// fold flushes the moment the batch holds maxBatchShapes shapes, not one
// shape later.
func TestFoldFlushesAtMaxBatchShapes(t *testing.T) {
	t.Parallel()
	sink := &memSink{}
	cfg := testConfig(10_000)
	cfg.MaxEndpointsPerRoute = 10_000
	r, _ := newTestRecorder(t, cfg, keyspace.MustNew("olp-dev:t:"), sink) // not started: the test folds
	b := newBatch(r.maxPerRoute)
	at := time.Date(2026, 3, 4, 5, 6, 30, 0, time.UTC)
	for i := range maxBatchShapes - 1 {
		r.Record(Event{Served: true, Time: at, Route: "portal", Path: fmt.Sprintf("/s%d", i)})
	}
	r.fold(t.Context(), b)
	if sink.batches != 0 || b.len() != maxBatchShapes-1 {
		t.Fatalf("%d shapes: %d batches written, %d shapes held; want none written", maxBatchShapes-1, sink.batches, b.len())
	}
	r.Record(Event{Served: true, Time: at, Route: "portal", Path: "/last"})
	r.fold(t.Context(), b)
	if sink.batches != 1 || b.len() != 0 {
		t.Errorf("%d shapes: %d batches written, %d shapes held; want one written", maxBatchShapes, sink.batches, b.len())
	}
}

// A fold adds each of its invalid and folded counts to its own series,
// also when two of them are equal.
func TestFoldCountsInvalidAndFoldedEvents(t *testing.T) {
	t.Parallel()
	cfg := testConfig(1000)
	cfg.MaxEndpointsPerRoute = 1
	r, _ := newTestRecorder(t, cfg, keyspace.MustNew("olp-dev:t:"), &memSink{})
	b := newBatch(r.maxPerRoute)
	at := time.Date(2026, 3, 4, 5, 6, 30, 0, time.UTC)
	r.Record(Event{Served: true, Time: at, Route: "portal", Path: "/a\x00", Status: 200, Escola: "e\xff"}) // one invalid each
	r.Record(Event{Served: true, Time: at, Route: "portal", Path: "/a", Status: 200})
	r.Record(Event{Served: true, Time: at, Route: "portal", Path: "/b", Status: 200}) // over the cap
	for i := range maxRefusedTemplates + 1 {                                          // one refused
		r.Record(Event{Served: true, Time: at, Route: "portal", Path: fmt.Sprintf("/r%dx", i), Status: 404})
	}
	r.fold(t.Context(), b)
	for name, c := range map[string]prometheus.Counter{
		"invalid endpoint": r.metrics.invalidEndpoint, "invalid escola": r.metrics.invalidEscola,
		"folded cap": r.metrics.foldedCap, "folded refused": r.metrics.foldedRefused,
	} {
		var m dto.Metric
		if err := c.Write(&m); err != nil {
			t.Fatal(err)
		}
		if got := m.GetCounter().GetValue(); got != 1 {
			t.Errorf("%s = %v, want 1", name, got)
		}
	}
}

// quoteKey cuts a value longer than 200 bytes, and only such a value.
func TestQuoteKeyCutsAt200Bytes(t *testing.T) {
	t.Parallel()
	at := strings.Repeat("k", 200)
	if got := quoteKey(at); got != `"`+at+`"` {
		t.Errorf("quoteKey(200 bytes) = %s, want it whole", got)
	}
	if got := quoteKey(at + "x"); got != `"`+at+`"…` {
		t.Errorf("quoteKey(201 bytes) = %s, want 200 bytes and …", got)
	}
}

// SetInterval takes any positive interval and refuses zero.
func TestSetIntervalBounds(t *testing.T) {
	t.Parallel()
	var a Aggregator
	if err := a.SetInterval(time.Nanosecond); err != nil {
		t.Errorf("SetInterval(1ns) = %v", err)
	}
	for _, d := range []time.Duration{0, -time.Second} {
		if err := a.SetInterval(d); err == nil {
			t.Errorf("SetInterval(%v) accepted", d)
		}
	}
	if err := a.SetRetention(24*time.Hour - time.Nanosecond); err == nil {
		t.Error("SetRetention(24h - 1ns) accepted")
	}
}

// A counter of 0 is a counter (its row lands); a dimension of
// maxDimensionLen bytes lands and one byte more is counted invalid.
func TestAggregateValueAndDimensionBounds(t *testing.T) {
	t.Parallel()
	rdb, ks := testRedis(t)
	cleanKeys(t, rdb, ks)
	db := migratedDB(t)
	minute := time.Now().UTC().Truncate(time.Minute).Add(-time.Minute)
	long := "portal:/" + strings.Repeat("x", maxDimensionLen-len("portal:/"))
	setCounters(t, rdb, map[string]int64{
		ks.Metric("portal:/zero", minute): 0,
		ks.Metric(long, minute):           3,
		ks.Metric(long+"x", minute):       4,
	})
	rep, err := newTestAggregator(t, rdb, db, ks).Aggregate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Keys != 3 || rep.Skipped != 0 || rep.Invalid != 1 || rep.Rows != 2 {
		t.Errorf("report = %+v, want 3 keys, 0 skipped, 1 invalid, 2 rows", rep)
	}
	want := []row{{"endpoint", long, minute, 3}, {"endpoint", "portal:/zero", minute, 0}}
	if got := readRows(t, db, "development"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("rows:\n got %v\nwant %v", got, want)
	}
}

// A one-shot Aggregate leaves no interval marker (only Run's turns set
// one), and a success sets the last-success gauge to the run's time in
// seconds.
func TestOneShotLeavesNoIntervalMarkerAndSetsTheGauge(t *testing.T) {
	t.Parallel()
	rdb, ks := testRedis(t)
	cleanKeys(t, rdb, ks)
	db := migratedDB(t)
	recordSome(t, rdb, ks)
	a := newTestAggregator(t, rdb, db, ks)
	at := time.Date(2026, 12, 6, 10, 30, 15, 500_000_000, time.UTC)
	a.now = func() time.Time { return at }
	if _, err := a.Aggregate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.Exists(t.Context(), ks.AggregateInterval()).Result(); err != nil || n != 0 {
		t.Errorf("interval marker after a one-shot run: exists %d (%v), want none", n, err)
	}
	if got, want := gaugeValue(t, a.lastSuccess), float64(at.UnixNano())/1e9; got != want {
		t.Errorf("last success gauge = %v, want %v", got, want)
	}
}

// Run's successful turn marks the interval done for 9/10 of the interval.
func TestRunMarksTheIntervalForNineTenths(t *testing.T) {
	t.Parallel()
	rdb, ks := testRedis(t)
	cleanKeys(t, rdb, ks)
	db := migratedDB(t)
	recordSome(t, rdb, ks)
	a := newTestAggregator(t, rdb, db, ks)
	if err := a.SetInterval(time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Stop(context.Background()) }()
	var ttl time.Duration
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		d, err := rdb.PTTL(t.Context(), ks.AggregateInterval()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if d > 0 {
			ttl = d
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run did not mark the interval in 10s")
		}
	}
	if hold := time.Hour * 9 / 10; ttl > hold || ttl < hold-time.Minute {
		t.Errorf("interval marker TTL = %v, want 9/10 of 1h (54m)", ttl)
	}
}

// attemptLog is a slog.Handler keeping the attempt and retry_in of each
// "telemetry aggregation failed" line.
type attemptLog struct {
	mu       sync.Mutex
	attempts []int64
	waits    []time.Duration
}

func (l *attemptLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *attemptLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "telemetry aggregation failed" {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "attempt":
			l.attempts = append(l.attempts, a.Value.Int64())
		case "retry_in":
			l.waits = append(l.waits, a.Value.Duration())
		}
		return true
	})
	return nil
}
func (l *attemptLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *attemptLog) WithGroup(string) slog.Handler      { return l }

// Run counts its failed attempts 1, 2, 3... and waits base·2^(attempt-1)
// (±20 %) after each.
func TestRunCountsFailedAttemptsAndDoublesItsWait(t *testing.T) {
	t.Parallel()
	a, log := startFailingAggregator(t, 10*time.Millisecond, 3)
	log.mu.Lock()
	defer log.mu.Unlock()
	for i := range 3 {
		want := a.backoffBase << i
		if log.attempts[i] != int64(i+1) || log.waits[i] < want*8/10 || log.waits[i] > want*12/10 {
			t.Errorf("failure %d logged attempt %d, retry in %v; want attempt %d, %v ±20%%", i+1, log.attempts[i], log.waits[i], i+1, want)
		}
	}
}

// Run's first retry after a failure waits 15 s (±20 %), the default
// backoff base NewAggregator sets (Run's doc).
func TestRunFirstRetryWaitsFifteenSeconds(t *testing.T) {
	t.Parallel()
	_, log := startFailingAggregator(t, 0, 1)
	log.mu.Lock()
	defer log.mu.Unlock()
	if w := log.waits[0]; w < 12*time.Second || w > 18*time.Second {
		t.Errorf("first retry in %v, want 15s ±20%%", w)
	}
}

// startFailingAggregator starts an Aggregator whose every run with
// counters fails (its database has no table), with backoff base base (0:
// NewAggregator's), waits (bounded) until it logged n failed attempts and
// stops it. It returns the Aggregator and its log.
func startFailingAggregator(t *testing.T, base time.Duration, n int) (*Aggregator, *attemptLog) {
	t.Helper()
	rdb, ks := testRedis(t)
	cleanKeys(t, rdb, ks)
	db, _ := servicetest.IsolatedDatabase(t) // no table: every run with counters fails
	recordSome(t, rdb, ks)
	a := newTestAggregator(t, rdb, db, ks)
	if base > 0 {
		a.backoffBase = base
	}
	log := &attemptLog{}
	a.logger = slog.New(log)
	if err := a.SetInterval(time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		log.mu.Lock()
		got := len(log.waits)
		log.mu.Unlock()
		if got >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Run logged %d failed attempts in 10s, want %d", got, n)
		}
	}
	if err := a.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	return a, log
}

// warnLog is a slog.Handler keeping the messages of warnings and errors.
type warnLog struct {
	mu   sync.Mutex
	msgs []string
}

func (l *warnLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *warnLog) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		l.mu.Lock()
		l.msgs = append(l.msgs, r.Message)
		l.mu.Unlock()
	}
	return nil
}
func (l *warnLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *warnLog) WithGroup(string) slog.Handler      { return l }

// A successful turn marks the interval and frees the lock without a
// warning: "not marked done" and "left to expire" are said only when they
// happened.
func TestSuccessfulTurnLogsNoWarning(t *testing.T) {
	t.Parallel()
	rdb, ks := testRedis(t)
	cleanKeys(t, rdb, ks)
	db := migratedDB(t)
	recordSome(t, rdb, ks)
	a := newTestAggregator(t, rdb, db, ks)
	log := &warnLog{}
	a.logger = slog.New(log)
	if _, err := a.aggregate(t.Context(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Exists(t.Context(), ks.AggregateInterval()).Result(); n != 1 {
		t.Error("the turn did not mark the interval")
	}
	if n, _ := rdb.Exists(t.Context(), ks.AggregateLock()).Result(); n != 0 {
		t.Error("the turn kept the lock")
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.msgs) != 0 {
		t.Errorf("a successful turn warned: %q", log.msgs)
	}
}

// backoff's jitter spans ±20 % of the doubled delay and never leaves it
// (2 000 draws: a jitter that stretched one end by 1/24 would show).
func TestBackoffJitterSpansTwentyPercent(t *testing.T) {
	t.Parallel()
	const base = 15 * time.Second
	lo, hi := time.Duration(1<<62), time.Duration(0)
	for range 2000 {
		d := backoff(base, time.Hour, 1)
		if d < base*8/10 || d > base*12/10 {
			t.Fatalf("backoff = %v, want within 15s ±20%%", d)
		}
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo > base*84/100 || hi < base*116/100 {
		t.Errorf("2 000 backoffs spanned %v..%v, want the jitter to reach near both ends of 12s..18s", lo, hi)
	}
}

// New templates over the places the known ones leave count as other and
// in overflow, one each, as those over the cap itself do.
func TestNewTemplatesOverTheKnownsPlacesCountAsOverflow(t *testing.T) {
	t.Parallel()
	c := newEndpointCap(4)
	for m := int64(1); m <= 2; m++ {
		for _, p := range []string{"/a", "/b", "/c"} {
			c.endpoint("app", p, 200, true, m)
		}
	}
	if c.overflow != 0 {
		t.Fatalf("overflow = %d before minute 3, want 0", c.overflow)
	}
	if _, tmpl := c.endpoint("app", "/x", 200, true, 3); tmpl != "/x" {
		t.Fatalf("the one new place went to %q, want /x", tmpl)
	}
	for _, p := range []string{"/y", "/z"} {
		if _, tmpl := c.endpoint("app", p, 200, true, 3); tmpl != otherTemplate {
			t.Errorf("%s over the known templates' places counted as %q, want other", p, tmpl)
		}
	}
	if c.overflow != 2 {
		t.Errorf("overflow = %d, want 2", c.overflow)
	}
}
