package redisconn_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/redisconn"
)

// Fresh attack pass 8 R01: after a restart the pool held one connection,
// so a burst of concurrent decisions dialled on the request path; each
// dial (60 ms to a remote store) outlived rate_limits.timeout (30 ms) and
// every request in flight failed open (20 of a limit of 1 passed). The
// pool is dialled and kept open in the background: it fills without a
// command, and a burst as large as the pool opens no connection. (The
// first command on each connection still carries go-redis's HELLO/AUTH:
// one round trip; docs/rate-limiting.md, "Failure behaviour".)
func TestPoolIsKeptWarmSoABurstNeverDials(t *testing.T) {
	target := strings.TrimSuffix(strings.TrimPrefix(servicetest.RedisURL(t), "redis://"), "/0")
	if i := strings.IndexByte(target, '/'); i >= 0 {
		target = target[:i]
	}
	addr, accepted := servicetest.SlowDialProxy(t, target, 60*time.Millisecond)
	const pool = 8
	c, err := redisconn.New(redisconn.Options{URL: "redis://" + addr, PoolSize: pool, DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.PoolStats().IdleConns < pool || accepted.Load() < pool {
		if time.Now().After(deadline) {
			t.Fatalf("the pool holds %d idle connections (%d dialled) 10 s after the client was made, want %d", c.PoolStats().IdleConns, accepted.Load(), pool)
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := accepted.Load()
	var wg sync.WaitGroup
	for range pool {
		wg.Go(func() {
			if err := c.Ping(context.Background()).Err(); err != nil {
				t.Errorf("ping: %v", err)
			}
		})
	}
	wg.Wait()
	if n := accepted.Load() - before; n != 0 {
		t.Errorf("a burst of %d on a warm pool of %d dialled %d connections on the request path", pool, pool, n)
	}
}
