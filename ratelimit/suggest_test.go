package ratelimit

import "testing"

// Suggest picks the smallest threshold blocking at most the share, and
// BlockedShare reads a limit between thresholds at the one below it.
func TestDistribution_SuggestAndBlockedShare(t *testing.T) {
	t.Parallel()
	// 1000 subject-windows: 100 went past 20, 10 past 30, 1 past 50.
	counts := make([]int64, 0, 1000)
	for i := range 1000 {
		switch {
		case i < 1:
			counts = append(counts, 60)
		case i < 10:
			counts = append(counts, 40)
		case i < 100:
			counts = append(counts, 25)
		default:
			counts = append(counts, 3)
		}
	}
	d := Distribution{Past: expectedDist(counts)}
	if n := d.SubjectWindows(); n != 1000 {
		t.Fatalf("SubjectWindows = %d", n)
	}
	for _, tt := range []struct {
		share float64
		want  int64
	}{{0.1, 3}, {0.0999, 25}, {0.01, 25}, {0.009, 40}, {0.001, 40}, {0, 60}} {
		if got, ok := d.Suggest(tt.share); !ok || got != tt.want {
			t.Errorf("Suggest(%v) = %d, %v; want %d", tt.share, got, ok, tt.want)
		}
	}
	if s, at := d.BlockedShare(33); at != 30 || s != 0.01 {
		t.Errorf("BlockedShare(33) = %v at %d, want 0.01 at 30", s, at)
	}
	if _, ok := (Distribution{}).Suggest(0.1); ok {
		t.Error("Suggest on no data is ok")
	}
	sh := d.Shares()
	if last := sh[len(sh)-1]; last.Past != 0 || last.At != 60 {
		t.Errorf("Shares ends at %+v, want the first threshold nobody passed (60)", last)
	}
	for _, s := range sh {
		if s.BlockedShare != float64(s.Past)/1000 {
			t.Errorf("Shares at %d: blocked share %v of %d past, want %v", s.At, s.BlockedShare, s.Past, float64(s.Past)/1000)
		}
	}
	if sh[0].At != 1 || sh[0].BlockedShare != 1 {
		t.Errorf("Shares starts at %+v, want threshold 1 with every subject-window past it", sh[0])
	}
	if s, at := d.BlockedShare(1); s != 1 || at != 1 {
		t.Errorf("BlockedShare(1) = %v at %d, want 1 at 1 (every subject-window went past 1)", s, at)
	}
	if s, at := d.BlockedShare(0); s != 0 || at != 0 {
		t.Errorf("BlockedShare(0) = %v at %d, want 0 at 0 (not a limit)", s, at)
	}
	if s, at := (Distribution{}).BlockedShare(5); s != 0 || at != 0 {
		t.Errorf("BlockedShare on no data = %v at %d, want 0 at 0", s, at)
	}
	if got := (Distribution{}).Shares(); got != nil {
		t.Errorf("Shares on no data = %v, want none", got)
	}
}
