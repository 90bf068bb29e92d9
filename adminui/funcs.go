package adminui

import (
	"fmt"
	"html/template"
	"strings"
	"time"
)

func (p *Page) funcs() template.FuncMap {
	return template.FuncMap{
		"dur":  duration,
		"ts":   timestamp,
		"ago":  func(t time.Time) string { return ago(p.opts.Clock.Now(), t) },
		"join": strings.Join,
		"factor": func(f float64) string {
			return fmt.Sprintf("×%g", f)
		},
		"in": func(t time.Time) string { return duration(t.Sub(p.opts.Clock.Now())) },
		"ms": func(d time.Duration) string {
			return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
		},
		"stateClass": stateClass,
		"chart":      chartOf,
		"pct":        percent,
		"add":        func(a, b float64) float64 { return a + b },
		"sub":        func(a, b float64) float64 { return a - b },
	}
}

// duration is d rounded for a person: 42s, 3m12s, 2h05m, 3d4h.
func duration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	d = d.Round(time.Hour)
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

func timestamp(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return duration(now.Sub(t)) + " ago"
}

// stateClass is the CSS class of a state word: ok, warn or bad.
func stateClass(s string) string {
	switch s {
	case "ok", "closed", "connected", "consuming", "enforce", "none", "republished":
		return "ok"
	case "half-open", "observe", "blocked", "unknown":
		return "warn"
	case "open", "down", "failing":
		return "bad"
	}
	return ""
}
