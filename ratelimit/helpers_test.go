package ratelimit

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/internal/upstashtest"
	"github.com/olp-edu/borda/keyspace"
)

// testLogger discards unless -v.
func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// redisClient returns a client on the shared test Redis with Borda's
// production settings, closed at cleanup, and fails the test if any key
// under prefix is left without a TTL.
func testRedis(t testing.TB, prefix string) redis.UniversalClient {
	t.Helper()
	url := servicetest.RedisURL(t)
	c := newRedis(t, url)
	t.Cleanup(func() { checkTTLsAndClean(t, c, prefix) })
	return c
}

// newRedis returns a client built exactly as production builds it
// (redisconn.New with the default timeouts), closed at cleanup.
func newRedis(t testing.TB, url string) redis.UniversalClient {
	t.Helper()
	return servicetest.RedisClient(t, url, false)
}

// checkTTLsAndClean fails when a key under prefix has no TTL, then deletes
// the keys.
func checkTTLsAndClean(t testing.TB, c redis.UniversalClient, prefix string) {
	ctx := context.Background()
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		// -1: the key has no TTL. -2: it expired between SCAN and PTTL
		// (a 1 ms key), which is no leak.
		if ttl := c.PTTL(ctx, k).Val(); ttl == -1 {
			t.Errorf("key %s has no TTL (PTTL %v)", k, ttl)
		}
		c.Del(ctx, k)
	}
}

// commandCounter is a go-redis hook counting commands sent (pipelined ones
// one by one).
// commandCounter counts the commands a client sends, less a new
// connection's handshake (HELLO, AUTH, SELECT, CLIENT): the pool opens its
// idle connections in the background (redisconn's MinIdleConns), at any
// time during a test, and their handshakes are no request's cost (CI saw
// 23 commands for 20 requests).
type commandCounter struct{ n atomic.Int64 }

