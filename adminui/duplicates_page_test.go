package adminui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/clock"
)

// TestOverviewShowsDuplicatesAndAnUnconsumedEventsQueue (issue 23): the
// forwarder's duplicates (acked without a POST) and an events queue that
// grows with no consumer are on the operator page, not only in metrics.
func TestOverviewShowsDuplicatesAndAnUnconsumedEventsQueue(t *testing.T) {
	p, err := New(Sources{
		Routes: fakeRoutes{}, Limiter: fakeLimiter{Store: "redis", StoreState: "ok", Breaker: "closed", Span: time.Minute},
		Pipeline: fakePipeline{Configured: true, Broker: Broker{Connected: true},
			Queues: []Queue{{Name: "events-q", Role: "events (consume-events)", Depth: 19747, Warn: "no consumer: 19747 messages wait"}},
			Forwarders: []Forwarder{{Instance: "fwd-1", Breaker: "closed", Consuming: true, Connected: true,
				Duplicates: 3, LastDuplicateKey: "olp:wh:fwd2:zapster:msg_1", LastDuplicateAt: time.Now()}}},
		DeadLetters: &fakeLetters{},
	}, Options{Token: testToken, ListCacheFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	_, body := do(t, p.Handler(), httptest.NewRequest(http.MethodGet, "/ui", nil))
	for _, want := range []string{"no consumer: 19747 messages wait", "duplicates acked without a POST: 3", "olp:wh:fwd2:zapster:msg_1"} {
		if !strings.Contains(body, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
}

// TestForwarderRowSaysWhenItsDepthsWereSampled: a worker's depths are
// sampled every 15 s and were shown beside the page's fresh ones without
// their age (36 waiting, "seen 3s ago", while the queue held 0).
func TestForwarderRowSaysWhenItsDepthsWereSampled(t *testing.T) {
	now := time.Now()
	p, err := New(Sources{Routes: fakeRoutes{}, Limiter: fakeLimiter{},
		Pipeline: fakePipeline{Configured: true, Forwarders: []Forwarder{
			{Instance: "fwd-1", Breaker: "closed", QueueDepth: 36, SampledAt: now.Add(-13 * time.Second), SeenAt: now.Add(-3 * time.Second)},
			{Instance: "fwd-old", Breaker: "closed", QueueDepth: 4, SeenAt: now}}}},
		Options{Clock: clock.Func(func() time.Time { return now })})
	if err != nil {
		t.Fatal(err)
	}
	_, body := do(t, p.Handler(), httptest.NewRequest(http.MethodGet, "/ui", nil))
	for _, want := range []string{"<th>Sampled</th>", `<td class="sampled">13s ago</td><td>3s ago</td>`, `<td class="sampled">—</td>`} {
		if !strings.Contains(body, want) {
			t.Errorf("forwarders table lacks %q", want)
		}
	}
}
