package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/servicetest"
)

func writeLimitsConfig(t *testing.T, prefix string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "borda.yaml")
	cfg := `environment: development
redis:
  key_prefix: "` + prefix + `"
routes:
  - name: portal
    upstream: "http://127.0.0.1:3000"
    rate_limits: ["burst"]
rate_limits:
  rules:
    - name: burst
      scope: ip
      limit: 50
      window: 5s
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLimits_RelaxWritesKeyWithTTLAndShowListsIt(t *testing.T) {
	url := servicetest.RedisURL(t)
	t.Setenv("REDIS_URL", url)
	prefix := servicetest.KeyPrefix(t)
	path := writeLimitsConfig(t, prefix)
	opt, _ := redis.ParseURL(url)
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	key := prefix + "cfg:relax:burst"
	t.Cleanup(func() { rdb.Del(context.Background(), key) })

	var out, errb bytes.Buffer
	if code := runLimits(context.Background(), []string{"relax", "--config", path, "--rule", "burst", "--factor", "2", "--for", "1m"}, &out, &errb); code != 0 {
		t.Fatalf("relax exit %d: %s", code, errb.String())
	}
	if v := rdb.Get(context.Background(), key).Val(); v != "2" {
		t.Fatalf("%s = %q, want 2", key, v)
	}
	if ttl := rdb.PTTL(context.Background(), key).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("%s PTTL = %v", key, ttl)
	}
	out.Reset()
	if code := runLimits(context.Background(), []string{"show", "--config", path}, &out, &errb); code != 0 {
		t.Fatalf("show exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "burst") || !strings.Contains(out.String(), "×2 for") {
		t.Fatalf("show output:\n%s", out.String())
	}
}

func TestLimits_RelaxRefusesFactorBelowOneAndUnknownRule(t *testing.T) {
	path := writeLimitsConfig(t, "olp-dev:tcli:")
	var out, errb bytes.Buffer
	code := runLimits(context.Background(), []string{"relax", "--config", path, "--rule", "nope", "--factor", "0.5", "--for", "1m"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "--factor") || !strings.Contains(errb.String(), "--rule") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

// Issue 16 §4: in an incident Redis is the likeliest thing down, and
// `borda limits show` failed instead of listing the configured rules.
func TestLimitsShowListsTheRulesWhenRedisIsUnreachable(t *testing.T) {
	t.Setenv("REDIS_URL", "redis://127.0.0.1:1/0")
	path := writeLimitsConfig(t, servicetest.KeyPrefix(t))
	var out, errb bytes.Buffer
	if code := runLimits(context.Background(), []string{"show", "--config", path}, &out, &errb); code != 0 {
		t.Fatalf("show exit %d with Redis down: %s", code, errb.String())
	}
	got := out.String()
	t.Logf("output:\n%s", got)
	for _, want := range []string{"burst", "ip", "50", "portal", "?", "relax: unavailable", "live relaxes unknown"} {
		if !strings.Contains(got, want) {
			t.Errorf("show output lacks %q", want)
		}
	}
}
