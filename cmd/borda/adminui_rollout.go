package main

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/olp-edu/borda/adminui"
	"github.com/olp-edu/borda/adminui/promwindow"
	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/internal/redact"
	"github.com/olp-edu/borda/ratelimit"
)

// rolloutSpan is what the page's distributions and would-block totals
// cover: the last day of gateway_metrics.
const rolloutSpan = 24 * time.Hour

// defaultMaxBlockedShare is `borda limits suggest`'s default, which the
// page's suggestions use too.
const defaultMaxBlockedShare = 0.001

// wouldBlocksSQL sums an environment's would-blocks since $2.
const wouldBlocksSQL = `
SELECT coalesce(sum(count), 0)::bigint FROM gateway_metrics
WHERE environment = $1 AND kind = 'would_block' AND minute >= $2`

// opsRollout reads the rollout section: each rule's distribution and the
// would-blocks of the last day from gateway_metrics, and the deny lists'
// refusals over the last minutes.
type opsRollout struct {
	cfg    *atomic.Pointer[configs.Config]
	db     *pgxpool.Pool // nil: no database.url
	window *promwindow.Window
	now    func() time.Time
}

func (o *opsRollout) Rollout(ctx context.Context) adminui.RolloutState {
	cfg := o.cfg.Load()
	st := adminui.RolloutState{MaxBlockedShare: defaultMaxBlockedShare}
	denied, span := o.window.DeltaBy("borda_denied_total", "list", nil, opsSpan)
	st.DeniedSpan = span
	for list, n := range denied {
		if n > 0 {
			st.Denied = append(st.Denied, adminui.ReasonCount{Reason: list, Count: int64(n)})
		}
	}
	slices.SortFunc(st.Denied, func(a, b adminui.ReasonCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Reason, b.Reason))
	})
	if o.db == nil {
		st.Note = "unknown: the distributions are read from PostgreSQL gateway_metrics (database.url), and this gateway has none"
		return st
	}
	now := time.Now()
	if o.now != nil {
		now = o.now()
	}
	from := now.Add(-rolloutSpan)
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	dists, _, err := readDistributions(cctx, o.db, cfg.Environment, from)
	if err == nil {
		err = o.db.QueryRow(cctx, wouldBlocksSQL, cfg.Environment, from).Scan(&st.WouldBlocks)
	}
	if err != nil {
		st.Note = "unknown: PostgreSQL did not answer (" + redact.URLs(err.Error()) + ")"
		return st
	}
	st.Span = rolloutSpan
	for _, r := range cfg.RateLimits.Rules {
		st.Rules = append(st.Rules, ruleDistribution(r, dists[r.Name], st.MaxBlockedShare))
	}
	return st
}

// ruleDistribution is the page's view of suggestRule.
func ruleDistribution(r configs.Rule, d ratelimit.Distribution, maxShare float64) adminui.RuleDistribution {
	s := suggestRule(r, d, span{}, maxShare)
	rd := adminui.RuleDistribution{Rule: r.Name, Scope: r.Scope, Mode: s.Mode, Limit: r.Limit, Window: r.Window.D(), SubjectWindows: s.SubjectWindows}
	for _, t := range s.Thresholds {
		rd.Points = append(rd.Points, adminui.SharePoint{At: t.At, Share: t.BlockedShare})
	}
	if s.SubjectWindows > 0 {
		rd.LimitShare = s.LimitBlockedShare
		rd.OverLimit = d.Past[s.LimitShareAt]
	}
	if s.SuggestedLimit != nil {
		rd.Suggested, rd.SuggestedShare = *s.SuggestedLimit, s.SuggestedShare
	}
	for _, n := range s.Notes {
		if !strings.Contains(n, "four weeks") { // the page shows a day: not a warning here
			rd.Note = n
		}
	}
	return rd
}
