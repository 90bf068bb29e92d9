package main

import (
	"fmt"
	"strings"
	"time"
)

// report renders the results as a Markdown table with ratios against nginx
// and the bare Go proxy, and the targets with PASS/MISS. missed is
// true when a target was missed.
func report(ts []*target, o options) (string, bool) {
	by := map[string]*target{}
	for _, t := range ts {
		if t.err == nil {
			by[t.name] = t
		}
	}
	rps := func(name string) float64 {
		if t := by[name]; t != nil {
			return t.rps()
		}
		return 0
	}
	p99 := func(name string) time.Duration {
		if t := by[name]; t != nil {
			return t.latency(0.99)
		}
		return 0
	}
	ratio := func(a, b float64) string {
		if a == 0 || b == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| target | req/s at saturation | × nginx | × bare Go | p50 at %d/s | p99 at %d/s | p99 added vs upstream |\n", o.rate, o.rate)
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|\n")
	for _, t := range ts {
		if t.err != nil {
			fmt.Fprintf(&b, "| %s | failed: %s | | | | | |\n", t.name, strings.ReplaceAll(t.err.Error(), "|", "/"))
			continue
		}
		added := "—"
		if t.name != "upstream" && by["upstream"] != nil {
			added = round2(p99(t.name) - p99("upstream")).String()
		}
		fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %v | %v | %s |\n", t.name, rps(t.name), ratio(rps(t.name), rps("nginx")),
			ratio(rps(t.name), rps("bare-go")), round2(t.latency(0.5)), round2(p99(t.name)), added)
	}
	type goal struct {
		what string
		ok   bool
		have bool
		got  string
	}
	goals := []goal{
		{"borda ≥ 0.95 × bare Go", rps("borda") >= 0.95*rps("bare-go"), rps("borda") > 0 && rps("bare-go") > 0, ratio(rps("borda"), rps("bare-go"))},
		{"borda-3rules ≥ 0.75 × bare Go", rps("borda-3rules") >= 0.75*rps("bare-go"), rps("borda-3rules") > 0 && rps("bare-go") > 0, ratio(rps("borda-3rules"), rps("bare-go"))},
		{"borda ≥ 0.5 × nginx", rps("borda") >= 0.5*rps("nginx"), rps("borda") > 0 && rps("nginx") > 0, ratio(rps("borda"), rps("nginx"))},
		{"borda p99 added ≤ 1 ms at 1 000/s", p99("borda")-p99("upstream") <= time.Millisecond, p99("borda") > 0 && p99("upstream") > 0, round2(p99("borda") - p99("upstream")).String()},
		{"borda-3rules p99 added ≤ 1 ms at 1 000/s", p99("borda-3rules")-p99("upstream") <= time.Millisecond, p99("borda-3rules") > 0 && p99("upstream") > 0, round2(p99("borda-3rules") - p99("upstream")).String()},
		{"borda (telemetry on) ≥ 0.97 × borda-notelemetry (issue 4)", rps("borda") >= 0.97*rps("borda-notelemetry"), rps("borda") > 0 && rps("borda-notelemetry") > 0, ratio(rps("borda"), rps("borda-notelemetry"))},
		{"borda-3rules ≥ 0.75 × borda (issue 7)", rps("borda-3rules") >= 0.75*rps("borda"), rps("borda-3rules") > 0 && rps("borda") > 0, ratio(rps("borda-3rules"), rps("borda"))},
		{"borda-3rules p99 − borda p99 ≤ 0.5 ms at 1 000/s (issue 7)", p99("borda-3rules")-p99("borda") <= 500*time.Microsecond, p99("borda-3rules") > 0 && p99("borda") > 0, round2(p99("borda-3rules") - p99("borda")).String()},
	}
	b.WriteString("\n| target | measured | |\n|---|---:|---|\n")
	missed := false
	for _, g := range goals {
		verdict := "not measured"
		switch {
		case !g.have:
			g.got = "—"
		case g.ok:
			verdict = "PASS"
		default:
			verdict, missed = "MISS", true
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", g.what, g.got, verdict)
	}
	return b.String(), missed
}
