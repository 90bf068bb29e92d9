package cookies

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

	"github.com/olp-edu/borda/configs"
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

type identityKey struct{}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity WithIdentity stored in ctx, and
// whether there was one that is not anonymous.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, _ := ctx.Value(identityKey{}).(Identity)
	return id, !id.Anonymous()
}

// AuthCookie is the cookie holding the portal's access token.
const AuthCookie = "olp_auth"

// maxClaimBytes bounds an identity value (it becomes part of Redis keys).
const maxClaimBytes = 256

// Verifier verifies access tokens: HS256 with the shared secret
// (auth.jwt_secret_env) and/or RS256/ES256 with the keys of auth.jwks_url.
// A nil *Verifier verifies nothing (every request is anonymous). Safe for
// concurrent use.
type Verifier struct {
	parser      *jwt.Parser
	secret      []byte
	jwks        keyfunc.Keyfunc
	keys        *keySet        // the key set jwks reads; its generation invalidates the cache
	refetcher   jwkset.Storage // refetches the JWKS when asked for a kid it does not hold
	refetching  atomic.Bool    // one unknown-kid refetch at a time
	kidLimiter  *rate.Limiter  // unknown-kid refetches: one per UnknownKIDRefetchEvery
	ctx         context.Context
	userClaim   []string
	escolaClaim []string
	cancel      context.CancelFunc
	cache       *verifiedCache
	now         func() time.Time // the parser's and the refetch limiter's clock too
}

// UnknownKIDRefetchEvery is the least time between two JWKS fetches
// triggered by tokens whose kid the key set does not hold: a key the
// issuer just added verifies as soon as the fetch its first token
// triggered completes, and a flood of made-up kids costs the JWKS server
// at most one request per interval.
const UnknownKIDRefetchEvery = 10 * time.Second

// jwksHTTPTimeout bounds one JWKS fetch.
const jwksHTTPTimeout = 5 * time.Second

// NewVerifier builds the Verifier of cfg, or returns nil (no error) when
// neither auth.jwt_secret_env's variable nor auth.jwks_url is set.
//
// With a JWKS URL the key set is fetched once here (a failure is logged,
// not returned: tokens stay anonymous until a fetch succeeds) and again
// every refresh interval in a goroutine that lives until Close or ctx
// ends; each fetch replaces the whole key set, so a key removed from the
// document stops verifying at the next fetch (verified tokens cached
// under the old set are forgotten). A token whose kid is not in the set
// is anonymous and starts a fetch in the background, at most one every
// UnknownKIDRefetchEvery: verification itself never waits on the
// network. refresh ≤ 0 means cfg.JWKSRefresh, and 1 minute when that is
// not set either.
func NewVerifier(ctx context.Context, cfg configs.Auth, refresh time.Duration, logger *slog.Logger) (*Verifier, error) {
	secret := cfg.JWTSecret.Reveal()
	if secret == "" && cfg.JWKSURL == "" {
		return nil, nil
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if refresh <= 0 {
		refresh = cfg.JWKSRefresh.D()
	}
	if refresh <= 0 {
		refresh = time.Minute
	}
	var methods []string
	v := &Verifier{
		userClaim:   strings.Split(cfg.UserClaim, "."),
		escolaClaim: strings.Split(cfg.EscolaClaim, "."),
		cancel:      func() {},
		cache:       newVerifiedCache(cfg.Leeway.D()),
		now:         time.Now,
		ctx:         ctx,
		keys:        &keySet{Storage: jwkset.NewMemoryStorage()},
	}
	if secret != "" {
		v.secret = []byte(secret)
		methods = append(methods, "HS256")
	}
	if cfg.JWKSURL != "" {
		if err := v.loadJWKS(ctx, cfg.JWKSURL, refresh, logger); err != nil {
			return nil, err
		}
		methods = append(methods, "RS256", "ES256")
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(methods),
		jwt.WithLeeway(cfg.Leeway.D()),
		jwt.WithIssuedAt(),
		jwt.WithJSONNumber(),
		// Canonical base64url only (no trailing bits set): the spelling the
		// gateway forwards is the one verified (cookies.NonCanonicalJWS).
		jwt.WithStrictDecoding(),
		jwt.WithTimeFunc(func() time.Time { return v.now() }),
	}
	if cfg.RequireExp {
		opts = append(opts, jwt.WithExpirationRequired())
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	v.parser = jwt.NewParser(opts...)
	return v, nil
}

// loadJWKS builds the key set of url: one jwkset HTTP storage (fetched
// now and every refresh, into v.keys) read through two clients, one for
// the request path that never fetches and one that fetches on an unknown
// kid, used only by refetchUnknownKID's goroutine.
func (v *Verifier) loadJWKS(ctx context.Context, url string, refresh time.Duration, logger *slog.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	store, err := jwkset.NewStorageFromHTTP(url, jwkset.HTTPClientStorageOptions{
		Ctx:                       ctx,
		HTTPTimeout:               jwksHTTPTimeout,
		NoErrorReturnFirstHTTPReq: true,
		RefreshInterval:           refresh,
		Storage:                   v.keys,
		RefreshErrorHandler: func(ctx context.Context, err error) {
			logger.WarnContext(ctx, "fetching JWKS failed", "error", configs.RedactError(err))
		},
	})
	if err != nil {
		cancel()
		return fmt.Errorf("loading JWKS: %w", configs.RedactError(err))
	}
	reader, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{HTTPURLs: map[string]jwkset.Storage{url: store}})
	if err == nil {
		v.refetcher, err = jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
			HTTPURLs:          map[string]jwkset.Storage{url: store},
			RefreshUnknownKID: rate.NewLimiter(rate.Inf, 1), // kidLimiter decides
		})
	}
	if err == nil {
		v.jwks, err = keyfunc.New(keyfunc.Options{Ctx: ctx, Storage: reader})
	}
	if err != nil {
		cancel()
		return fmt.Errorf("loading JWKS: %w", configs.RedactError(err))
	}
	v.kidLimiter = rate.NewLimiter(rate.Every(UnknownKIDRefetchEvery), 1)
	v.ctx, v.cancel = ctx, cancel
	return nil
}

