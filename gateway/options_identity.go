package gateway

import (
	"context"
	"log/slog"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/cookies"
	"github.com/olp-edu/borda/identity"
)

// The mappings of the auth section and of a route's cookies.forward to the
// typed options of identity and cookies, kept here while gateway.New
// takes configs.Config (cmd/borda takes them over with the gateway's own
// options).

// startVerifier builds the identity verifier of auth (nil when neither a
// secret nor a JWKS URL is set) and starts its JWKS refresher; Close stops
// it.
func startVerifier(auth configs.Auth, logger *slog.Logger) (*identity.Verifier, error) {
	o := identity.Options{
		JWKSURL:     auth.JWKSURL,
		JWKSRefresh: auth.JWKSRefresh.D(),
		UserClaim:   auth.UserClaim,
		EscolaClaim: auth.EscolaClaim,
		Leeway:      auth.Leeway.D(),
		RequireExp:  auth.RequireExp,
		Issuer:      auth.Issuer,
		Audience:    auth.Audience,
	}
	if s := auth.JWTSecret.Reveal(); s != "" {
		o.Secret = []byte(s)
	}
	v, err := identity.NewVerifier(context.Background(), o, logger)
	if err != nil {
		return nil, err
	}
	if err := v.Start(context.Background()); err != nil {
		_ = v.Stop(context.Background())
		return nil, err
	}
	return v, nil
}

// cookieForward maps a route's cookies.forward list. nil (the key absent)
// gives cookies.DefaultForward; an empty, non-nil list forwards no olp_*
// cookie at all.
func cookieForward(fw []configs.CookieForward) []cookies.Forward {
	if fw == nil {
		return cookies.DefaultForward()
	}
	out := make([]cookies.Forward, 0, len(fw))
	for _, f := range fw {
		out = append(out, cookies.Forward{Cookie: f.Cookie, AsAuthorization: f.As == "authorization"})
	}
	return out
}
