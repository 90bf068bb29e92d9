package adminui

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// ctxLetters lists only with a live context, like a DLQ pass cut short.
type ctxLetters struct{ fakeLetters }

func (c *ctxLetters) List(ctx context.Context, limit int) ([]DeadLetter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return c.fakeLetters.List(ctx, limit)
}

func TestAClientThatGoesAwayDoesNotCutTheSharedListingShort(t *testing.T) {
	letters := &ctxLetters{fakeLetters{letters: []DeadLetter{{ID: "ev-kept"}}}}
	p, err := New(Sources{Routes: fakeRoutes{}, Limiter: fakeLimiter{}, DeadLetters: letters}, Options{Token: "tok", ListCacheFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the first visitor reloaded before the listing ended
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:9091/ui/dead-letters", nil)
	p.Handler().ServeHTTP(httptest.NewRecorder(), req)
	_, body := do(t, p.Handler(), httptest.NewRequest(http.MethodGet, "/ui/dead-letters", nil))
	if !strings.Contains(body, "ev-kept") || strings.Contains(body, "Listing failed") {
		t.Errorf("the next visitor sees the first one's cancelled listing (cached):\n%s", body)
	}
}