func handshake(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello", "auth", "select", "client":
		return true
	}
	return false
}

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !handshake(cmd) {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if !handshake(cmd) {
				c.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// countingStore wraps a Store and counts Hit calls.
type countingStore struct {
	Store
	hits atomic.Int64
	fail atomic.Bool
}

var errInjected = fmt.Errorf("injected store failure")

func (s *countingStore) Hit(ctx context.Context, hits []Hit, out []Count) (time.Time, error) {
	s.hits.Add(1)
	if s.fail.Load() {
		return time.Time{}, errInjected
	}
	return s.Store.Hit(ctx, hits, out)
}

// storeHit is s.Hit on the store's own clock, the error only.
func storeHit(ctx context.Context, s Store, hits []Hit, out []Count) error {
	_, err := s.Hit(ctx, hits, out)
	return err
}

// pinStoreClock makes the store decide at now from here on (the Redis and
// REST stores pass it to the script instead of TIME; the MemoryStore's
// clock is set), so a test can step the store's time deterministically.
func pinStoreClock(s Store, now time.Time) {
	switch x := s.(type) {
	case *MemoryStore:
		x.SetClock(clockFunc(func() time.Time { return now }))
	case *RedisStore:
		x.pinnedMS.Store(now.UnixMilli())
	case *RESTStore:
		x.pinnedMS.Store(now.UnixMilli())
	case *countingStore:
		pinStoreClock(x.Store, now)
	default:
		panic(fmt.Sprintf("pinStoreClock: %T has no clock to pin", s))
	}
}

// hitAt is s.Hit with the store's clock pinned at now.
func hitAt(ctx context.Context, s Store, now time.Time, hits []Hit, out []Count) error {
	pinStoreClock(s, now)
	return storeHit(ctx, s, hits, out)
}

func (s *countingStore) Ping(ctx context.Context) error {
	if s.fail.Load() {
		return errInjected
	}
	return s.Store.Ping(ctx)
}

// rulesConfig returns the Options of the configuration's defaults
// (timeout 30ms, breaker 5 failures / 2s, relax poll 5s) with rules.
func rulesConfig(rules ...Rule) Options {
	return Options{Rules: rules, Timeout: 30 * time.Millisecond, BreakerFailures: 5, BreakerOpenFor: 2 * time.Second, RelaxPoll: 5 * time.Second,
		DenyCacheSize: testDenyCacheSize}
}

// testDenyCacheSize is the deny cache of the tests' limiters: the
// configuration's default (rate_limits.deny_cache_size).
const testDenyCacheSize = 1 << 16

func burstRule(limit int64, window time.Duration) Rule {
	return Rule{Name: "burst", Scope: ScopeIP, Limit: limit, Window: window, Routes: []string{"*"}}
}

// newTestLimiter builds a Limiter on store with its own registry.
func newTestLimiter(t testing.TB, cfg Options, ks keyspace.Keyspace, store Store) (*Limiter, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	l, err := New(cfg, ks, store, reg, testLogger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l, reg
}

// privateRedis starts a redis-server of our own on a free port (so it can
// be stopped with SIGSTOP without touching the shared one) and returns its
// address and PID. Skips when redis-server is not installed.
func privateRedis(t testing.TB) (addr string, pid int) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if servicetest.Required() {
			t.Fatalf("redis-server not installed: %v", err)
		}
		t.Skip("redis-server not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr = fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr, cmd.Process.Pid
		}
	}
	t.Fatalf("private redis-server on %s did not start", addr)
	return "", 0
}

func hasPrefix(s, p string) bool { return strings.HasPrefix(s, p) }

func TestMain(m *testing.M) {
	code := m.Run()
	servicetest.StopRedisCluster()
	os.Exit(code)
}

// testRedisCluster returns a client on the binary's private Redis Cluster
// (three masters), built as production builds it (redisconn.New with
// redis.cluster), whose keys under prefix are checked for a TTL and
// deleted, on every master, at cleanup.
func testRedisCluster(t testing.TB, prefix string) redis.UniversalClient {
	t.Helper()
	c := servicetest.RedisClient(t, servicetest.StartedRedisCluster(t).URL, true)
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("redisconn.New with redis.cluster returned %T, want *redis.ClusterClient", c)
	}
	t.Cleanup(func() {
		_ = cc.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
			checkTTLsAndClean(t, node, prefix)
			return nil
		})
	})
	return c
}

// scanKeys returns the keys matching pattern (SCAN), on every master of a
// Redis Cluster.
func scanKeys(t testing.TB, c redis.UniversalClient, pattern string) []string {
	t.Helper()
	ctx := context.Background()
	var (
		mu   sync.Mutex
		keys []string
	)
	scan := func(ctx context.Context, node redis.UniversalClient) error {
		iter := node.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			keys = append(keys, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return scan(ctx, node) })
	} else {
		err = scan(ctx, c)
	}
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// withClock is opts with the Limiter's clock now.
func withClock(opts Options, now func() time.Time) Options {
	opts.Clock = clock.Func(now)
	return opts
}

// clockFunc is now as a clock (MemoryStore.SetClock).
func clockFunc(now func() time.Time) clock.Clock { return clock.Func(now) }

// syncedHit returns the last Hit l's syncer took for key (zero when it
// holds no state for key).
func syncedHit(l *Limiter, key string) Hit {
	l.sync.mu.Lock()
	defer l.sync.mu.Unlock()
	k, ok := l.sync.keys.get(key)
	if !ok {
		return Hit{}
	}
	return l.sync.keys.hit(key, k.hit)
}

// restStoreOn returns an Upstash REST store on the local test server in
// front of rdb (closed at cleanup).
func restStoreOn(t testing.TB, rdb redis.UniversalClient) *RESTStore {
	t.Helper()
	srv := upstashtest.Start(rdb, "tok")
	t.Cleanup(srv.Close)
	rest, err := NewRESTStore(srv.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	return rest
}
