package servicetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/brokernode"
)

// Rabbitmqctl runs one rabbitmqctl command against the local (shared)
// node, bounded by 30 s, and returns its output; the error carries the
// output. It is for reading the shared broker and closing one's own
// connections: node-wide changes (memory watermark, policies, stopping the
// node) go through a private node (PrivateBroker), and Rabbitmqctl refuses
// them.
func Rabbitmqctl(args ...string) (string, error) {
	if len(args) > 0 && brokernode.NodeWide[args[0]] {
		return "", fmt.Errorf("%w: rabbitmqctl %s (use servicetest.PrivateBroker)", brokernode.ErrShared, args[0])
	}
	return rabbitmqctl(args...)
}

// rabbitmqctl runs rabbitmqctl with no check (Vhost's policies, which -p
// keeps to the test's own vhost).
func rabbitmqctl(args ...string) (string, error) {
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

var (
	privateOnce sync.Once
	private     *brokernode.Node
	privateErr  error

	routesMu sync.Mutex
	routes   = map[testing.TB]string{}
)

// PrivateBroker returns this test binary's private RabbitMQ node (started
// on first use, ~6 s; stopped when the binary exits, even when killed) and
// routes the test's AMQPURL (and so brokertest's topology and admin
// connection) to it. Tests that change node-wide state use it: the shared
// broker in BORDA_TEST_AMQP_URL is never touched. Call it first in the
// test. It skips when the Debian rabbitmq-server is not installed or the
// node does not start within 90 s (fails under BORDA_REQUIRE_SERVICES=1).
func PrivateBroker(t testing.TB) *brokernode.Node {
	t.Helper()
	privateOnce.Do(func() { private, privateErr = startPrivate("borda-test-shared") })
	return routed(t, private, privateErr)
}

// PrivateBrokerAlone is PrivateBroker with a node of the test's own,
// stopped when the test ends: for a memory alarm, which would block every
// other test publishing on a node they share.
func PrivateBrokerAlone(t testing.TB) *brokernode.Node {
	t.Helper()
	n, err := startPrivate("borda-test-alone")
	if err == nil {
		t.Cleanup(n.Stop)
	}
	return routed(t, n, err)
}

func routed(t testing.TB, n *brokernode.Node, err error) *brokernode.Node {
	t.Helper()
	if err != nil {
		if Required() {
			t.Fatalf("private RabbitMQ node: %v", err)
		}
		t.Skipf("private RabbitMQ node unavailable (%v); skipping (set BORDA_REQUIRE_SERVICES=1 to fail instead)", err)
	}
	routesMu.Lock()
	routes[t] = n.URL
	routesMu.Unlock()
	t.Cleanup(func() {
		routesMu.Lock()
		delete(routes, t)
		routesMu.Unlock()
	})
	return n
}

func routedURL(t testing.TB) (string, bool) {
	routesMu.Lock()
	defer routesMu.Unlock()
	u, ok := routes[t]
	return u, ok
}

func startPrivate(prefix string) (*brokernode.Node, error) {
	dir, err := os.MkdirTemp("", prefix+"-")
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%s-%d-%s", prefix, os.Getpid(), strings.TrimPrefix(dir[strings.LastIndex(dir, "-")+1:], "-"))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	return brokernode.Start(ctx, brokernode.Options{Dir: dir, Name: name, MemoryMiB: 256, RemoveDir: true})
}

// MemoryAlarm raises the memory alarm on the private node n (every
// publishing connection on it is blocked) by setting
// vm_memory_high_watermark to 1e-7, and restores defaultWatermark when the
// test ends unless the returned clear did so first (clear may be called
// more than once; only the first call acts). n must be the test's own
// (PrivateBrokerAlone).
func MemoryAlarm(t testing.TB, n *brokernode.Node) (clear func()) {
	t.Helper()
	var once sync.Once
	clear = func() {
		once.Do(func() {
			if err := n.SetMemoryWatermark(defaultWatermark); err != nil {
				t.Errorf("clearing the memory alarm: %v", err)
			}
		})
	}
	if err := n.SetMemoryWatermark("0.0000001"); err != nil {
		t.Fatalf("raising the memory alarm: %v", err)
	}
	t.Cleanup(clear)
	return clear
}

// DeliveryLimitPolicy applies, on the private node n, a policy named after
// prefix that sets "delivery-limit" to limit on every queue whose name
// starts with prefix (and only those: the pattern is ^QuoteMeta(prefix)),
// as RabbitMQ 4 does by default (20) on every quorum queue; on RabbitMQ
// 3.10+ the policy takes effect on quorum queues. The policy is cleared
// when the test ends.
func DeliveryLimitPolicy(t testing.TB, n *brokernode.Node, prefix string, limit int) {
	t.Helper()
	name := "borda-test-dl-" + prefix
	if err := n.SetPolicy(name, "^"+regexp.QuoteMeta(prefix), fmt.Sprintf(`{"delivery-limit":%d}`, limit)); err != nil {
		t.Fatalf("setting the delivery-limit policy: %v", err)
	}
	t.Cleanup(func() {
		if err := n.ClearPolicy(name); err != nil {
			t.Errorf("clearing the delivery-limit policy: %v", err)
		}
	})
}
