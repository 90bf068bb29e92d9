package servicetest

import (
	"net/http/httptest"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/upstashtest"
	"github.com/olp-edu/borda/redisconn"
)

// RESTToken is the bearer token of the REST fronts RESTFront starts.
const RESTToken = "servicetest-rest-token"

// Redis transports: the two ways Borda reaches Redis. A conformance test
// runs once over each (RedisTransports, RedisClientOver).
const (
	// RESP is redis:// (go-redis on a socket).
	RESP = "resp"
	// REST is the Upstash REST API: redisconn's REST client through
	// internal/upstashtest in front of the same Redis.
	REST = "rest"
)

// RedisTransports lists RESP and REST, for t.Run matrices.
var RedisTransports = []string{RESP, REST}

// RESTFront starts the Upstash REST test server (internal/upstashtest,
// token RESTToken) in front of the Redis at url, and returns it and its
// base URL; both are closed at cleanup.
func RESTFront(t testing.TB, url string) (*upstashtest.Server, string) {
	t.Helper()
	front := upstashtest.New(RedisClient(t, url, false), RESTToken)
	srv := httptest.NewServer(front)
	t.Cleanup(srv.Close)
	return front, srv.URL
}

// RESTClient returns a client of restURL built exactly as production
// builds it from UPSTASH_REDIS_REST_URL and _TOKEN alone (redisconn.New
// with the default timeouts), closed at cleanup.
func RESTClient(t testing.TB, restURL string) redis.UniversalClient {
	t.Helper()
	c, err := redisconn.New(redisconn.Options{RESTURL: restURL, RESTToken: RESTToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// RedisClientOver returns a client of the test Redis (RedisURL, or a skip)
// over transport: RESP (RedisClient) or REST (RESTClient through a
// RESTFront of its own).
func RedisClientOver(t testing.TB, transport string) redis.UniversalClient {
	t.Helper()
	url := RedisURL(t)
	switch transport {
	case RESP:
		return RedisClient(t, url, false)
	case REST:
		_, restURL := RESTFront(t, url)
		return RESTClient(t, restURL)
	}
	t.Fatalf("servicetest: unknown redis transport %q", transport)
	return nil
}
