package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
