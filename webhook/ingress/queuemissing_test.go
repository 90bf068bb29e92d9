package ingress

import (
	"fmt"
	"testing"

	"github.com/olp-edu/borda/webhook/publish"
)

// TestReasonOfAMissingForwardQueue: the publisher's ErrQueueMissing
// answers 503 FORWARD_QUEUE_MISSING, its own reason (issue 23, item 3).
func TestReasonOfAMissingForwardQueue(t *testing.T) {
	if got := Reason(fmt.Errorf("%w: q", publish.ErrQueueMissing)); got != "FORWARD_QUEUE_MISSING" {
		t.Errorf("Reason = %q", got)
	}
}
