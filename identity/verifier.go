// Package identity says who a request is, from a verified token only:
// the Verifier checks the JWT the upstream will see as the request's
// credential (cookies.Resolve) with golang-jwt/jwt/v5 (HS256 from a
// shared secret, or RS256/ES256 from a JWKS document fetched at start and
// refreshed in the background, github.com/MicahParks/jwkset), so
// verification never costs a network call on the request path. An
// unverifiable token makes the request anonymous; it is never rejected
// here (the upstream is the authority on authentication). See
// docs/edge.md, Identity.
package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"

	"github.com/olp-edu/borda/cookies"
	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/internal/startstop"
)

// Identity is who a request is, from a verified token only. The zero
// Identity is anonymous: user and escola rate limits do not apply to it.
type Identity struct {
	// UserID is usuario_id (claim auth.user_claim, default "sub").
	UserID string
	// EscolaID is escola_id (dotted claim auth.escola_claim, default
	// "app_metadata.escola_id"); may be empty for a verified user.
	EscolaID string
}

// Anonymous reports whether the identity carries nothing verified.
func (id Identity) Anonymous() bool { return id.UserID == "" && id.EscolaID == "" }

// maxClaimBytes bounds an identity value (it becomes part of Redis keys).
const maxClaimBytes = 256

// Options configures NewVerifier (docs/configuration.md, auth).
type Options struct {
	// Secret is the HS256 shared secret; empty: no HS256.
	Secret []byte
	// JWKSURL is the JWKS document of RS256/ES256 keys; empty: none.
	JWKSURL string
	// JWKSRefresh is how often the JWKS is fetched again; must be
	// positive with a JWKSURL (auth.jwks_refresh holds the default).
	JWKSRefresh time.Duration
	// UserClaim and EscolaClaim are dotted claim paths ("sub",
	// "app_metadata.escola_id").
	UserClaim   string
	EscolaClaim string
	// Leeway is the clock skew allowed on exp, nbf and iat.
	Leeway time.Duration
	// RequireExp refuses a token without exp.
	RequireExp bool
	// Issuer and Audience, when set, must match iss and aud.
	Issuer   string
	Audience string
	// Clock decides exp, nbf and iat and the verified-token cache's
	// expiry (nil: the wall clock).
	Clock clock.Clock
}

// Verifier verifies access tokens: HS256 with the shared secret and/or
// RS256/ES256 with the keys of a JWKS document. A nil *Verifier verifies
// nothing (every request is anonymous). Safe for concurrent use.
type Verifier struct {
	parser      *jwt.Parser
	secret      []byte
	jwks        keyfunc.Keyfunc
	keys        *keySet        // the key set jwks reads; its generation invalidates the cache
	refetcher   jwkset.Storage // refetches the JWKS when asked for a kid it does not hold
	refetching  atomic.Bool    // one unknown-kid refetch at a time
	kidLimiter  *rate.Limiter  // unknown-kid refetches: one per UnknownKIDRefetchEvery
	refresh     time.Duration  // the JWKS refresh interval (Start)
	userClaim   []string
	escolaClaim []string
	cache       *verifiedCache
	now         func() time.Time // the parser's and the refetch limiter's clock too

	// ctx bounds the unknown-kid refetches; Stop cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	bg     startstop.Runner // the JWKS refresher
}

// NewVerifier builds the Verifier of o, or returns nil (no error) when o
// has neither a secret nor a JWKS URL.
//
// With a JWKS URL the key set is fetched once here, within ctx (a failure
// is logged, not returned: tokens stay anonymous until a fetch succeeds);
// Start fetches it again every o.JWKSRefresh until Stop. Each fetch
// replaces the whole key set, so a key removed from the document stops
// verifying at the next fetch (verified tokens cached under the old set
// are forgotten). A token whose kid is not in the set is anonymous and
// starts a fetch in the background, at most one every
// UnknownKIDRefetchEvery: verification itself never waits on the
// network. Errors: a JWKS URL the client refuses (redacted), a JWKS URL
// without a positive JWKSRefresh.
func NewVerifier(ctx context.Context, o Options, logger *slog.Logger) (*Verifier, error) {
	if len(o.Secret) == 0 && o.JWKSURL == "" {
		return nil, nil
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if o.JWKSURL != "" && o.JWKSRefresh <= 0 {
		return nil, fmt.Errorf("identity: a JWKS URL needs a positive JWKSRefresh (got %s)", o.JWKSRefresh)
	}
	var methods []string
	v := &Verifier{
		userClaim:   strings.Split(o.UserClaim, "."),
		escolaClaim: strings.Split(o.EscolaClaim, "."),
		cache:       newVerifiedCache(o.Leeway),
		now:         clock.Or(o.Clock).Now,
		refresh:     o.JWKSRefresh,
		keys:        &keySet{Storage: jwkset.NewMemoryStorage()},
	}
	v.ctx, v.cancel = context.WithCancel(context.WithoutCancel(ctx))
	if len(o.Secret) > 0 {
		v.secret = append([]byte(nil), o.Secret...)
		methods = append(methods, "HS256")
	}
	if o.JWKSURL != "" {
		if err := v.loadJWKS(ctx, o.JWKSURL, logger); err != nil {
			v.cancel()
			return nil, err
		}
		methods = append(methods, "RS256", "ES256")
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(methods),
		jwt.WithLeeway(o.Leeway),
		jwt.WithIssuedAt(),
		jwt.WithJSONNumber(),
		// Canonical base64url only (no trailing bits set): the spelling the
		// gateway forwards is the one verified (cookies.NonCanonicalJWS).
		jwt.WithStrictDecoding(),
		jwt.WithTimeFunc(func() time.Time { return v.now() }),
	}
	if o.RequireExp {
		opts = append(opts, jwt.WithExpirationRequired())
	}
	if o.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(o.Issuer))
	}
	if o.Audience != "" {
		opts = append(opts, jwt.WithAudience(o.Audience))
	}
	v.parser = jwt.NewParser(opts...)
	return v, nil
}

