package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/olp-edu/borda/configs"
)

// freshIDHeader is a delivery-id header whose value a shell computes at
// each run (a $(…) substitution), so the id is new every time.
var freshIDHeader = regexp.MustCompile(`(?i)-H ["'](Idempotency-Key|webhook-id|X-GitHub-Delivery): [^"']*\$\(`)

// TestDocExamplesPostWebhooksWithAFreshID (issue 23, item 2): a README
// example that POSTs a webhook with a fixed event id leaves it
// "forwarded" in a shared Redis for the retention TTL (7 days), and the
// next person's forwarder acks their event as a duplicate. Every curl
// that POSTs to a webhook path in README.md and docs/*.md sends a
// delivery-id header computed at each run.
func TestDocExamplesPostWebhooksWithAFreshID(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Join shell continuation lines, then look at each command.
		text := strings.ReplaceAll(string(b), "\\\n", " ")
		for n, line := range strings.Split(text, "\n") {
			if !strings.Contains(line, "curl") || !strings.Contains(line, "POST") || !strings.Contains(line, "/webhooks/") {
				continue
			}
			seen++
			if !freshIDHeader.MatchString(line) {
				t.Errorf("%s (command %d): a webhook POST without a fresh delivery id: %s", filepath.Base(f), n+1, strings.TrimSpace(line))
			}
		}
	}
	if seen == 0 {
		t.Fatal("no webhook POST example found: the test looks in the wrong place")
	}
}

// TestReadmeBurstLoopStartsAFreshWindow: the README's loop of 60 requests
// promised "50 × 200, then 429" right after a curl of the same client
// that had already counted, so it printed 49 × 200. The loop must follow
// a sleep of at least the burst rule's window, and promise the rule's
// limit (configs/local.yaml, the file the README runs).
func TestReadmeBurstLoopStartsAFreshWindow(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	local, err := configs.Load("../../configs/local.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var burst configs.Rule
	for _, r := range local.RateLimits.Rules {
		if r.Name == "burst" {
			burst = r
		}
	}
	lines := strings.Split(string(readme), "\n")
	for i, l := range lines {
		if !strings.Contains(l, "$(seq 60)") {
			continue
		}
		if want := fmt.Sprintf("# %d × 200, then %d × 429", burst.Limit, 60-burst.Limit); !strings.Contains(l, want) {
			t.Errorf("README loop promises something else than %q: %s", want, l)
		}
		var secs float64
		if i == 0 || !strings.HasPrefix(lines[i-1], "sleep ") {
			t.Fatalf("README loop not preceded by a sleep: %s", lines[i-1])
		}
		if _, err := fmt.Sscanf(strings.TrimPrefix(lines[i-1], "sleep "), "%g", &secs); err != nil || secs < burst.Window.D().Seconds() {
			t.Errorf("README sleeps %q before the loop, want at least the burst window %v", lines[i-1], burst.Window.D())
		}
		return
	}
	t.Fatal("README lost its burst loop ($(seq 60)): update this test with it")
}
