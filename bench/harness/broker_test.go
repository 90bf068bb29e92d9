package harness

import (
	"strconv"
	"strings"
	"testing"

	"github.com/olp-edu/borda/internal/brokernode"
	"github.com/olp-edu/borda/internal/servicetest"
)

func watermark(t *testing.T, node *brokernode.Node) float64 {
	t.Helper()
	out, err := node.Ctl("eval", "vm_memory_monitor:get_vm_memory_high_watermark().")
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
// died of a stack overflow with the broker still alarmed. The alarm is
// node-wide, so this runs on a private node of its own.
func TestMemoryAlarmClearRestoresTheWatermark(t *testing.T) {
	node := servicetest.PrivateBrokerAlone(t)
	clear, err := MemoryAlarm(node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = clear() })
	if v := watermark(t, node); v > 0.001 {
		t.Errorf("watermark %g with the alarm raised, want 1e-7", v)
	}
	if err := clear(); err != nil {
		t.Fatal(err)
	}
	if err := clear(); err != nil { // a second call is harmless
		t.Fatal(err)
	}
	if v := watermark(t, node); v != 0.4 {
		t.Errorf("watermark %g after clear, want 0.4", v)
	}
}
