package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/servicetest"
)

// Broker faults for bench/cmd/faults, driven through rabbitmqctl on the
// local RabbitMQ node (the one the benches use).

// rabbitmqctl runs one rabbitmqctl command, bounded by 30 s.
func rabbitmqctl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "rabbitmqctl", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("rabbitmqctl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// PublisherConnectionName is the client-provided name of the webhook
// publisher's connection of the borda process pid (webhook.NewPublisher's
// default: borda-webhook-publisher/<hostname>/<pid>).
func PublisherConnectionName(pid int) string {
	host, _ := os.Hostname()
	return "borda-webhook-publisher/" + host + "/" + strconv.Itoa(pid)
}

// CloseBrokerConnection makes the broker close the connection named name
// (rabbitmqctl close_connection), waiting up to 10 s for it to appear.
func CloseBrokerConnection(name, reason string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := rabbitmqctl("list_connections", "--no-table-headers", "pid", "client_properties")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, `"`+name+`"`) {
				_, err := rabbitmqctl("close_connection", strings.Fields(line)[0], reason)
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no broker connection named %s", name)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// MemoryAlarm raises a broker-wide memory alarm (every publishing
// connection is blocked) by setting vm_memory_high_watermark to a tiny
// value, holding the machine's broker lock (servicetest.BrokerLockPath)
// exclusively so no test publishing on the same broker runs meanwhile.
// The returned clear restores the watermark it found and releases the
// lock; call it exactly once, also on error paths.
func MemoryAlarm() (clear func() error, err error) {
	f, err := os.OpenFile(servicetest.BrokerLockPath(), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("opening the broker lock: %w", err)
	}
	// Wait for the tests holding it shared, but not for ever (a test
	// binary stuck elsewhere must not hang the bench).
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if err != syscall.EWOULDBLOCK || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("taking the broker lock %s: %w", servicetest.BrokerLockPath(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Restore what was there, unless that is itself a leftover alarm (an
	// aborted run's 1e-7): then RabbitMQ 3.x's default, 0.4.
	was := "0.4"
	if out, err := rabbitmqctl("eval", "vm_memory_monitor:get_vm_memory_high_watermark()."); err == nil {
		if v, err := strconv.ParseFloat(strings.TrimSpace(out), 64); err == nil && v >= 0.01 && v <= 1 {
			was = strings.TrimSpace(out)
		}
	}
	clear = func() error {
		defer f.Close() // releases the flock
		_, err := rabbitmqctl("set_vm_memory_high_watermark", was)
		return err
	}
	if _, err := rabbitmqctl("set_vm_memory_high_watermark", "0.0000001"); err != nil {
		_ = clear()
		return nil, err
	}
	return clear, nil
}

// DeleteQueue deletes queue (messages and all): its publishes become
// unroutable until something declares it again.
func DeleteQueue(amqpURL, queue string) error {
	return withChannel(amqpURL, func(ch *amqp.Channel) error {
		_, err := ch.QueueDelete(queue, false, false, false)
		return err
	})
}
