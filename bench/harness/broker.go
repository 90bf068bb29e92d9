package harness

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/brokernode"
)

// Broker faults for bench/cmd/faults, driven through rabbitmqctl on the
// bench's private RabbitMQ node (internal/brokernode): a memory alarm or a
// closed connection is node-wide or touches other clients' state, so it is
// never done to the shared broker.

// PublisherConnectionName is the client-provided name of the webhook
// publisher's connection of the borda process pid (webhook.NewPublisher's
// default: borda-webhook-publisher/<hostname>/<pid>).
func PublisherConnectionName(pid int) string {
	host, _ := os.Hostname()
	return "borda-webhook-publisher/" + host + "/" + strconv.Itoa(pid)
}

// CloseBrokerConnection makes node close the connection named name
// (rabbitmqctl close_connection), waiting up to 10 s for it to appear.
func CloseBrokerConnection(node *brokernode.Node, name, reason string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := node.Ctl("list_connections", "--no-table-headers", "pid", "client_properties")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, `"`+name+`"`) {
				_, err := node.Ctl("close_connection", strings.Fields(line)[0], reason)
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no broker connection named %s", name)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// MemoryAlarm raises the memory alarm on node (every publishing connection
// on it is blocked: vm_memory_high_watermark 1e-7). The returned clear
// restores RabbitMQ 3.x's default 0.4; it may be called more than once,
// only the first call acts.
func MemoryAlarm(node *brokernode.Node) (func() error, error) {
	var once sync.Once
	var clearErr error
	clear := func() error {
		once.Do(func() { clearErr = node.SetMemoryWatermark("0.4") })
		return clearErr
	}
	if err := node.SetMemoryWatermark("0.0000001"); err != nil {
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
