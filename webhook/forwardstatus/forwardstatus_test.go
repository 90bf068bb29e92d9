package forwardstatus

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/internal/upstashtest"
	"github.com/olp-edu/borda/keyspace"
)

// Over RESP and over the Upstash REST API (the operator page reads the
// snapshots `borda forward` writes, whichever store holds them).
func TestEverySnapshotIsWrittenWithATTLAndReadBack(t *testing.T) {
	servicetest.ForEachRedisTransport(t, func(t *testing.T, rdb redis.UniversalClient, _ *upstashtest.Server) {
		ks := keyspace.MustNew(servicetest.KeyPrefix(t))
		ctx := context.Background()
		for _, inst := range []string{"fwd-b", "fwd-a"} {
			w, err := NewWriter(rdb, ks, inst, time.Second, 3*time.Second, func() Snapshot {
				return Snapshot{Breaker: "open", OpenedBy: "5xx (HTTP 503)", QueueDepth: 4, DLQDepth: 1}
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Write(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rdb.Del(context.Background(), ks.ForwardStatus(inst)) })
			if ttl := rdb.TTL(ctx, ks.ForwardStatus(inst)).Val(); ttl <= 0 || ttl > 3*time.Second {
				t.Fatalf("%s: TTL %s, want (0, 3s]", inst, ttl)
			}
		}
		got, err := Read(ctx, rdb, ks)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Instance != "fwd-a" || got[1].Instance != "fwd-b" || got[0].OpenedBy != "5xx (HTTP 503)" ||
			got[0].QueueDepth != 4 || got[0].WrittenAt.IsZero() {
			t.Fatalf("Read = %+v", got)
		}
	})
}

func TestAStoppedWriterRemovesItsSnapshot(t *testing.T) {
	servicetest.ForEachRedisTransport(t, func(t *testing.T, rdb redis.UniversalClient, _ *upstashtest.Server) {
		ks := keyspace.MustNew(servicetest.KeyPrefix(t))
		w, err := NewWriter(rdb, ks, "fwd-1", 50*time.Millisecond, time.Second, func() Snapshot { return Snapshot{Breaker: "closed"} }, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for rdb.Exists(ctx, ks.ForwardStatus("fwd-1")).Val() == 0 {
			if time.Now().After(deadline) {
				t.Fatal("no snapshot written within 5 s")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := w.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if got, _ := Read(ctx, rdb, ks); len(got) != 0 {
			t.Fatalf("after Stop: %+v", got)
		}
	})
}

func TestNewWriterRefusesATTLNotLongerThanTheInterval(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	read := func() Snapshot { return Snapshot{} }
	ks := keyspace.MustNew("olp-dev:")
	if _, err := NewWriter(rdb, ks, "x", time.Second, time.Second, read, nil); err == nil {
		t.Error("a TTL equal to the interval was accepted")
	}
	if _, err := NewWriter(rdb, ks, " ", 0, 0, read, nil); err == nil {
		t.Error("an empty instance was accepted")
	}
	if _, err := NewWriter(nil, ks, "x", 0, 0, read, nil); err == nil {
		t.Error("a nil client was accepted")
	}
}
