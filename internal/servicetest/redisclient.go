package servicetest

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/redisconn"
)

// RedisClient returns a client for url built exactly as production builds
// it (redisconn.New with the default timeouts; a Redis Cluster seed URL
// when cluster), closed at cleanup.
func RedisClient(t testing.TB, url string, cluster bool) redis.UniversalClient {
	t.Helper()
	c, err := redisconn.New(redisconn.Options{URL: url, Cluster: cluster})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
