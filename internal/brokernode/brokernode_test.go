package brokernode

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

func skipUnlessAvailable(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("BORDA_REQUIRE_SERVICES") == "1" {
			t.Fatal(err)
		}
		t.Skipf("%v; skipping (set BORDA_REQUIRE_SERVICES=1 to fail instead)", err)
	}
}

// TestNodeWideOperationsRefuseTheSharedBroker: a Node aimed at the shared
// broker's port (5672, or BORDA_TEST_AMQP_URL's) refuses every node-wide
// operation before running rabbitmqctl, and Start refuses such a port.
func TestNodeWideOperationsRefuseTheSharedBroker(t *testing.T) {
	t.Setenv("BORDA_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5999/")
	for _, port := range []int{5672, 5999} {
		n := &Node{Name: "borda-x@localhost", Port: port}
		for name, op := range map[string]func() error{
			"watermark": func() error { return n.SetMemoryWatermark("0.0000001") },
			"policy":    func() error { return n.SetPolicy("p", "^x", `{"delivery-limit":1}`) },
			"clear":     func() error { return n.ClearPolicy("p") },
			"stop_app":  func() error { _, err := n.Ctl("stop_app"); return err },
		} {
			if err := op(); !errors.Is(err, ErrShared) {
				t.Errorf("port %d %s: err = %v, want ErrShared", port, name, err)
			}
		}
		if _, err := Start(context.Background(), Options{Dir: t.TempDir(), Name: "borda-x", Port: port}); err == nil || (Available() == nil && !errors.Is(err, ErrShared)) {
			t.Errorf("Start on port %d: err = %v, want ErrShared", port, err)
		}
	}
	for _, bad := range []string{"rabbit", "x@localhost", ""} {
		if _, err := Start(context.Background(), Options{Dir: t.TempDir(), Name: bad}); err == nil {
			t.Errorf("Start(name %q) succeeded", bad)
		}
	}
}

// TestClusterOfThreeFormsAndSurvivesANodeStop starts a three-node cluster,
// declares a quorum queue, stops its leader's node, and publishes with a
// confirm on another node (the queue elects a new leader).
func TestClusterOfThreeFormsAndSurvivesANodeStop(t *testing.T) {
	skipUnlessAvailable(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := StartCluster(ctx, t.TempDir(), "borda-bn-test", 3, 200)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	conn, err := amqp.Dial(c.Nodes[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	ch, _ := conn.Channel()
	if _, err := ch.QueueDeclare("q", true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	leader, err := QueueLeader(c.Nodes[1], "q")
	if err != nil {
		t.Fatal(err)
	}
	ln := c.ByName(leader)
	if ln == nil {
		t.Fatalf("leader %q is not a cluster node", leader)
	}
	ln.Stop()
	var other *Node
	for _, n := range c.Nodes {
		if n != ln {
			other = n
		}
	}
	conn, err = amqp.Dial(other.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, _ = conn.Channel()
	_ = ch.Confirm(false)
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", "q", true, false, amqp.Publishing{Body: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := dc.WaitContext(ctx); !ok || err != nil {
		t.Fatalf("confirm after the leader's node stopped: ok=%v err=%v", ok, err)
	}
	if err := ln.Restart(ctx); err != nil {
		t.Fatal(err)
	}
}
