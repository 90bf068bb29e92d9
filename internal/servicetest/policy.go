package servicetest

import (
	"fmt"
	"os/exec"
	"regexp"
	"testing"
)

// DeliveryLimitPolicy applies a RabbitMQ policy named after the test that
// sets "delivery-limit" to limit on every queue whose name starts with
// prefix (and only those: the pattern is ^QuoteMeta(prefix)), as RabbitMQ 4
// does by default (20) on every quorum queue; on RabbitMQ 3.10+ the policy
// takes effect on quorum queues. The policy is cleared when the test ends.
// It skips when rabbitmqctl is missing (fails when services are required).
func DeliveryLimitPolicy(t testing.TB, prefix string, limit int) {
	t.Helper()
	if _, err := exec.LookPath("rabbitmqctl"); err != nil {
		if Required() {
			t.Fatalf("rabbitmqctl not found: %v", err)
		}
		t.Skip("rabbitmqctl not found")
	}
	name := "borda-test-dl-" + prefix
	pattern := "^" + regexp.QuoteMeta(prefix)
	if _, err := Rabbitmqctl("set_policy", "--apply-to", "queues", "--priority", "900", name, pattern,
		fmt.Sprintf(`{"delivery-limit":%d}`, limit)); err != nil {
		t.Fatalf("setting the delivery-limit policy: %v", err)
	}
	t.Cleanup(func() {
		if _, err := Rabbitmqctl("clear_policy", name); err != nil {
			t.Errorf("clearing the delivery-limit policy: %v", err)
		}
	})
}
