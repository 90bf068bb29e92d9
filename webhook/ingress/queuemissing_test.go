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

// TestReasonOfAnUnboundForwardQueue (attack A48): the publisher's
// ErrForwardUnbound answers 503 FORWARD_UNBOUND, its own reason.
func TestReasonOfAnUnboundForwardQueue(t *testing.T) {
	if got := Reason(fmt.Errorf("%w: q", publish.ErrForwardUnbound)); got != "FORWARD_UNBOUND" {
		t.Errorf("Reason = %q", got)
	}
}
