package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/ratelimit"
	"github.com/olp-edu/borda/schema"
	"github.com/olp-edu/borda/telemetry"
)

// calibrationPeriod is the design's observation period (docs/rollout.md):
// suggest warns when its data covers less (to the tenth of a day).
const calibrationPeriod = 28 * 24 * time.Hour

// suggestSQL sums an environment's distribution counters since $2, by
// dimension ("{rule}:{threshold}"), with the first and last minute seen.
const suggestSQL = `
SELECT dimension, sum(count)::bigint, min(minute), max(minute)
FROM gateway_metrics
WHERE environment = $1 AND kind = 'distribution' AND minute >= $2
GROUP BY dimension`

// ruleSuggestion is one rule's line of `borda limits suggest` (the JSON
// object; docs/rollout.md).
type ruleSuggestion struct {
	Rule              string                     `json:"rule"`
	Scope             string                     `json:"scope"`
	Mode              string                     `json:"mode"`
	Algorithm         string                     `json:"algorithm"`
	Limit             int64                      `json:"limit"`
	Window            string                     `json:"window"`
	SubjectWindows    int64                      `json:"subject_windows"`
	LimitBlockedShare float64                    `json:"limit_blocked_share"`
	LimitShareAt      int64                      `json:"limit_share_at"`
	Thresholds        []ratelimit.ThresholdShare `json:"thresholds"`
	SuggestedLimit    *int64                     `json:"suggested_limit"`
	SuggestedShare    float64                    `json:"suggested_blocked_share"`
	Days              float64                    `json:"days"`
	First             *time.Time                 `json:"first,omitempty"`
	Last              *time.Time                 `json:"last,omitempty"`
	Notes             []string                   `json:"notes,omitempty"`
}

// runLimitsSuggest is `borda limits suggest`: from the distribution
// counters in gateway_metrics, per rule, the subject-windows observed, the
// share each threshold would have blocked, the share the current limit
// blocks, and the smallest threshold blocking at most --max-blocked-share;
// then the YAML change. Exit 0 (warnings included), 1 when the database
// fails, 2 for bad flags or config.
func runLimitsSuggest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, cfgPath := newFlags("limits suggest", stderr)
	only := fs.String("rule", "", "only this rule (rate_limits.rules[].name)")
	since := fs.String("since", "28d", "the period read, back from now (e.g. 28d, 72h)")
	maxShare := fs.Float64("max-blocked-share", 0.001, "the largest share of subject-windows a suggested limit may block (0 ≤ share < 1)")
	format := fs.String("format", "table", "table or json")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg, code, ok := loadConfig(*cfgPath, stderr)
	if !ok {
		return code
	}
	var problems []string
	period, err := parseSince(*since)
	if err != nil {
		problems = append(problems, "--since: "+err.Error())
	}
	if math.IsNaN(*maxShare) || *maxShare < 0 || *maxShare >= 1 {
		problems = append(problems, "--max-blocked-share: must be at least 0 and below 1")
	}
	if *format != "table" && *format != "json" {
		problems = append(problems, fmt.Sprintf("--format %q: want table or json", *format))
	}
	if *only != "" && !slices.Contains(ruleNames(cfg), *only) {
		problems = append(problems, fmt.Sprintf("--rule %q: not a rule in rate_limits.rules", *only))
	}
	if cfg.Database.URL == "" {
		problems = append(problems, "database.url (or DATABASE_URL) is required: the distribution is in gateway_metrics")
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(stderr, "borda limits suggest: "+p)
		}
		return 2
	}
	pool, err := pgxpool.New(ctx, cfg.Database.URL.Reveal())
	if err != nil {
		fmt.Fprintf(stderr, "borda limits suggest: connecting to postgresql: %v\n", err)
		return 2
	}
	defer pool.Close()
	now := time.Now()
	dists, spans, err := readDistributions(ctx, pool, cfg.Environment, now.Add(-period))
	if err != nil {
		fmt.Fprintf(stderr, "borda limits suggest: %v\n", schema.Hint(err))
		return 1
	}
	var out []ruleSuggestion
	for _, r := range cfg.RateLimits.Rules {
		if *only != "" && r.Name != *only {
			continue
		}
		out = append(out, suggestRule(r, dists[r.Name], spans[r.Name], *maxShare))
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if out == nil {
			out = []ruleSuggestion{}
		}
		_ = enc.Encode(out)
		return 0
	}
	writeSuggestTable(stdout, out, *since, *maxShare)
	return 0
}

// span is the first and last minute a rule's counters cover.
type span struct{ first, last time.Time }

// readDistributions sums the distribution counters of environment since
// from, by rule.
func readDistributions(ctx context.Context, pool *pgxpool.Pool, environment string, from time.Time) (map[string]ratelimit.Distribution, map[string]span, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rows, err := pool.Query(ctx, suggestSQL, environment, from)
	if err != nil {
		return nil, nil, fmt.Errorf("reading gateway_metrics: %w", err)
	}
	defer rows.Close()
	dists := map[string]ratelimit.Distribution{}
	spans := map[string]span{}
	for rows.Next() {
		var dim string
		var n int64
		var first, last time.Time
		if err := rows.Scan(&dim, &n, &first, &last); err != nil {
			return nil, nil, fmt.Errorf("reading gateway_metrics: %w", err)
		}
		rule, at, ok := telemetry.ParseDistribution(dim)
		if !ok {
			continue
		}
		d, ok := dists[rule]
		if !ok {
			d = ratelimit.Distribution{Past: map[int64]int64{}}
			dists[rule] = d
		}
		d.Past[at] += n
		s, ok := spans[rule]
		if !ok || first.Before(s.first) {
			s.first = first
		}
		if last.After(s.last) {
			s.last = last
		}
		spans[rule] = s
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("reading gateway_metrics: %w", err)
	}
	return dists, spans, nil
}

