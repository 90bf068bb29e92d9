package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/adminui"
	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// The operator page's top would-block endpoints sum the telemetry
// counters of the last minutes. It read them with one SCAN and an MGET
// per page, which on a Redis Cluster (redis.cluster) walks one master only
// and fails with CROSSSLOT as soon as a page holds keys of two slots; it
// now reads through telemetry.ScanCounters, as the aggregator does. On
// the Upstash REST store it reads them too (it used to say "unknown").
func TestTopWouldBlockSumsTheCountersOnRedisAndOnACluster(t *testing.T) {
	for _, tc := range []struct {
		name string
		rdb  func(t *testing.T) redis.UniversalClient
	}{
		{"redis", func(t *testing.T) redis.UniversalClient {
			return servicetest.RedisClient(t, servicetest.RedisURL(t), false)
		}},
		{"cluster", func(t *testing.T) redis.UniversalClient {
			return servicetest.RedisClient(t, servicetest.StartedRedisCluster(t).URL, true)
		}},
		{"upstash-rest", func(t *testing.T) redis.UniversalClient {
			rdb, _ := servicetest.RedisOver(t, servicetest.REST)
			return rdb
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			rdb := tc.rdb(t)
			ks := keyspace.MustNew(servicetest.KeyPrefix(t))
			now := time.Now().UTC()
			set := func(dim string, minute time.Time, n int) {
				if err := rdb.Set(ctx, ks.Metric(dim, minute), n, 2*time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
			}
			set("would_block:portal:/a", now, 3)
			set("would_block:portal:/a", now.Add(-time.Minute), 2)
			set("would_block:portal:/b", now, 4)
			set("blocked:portal:/c", now, 9) // a block, not a would-block
			for i := range 40 {              // keys over many slots (and masters)
				set(fmt.Sprintf("would_block:api:/n%02d", i), now, 1)
			}
			cfg := configs.Config{}
			cfg.Telemetry.Enabled = true
			var p atomic.Pointer[configs.Config]
			p.Store(&cfg)
			l := &opsLimiter{cfg: &p, redis: rdb, ks: ks}
			var st adminui.LimiterState
			l.top(ctx, &cfg, &st)
			if st.TopNote != "" {
				t.Fatalf("TopNote = %q", st.TopNote)
			}
			if len(st.TopWouldBlock) != topWouldBlock {
				t.Fatalf("%d endpoints listed, want %d: %+v", len(st.TopWouldBlock), topWouldBlock, st.TopWouldBlock)
			}
			if got := st.TopWouldBlock[:2]; got[0] != (adminui.EndpointCount{Endpoint: "portal:/a", Count: 5}) || got[1] != (adminui.EndpointCount{Endpoint: "portal:/b", Count: 4}) {
				t.Errorf("top two = %+v, want portal:/a 5 then portal:/b 4", got)
			}
			for _, e := range st.TopWouldBlock {
				if e.Endpoint == "portal:/c" {
					t.Errorf("a blocked counter is listed as a would-block: %+v", e)
				}
			}
		})
	}
}
