package forward

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The source label is message data: the first maxSourceLabels distinct
// values are kept, every later one counts as "other", and a value in use
// stays itself.
func TestSourceLabelKeepsAtMostMaxSourceLabelsValues(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxSourceLabels {
		s := fmt.Sprint("src-", i)
		if got := m.sourceLabel(s); got != s {
			t.Fatalf("source %d of %d: label %q, want its own", i+1, maxSourceLabels, got)
		}
	}
	if got := m.sourceLabel("one-too-many"); got != "other" {
		t.Errorf("source %d: label %q, want other", maxSourceLabels+1, got)
	}
	if got := m.sourceLabel("src-0"); got != "src-0" {
		t.Errorf("a source in use: label %q, want its own", got)
	}
}

// newMetrics refuses a registry that already holds its metrics, naming
// every collision (one error per metric, not the first alone).
func TestNewMetricsReportsEveryCollision(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := newMetrics(reg); err != nil {
		t.Fatal(err)
	}
	_, err := newMetrics(reg)
	if err == nil {
		t.Fatal("newMetrics on a registry that holds its metrics = nil")
	}
	if n := strings.Count(err.Error(), "duplicate metrics collector registration attempted"); n != 11 {
		t.Errorf("%d collisions reported, want 11 (every collector): %v", n, err)
	}
}
