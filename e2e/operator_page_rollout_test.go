package e2e

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/olp-edu/borda/adminui"
)

type stateRollout adminui.RolloutState

func (s stateRollout) Rollout(context.Context) adminui.RolloutState { return adminui.RolloutState(s) }

// TestOperatorPageDrawsEachRulesDistributionInABrowser drives chromium
// through the rollout section over a known state: the distribution is an
// SVG drawn by the server (the page carries no script), with the current
// limit and the suggestion as vertical lines in their order on the log
// axis, the would-blocks of the last day, a rule without data saying so,
// and the deny lists' counts.
func TestOperatorPageDrawsEachRulesDistributionInABrowser(t *testing.T) {
	ctx := browser(t)
	points := []adminui.SharePoint{{At: 1, Share: 1}, {At: 5, Share: 0.6}, {At: 10, Share: 0.3}, {At: 20, Share: 0.1},
		{At: 50, Share: 0.02}, {At: 100, Share: 0.004}, {At: 150, Share: 0.0008}, {At: 200, Share: 0}}
	page, err := adminui.New(adminui.Sources{
		Routes:  stateRoutes{{Name: "portal", PathPrefix: "/", Upstream: "http://127.0.0.1:1"}},
		Limiter: stateLimiter{Store: "redis", StoreState: "ok", Breaker: "closed"},
		Rollout: stateRollout{Span: 24 * time.Hour, MaxBlockedShare: 0.001, WouldBlocks: 4321,
			Rules: []adminui.RuleDistribution{
				{Rule: "api", Scope: "user", Mode: "observe", Limit: 300, Window: time.Minute, SubjectWindows: 12500, Points: points,
					LimitShare: 0, OverLimit: 0, Suggested: 150, SuggestedShare: 0.0008},
				{Rule: "burst", Scope: "ip", Mode: "enforce", Limit: 50, Window: 5 * time.Second, Note: "gcra counts only the requests that pass"},
			},
			Denied: []adminui.ReasonCount{{Reason: "scanners", Count: 17}}, DeniedSpan: 5 * time.Minute},
	}, adminui.Options{Token: operatorToken})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(page.Handler())
	t.Cleanup(srv.Close)
	base := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)

	do(t, ctx, "loading the overview", chromedp.Navigate(base+"/ui"))
	screenshot(t, ctx, "operator-rollout.png")
	text := textOf(t, ctx, chromedp.ID("rollout"))
	for _, want := range []string{"4321", "12500 subject-windows", "suggested 150", "limit 300", "gcra counts only the requests that pass", "scanners", "17"} {
		if !strings.Contains(text, want) {
			t.Errorf("rollout section lacks %q:\n%s", want, text)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, browserStep)
	defer cancel()
	scripts, err := chromedp.Run(sctx, chromedp.Evaluate[int](`document.scripts.length`))
	if err != nil {
		t.Fatal(err)
	}
	svg, err := chromedp.Run(sctx, chromedp.Evaluate[map[string]float64](`(() => {
			const s = document.querySelector('#dist-api svg.chart');
			const r = s.getBoundingClientRect();
			const x = sel => parseFloat(s.querySelector(sel).getAttribute('x1'));
			return {width: r.width, height: r.height, limit: x('line.limit'), suggested: x('line.suggested'),
				points: s.querySelector('polyline.distribution').points.numberOfItems,
				burstCharts: document.querySelectorAll('#dist-burst svg').length};
		})()`))
	if err != nil {
		t.Fatalf("reading the chart: %v", err)
	}
	pointsAttr, err := chromedp.Run(sctx, chromedp.Evaluate[string](`document.querySelector('#dist-api polyline.distribution').getAttribute('points')`))
	if err != nil {
		t.Fatal(err)
	}
	if scripts != 0 {
		t.Errorf("the page has %d scripts, want none", scripts)
	}
	if svg["width"] < 100 || svg["height"] < 100 {
		t.Errorf("chart rendered %vx%v, want a visible chart", svg["width"], svg["height"])
	}
	if int(svg["points"]) != len(points) {
		t.Errorf("the distribution line has %v points, want %d (%q)", svg["points"], len(points), pointsAttr)
	}
	if !(svg["suggested"] < svg["limit"]) {
		t.Errorf("suggested line at x=%v, limit at x=%v: 150 must be left of 300", svg["suggested"], svg["limit"])
	}
	if svg["burstCharts"] != 0 {
		t.Errorf("a rule without data has %v charts", svg["burstCharts"])
	}
	// The line descends: a higher limit never blocks a larger share.
	prevY := -1.0
	for _, p := range strings.Fields(pointsAttr) {
		_, ys, _ := strings.Cut(p, ",")
		y, err := strconv.ParseFloat(ys, 64)
		if err != nil {
			t.Fatalf("point %q: %v", p, err)
		}
		if y < prevY {
			t.Errorf("the line rises at %q", p)
		}
		prevY = y
	}
}
