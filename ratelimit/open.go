package ratelimit

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/redis/go-redis/v9"
)

// StoreKind selects the Store NewStore builds.
type StoreKind uint8

// Store kinds.
const (
	// StoreMemory is the embedded MemoryStore (one instance counts alone).
	StoreMemory StoreKind = iota
	// StoreRedis is a RedisStore on StoreOptions.Redis.
	StoreRedis
	// StoreREST is a RESTStore on Upstash's REST API.
	StoreREST
)

// String returns the kind as logs and `borda config check` name it
// (memory, redis, upstash-rest).
func (k StoreKind) String() string {
	switch k {
	case StoreMemory:
		return "memory"
	case StoreRedis:
		return "redis"
	case StoreREST:
		return "upstash-rest"
	}
	return fmt.Sprintf("StoreKind(%d)", uint8(k))
}

// StoreOptions configures NewStore.
type StoreOptions struct {
	// Kind selects the store.
	Kind StoreKind
	// Redis is the client of StoreRedis (required then; build it with
	// redisconn.New and share it).
	Redis redis.UniversalClient
	// RESTURL and RESTToken reach Upstash's REST API (StoreREST): an
	// absolute http(s) URL and the bearer token.
	RESTURL   string
	RESTToken string
	// HTTPClient carries the REST calls; nil: a default (NewRESTStore).
	HTTPClient *http.Client
}

// NewStore returns the Store o selects. Errors: StoreRedis without a
// client, a bad REST URL or an empty token (NewRESTStore), an unknown
// kind.
func NewStore(o StoreOptions) (Store, error) {
	switch o.Kind {
	case StoreRedis:
		if o.Redis == nil {
			return nil, errors.New("creating the rate-limit store: redis.url is set but no client was given")
		}
		return NewRedisStore(o.Redis), nil
	case StoreREST:
		return NewRESTStore(o.RESTURL, o.RESTToken, o.HTTPClient)
	case StoreMemory:
		return NewMemoryStore(0), nil
	default:
		return nil, fmt.Errorf("creating the rate-limit store: unknown store kind %v", o.Kind)
	}
}
