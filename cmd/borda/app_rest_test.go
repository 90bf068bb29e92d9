package main

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
	"github.com/olp-edu/borda/ratelimit"
	"github.com/olp-edu/borda/telemetry"
)

// `borda serve` with only the Upstash REST URL and token used to leave
// its shared Redis client nil: telemetry off, no aggregation, the
// operator page's forwarders "unknown" (issue 27 item 4). It now builds
// that client over REST, while rate-limit decisions stay on the
// RESTStore; a recorded request reaches its counter through the REST
// server.
func TestServeOnTheRESTStoreKeepsTelemetry(t *testing.T) {
	redisURL := servicetest.RedisURL(t)
	front, restURL := servicetest.RESTFront(t, redisURL)
	prefix := servicetest.KeyPrefix(t)
	cfg, err := configs.Parse([]byte(fmt.Sprintf(`environment: development
listen: "127.0.0.1:0"
admin_listen: "127.0.0.1:0"
redis: {rest_url: %q, key_prefix: %q, read_timeout: 1s}
amqp: {url: "amqp://guest:guest@127.0.0.1:1/"}
telemetry: {enabled: true, flush_every: 50ms}
routes:
  - {name: app, path_prefix: /, upstream: "http://127.0.0.1:1"}
`, restURL, prefix)), func(name string) (string, bool) {
		if name == "UPSTASH_REDIS_REST_TOKEN" {
			return servicetest.RESTToken, true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := newApp(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	if a.redis == nil || a.recorder == nil {
		t.Fatalf("on the REST store: shared client %v, recorder %v; want both", a.redis, a.recorder)
	}
	if _, ok := a.limitStore.(*ratelimit.RESTStore); !ok {
		t.Errorf("rate-limit store %T, want the RESTStore", a.limitStore)
	}
	a.recorder.Record(telemetry.Event{Time: time.Now(), Route: "app", Path: "/x", Status: 200})
	look := servicetest.RedisClient(t, redisURL, false)
	key := keyspace.MustNew(prefix).Metric("app:/x", time.Now().UTC())
	t.Cleanup(func() { look.Del(context.Background(), key) })
	for deadline := time.Now().Add(10 * time.Second); look.Get(context.Background(), key).Val() != "1"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("counter %s not 1 within 10 s (REST requests %v)", key, front.Stats().Requests)
		}
	}
	if front.Stats().Requests["/multi-exec"] == 0 {
		t.Errorf("the counter did not travel over REST: %v", front.Stats().Requests)
	}
}
