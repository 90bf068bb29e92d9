package harness

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/olp-edu/borda/internal/servicetest"
)

func watermark(t *testing.T) float64 {
	t.Helper()
	out, err := servicetest.Rabbitmqctl("eval", "vm_memory_monitor:get_vm_memory_high_watermark().")
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
	if err != nil {
		t.Fatalf("watermark %q: %v", out, err)
	}
	return v
}

// The first version of MemoryAlarm returned a clear that called itself
// (a closure over the named result it was assigned to): the faults bench
// died of a stack overflow with the shared broker still alarmed. This
// takes the broker lock itself, so it must not call servicetest.AMQPURL
// (that lock, held shared by this process, would make it wait).
func TestMemoryAlarmClearRestoresTheWatermark(t *testing.T) {
	if _, err := exec.LookPath("rabbitmqctl"); err != nil {
		if servicetest.Required() {
			t.Fatal("rabbitmqctl not found")
		}
		t.Skip("rabbitmqctl not found")
	}
	if _, err := servicetest.Rabbitmqctl("status"); err != nil {
		if servicetest.Required() {
			t.Fatalf("RabbitMQ unreachable: %v", err)
		}
		t.Skipf("RabbitMQ unreachable: %v", err)
	}
	before := watermark(t)
	clear, err := MemoryAlarm()
	if err != nil {
		t.Fatal(err)
	}
	cleared := false
	t.Cleanup(func() {
		if !cleared {
			_ = clear()
		}
	})
	if v := watermark(t); v > 0.001 {
		t.Errorf("watermark %g with the alarm raised, want 1e-7", v)
	}
	if err := clear(); err != nil {
		t.Fatal(err)
	}
	cleared = true
	if v := watermark(t); v != before && !(before < 0.01 && v == 0.4) {
		t.Errorf("watermark %g after clear, want %g", v, before)
	}
}
