package configs

import (
	"fmt"
	"os"
	"strings"
)

// ValidationError lists every problem found in a configuration, one per
// line, each naming its field ("routes[0].upstream: is required").
// `borda` prints it and exits with code 2.
type ValidationError struct {
	Problems []string
}

func (e *ValidationError) Error() string {
	return "invalid config:\n  " + strings.Join(e.Problems, "\n  ")
}

type problems []string

func (p *problems) addf(field, format string, args ...any) {
	*p = append(*p, field+": "+fmt.Sprintf(format, args...))
}

// EnvPrefix returns the Redis key prefix of an environment: olp: for
// production, olp-stg: for staging, olp-dev: for development, "" for an
// unknown one.
func EnvPrefix(env string) string {
	switch env {
	case EnvProduction:
		return "olp:"
	case EnvStaging:
		return "olp-stg:"
	case EnvDevelopment:
		return "olp-dev:"
	}
	return ""
}

// KeyPrefix returns the effective Redis key prefix: redis.key_prefix when
// set (Validate checks it starts with the environment's), else the
// environment's.
func (c Config) KeyPrefix() string {
	if c.Redis.KeyPrefix != "" {
		return c.Redis.KeyPrefix
	}
	return EnvPrefix(c.Environment)
}

// Validate checks the whole configuration, fills derived fields (parsed
// CIDRs and URLs, rule defaults) and returns a *ValidationError listing
// every problem, or nil.
func (c *Config) Validate() error {
	return c.validate(os.LookupEnv)
}

func (c *Config) validate(lookup func(string) (string, bool)) error {
	var p problems
	envPrefix := EnvPrefix(c.Environment)
	if envPrefix == "" {
		p.addf("environment", "%q: want production, staging or development", c.Environment)
	}
	if c.Redis.KeyPrefix != "" && envPrefix != "" && !strings.HasPrefix(c.Redis.KeyPrefix, envPrefix) {
		p.addf("redis.key_prefix", "%q must start with %q in %s (a %s process never writes another environment's keys)",
			c.Redis.KeyPrefix, envPrefix, c.Environment, c.Environment)
	}
	if c.Redis.KeyPrefix != "" && !strings.HasSuffix(c.Redis.KeyPrefix, ":") {
		p.addf("redis.key_prefix", "%q must end with ':'", c.Redis.KeyPrefix)
	}
	if u := c.Redis.URL.Reveal(); u != "" && !strings.HasPrefix(u, "redis://") && !strings.HasPrefix(u, "rediss://") {
		p.addf("redis.url", "must start with redis:// or rediss://")
	}
	if c.Redis.RestURL != "" {
		if !strings.HasPrefix(c.Redis.RestURL, "https://") && !strings.HasPrefix(c.Redis.RestURL, "http://") {
			p.addf("redis.rest_url", "must be an http(s) URL")
		}
		if c.Redis.RestToken == "" {
			p.addf("redis.rest_token", "is required with redis.rest_url (UPSTASH_REDIS_REST_TOKEN)")
		}
	}
	if c.Redis.DialTimeout <= 0 || c.Redis.ReadTimeout <= 0 || c.Redis.WriteTimeout <= 0 {
		p.addf("redis", "dial_timeout, read_timeout and write_timeout must be positive")
	}
	if u := c.AMQP.URL.Reveal(); u != "" && !strings.HasPrefix(u, "amqp://") && !strings.HasPrefix(u, "amqps://") {
		p.addf("amqp.url", "must start with amqp:// or amqps://")
	}
	if u := c.Database.URL.Reveal(); u != "" && !strings.HasPrefix(u, "postgres://") && !strings.HasPrefix(u, "postgresql://") {
		p.addf("database.url", "must start with postgres:// or postgresql://")
	}
	if c.Listen == "" {
		p.addf("listen", "is required")
	}
	if c.Shutdown.Drain < 0 {
		p.addf("shutdown.drain", "must not be negative")
	}
	c.validateGateway(&p)
	c.validateRateLimits(&p)
	c.validateTelemetry(&p)
	c.validateWebhook(&p, lookup)
	c.validateForward(&p)
	if len(p) > 0 {
		return &ValidationError{Problems: p}
	}
	return nil
}
