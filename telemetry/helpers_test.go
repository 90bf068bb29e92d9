package telemetry

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/internal/upstashtest"
	"github.com/olp-edu/borda/keyspace"
	"github.com/olp-edu/borda/schema"
)

// testRedis returns a client of the test Redis with production timeouts
// and a keyspace no other test uses; its keys are deleted at cleanup.
func testRedis(t testing.TB) (redis.UniversalClient, keyspace.Keyspace) {
	t.Helper()
	return redisAt(t, servicetest.RedisURL(t)), keyspace.MustNew(servicetest.KeyPrefix(t))
}

// redisAt returns a client for url built as `borda serve` builds it.
func redisAt(t testing.TB, url string) redis.UniversalClient {
	t.Helper()
	return servicetest.RedisClient(t, url, false)
}

// cleanKeys deletes every key under ks's prefix at cleanup.
func cleanKeys(t testing.TB, c redis.UniversalClient, ks keyspace.Keyspace) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, k := range scanKeys(t, ctx, c, ks.Prefix()+"*") {
			c.Del(ctx, k)
		}
	})
}

func scanKeys(t testing.TB, ctx context.Context, c redis.UniversalClient, match string) []string {
	t.Helper()
	var keys []string
	iter := c.Scan(ctx, 0, match, 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("scanning %s: %v", match, err)
	}
	return keys
}

// migratedDB is a schema of the test's own (servicetest.IsolatedDatabase)
// with gateway_metrics created.
func migratedDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, url := servicetest.IsolatedDatabase(t)
	if err := schema.Up(context.Background(), url); err != nil {
		t.Fatalf("migrating: %v", err)
	}
	return pool
}

// faultProxy is a TCP proxy in front of a server that a test can cut
// (every connection closed, new ones closed at once) and restore.
type faultProxy struct {
	ln       net.Listener
	upstream string
	mu       sync.Mutex
	down     bool
	conns    map[net.Conn]struct{}
}

func newFaultProxy(t testing.TB, upstream string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.cut() })
	return p
}

func (p *faultProxy) addr() string { return p.ln.Addr().String() }

func (p *faultProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		if !down {
			p.conns[c] = struct{}{}
		}
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		go p.pipe(c)
	}
}

func (p *faultProxy) pipe(c net.Conn) {
	u, err := net.Dial("tcp", p.upstream)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[u] = struct{}{}
	p.mu.Unlock()
	go func() { _, _ = io.Copy(u, c); u.Close() }()
	_, _ = io.Copy(c, u)
	c.Close()
}

// cut closes every connection and refuses new ones until restore.
func (p *faultProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *faultProxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// overEachTransport runs fn over RESP and over the Upstash REST API
// (servicetest.ForEachRedisTransport: the same Redis behind
// internal/upstashtest), each with a keyspace of its own whose keys are
// deleted at cleanup; front is the REST server (nil on RESP).
func overEachTransport(t *testing.T, fn func(t *testing.T, rdb redis.UniversalClient, ks keyspace.Keyspace, front *upstashtest.Server)) {
	t.Helper()
	servicetest.ForEachRedisTransport(t, func(t *testing.T, rdb redis.UniversalClient, front *upstashtest.Server) {
		ks := keyspace.MustNew(servicetest.KeyPrefix(t))
		cleanKeys(t, rdb, ks)
		fn(t, rdb, ks, front)
	})
}
