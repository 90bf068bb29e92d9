package main

import (
	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/redisconn"
)

// redisOptions maps the redis section to the shared client's options:
// redis.url, or (when it is empty) the Upstash REST URL and token, over
// which the same client speaks (redisconn/restconn).
func redisOptions(r configs.Redis) redisconn.Options {
	return redisconn.Options{
		URL:          r.URL.Reveal(),
		RESTURL:      r.RestURL,
		RESTToken:    r.RestToken.Reveal(),
		Cluster:      r.Cluster,
		DialTimeout:  r.DialTimeout.D(),
		ReadTimeout:  r.ReadTimeout.D(),
		WriteTimeout: r.WriteTimeout.D(),
		PoolSize:     r.PoolSize,
	}
}
