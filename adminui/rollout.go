package adminui

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"
)

// RolloutSource gives the rollout section of the overview
// (docs/rollout.md): each rule's distribution over the last day, with its
// current limit and the suggestion, and the deny lists' counts.
type RolloutSource interface {
	Rollout(ctx context.Context) RolloutState
}

// RolloutState is the rollout section's data.
type RolloutState struct {
	// Span is what Rules and WouldBlocks cover (the last day of
	// gateway_metrics); Note says why they are unknown (empty: read).
	Span time.Duration
	Note string
	// MaxBlockedShare is the share the suggestions are computed for
	// (borda limits suggest's default).
	MaxBlockedShare float64
	Rules           []RuleDistribution
	// WouldBlocks are the observe-mode would-blocks over Span, all
	// endpoints (gateway_metrics kind would_block).
	WouldBlocks int64
	// Denied are the deny lists' refusals over DeniedSpan, by list
	// (borda_denied_total).
	Denied     []ReasonCount
	DeniedSpan time.Duration
}

// RuleDistribution is one rule's distribution over the span.
type RuleDistribution struct {
	Rule, Scope, Mode string
	Limit             int64
	Window            time.Duration
	// SubjectWindows observed; Points the share a limit at each threshold
	// would have blocked (ascending thresholds). Empty: no data (Note).
	SubjectWindows int64
	Points         []SharePoint
	// LimitShare is the share the current limit blocks (read at the
	// largest threshold ≤ Limit); OverLimit the subject-windows past it.
	LimitShare float64
	OverLimit  int64
	// Suggested is the smallest threshold blocking at most the state's
	// MaxBlockedShare (0: none).
	Suggested      int64
	SuggestedShare float64
	Note           string
}

// SharePoint is one threshold and the share of subject-windows past it.
type SharePoint struct {
	At    int64
	Share float64
}

// Chart is a RuleDistribution drawn as an SVG (server-side: numbers
// only, readable without JavaScript): x the limit on a log scale, y the
// blocked share on a log scale from 100 % down to 0.01 %.
type Chart struct {
	Width, Height          int
	Left, Top, Right, Base float64 // plot area
	Line                   string  // polyline points
	XTicks, YTicks         []Tick
	Limit, Suggested       Marker
}

// Tick is an axis label at a position.
type Tick struct {
	Pos   float64
	Label string
}

// Marker is a vertical line at X (Show false: not drawn).
type Marker struct {
	Show  bool
	X     float64
	Label string
}

const (
	chartW, chartH = 560, 220
	chartL, chartT = 56.0, 12.0
	chartR, chartB = 540.0, 184.0
	minShare       = 1e-4
)

// chartOf lays out d's chart.
func chartOf(d RuleDistribution) Chart {
	c := Chart{Width: chartW, Height: chartH, Left: chartL, Top: chartT, Right: chartR, Base: chartB}
	maxAt := int64(10)
	for _, p := range d.Points {
		maxAt = max(maxAt, p.At)
	}
	maxAt = max(maxAt, d.Limit, d.Suggested)
	decades := math.Ceil(math.Log10(float64(maxAt)))
	if decades < 1 {
		decades = 1
	}
	x := func(at int64) float64 {
		return chartL + (chartR-chartL)*math.Log10(float64(max(at, 1)))/decades
	}
	y := func(share float64) float64 {
		share = max(share, minShare)
		return chartT + (chartB-chartT)*(-math.Log10(share))/(-math.Log10(minShare))
	}
	var pts []string
	for _, p := range d.Points {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.At), y(p.Share)))
	}
	c.Line = strings.Join(pts, " ")
	for e := 0; e <= int(decades); e++ {
		at := int64(math.Pow(10, float64(e)))
		c.XTicks = append(c.XTicks, Tick{Pos: x(at), Label: fmt.Sprint(at)})
	}
	for _, s := range []float64{1, 0.1, 0.01, 0.001, 0.0001} {
		c.YTicks = append(c.YTicks, Tick{Pos: y(s), Label: percent(s)})
	}
	if d.Limit > 0 {
		c.Limit = Marker{Show: true, X: x(d.Limit), Label: fmt.Sprintf("limit %d", d.Limit)}
	}
	if d.Suggested > 0 {
		c.Suggested = Marker{Show: true, X: x(d.Suggested), Label: fmt.Sprintf("suggested %d", d.Suggested)}
	}
	return c
}

// percent formats a share for a person: 12.5%, 0.1%, 0.01%.
func percent(s float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", s*100), "0"), ".") + "%"
}
