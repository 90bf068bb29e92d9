package prometheus_test

import (
	"os"
	"regexp"
	"testing"
)

// TestEveryAlertValueIsHumanized: every {{ $value }} in an alert text goes
// through humanize, humanizePercentage, humanizeDuration or printf (the DLQ
// summary read "grew by 3.0749999999999997 message(s)"). The rendered texts
// are pinned by promtool's unit tests (alerts_test.yml, .ci/run).
func TestEveryAlertValueIsHumanized(t *testing.T) {
	b, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	action := regexp.MustCompile(`\{\{[^}]*\$value[^}]*\}\}`)
	ok := regexp.MustCompile(`\$value\s*\|\s*(humanize|humanizePercentage|humanizeDuration|printf)\b`)
	n := 0
	for _, a := range action.FindAll(b, -1) {
		n++
		if !ok.Match(a) {
			t.Errorf("alert text shows a raw value: %s", a)
		}
	}
	if n == 0 {
		t.Fatal("no {{ $value }} found in alerts.yml")
	}
}