// refetchUnknownKID fetches the JWKS again in the background for a token
// whose kid the key set does not hold, unless a fetch for that reason is
// running or ran less than UnknownKIDRefetchEvery ago.
func (v *Verifier) refetchUnknownKID(kid string) {
	if !v.refetching.CompareAndSwap(false, true) {
		return
	}
	if !v.kidLimiter.AllowN(v.now(), 1) {
		v.refetching.Store(false)
		return
	}
	go func() {
		defer v.refetching.Store(false)
		ctx, cancel := context.WithTimeout(v.ctx, jwksHTTPTimeout)
		defer cancel()
		_, _ = v.refetcher.KeyRead(ctx, kid) // fetch errors go to the RefreshErrorHandler
	}()
}

// Close stops the JWKS refresh goroutine. Safe on nil.
func (v *Verifier) Close() {
	if v != nil {
		v.cancel()
	}
}

// FromRequest verifies the token the upstream of a route with cookie
// policy forward will see as the request's credential: the
// Authorization: Bearer token when the request has Authorization, else
// the cookie ApplyRequest turns into the Bearer token (the first olp_*
// cookie forward lists AsAuthorization with a usable value), else the
// olp_auth cookie. A header the client names in Connection is not
// forwarded (RFC 9110 §7.6.1), so it is ignored here too: otherwise
// `Connection: Authorization` with a non-Bearer Authorization would leave
// the request anonymous while the upstream gets the olp_auth cookie as its
// Bearer token. It returns the anonymous Identity and false when there is
// no token or it does not verify.
func (v *Verifier) FromRequest(h http.Header, forward []Forward) (Identity, bool) {
	if v == nil {
		return Identity{}, false
	}
	h = forwardedView(h)
	if auth := h.Get("Authorization"); auth != "" {
		token, ok := bearerToken(auth)
		if !ok {
			return Identity{}, false
		}
		return v.Verify(token)
	}
	if token, ok := bearerCookie(h, forward); ok {
		return v.Verify(token)
	}
	if token, ok := cookieToken(h, AuthCookie); ok {
		return v.Verify(token)
	}
	return Identity{}, false
}

// BearerTooLarge reports whether the request's Authorization header, as
// the upstream would receive it, carries a Bearer token longer than
// MaxTokenBytes. The gateway answers such a request 431 instead of
// forwarding a credential Verify refuses to read (docs/edge.md,
// Identity). Works without a Verifier.
func BearerTooLarge(h http.Header) bool {
	auth := forwardedView(h).Get("Authorization")
	if len(auth) <= MaxTokenBytes {
		return false
	}
	token, ok := bearerToken(auth)
	return ok && len(token) > MaxTokenBytes
}

// forwardedView returns h without the Authorization and Cookie headers a
// Connection header names (they are hop-by-hop and never forwarded); h
// itself is not modified.
func forwardedView(h http.Header) http.Header {
	if len(h["Connection"]) > 0 && (connectionNames(h, "Authorization") || connectionNames(h, "Cookie")) {
		h = h.Clone()
		for _, name := range []string{"Authorization", "Cookie"} {
			if connectionNames(h, name) {
				delete(h, name)
			}
		}
	}
	return h
}

// bearerToken returns the token of an Authorization value with the
// Bearer scheme (any case), separated from it by spaces or tabs (RFC 9110
// §11.4 allows one or more SP; servers commonly accept HTAB too, so
// identity does as well), without surrounding whitespace.
func bearerToken(auth string) (string, bool) {
	i := strings.IndexAny(auth, " \t")
	if i < 0 || !strings.EqualFold(auth[:i], "Bearer") {
		return "", false
	}
	token := strings.Trim(auth[i:], " \t")
	return token, token != ""
}

// Verify checks token's signature (HS256, RS256, ES256) and its
// registered claims (docs/edge.md, Identity): exp, nbf and iat with
// auth.leeway when present (exp required when auth.require_exp; iat must
// not be in the future), iss and aud when auth.issuer / auth.audience are
// set; then it reads the user and escola claims (strings or JSON numbers;
// dotted paths walk nested objects). Any failure, a token longer than
// MaxTokenBytes, or a token without the user claim returns the anonymous
// Identity and false. Verify never waits on network I/O (an unknown kid
// starts a background JWKS fetch, see NewVerifier).
//
// A token that verified is remembered (by its SHA-256) until its exp plus
// the leeway, at most one minute, and only while the JWKS key set is the
// one it verified under, so the signature of a session's token is not
// checked on every request; tokens that fail are checked every time.
func (v *Verifier) Verify(token string) (Identity, bool) {
	if v == nil || token == "" || len(token) > MaxTokenBytes {
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

// connectionNames reports whether any Connection line of h names the
// header name (case-insensitively), as the hop-by-hop removal of
// net/http/httputil.ReverseProxy reads them.
func connectionNames(h http.Header, name string) bool {
	for _, line := range h["Connection"] {
		for tok := range strings.SplitSeq(line, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), name) {
				return true
			}
		}
	}
	return false
}

var errNoKey = errors.New("no key for the token's algorithm")

func (v *Verifier) key(t *jwt.Token) (any, error) {
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
