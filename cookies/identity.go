package cookies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

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

// maxTokenBytes bounds what Verify parses; longer tokens are anonymous.
const maxTokenBytes = 8 << 10

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
	userClaim   []string
	escolaClaim []string
	cancel      context.CancelFunc
	cache       *verifiedCache
	now         func() time.Time // the parser's clock too
}

// NewVerifier builds the Verifier of cfg, or returns nil (no error) when
// neither auth.jwt_secret_env's variable nor auth.jwks_url is set.
//
// With a JWKS URL the key set is fetched once here (a failure is logged,
// not returned: tokens stay anonymous until a refresh succeeds) and
// refreshed every refresh interval in a goroutine that lives until Close
// or ctx ends. A token whose kid is unknown never triggers a fetch on the
// request path. refresh ≤ 0 means 5 minutes.
func NewVerifier(ctx context.Context, cfg configs.Auth, refresh time.Duration, logger *slog.Logger) (*Verifier, error) {
	secret := cfg.JWTSecret.Reveal()
	if secret == "" && cfg.JWKSURL == "" {
		return nil, nil
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if refresh <= 0 {
		refresh = 5 * time.Minute
	}
	var methods []string
	v := &Verifier{
		userClaim:   strings.Split(cfg.UserClaim, "."),
		escolaClaim: strings.Split(cfg.EscolaClaim, "."),
		cancel:      func() {},
		cache:       newVerifiedCache(cfg.Leeway.D()),
		now:         time.Now,
	}
	if secret != "" {
		v.secret = []byte(secret)
		methods = append(methods, "HS256")
	}
	if cfg.JWKSURL != "" {
		ctx, cancel := context.WithCancel(ctx)
		kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{cfg.JWKSURL}, keyfunc.Override{
			HTTPTimeout:       5 * time.Second,
			RefreshInterval:   refresh,
			RefreshUnknownKID: rate.NewLimiter(0, 0), // never fetch on the request path
			RefreshErrorHandlerFunc: func(string) func(context.Context, error) {
				return func(ctx context.Context, err error) {
					// keyfunc's errors hold auth.jwks_url whole.
					logger.WarnContext(ctx, "refreshing JWKS failed", "error", configs.RedactError(err))
				}
			},
		})
		if err != nil {
			cancel()
			return nil, fmt.Errorf("loading JWKS: %w", configs.RedactError(err))
		}
		v.jwks, v.cancel = kf, cancel
		methods = append(methods, "RS256", "ES256")
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(methods),
		jwt.WithLeeway(cfg.Leeway.D()),
		jwt.WithJSONNumber(),
		jwt.WithTimeFunc(func() time.Time { return v.now() }),
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

// Close stops the JWKS refresh goroutine. Safe on nil.
func (v *Verifier) Close() {
	if v != nil {
		v.cancel()
	}
}

// FromRequest verifies the token the upstream will see as the request's
// credential: the Authorization: Bearer token when present, else the
// olp_auth cookie. A header the client names in Connection is not
// forwarded (RFC 9110 §7.6.1), so it is ignored here too: otherwise
// `Connection: Authorization` with a non-Bearer Authorization would leave
// the request anonymous while the upstream gets the olp_auth cookie as its
// Bearer token. Of several olp_auth cookies, the one ApplyRequest turns
// into the Bearer token is verified (the first with a usable value). It
// returns the anonymous Identity and false when there is no token or it
// does not verify.
func (v *Verifier) FromRequest(h http.Header) (Identity, bool) {
	if v == nil {
		return Identity{}, false
	}
	if len(h["Connection"]) > 0 && (connectionNames(h, "Authorization") || connectionNames(h, "Cookie")) {
		h = h.Clone()
		for _, name := range []string{"Authorization", "Cookie"} {
			if connectionNames(h, name) {
				delete(h, name)
			}
		}
	}
	if auth := h.Get("Authorization"); auth != "" {
		scheme, token, ok := strings.Cut(auth, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return Identity{}, false
		}
		return v.Verify(strings.TrimSpace(token))
	}
	if token, ok := bearerCookie(h, AuthCookie); ok {
		return v.Verify(token)
	}
	return Identity{}, false
}

// Verify checks token's signature (HS256, RS256, ES256), exp and nbf
// (with auth.leeway), and iss/aud when configured, then reads the user and
// escola claims (strings or JSON numbers; dotted paths walk nested
// objects). Any failure, or a token without the user claim, returns the
// anonymous Identity and false. Verify never does network I/O.
//
// A token that verified is remembered (by its SHA-256) until its exp plus
// the leeway, and at most one minute, so the signature of a session's
// token is not checked on every request; tokens that fail are checked
// every time.
func (v *Verifier) Verify(token string) (Identity, bool) {
	if v == nil || token == "" || len(token) > maxTokenBytes {
		return Identity{}, false
	}
	now := v.now()
	if id, ok := v.cache.get(token, now); ok {
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
	v.cache.add(token, id, claims, now)
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
			return v.jwks.Keyfunc(t)
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
