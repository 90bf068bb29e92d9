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

// TestReasonOfAQueueThatMayDrop: the queue guard's ErrQueueMayDrop (a
// broker policy makes a queue drop at its limit, and it is near it)
// answers 503 QUEUE_MAY_DROP, its own reason.
func TestReasonOfAQueueThatMayDrop(t *testing.T) {
	if got := Reason(fmt.Errorf("%w: q", publish.ErrQueueMayDrop)); got != "QUEUE_MAY_DROP" {
		t.Errorf("Reason = %q", got)
	}
}
