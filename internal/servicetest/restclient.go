package servicetest

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/upstashtest"
	"github.com/olp-edu/borda/redisconn"
)

// RESTToken is the bearer token of the REST fronts RESTFront starts.
const RESTToken = "servicetest-rest-token"

// Redis transports: the two ways Borda reaches Redis. A conformance test
// runs once over each (ForEachRedisTransport).
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
// base URL; both are closed at cleanup. Its own Redis client reads with
// RESTReadTimeout: at the 100 ms default a loaded machine failed a
// forwarder script there ("read tcp …: i/o timeout"), a failure the RESP
// tests' 1 s clients never see.
func RESTFront(t testing.TB, url string) (*upstashtest.Server, string) {
	t.Helper()
	rdb, err := redisconn.New(redisconn.Options{URL: url, ReadTimeout: RESTReadTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	front := upstashtest.New(rdb, RESTToken)
	srv := httptest.NewServer(front)
	t.Cleanup(srv.Close)
	return front, srv.URL
}

// RESTReadTimeout is the read timeout of RESTClient: a request through
// the in-process test server (HTTP, JSON, then Redis) under -race on a
// loaded machine was seen to take 150 ms, past the 100 ms default, which
// a RESP round trip to the same Redis never does.
const RESTReadTimeout = time.Second

// RESTClient returns a client of restURL built as production builds it
// from UPSTASH_REDIS_REST_URL and _TOKEN alone (redisconn.New), with
// RESTReadTimeout, closed at cleanup.
func RESTClient(t testing.TB, restURL string) redis.UniversalClient {
	t.Helper()
	c, err := redisconn.New(redisconn.Options{RESTURL: restURL, RESTToken: RESTToken, ReadTimeout: RESTReadTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// RedisOver returns a client of the test Redis (RedisURL, or a skip) over
// transport: RESP (RedisClient) or REST (RESTClient through a RESTFront
// of its own, returned for tests that count requests; nil on RESP).
func RedisOver(t testing.TB, transport string) (redis.UniversalClient, *upstashtest.Server) {
	t.Helper()
	url := RedisURL(t)
	switch transport {
	case RESP:
		return RedisClient(t, url, false), nil
	case REST:
		front, restURL := RESTFront(t, url)
		return RESTClient(t, restURL), front
	}
	t.Fatalf("servicetest: unknown redis transport %q", transport)
	return nil, nil
}

// ForEachRedisTransport runs fn once per transport (RESP, REST) as a
// parallel subtest named after it, with RedisOver's client and front: the
// conformance matrix of what Borda keeps in Redis.
func ForEachRedisTransport(t *testing.T, fn func(t *testing.T, rdb redis.UniversalClient, front *upstashtest.Server)) {
	t.Helper()
	for _, transport := range RedisTransports {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			rdb, front := RedisOver(t, transport)
			fn(t, rdb, front)
		})
	}
}

// RESTClientWith is RESTClient with another token and read timeout (0:
// redisconn's default).
func RESTClientWith(t testing.TB, restURL, token string, read time.Duration) redis.UniversalClient {
	t.Helper()
	c, err := redisconn.New(redisconn.Options{RESTURL: restURL, RESTToken: token, ReadTimeout: read})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
