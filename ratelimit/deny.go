package ratelimit

import (
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// denyCache remembers keys that are over their enforced limit until their
// window resets, so later requests for them are refused from memory
// without a store call (Envoy's over-limit local cache): an attacker
// hammering one key cannot turn into store load. Bounded LRU; an entry is
// dropped when read after its deadline.
type denyCache struct {
	c *lru.Cache[string, time.Time]
}

func newDenyCache(size int) *denyCache {
	c, _ := lru.New[string, time.Time](size) // only errors on size ≤ 0
	return &denyCache{c: c}
}

// get returns the time key is refused until, when that is after now.
func (d *denyCache) get(key string, now time.Time) (time.Time, bool) {
	until, ok := d.c.Get(key)
	if !ok {
		return time.Time{}, false
	}
	if !now.Before(until) {
		d.c.Remove(key)
		return time.Time{}, false
	}
	return until, true
}

func (d *denyCache) add(key string, until time.Time) {
	if key != "" {
		d.c.Add(key, until)
	}
}

func (d *denyCache) purge() { d.c.Purge() }
