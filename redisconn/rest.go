package redisconn

import (
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/redisconn/restconn"
)

// newREST returns a client of opt's timeouts, retries and pool whose
// connections speak the Upstash REST API (restconn): RESP2 (restconn
// translates JSON replies to RESP2) and no HELLO (opt already skips CLIENT
// SETINFO: REST has no connection to name).
func newREST(o Options, opt *redis.UniversalOptions) (redis.UniversalClient, error) {
	rc, err := restconn.NewClient(o.RESTURL, o.RESTToken, nil, opt.PoolSize, opt.DialTimeout)
	if err != nil {
		return nil, fmt.Errorf("building the upstash rest client: %w", err)
	}
	opt.Addrs = []string{rc.Host()}
	// restconn's connections are views of one HTTP client: there is no
	// socket to keep warm (its HTTPS connections are dialled on demand).
	opt.MinIdleConns = 0
	opt.Dialer = restconn.Dialer(rc)
	opt.Protocol = 2
	return redis.NewClient(opt.Simple()), nil
}
