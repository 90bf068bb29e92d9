package main

import (
	"context"
	"log/slog"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/cookies"
	"github.com/olp-edu/borda/identity"
	"github.com/olp-edu/borda/internal/startstop"
)

// identityOptions maps the auth section to the verifier's options.
func identityOptions(auth configs.Auth) identity.Options {
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
	return o
}

// startVerifier builds the identity verifier of auth (nil when neither a
// secret nor a JWKS URL is set) and starts its JWKS refresher; app.close
// stops it.
func startVerifier(auth configs.Auth, logger *slog.Logger) (*identity.Verifier, error) {
	v, err := identity.NewVerifier(context.Background(), identityOptions(auth), logger)
	if err != nil || v == nil {
		return nil, err
	}
	if err := v.Start(context.Background()); err != nil {
		_ = v.Stop(context.Background())
		return nil, err
	}
	return v, nil
}

// cookieForward maps a route's cookies.forward list, which Validate has
// set to configs.DefaultCookieForward when the key is absent (its one
// home); an empty list forwards no olp_* cookie at all, and so does nil.
func cookieForward(fw []configs.CookieForward) []cookies.Forward {
	if fw == nil {
		return nil
	}
	out := make([]cookies.Forward, 0, len(fw))
	for _, f := range fw {
		out = append(out, cookies.Forward{Cookie: f.Cookie, AsAuthorization: f.As == "authorization"})
	}
	return out
}

// The verifier runs its JWKS refresher in the background.
var _ startstop.Service = (*identity.Verifier)(nil)