// suggestRule computes one rule's suggestion.
func suggestRule(r configs.Rule, d ratelimit.Distribution, sp span, maxShare float64) ruleSuggestion {
	s := ruleSuggestion{
		Rule: r.Name, Scope: r.Scope, Mode: orDefault(r.Mode, "enforce"), Algorithm: orDefault(r.Algorithm, "fixed_window"),
		Limit: r.Limit, Window: r.Window.D().String(), Thresholds: []ratelimit.ThresholdShare{},
	}
	if s.Algorithm != "fixed_window" {
		s.Notes = append(s.Notes, s.Algorithm+" counts only the requests that pass: no distribution above the limit is kept (use fixed_window in observe mode to calibrate)")
		return s
	}
	if s.Mode == "off" {
		s.Notes = append(s.Notes, "mode off: not counted")
		return s
	}
	if d.Past == nil || d.SubjectWindows() == 0 {
		s.Notes = append(s.Notes, "no distribution data in the period (telemetry on, `borda aggregate` hourly?)")
		return s
	}
	s.SubjectWindows = d.SubjectWindows()
	s.Thresholds = d.Shares()
	s.LimitBlockedShare, s.LimitShareAt = d.BlockedShare(r.Limit)
	if !sp.first.IsZero() {
		first, last := sp.first.UTC(), sp.last.UTC()
		s.First, s.Last = &first, &last
		s.Days = math.Round(sp.last.Add(time.Minute).Sub(sp.first).Hours()/24*10) / 10
	}
	if s.Days < calibrationPeriod.Hours()/24 { // to the tenth of a day it prints

		s.Notes = append(s.Notes, fmt.Sprintf("only %.1f days of data: the rollout calibrates on four weeks (docs/rollout.md)", s.Days))
	}
	if lim, ok := d.Suggest(maxShare); ok {
		s.SuggestedLimit = &lim
		s.SuggestedShare, _ = d.BlockedShare(lim)
		if s.Mode == "enforce" && lim > r.Limit {
			s.Notes = append(s.Notes, "in enforce, blocked requests stop counting (local deny cache): the counts above the limit are low, put the rule in observe mode to measure past it")
		}
	} else {
		s.Notes = append(s.Notes, fmt.Sprintf("no threshold up to %d blocks at most that share", ratelimit.DistributionThresholds[len(ratelimit.DistributionThresholds)-1]))
	}
	return s
}

// writeSuggestTable prints the suggestions, the thresholds of each rule
// and the YAML change.
func writeSuggestTable(w io.Writer, out []ruleSuggestion, since string, maxShare float64) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tSCOPE\tMODE\tLIMIT\tSUBJECT-WINDOWS\tBLOCKED AT LIMIT\tSUGGESTED\tBLOCKED AT SUGGESTED\tDAYS")
	for _, s := range out {
		sug := "-"
		sugShare := "-"
		if s.SuggestedLimit != nil {
			sug = fmt.Sprint(*s.SuggestedLimit)
			sugShare = pct(s.SuggestedShare)
		}
		atLimit := "-"
		if s.SubjectWindows > 0 {
			atLimit = pct(s.LimitBlockedShare)
			if s.LimitShareAt != s.Limit {
				atLimit = "≤ " + atLimit + fmt.Sprintf(" (at %d)", s.LimitShareAt)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d / %s\t%d\t%s\t%s\t%s\t%.1f\n", s.Rule, s.Scope, s.Mode, s.Limit, s.Window, s.SubjectWindows, atLimit, sug, sugShare, s.Days)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\n(period --since %s; suggested: the smallest threshold blocking at most %s of subject-windows)\n", since, pct(maxShare))
	for _, s := range out {
		if len(s.Thresholds) > 0 {
			fmt.Fprintf(w, "\n%s: share of subject-windows a limit would block\n", s.Rule)
			var parts []string
			for _, t := range s.Thresholds {
				parts = append(parts, fmt.Sprintf("%d: %s", t.At, pct(t.BlockedShare)))
			}
			fmt.Fprintln(w, "  "+strings.Join(parts, ", "))
		}
		for _, n := range s.Notes {
			fmt.Fprintf(w, "warning: %s: %s\n", s.Rule, n)
		}
	}
	var change []ruleSuggestion
	for _, s := range out {
		if s.SuggestedLimit != nil && *s.SuggestedLimit != s.Limit {
			change = append(change, s)
		}
	}
	if len(change) == 0 {
		fmt.Fprintln(w, "\nno change to suggest")
		return
	}
	fmt.Fprintln(w, "\nYAML change (rate_limits.rules):")
	for _, s := range change {
		fmt.Fprintf(w, "  - name: %s\n    limit: %d  # was %d; blocks %s of %d subject-windows (was %s)\n",
			s.Rule, *s.SuggestedLimit, s.Limit, pct(s.SuggestedShare), s.SubjectWindows, pct(s.LimitBlockedShare))
	}
}

// pct formats a share as a percentage with enough digits for 0.1 %.
func pct(share float64) string {
	return fmt.Sprintf("%.3g%%", share*100)
}

// parseSince parses a period: a Go duration or a whole number of days
// ("28d").
func parseSince(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		if _, err := fmt.Sscanf(d, "%d", &n); err != nil || n < 1 || fmt.Sprint(n) != d || n > 3660 {
			return 0, fmt.Errorf("%q: want a whole number of days (28d) or a duration (72h)", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q: want a whole number of days (28d) or a duration (72h)", s)
	}
	return d, nil
}
