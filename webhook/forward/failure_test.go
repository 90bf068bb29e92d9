package forward

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/internal/breaker"
	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/webhook/envelope"
)

// someSenders is a senderSet of n sources, each its own sender.
func someSenders(n int) senderSet {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("configured-%d", i)
	}
	return senders(names, nil)
}

func newCountingBreaker(failures, sources int) *Breaker {
	return newSendersBreaker(failures, someSenders(sources))
}

func newSendersBreaker(failures int, set senderSet) *Breaker {
	return newBreaker(failures, time.Minute, set, clock.NewManual(time.Unix(1_800_000_000, 0)),
		prometheus.NewGauge(prometheus.GaugeOpts{Name: "g", Help: "h"}), slog.New(slog.DiscardHandler))
}

// fail runs one slot that fails with r for an event of source.
func fail(t *testing.T, b *Breaker, r Result, source string) {
	t.Helper()
	done, err := b.allow()
	if err != nil {
		t.Fatalf("slot refused: %v", err)
	}
	b.failed(breakerReason(r), time.Now())
	done(b.outcome(r, b.senders.sender(source)))
}

func succeed(t *testing.T, b *Breaker) {
	t.Helper()
	done, err := b.allow()
	if err != nil {
		t.Fatalf("slot refused: %v", err)
	}
	b.answered()
	done(nil)
}

// answeredStatuses are every 5xx the endpoint answers with that does not
// say it is down: 500, 501, 505-599.
func answeredStatuses() []int {
	var out []int
	for s := 500; s <= 599; s++ {
		if s < 502 || s > 504 {
			out = append(out, s)
		}
	}
	return out
}

// TestBreaker_OneSourcesPoisonEventsDoNotOpenIt is fresh attack pass 8's
// F01: ten events of one source that the endpoint answers 500 to opened
// the breaker and paused every source. Now no run of answered failures
// from one source opens it, whatever the 5xx, as long as more than one
// source is configured.
func TestBreaker_OneSourcesPoisonEventsDoNotOpenIt(t *testing.T) {
	for _, status := range answeredStatuses() {
		b := newCountingBreaker(3, 2)
		for range 50 {
			fail(t, b, Result{Kind: Retryable, Class: "5xx", Status: status}, "hostile")
		}
		if s := b.State(); s != breaker.StateClosed {
			t.Fatalf("HTTP %d ×50 from one source: breaker %s, want closed", status, s)
		}
	}
}

// TestBreaker_AnsweredFailuresOfTwoSourcesOpenIt: an endpoint that answers
// 500 to everyone is down for everyone: once a second source fails in the
// run, its failures count.
func TestBreaker_AnsweredFailuresOfTwoSourcesOpenIt(t *testing.T) {
	for _, status := range []int{500, 501, 505, 507, 599} {
		b := newCountingBreaker(3, 2)
		r := Result{Kind: Retryable, Class: "5xx", Status: status}
		fail(t, b, r, "a")
		fail(t, b, r, "a")
		for i := range 3 {
			if s := b.State(); s != breaker.StateClosed {
				t.Fatalf("HTTP %d: open after %d counted failures, want after 3", status, i)
			}
			fail(t, b, r, []string{"b", "a"}[i%2])
		}
		if s := b.State(); s != breaker.StateOpen {
			t.Errorf("HTTP %d from two sources ×3 counted: breaker %s, want open", status, s)
		}
	}
}

// TestBreaker_DownFailuresOfOneSourceOpenIt: no response, 502/503/504, 408
// and 429 say the endpoint is down or overloaded, whichever source's event
// met them.
func TestBreaker_DownFailuresOfOneSourceOpenIt(t *testing.T) {
	for _, r := range []Result{
		{Kind: Retryable, Class: "network"}, {Kind: Retryable, Class: "timeout"},
		{Kind: Retryable, Class: "5xx", Status: 502}, {Kind: Retryable, Class: "5xx", Status: 503},
		{Kind: Retryable, Class: "5xx", Status: 504}, {Kind: Retryable, Class: "408", Status: 408},
		{Kind: Retryable, Class: "429", Status: 429},
	} {
		b := newCountingBreaker(3, 5)
		for range 3 {
			fail(t, b, r, "only")
		}
		if s := b.State(); s != breaker.StateOpen {
			t.Errorf("%s ×3 from one source: breaker %s, want open", failureReason(r), s)
		}
	}
}

// TestBreaker_WithOneSourceAnsweredFailuresOpenIt: with a single source
// configured there is no other source to pause.
func TestBreaker_WithOneSourceAnsweredFailuresOpenIt(t *testing.T) {
	for _, sources := range []int{0, 1} {
		b := newCountingBreaker(3, sources)
		for range 3 {
			fail(t, b, Result{Kind: Retryable, Class: "5xx", Status: 500}, "whatsapp")
		}
		if s := b.State(); s != breaker.StateOpen {
			t.Errorf("%d sources configured, 500 ×3: breaker %s, want open", sources, s)
		}
	}
}

