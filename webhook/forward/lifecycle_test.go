package forward

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/startstop/startstoptest"
	"github.com/olp-edu/borda/keyspace"
	"github.com/olp-edu/borda/webhook/topology"
)

// TestForwarderSurvivesConcurrentStartStop: the Forwarder as `borda
// forward` runs it (a service of internal/startstop's shape), started and
// stopped from many goroutines at once, under -race. Nothing answers at
// its broker or Redis addresses (port 1): it keeps reconnecting until
// stopped, which is the lifecycle under test.
func TestForwarderSurvivesConcurrentStartStop(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	for range 3 {
		f, err := New(Options{
			URL: "http://127.0.0.1:1/legacy", HMACSecret: []byte(testSecret), SignatureVersions: []string{SignatureV1},
			Prefetch: 1, Timeout: time.Second, LeaseTTL: 3 * time.Second, RetentionTTL: time.Hour,
			Breaker:  BreakerOptions{Failures: 1, OpenFor: time.Second},
			AMQPURL:  "amqp://guest:guest@127.0.0.1:1/",
			Topology: topology.Topology{Exchange: "stress-ex", RoutingKey: "stress", ForwardQueue: "stress-fwd", DLQ: "stress-dlq", Retry: []topology.Delay{{Name: "1s", TTL: time.Second}}},
			Redis:    rdb, Keys: keyspace.MustNew("olp-dev:fwdstress:"), Scrub: func(s string) string { return s },
			Reconnect: 10 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		startstoptest.Stress(t, f)
		select {
		case <-f.Done():
		default:
			t.Fatal("Done not closed after the last Stop")
		}
		if err := f.Err(); err != nil {
			t.Errorf("Err = %v after a stop, want nil", err)
		}
	}
}
