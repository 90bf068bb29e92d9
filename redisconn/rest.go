package redisconn

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/redisconn/restconn"
)

// newREST returns a client whose connections speak the Upstash REST API
// (restconn): RESP2 (restconn translates JSON replies to RESP2), no HELLO
// and no CLIENT SETINFO (REST has no connection to name), the same
// timeouts, retries and pool as a RESP client.
func newREST(o Options, pool int, dial, read, write time.Duration) (redis.UniversalClient, error) {
	rc, err := restconn.NewClient(o.RESTURL, o.RESTToken, nil, pool, dial)
	if err != nil {
		return nil, fmt.Errorf("building the upstash rest client: %w", err)
	}
	return redis.NewClient(&redis.Options{
		Addr:                  rc.Host(),
		Dialer:                restconn.Dialer(rc),
		Protocol:              2,
		DisableIdentity:       true,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialerRetries:         1,
		DialTimeout:           dial,
		ReadTimeout:           read,
		WriteTimeout:          write,
		PoolTimeout:           dial,
		PoolSize:              pool,
	}), nil
}
