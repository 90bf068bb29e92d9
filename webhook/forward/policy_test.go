package forward

import (
	"testing"
	"time"
)

func TestPolicy_Next(t *testing.T) {
	t.Parallel()
	p := Policy{Delays: []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour}}
	tests := []struct {
		name       string
		failures   int
		retryAfter time.Duration
		rung       int
		ok         bool
	}{
		{"first failure → 1m", 1, 0, 0, true},
		{"second → 5m", 2, 0, 1, true},
		{"fourth → 60m", 4, 0, 3, true},
		{"after the 60m rung → DLQ", 5, 0, 0, false},
		{"Retry-After shorter than the rung is ignored", 1, 30 * time.Second, 0, true},
		{"Retry-After 2m → first rung ≥ it (5m)", 1, 2 * time.Minute, 1, true},
		{"Retry-After 15m exactly → 15m", 2, 15 * time.Minute, 2, true},
		{"Retry-After beyond the ladder → last rung", 1, 3 * time.Hour, 3, true},
		{"zero failures counts as the first", 0, 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rung, ok := p.Next(tt.failures, tt.retryAfter)
			if rung != tt.rung || ok != tt.ok {
				t.Errorf("Next(%d, %s) = %d, %v; want %d, %v", tt.failures, tt.retryAfter, rung, ok, tt.rung, tt.ok)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 6, 50, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"120", 2 * time.Minute},
		{" 7 ", 7 * time.Second},
		{"0", 0},
		{"-5", 0},
		{"soon", 0},
		{"Thu, 01 Jan 2026 07:00:00 GMT", 10 * time.Minute},
		{"Thu, 01 Jan 2026 06:00:00 GMT", 0},
		{"99999999999999999999", 0},
		{"31536000", 365 * 24 * time.Hour}, // a year: the bound, kept
		{"31536001", 0},                    // past a year: a broken header
	}
	for _, tt := range tests {
		if got := ParseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("ParseRetryAfter(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"", "120", "Thu, 01 Jan 2026 07:00:00 GMT", "-1", "1e9"} {
		f.Add(s)
	}
	now := time.Date(2026, 1, 1, 6, 50, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		if d := ParseRetryAfter(s, now); d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %s, negative", s, d)
		}
	})
}