// FromRequest verifies the request's one credential on a route with
// cookie policy forward (cookies.Resolve, with Verifies deciding between
// candidates). It returns the anonymous Identity and false when there is
// no credential, it does not verify, or the request carries two different
// credentials (cookies.ErrConflict, which the gateway answers 400 before
// asking).
func (v *Verifier) FromRequest(h http.Header, forward []cookies.Forward) (Identity, bool) {
	if v == nil {
		return Identity{}, false
	}
	r, err := cookies.Resolve(h, forward, v.Verifies)
	if err != nil || r.Token == "" {
		return Identity{}, false
	}
	return v.Verify(r.Token)
}

// Verifies reports whether token verifies (Verify); it is the verify
// callback of cookies.Resolve. False on a nil Verifier.
func (v *Verifier) Verifies(token string) bool {
	_, ok := v.Verify(token)
	return ok
}

// Verify checks token's signature (HS256, RS256, ES256) and its
// registered claims (docs/edge.md, Identity): exp, nbf and iat with
// auth.leeway when present (exp required when auth.require_exp; iat must
// not be in the future), iss and aud when auth.issuer / auth.audience are
// set; then it reads the user and escola claims (strings or JSON numbers;
// dotted paths walk nested objects). Any failure, a token longer than
// cookies.MaxTokenBytes, or a token without the user claim returns the anonymous
// Identity and false. Verify never waits on network I/O (an unknown kid
// starts a background JWKS fetch, see NewVerifier).
//
// A token that verified is remembered (by its SHA-256) until its exp plus
// the leeway, at most one minute, and only while the JWKS key set is the
// one it verified under, so the signature of a session's token is not
// checked on every request; tokens that fail are checked every time.
func (v *Verifier) Verify(token string) (Identity, bool) {
	if v == nil || token == "" || len(token) > cookies.MaxTokenBytes {
		return Identity{}, false
	}
	if strings.Count(token, ".") != 2 {
		// Not a JWS in compact form (header.payload.signature): the
		// parser would refuse it too, after a hash, a cache lookup and
		// seven allocations of error values.
		return Identity{}, false
	}
	now := v.now()
	gen := v.keys.generation()
	if id, ok := v.cache.get(token, now, gen); ok {
		return id, true
	}
	claims := jwt.MapClaims{}
	if _, err := v.parser.ParseWithClaims(token, claims, v.key); err != nil {
		return Identity{}, false
	}
	id := Identity{UserID: claimString(claims, v.userClaim), EscolaID: claimString(claims, v.escolaClaim)}
	if id.UserID == "" {
		return Identity{}, false
	}
	v.cache.add(token, id, claims, now, gen)
	return id, true
}

var (
	errNoKey    = errors.New("no key for the token's algorithm")
	errCritical = errors.New("the token's crit header names an extension the verifier does not understand")
)

// key returns the key t's signature is checked with. A token whose
// header has a "crit" parameter is refused before any key is looked up:
// RFC 7515 §4.1.11 requires a recipient to reject a JWS whose crit lists
// an extension it does not understand, and the verifier understands none
// (fresh attack pass 2 A40: {"crit":["exp2"]} verified and was counted as
// the user, while an upstream that honours crit refuses it). go-jose and
// jose4j refuse such tokens the same way.
func (v *Verifier) key(t *jwt.Token) (any, error) {
	if _, ok := t.Header["crit"]; ok {
		return nil, errCritical
	}
	switch t.Method.(type) {
	case *jwt.SigningMethodHMAC:
		if v.secret != nil {
			return v.secret, nil
		}
	case *jwt.SigningMethodRSA, *jwt.SigningMethodECDSA:
		if v.jwks != nil {
			k, err := v.jwks.Keyfunc(t)
			if kid, ok := t.Header["kid"].(string); ok && errors.Is(err, jwkset.ErrKeyNotFound) {
				v.refetchUnknownKID(kid)
			}
			return k, err
		}
	}
	return nil, errNoKey
}

// claimString walks a dotted claim path and returns a string or integer
// value as text; other types, empty strings, over-long values and values
// with control characters give "".
func claimString(claims map[string]any, path []string) string {
	var cur any = claims
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		if cur, ok = m[p]; !ok {
			return ""
		}
	}
	var s string
	switch x := cur.(type) {
	case string:
		s = x
	case json.Number:
		s = x.String()
	default:
		return ""
	}
	if len(s) > maxClaimBytes {
		return ""
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return ""
		}
	}
	return s
}
