// Package servicetest gives tests the real Redis, RabbitMQ and PostgreSQL on
// this machine, and names that no other test uses.
//
// When a server is unreachable the test is skipped with a message naming
// it, unless BORDA_REQUIRE_SERVICES=1 (set by .ci/run), where it fails.
// Addresses come from BORDA_TEST_REDIS_URL, BORDA_TEST_AMQP_URL and
// BORDA_TEST_DATABASE_URL, defaulting to the local servers on 127.0.0.1.
package servicetest

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Default addresses of the local servers.
const (
	DefaultRedisURL    = "redis://127.0.0.1:6379/0"
	DefaultAMQPURL     = "amqp://guest:guest@127.0.0.1:5672/"
	DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
)

// Required reports whether BORDA_REQUIRE_SERVICES=1.
func Required() bool { return os.Getenv("BORDA_REQUIRE_SERVICES") == "1" }

// Inconclusive ends a test whose scenario did not happen (a loaded
// machine, a window that turned over): it skips, and fails under
// BORDA_REQUIRE_SERVICES=1 (CI), where a skip would leave the property
// untested unnoticed.
func Inconclusive(t testing.TB, format string, args ...any) {
	t.Helper()
	if Required() {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// RedisURL returns the test Redis URL, or skips (fails when required).
func RedisURL(t testing.TB) string {
	return reachable(t, "Redis", env("BORDA_TEST_REDIS_URL", DefaultRedisURL))
}

// AMQPURL returns the test RabbitMQ URL, or skips (fails when required):
// the private node's when the test called PrivateBroker or
// PrivateBrokerAlone first, else the shared broker's. On the shared broker
// the test holds a shared lock until it ends (bench/cmd/faults takes it
// exclusively).
func AMQPURL(t testing.TB) string {
	if u, ok := routedURL(t); ok {
		return u
	}
	u := reachable(t, "RabbitMQ", env("BORDA_TEST_AMQP_URL", DefaultAMQPURL))
	brokerLock(t, syscall.LOCK_SH)
	return u
}

// BrokerLockPath is the file every test binary (and bench/cmd/faults,
// while it raises a memory alarm) flocks around the shared RabbitMQ:
// shared to publish, exclusive to raise a broker-wide alarm.
func BrokerLockPath() string {
	return filepath.Join(os.TempDir(), "borda-servicetest-broker.lock")
}

var (
	locksMu sync.Mutex
	locks   = map[testing.TB]*os.File{}
)

// brokerLock takes (or converts to) a flock on a file every test binary of
// this machine shares, released when t ends.
func brokerLock(t testing.TB, how int) {
	t.Helper()
	locksMu.Lock()
	f, held := locks[t]
	if !held {
		var err error
		f, err = os.OpenFile(BrokerLockPath(), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			locksMu.Unlock()
			t.Fatalf("servicetest: opening the broker lock: %v", err)
		}
		locks[t] = f
	}
	locksMu.Unlock()
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		t.Fatalf("servicetest: taking the broker lock: %v", err)
	}
	if !held {
		t.Cleanup(func() {
			locksMu.Lock()
			delete(locks, t)
			locksMu.Unlock()
			f.Close() // releases the flock
		})
	}
}

// DatabaseURL returns the test PostgreSQL URL, or skips (fails when
// required).
func DatabaseURL(t testing.TB) string {
	return reachable(t, "PostgreSQL", env("BORDA_TEST_DATABASE_URL", DefaultDatabaseURL))
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func reachable(t testing.TB, what, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("servicetest: bad %s URL %q: %v", what, raw, err)
	}
	host := u.Host
	if u.Port() == "" {
		switch u.Scheme {
		case "redis", "rediss":
			host = net.JoinHostPort(u.Hostname(), "6379")
		case "amqp":
			host = net.JoinHostPort(u.Hostname(), "5672")
		default:
			host = net.JoinHostPort(u.Hostname(), "5432")
		}
	}
	c, err := net.DialTimeout("tcp", host, 2*time.Second)
	if err != nil {
		if Required() {
			t.Fatalf("%s at %s is unreachable and BORDA_REQUIRE_SERVICES=1: %v", what, host, err)
		}
		t.Skipf("%s at %s is unreachable (%v); skipping (set BORDA_REQUIRE_SERVICES=1 to fail instead)", what, host, err)
	}
	c.Close()
	return raw
}

var unsafe = regexp.MustCompile(`[^a-z0-9]+`)

// Name returns a name no other test run uses, built from the test's name:
// "borda-t-<test>-<random>", lower-case, safe for queue names and key
// segments.
func Name(t testing.TB) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	n := strings.Trim(unsafe.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(n) > 40 {
		n = n[:40]
	}
	return "borda-t-" + n + "-" + hex.EncodeToString(b)
}

// KeyPrefix returns a Redis key prefix unique to this test, under the
// development environment's prefix: "olp-dev:t<random>:".
func KeyPrefix(t testing.TB) string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return "olp-dev:t" + hex.EncodeToString(b) + ":"
}
