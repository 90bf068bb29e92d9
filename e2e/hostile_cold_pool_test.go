package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
)

// Fresh attack pass 8 R01: Redis behind a link where every new connection
// costs 60 ms (a remote rediss:// store's handshakes), sync: 0, a rule of 1
// per 30 s per IP: after one warm request, 20 concurrent requests each
// needed a connection of their own, each outlived the 30 ms deadline, and
// all 20 passed (fail-open), before the breaker's count of 5 (and 11 with
// a budget that every successful call between them refilled). Through
// the real binary: at most breaker.failures (5) pass unchecked per
// breaker.open_for, plus the limit in the store and in process.
func TestHostileColdPoolBurstPassesTheLimitFailingOpen(t *testing.T) {
	redisURL := servicetest.RedisURL(t)
	target := strings.TrimPrefix(redisURL, "redis://")
	if i := strings.IndexByte(target, '/'); i >= 0 {
		target = target[:i]
	}
	addr, _ := servicetest.SlowDialProxy(t, target, 60*time.Millisecond)
	up := recordingUpstream(t)
	prefix := servicetest.KeyPrefix(t)
	cfg := fmt.Sprintf(`environment: development
listen: "{LISTEN}"
admin_listen: "{ADMIN}"
trusted_proxies: ["127.0.0.1/32"]
client_ip_header: X-Real-IP
redis:
  url: "redis://%s/0"
  key_prefix: %q
amqp:
  url: "amqp://guest:guest@127.0.0.1:1/"
telemetry:
  enabled: false
routes:
  - {name: one, path_prefix: /one/, upstream: %q}
rate_limits:
  timeout: 30ms
  breaker: {failures: 5}
  rules:
    - {name: one, scope: ip, algorithm: fixed_window, limit: 1, window: 30s, routes: [one]}
`, addr, prefix, up.URL)
	p := startServe(t, cfg)
	if status, _, _ := identityGet(t, p.public, "X-Real-IP: 203.0.113.200"); status == 0 {
		t.Fatal("warm request failed")
	}
	passed, _ := concurrentBurst(t, []*process{p}, "one", "203.0.113.201", 20)
	// breaker.failures (5) unchecked, the limit once in the store (a call
	// that made it) and once in process (the calls past the budget).
	if passed > 5+1+1 {
		t.Errorf("%d of 20 concurrent requests passed a limit of 1 on a cold pool, want ≤ 7 (breaker.failures unchecked, then the limit in the store and in process)", passed)
	}
}
