package e2e

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/olp-edu/borda/adminui"
)

type stateRoutes []adminui.Route

func (s stateRoutes) Routes() []adminui.Route { return s }

type stateLimiter adminui.LimiterState

func (s stateLimiter) Limiter(context.Context) adminui.LimiterState { return adminui.LimiterState(s) }

type failingLetters struct{ err error }

func (f failingLetters) List(context.Context, int) ([]adminui.DeadLetter, error) { return nil, f.err }
func (f failingLetters) Replay(context.Context, adminui.ReplayRequest) (adminui.ReplayResult, error) {
	return adminui.ReplayResult{}, f.err
}

// TestOperatorPageInABrowserShowsTheRelaxedLimitAndNeverAFailedListingAsEmpty
// drives chromium through the operator page over sources in a known state:
// a rule relaxed ×3 shows the limit in force (150), the factor and its end
// in the Routes table; a DLQ listing that fails (a broker alarm) says so
// and never "The dead-letter queue is empty.".
func TestOperatorPageInABrowserShowsTheRelaxedLimitAndNeverAFailedListingAsEmpty(t *testing.T) {
	ctx := browser(t)
	until := time.Now().Add(40 * time.Minute)
	page, err := adminui.New(adminui.Sources{
		Routes: stateRoutes{{Name: "portal", PathPrefix: "/", Upstream: "http://127.0.0.1:1",
			Rules: []adminui.Rule{{Name: "burst", Scope: "ip", Algorithm: "fixed", Mode: "enforce", Limit: 50, Window: 5 * time.Second}}}},
		Limiter:     stateLimiter{Store: "redis", StoreState: "ok", Breaker: "closed", Relaxes: []adminui.Relax{{Rule: "burst", Factor: 3, Until: until}}},
		DeadLetters: failingLetters{errors.New("the broker does not take publishes now, so no dead letter is read")},
	}, adminui.Options{Token: operatorToken})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(page.Handler())
	t.Cleanup(srv.Close)
	base := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)

	do(t, ctx, "loading the overview", chromedp.Navigate(base+"/ui"))
	routes := textOf(t, ctx, chromedp.ID("routes"))
	for _, want := range []string{"150 / 5s per ip", "relaxed ×3 until", "(base 50,"} {
		if !strings.Contains(routes, want) {
			t.Errorf("Routes table lacks %q:\n%s", want, routes)
		}
	}
	do(t, ctx, "loading the dead letters", chromedp.Navigate(base+"/ui/dead-letters"))
	text := textOf(t, ctx, chromedp.CSS("main"))
	if !strings.Contains(text, "Listing failed") || !strings.Contains(text, "whether the queue holds any is unknown") || strings.Contains(text, "is empty") {
		t.Errorf("dead-letter page during a failed listing:\n%s", text)
	}
}
