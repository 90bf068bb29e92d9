package harness

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/servicetest"
)

// Broker faults for bench/cmd/faults, driven through rabbitmqctl on the
// local RabbitMQ node (the one the benches use).

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
		out, err := servicetest.Rabbitmqctl("list_connections", "--no-table-headers", "pid", "client_properties")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, `"`+name+`"`) {
				_, err := servicetest.Rabbitmqctl("close_connection", strings.Fields(line)[0], reason)
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no broker connection named %s", name)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// MemoryAlarm raises a broker-wide memory alarm
// (servicetest.RaiseMemoryAlarm) holding the machine's broker lock
// (servicetest.BrokerLockPath) exclusively, so no test publishing on the
// same broker runs meanwhile. The returned clear restores the watermark
// and releases the lock; call it exactly once, also on error paths.
func MemoryAlarm() (func() error, error) {
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
	raised, err := servicetest.RaiseMemoryAlarm()
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		defer f.Close() // releases the flock
		return raised()
	}, nil
}

// DeleteQueue deletes queue (messages and all): its publishes become
// unroutable until something declares it again.
func DeleteQueue(amqpURL, queue string) error {
	return withChannel(amqpURL, func(ch *amqp.Channel) error {
		_, err := ch.QueueDelete(queue, false, false, false)
		return err
	})
}
