package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestHostileWebhookOverflowOnceDoesNotStickToTheReplica (attack S04): a
// max-length policy (2) on the quorum forward queue, `borda forward` not
// running, POSTs past the limit (503 NACK); then the policy is cleared and
// `borda forward` drains the queue. Before: the replica that published
// during the overflow answered 503 NACK to every webhook for minutes
// (RabbitMQ 3.10 keeps a quorum queue's reject-publish state on the
// publishing channel, and Borda kept its channels), while /readyz said
// ready. Now the nacked channel is replaced (at most one per
// confirm_timeout): once the queue has room the same replica answers 200
// again, and the events reach the legacy endpoint.
func TestHostileWebhookOverflowOnceDoesNotStickToTheReplica(t *testing.T) {
	r := newLossRig(t)
	const fwd = "yzex-connect-whatsapp-legacy-forward-queue"
	r.v.SetPolicy("cap", "^"+fwd+"$", `{"max-length":2}`)
	var accepted []string
	refused := 0
	for i := 0; refused < 3; i++ {
		if i > 40 {
			t.Fatalf("the max-length policy never refused a webhook")
		}
		id := "ovf" + strconv.Itoa(i)
		code, body := r.post(t, id)
		switch {
		case code == 200 && strings.Contains(body, "PUBLISHED_CONFIRMED"):
			accepted = append(accepted, id)
		case code == 503 && strings.Contains(body, "NACK"):
			refused++
		default:
			t.Fatalf("event %s during the overflow: %d %s", id, code, body)
		}
	}
	r.v.ClearPolicy("cap")
	startForward(t, r.config, r.env...)
	r.delivered(t, accepted)
	for deadline := time.Now().Add(30 * time.Second); r.count(t, fwd) != 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("forward queue not drained")
		}
	}
	// confirm_timeout is 3 s by default: one replacement, then 200s.
	var after []string
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; len(after) < 5; i++ {
		id := "after" + strconv.Itoa(i)
		code, body := r.post(t, id)
		switch {
		case code == 200 && strings.Contains(body, "PUBLISHED_CONFIRMED"):
			after = append(after, id)
		case code == 503 && strings.Contains(body, "NACK") && len(after) == 0:
			if time.Now().After(deadline) {
				t.Fatalf("the queue is empty and has no policy, yet the replica still answers 503 NACK %s later (the overflow stuck to its channels)", 10*time.Second)
			}
			time.Sleep(100 * time.Millisecond)
		default:
			t.Fatalf("event %s after the queue drained: %d %s", id, code, body)
		}
	}
	r.delivered(t, after)
}
