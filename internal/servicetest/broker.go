package servicetest

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Rabbitmqctl runs one rabbitmqctl command against the local node,
// bounded by 30 s, and returns its output; the error carries the output.
func Rabbitmqctl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "rabbitmqctl", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("rabbitmqctl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// defaultWatermark is RabbitMQ 3.x's vm_memory_high_watermark.
const defaultWatermark = "0.4"

// RaiseMemoryAlarm raises the broker-wide memory alarm (every publishing
// connection on the node is blocked) by setting vm_memory_high_watermark
// to 1e-7. The caller must hold the broker lock exclusively (BrokerAlarm
// in tests; bench/harness.MemoryAlarm in the benches). clear restores the
// watermark found, unless that was itself a leftover alarm (below 0.01,
// an aborted run's): then defaultWatermark. clear may be called more than
// once; only the first call acts.
func RaiseMemoryAlarm() (clear func() error, err error) {
	was := defaultWatermark
	if out, err := Rabbitmqctl("eval", "vm_memory_monitor:get_vm_memory_high_watermark()."); err == nil {
		if v, err := strconv.ParseFloat(strings.TrimSpace(out), 64); err == nil && v >= 0.01 && v <= 1 {
			was = strings.TrimSpace(out)
		}
	}
	var once sync.Once
	var clearErr error
	clear = func() error {
		once.Do(func() { _, clearErr = Rabbitmqctl("set_vm_memory_high_watermark", was) })
		return clearErr
	}
	if _, err := Rabbitmqctl("set_vm_memory_high_watermark", "0.0000001"); err != nil {
		_ = clear()
		return nil, err
	}
	return clear, nil
}

// MemoryAlarm is RaiseMemoryAlarm for a test: it takes the broker lock
// exclusively (BrokerAlarm), raises the alarm, and clears it when the test
// ends unless the returned clear did so first. It skips when rabbitmqctl
// is missing (fails when services are required).
func MemoryAlarm(t *testing.T) (clear func()) {
	t.Helper()
	if _, err := exec.LookPath("rabbitmqctl"); err != nil {
		if Required() {
			t.Fatalf("rabbitmqctl not found: %v", err)
		}
		t.Skip("rabbitmqctl not found")
	}
	BrokerAlarm(t)
	c, err := RaiseMemoryAlarm()
	if err != nil {
		t.Fatalf("raising the memory alarm: %v", err)
	}
	clear = func() {
		if err := c(); err != nil {
			t.Errorf("clearing the memory alarm: %v", err)
		}
	}
	t.Cleanup(clear)
	return clear
}
