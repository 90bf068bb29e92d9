package ratelimit

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/configs"
)

// NewStore returns the Store cfg selects by cfg.StoreKind(): "redis" → a
// RedisStore on rdb (required then; build it with redisconn.New(cfg.Redis)
// and share it), "upstash-rest" → a RESTStore on redis.rest_url and
// rest_token with httpClient (nil: a default), "memory" → a MemoryStore.
func NewStore(cfg configs.Config, rdb redis.UniversalClient, httpClient *http.Client) (Store, error) {
	switch kind := cfg.StoreKind(); kind {
	case "redis":
		if rdb == nil {
			return nil, errors.New("creating the rate-limit store: redis.url is set but no client was given")
		}
		return NewRedisStore(rdb), nil
	case "upstash-rest":
		return NewRESTStore(cfg.Redis.RestURL, cfg.Redis.RestToken, httpClient)
	case "memory":
		return NewMemoryStore(0), nil
	default:
		return nil, fmt.Errorf("creating the rate-limit store: unknown store kind %q", kind)
	}
}
