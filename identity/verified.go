package identity

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
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

// keySet is the JWKS key storage; every replacement that changes the keys
// (a fetch that added, removed or altered one) starts a new generation,
// so tokens verified under the old keys are checked again.
type keySet struct {
	jwkset.Storage
	gen atomic.Uint64

	mu   sync.Mutex
	last []byte // fingerprint of the keys of the last replacement
}

// generation returns the current generation; 0 on a nil keySet.
func (k *keySet) generation() uint64 {
	if k == nil {
		return 0
	}
	return k.gen.Load()
}

// KeyReplaceAll replaces the keys and starts a new generation when they
// differ from the previous ones.
func (k *keySet) KeyReplaceAll(ctx context.Context, given []jwkset.JWK) error {
	if err := k.Storage.KeyReplaceAll(ctx, given); err != nil {
		return err
	}
	var fp bytes.Buffer
	for _, j := range given {
		b, _ := json.Marshal(j.Marshal()) // public parts only (no private key requested)
		fp.Write(b)
		fp.WriteByte('\n')
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !bytes.Equal(fp.Bytes(), k.last) {
		k.last = fp.Bytes()
		k.gen.Add(1)
	}
	return nil
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
