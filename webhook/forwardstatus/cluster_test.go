package forwardstatus

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

func TestMain(m *testing.M) {
	code := m.Run()
	servicetest.StopRedisCluster()
	os.Exit(code)
}

// Read listed the snapshots with one SCAN, which a Redis Cluster client
// sends to one master: the forwarders whose keys hash to the others were
// missing from the operator page. It now walks every master.
func TestReadFindsTheSnapshotsOnEveryMasterOfACluster(t *testing.T) {
	rdb := servicetest.RedisClient(t, servicetest.StartedRedisCluster(t).URL, true)
	ks := keyspace.MustNew(servicetest.KeyPrefix(t))
	ctx := context.Background()
	const n = 12 // keys over the three masters
	for i := range n {
		inst := fmt.Sprintf("fwd-%02d", i)
		w, err := NewWriter(rdb, ks, inst, time.Second, time.Minute, func() Snapshot { return Snapshot{Breaker: "closed"} }, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Del(context.Background(), ks.ForwardStatus(inst)) })
	}
	got, err := Read(ctx, rdb, ks)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n || got[0].Instance != "fwd-00" || got[n-1].Instance != fmt.Sprintf("fwd-%02d", n-1) {
		t.Fatalf("Read found %d snapshots, want %d: %+v", len(got), n, got)
	}
}
