package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/olp-edu/borda/bench/failover"
	"github.com/olp-edu/borda/internal/brokernode"
	"github.com/olp-edu/borda/internal/servicetest"
)

// TestFailover_NodeStopsMidStreamLoseNothing (issue 23, item 6) is the
// short version of bench/cmd/failover: a private three-node RabbitMQ
// cluster, the real `borda serve` and `borda forward` given all three
// nodes in AMQP_URL, a steady webhook load, and two node stops mid-stream
// (the node serve publishes to; with BORDA_E2E_FAILOVER_FULL=1 also the
// forward queue's leader, moved off serve's and forward's nodes first). After each: every 200 reached
// the legacy stand-in exactly once, every other answer was a 503, nothing
// was dead-lettered, and neither process exited. The figures at 200
// events/s are in docs/reliability.md ("Cluster failover").
//
// The suite runs the connected scenario only (about 4 minutes here, most
// of it the cluster starting): the forward queue is declared through
// serve's connection, so its leader is on serve's node and that stop also
// changes the leader with confirms in flight. BORDA_E2E_FAILOVER_FULL=1
// adds the leader-alone scenario (bench/cmd/failover always runs both).
//
// It needs the Debian rabbitmq-server (three nodes take a minute or more
// to start on a loaded two-core machine) and several minutes, more than
// `go test ./...`'s default 10-minute package timeout leaves the e2e
// package, so it runs only when asked: BORDA_E2E_FAILOVER=1 runs it
// (skipping without rabbitmq-server), BORDA_REQUIRE_CLUSTER=1 runs it and
// makes a missing rabbitmq-server a failure. The documented proof is
// `go run ./bench/cmd/failover` (docs/reliability.md, "Cluster failover").
func TestFailover_NodeStopsMidStreamLoseNothing(t *testing.T) {
	if os.Getenv("BORDA_E2E_FAILOVER") != "1" && os.Getenv("BORDA_REQUIRE_CLUSTER") != "1" {
		t.Skip("starts a three-node RabbitMQ cluster for minutes; set BORDA_E2E_FAILOVER=1 to run it (docs/reliability.md, \"Cluster failover\")")
	}
	if testing.Short() {
		t.Skip("starts a three-node RabbitMQ cluster; skipped with -short")
	}
	if err := brokernode.Available(); err != nil {
		if os.Getenv("BORDA_REQUIRE_CLUSTER") == "1" {
			t.Fatal(err)
		}
		t.Skipf("%v; skipping the cluster failover (set BORDA_REQUIRE_CLUSTER=1 to fail instead)", err)
	}
	redisURL := servicetest.RedisURL(t)
	bin := borda(t) // built before the run's deadline starts
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var log strings.Builder
	scenarios, err := failover.Run(ctx, failover.Config{
		Borda: bin, Dir: t.TempDir(), RedisURL: redisURL,
		Rate: 40, Before: 3 * time.Second, Down: 6 * time.Second, After: 4 * time.Second, Settle: 90 * time.Second,
		ClusterPrefix: fmt.Sprintf("borda-e2e-fo-%d", os.Getpid()), Log: &log,
		Scenarios: scenariosToRun(),
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if len(scenarios) != len(scenariosToRun()) {
		t.Fatalf("%d scenarios, want %d\n%s", len(scenarios), len(scenariosToRun()), log.String())
	}
	for _, s := range scenarios {
		t.Log(s.String())
		for _, f := range s.Failures() {
			t.Errorf("scenario %s: %s", s.Name, f)
		}
		if s.Name == "connected" && s.Stopped != s.ServeNode {
			t.Errorf("scenario connected stopped %s, serve was on %s", s.Stopped, s.ServeNode)
		}
		if s.Name == "leader" && s.Stopped != s.LeaderBefore {
			t.Errorf("scenario leader stopped %s, the leader was %s", s.Stopped, s.LeaderBefore)
		}
	}
	if t.Failed() {
		t.Log(log.String())
	}
}

func scenariosToRun() []string {
	if os.Getenv("BORDA_E2E_FAILOVER_FULL") == "1" {
		return []string{"connected", "leader"}
	}
	return []string{"connected"}
}
