// Package redisconn builds the go-redis client every Borda component shares,
// with settings chosen for a request path that must never wait on Redis
// longer than its own deadline (docs/reliability.md):
//
//   - ContextTimeoutEnabled: a context deadline bounds the whole command,
//     not only the wait for a pooled connection;
//   - MaxRetries -1 and DialerRetries 1: no retry multiplies a dead
//     server's latency (go-redis otherwise dials 5 times, 100 ms apart);
//   - short dial, read, write and pool timeouts (configs.Redis).
package redisconn

import (
	"errors"
	"fmt"
	"net/url"
	"runtime"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/configs"
)

// ErrNoURL is returned by New when cfg.URL is empty.
var ErrNoURL = errors.New("redisconn: redis.url is empty")

// New returns a client for cfg.URL (redis:// or rediss://; a Redis Cluster
// seed when cfg.Cluster). It does not dial: the first command does, so a
// gateway starts while Redis is down. Errors: ErrNoURL, or a parse error
// naming the URL's problem.
func New(cfg configs.Redis) (redis.UniversalClient, error) {
	raw := cfg.URL.Reveal()
	if raw == "" {
		return nil, ErrNoURL
	}
	pool := cfg.PoolSize
	if pool == 0 {
		pool = 10 * runtime.GOMAXPROCS(0)
	}
	opt := &redis.UniversalOptions{
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialerRetries:         1,
		DialTimeout:           cfg.DialTimeout.D(),
		ReadTimeout:           cfg.ReadTimeout.D(),
		WriteTimeout:          cfg.WriteTimeout.D(),
		PoolTimeout:           cfg.DialTimeout.D(),
		PoolSize:              pool,
		DisableIdentity:       true,
	}
	if cfg.Cluster {
		c, err := redis.ParseClusterURL(raw)
		if err != nil {
			return nil, fmt.Errorf("parsing redis.url as a cluster URL: %w", withoutURL(err))
		}
		opt.IsClusterMode = true
		opt.Addrs, opt.Username, opt.Password, opt.TLSConfig = c.Addrs, c.Username, c.Password, c.TLSConfig
	} else {
		c, err := redis.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("parsing redis.url: %w", withoutURL(err))
		}
		opt.Addrs, opt.Username, opt.Password, opt.DB, opt.TLSConfig = []string{c.Addr}, c.Username, c.Password, c.DB, c.TLSConfig
	}
	return redis.NewUniversalClient(opt), nil
}

// withoutURL drops the URL from a net/url parse error: it carries the
// password.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