// TestBreaker_ASuccessEndsTheRunOfAnsweredFailures: after a delivery (or a
// 4xx refusal) the sources of the run start again, so a hostile source's
// poison between other sources' successes never counts.
func TestBreaker_ASuccessEndsTheRunOfAnsweredFailures(t *testing.T) {
	b := newCountingBreaker(2, 3)
	r := Result{Kind: Retryable, Class: "5xx", Status: 500}
	fail(t, b, r, "a")
	fail(t, b, r, "b") // mixed: counted (1 of 2)
	succeed(t, b)      // the run ends, and the count with it
	for i := range 20 {
		fail(t, b, r, "hostile")
		if i%5 == 4 {
			succeed(t, b)
		}
	}
	if s := b.State(); s != breaker.StateClosed {
		t.Errorf("breaker %s after one source's poison between successes, want closed", s)
	}
}

// TestBreaker_HalfOpenProbeOfOneSourcesPoisonTakesAnotherProbe: a probe
// that meets one source's answered failure neither closes nor reopens the
// breaker: the next event is probed.
func TestBreaker_HalfOpenProbeOfOneSourcesPoisonTakesAnotherProbe(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	b := newBreaker(1, time.Second, someSenders(3), clk, prometheus.NewGauge(prometheus.GaugeOpts{Name: "g", Help: "h"}), slog.New(slog.DiscardHandler))
	fail(t, b, Result{Kind: Retryable, Class: "network"}, "a")
	clk.Advance(2 * time.Second)
	for i := range 3 {
		if s := b.State(); s != breaker.StateHalfOpen {
			t.Fatalf("probe %d: breaker %s, want half-open", i, s)
		}
		fail(t, b, Result{Kind: Retryable, Class: "5xx", Status: 500}, "hostile")
	}
	succeed(t, b)
	if s := b.State(); s != breaker.StateClosed {
		t.Errorf("breaker %s after a good probe, want closed", s)
	}
}

// TestBreaker_SourcesSharingACredentialAreOneSender is fresh attack pass
// 10's A05: two sources that take the same WEBHOOK_TOKENS are one holder's;
// alternating poison between them counted as two senders and opened the
// breaker for every source (a signed source's events waited 40 s). Sources
// of one credential group are one sender; another group's failure mixes
// the run.
func TestBreaker_SourcesSharingACredentialAreOneSender(t *testing.T) {
	set := senders([]string{"whatsapp", "zap", "gh"}, map[string]string{"whatsapp": "whatsapp", "zap": "whatsapp", "gh": "gh"})
	if set.count != 2 {
		t.Fatalf("senders = %d, want 2", set.count)
	}
	b := newSendersBreaker(3, set)
	r := Result{Kind: Retryable, Class: "5xx", Status: 500}
	for i := range 50 {
		fail(t, b, r, []string{"whatsapp", "zap"}[i%2])
	}
	if s := b.State(); s != breaker.StateClosed {
		t.Fatalf("poison alternating over two sources of one credential: breaker %s, want closed", s)
	}
	for range 3 {
		fail(t, b, r, "gh")
	}
	if s := b.State(); s != breaker.StateOpen {
		t.Errorf("a second sender's failures: breaker %s, want open", s)
	}
	// Two sources of one credential only: one sender, nobody else to
	// pause: answered failures count at once.
	one := newSendersBreaker(3, senders([]string{"whatsapp", "zap"}, map[string]string{"zap": "whatsapp"}))
	for i := range 3 {
		fail(t, one, r, []string{"whatsapp", "zap"}[i%2])
	}
	if s := one.State(); s != breaker.StateOpen {
		t.Errorf("one sender configured: breaker %s, want open", s)
	}
}

// TestBreaker_TheEnvelopesSenderDecides (fresh attack pass 11, A06): a
// forwarder run without the token variables groups sources by variable
// names only, so two sources sharing a value under two names looked like
// two senders; the sender the ingress wrote into the envelope decides,
// and an envelope of an earlier release (no sender) falls back to the
// forwarder's own grouping.
func TestBreaker_TheEnvelopesSenderDecides(t *testing.T) {
	set := senders([]string{"whatsapp", "zap", "gh"}, nil) // no values: three senders here
	env := func(source, sender string) envelope.Envelope {
		e := envelope.New("id", source, "application/json", nil, []byte("{}"), time.Now())
		e.Sender = sender
		return e
	}
	if got := set.ofEnvelope(env("zap", "whatsapp")); got != "whatsapp" {
		t.Errorf("sender %q, want the envelope's", got)
	}
	if got := set.ofEnvelope(env("zap", "")); got != "zap" {
		t.Errorf("sender %q without one in the envelope, want the source's group", got)
	}
	b := newSendersBreaker(3, set)
	r := Result{Kind: Retryable, Class: "5xx", Status: 500}
	for i := range 30 {
		e := env([]string{"whatsapp", "zap"}[i%2], "whatsapp")
		done, err := b.allow()
		if err != nil {
			t.Fatalf("slot %d refused: %v", i, err)
		}
		done(b.outcome(r, b.senders.ofEnvelope(e)))
	}
	if s := b.State(); s != breaker.StateClosed {
		t.Errorf("one sender's poison over two sources: breaker %s, want closed", s)
	}
}
