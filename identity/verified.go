package identity

import (
	"crypto/sha256"
	"time"

	"github.com/golang-jwt/jwt/v5"
	lru "github.com/hashicorp/golang-lru/v2"
)

// verifiedCacheSize bounds the cache of verified tokens (entries of about
// 100 bytes: the token's SHA-256 and the identity).
const verifiedCacheSize = 10_000

// verifiedCacheTTL bounds how long a verified token is believed without
// checking its signature and claims again. A key removed from the JWKS
// does not wait for it: a fetch that changes the key set forgets every
// cached token (keySet.generation).
const verifiedCacheTTL = time.Minute

// verified is one cached verification.
type verified struct {
	id    Identity
	until time.Time // the token's exp plus the leeway, or cached-at + verifiedCacheTTL, whichever is first
	gen   uint64    // the key set's generation the token verified under
}

// verifiedCache remembers tokens that verified, keyed by their SHA-256,
// so a portal session's token is parsed and its signature checked once a
// minute, not on every request (HS256 costs ~4 µs, RS256 ~40 µs, ES256
// more). Only successes are kept: a forged token is checked every time.
type verifiedCache struct {
	lru    *lru.Cache[[sha256.Size]byte, verified]
	leeway time.Duration
}

func newVerifiedCache(leeway time.Duration) *verifiedCache {
	c, _ := lru.New[[sha256.Size]byte, verified](verifiedCacheSize) // errors only for a size ≤ 0
	return &verifiedCache{lru: c, leeway: leeway}
}

// get returns the identity of token when it verified before, under key
// set generation gen, and is still within its expiry at now.
func (c *verifiedCache) get(token string, now time.Time, gen uint64) (Identity, bool) {
	e, ok := c.lru.Get(sha256.Sum256([]byte(token)))
	if !ok || !now.Before(e.until) || e.gen != gen {
		return Identity{}, false
	}
	return e.id, true
}

// add remembers that token verified as id at now under generation gen.
func (c *verifiedCache) add(token string, id Identity, claims jwt.MapClaims, now time.Time, gen uint64) {
	until := now.Add(verifiedCacheTTL)
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil {
		if limit := exp.Add(c.leeway); limit.Before(until) {
			until = limit
		}
	}
	c.lru.Add(sha256.Sum256([]byte(token)), verified{id: id, until: until, gen: gen})
}
