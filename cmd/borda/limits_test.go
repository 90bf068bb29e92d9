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
	"github.com/olp-edu/borda/schema"
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

// TestLimits_RelaxRecordsWhoAndWhyThenWritesTheKeyAndShowListsIt: the
// relax is a limit_relaxes row (operator, reason, origin cli, applied)
// and the key with its TTL; show lists it.
func TestLimits_RelaxRecordsWhoAndWhyThenWritesTheKeyAndShowListsIt(t *testing.T) {
	url := servicetest.RedisURL(t)
	pool, dbURL := servicetest.IsolatedDatabase(t)
	if err := schema.Up(t.Context(), dbURL); err != nil {
		t.Fatal(err)
	}
	t.Setenv("REDIS_URL", url)
	t.Setenv("DATABASE_URL", dbURL)
	prefix := servicetest.KeyPrefix(t)
	path := writeLimitsConfig(t, prefix)
	opt, _ := redis.ParseURL(url)
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	key := prefix + "cfg:relax:burst"
	t.Cleanup(func() { rdb.Del(context.Background(), key) })

	var out, errb bytes.Buffer
	if code := runLimits(context.Background(), []string{"relax", "--config", path, "--rule", "burst", "--factor", "2", "--for", "1m",
		"--operator", "ana.plantao", "--reason", "matrícula: fila no portal"}, &out, &errb); code != 0 {
		t.Fatalf("relax exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "relaxed burst ×2 for 1m0s until ") || !strings.Contains(out.String(), "audit #") {
		t.Errorf("relax output: %s", out.String())
	}
	if v := rdb.Get(context.Background(), key).Val(); v != "2" {
		t.Fatalf("%s = %q, want 2", key, v)
	}
	if ttl := rdb.PTTL(context.Background(), key).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("%s PTTL = %v", key, ttl)
	}
	var operator, reason, origin, outcome string
	if err := pool.QueryRow(t.Context(), `SELECT operator, reason, origin, outcome FROM limit_relaxes WHERE rule = 'burst'`).
		Scan(&operator, &reason, &origin, &outcome); err != nil {
		t.Fatal(err)
	}
	if operator != "ana.plantao" || reason != "matrícula: fila no portal" || origin != "cli" || outcome != "applied" {
		t.Errorf("limit_relaxes row: %q %q %s %s", operator, reason, origin, outcome)
	}
	out.Reset()
	if code := runLimits(context.Background(), []string{"show", "--config", path}, &out, &errb); code != 0 {
		t.Fatalf("show exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "burst") || !strings.Contains(out.String(), "×2 for") {
		t.Fatalf("show output:\n%s", out.String())
	}
}

// TestLimits_RelaxRefusesEveryBadFlagAtOnce: the CLI reads its flags
// with the operator page's parser (relaxaudit.Parse), so each refusal
// names its flag; no store nor database is touched (exit 2).
func TestLimits_RelaxRefusesEveryBadFlagAtOnce(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	path := writeLimitsConfig(t, "olp-dev:tcli:")
	var out, errb bytes.Buffer
	code := runLimits(context.Background(), []string{"relax", "--config", path, "--rule", "nope", "--factor", "0.5", "--for", "soon"}, &out, &errb)
	for _, want := range []string{`--rule: "nope": not a rule`, "--factor: must be between 1 and 100", `--for: "soon" is not a duration`,
		"--operator: required", "--reason: required", "needs database.url"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	if code != 2 || out.Len() > 0 {
		t.Errorf("exit %d, stdout %q, stderr:\n%s", code, out.String(), errb.String())
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
