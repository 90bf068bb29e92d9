package gateway

import (
	"context"
	"net/url"
	"testing"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/cookies"
	"github.com/olp-edu/borda/identity"
)

// The gateway's tests write their route tables as the configuration file
// an operator writes (parseConfig), which reads far better than Options
// literals; newServer maps such a file into Options and Deps as
// cmd/borda does (cmd/borda/options_gateway.go: keep the two mappings in
// step) and builds the gateway.

// newServer builds the gateway of a parsed configuration: Options mapped
// from cfg, the identity verifier of cfg.Auth added to deps, both closed
// at cleanup.
func newServer(t testing.TB, cfg configs.Config, deps Deps) *Server {
	t.Helper()
	v, err := identity.NewVerifier(context.Background(), identityOptionsOf(cfg.Auth), deps.Logger)
	if err != nil {
		t.Fatalf("building identity verifier: %v", err)
	}
	if err := v.Start(context.Background()); err != nil {
		t.Fatalf("starting identity verifier: %v", err)
	}
	t.Cleanup(func() { _ = v.Stop(context.Background()) })
	if v != nil && deps.Verifier == nil {
		deps.Verifier = v
	}
	srv, err := New(optionsFromConfig(t, cfg), deps)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// optionsFromConfig is cmd/borda's gatewayOptions for tests.
func optionsFromConfig(t testing.TB, cfg configs.Config) Options {
	t.Helper()
	opts := Options{
		TrustedProxies:        cfg.TrustedPrefixes,
		ClientIPHeader:        cfg.ClientIPHeader,
		IPv6PrefixLen:         cfg.IPv6PrefixLen,
		KeepUnderscoreHeaders: cfg.HeadersWithUnderscores == "allow",
		EscapedSlashes:        slashPolicyOf(cfg.EscapedSlashes),
		BodyTimeout:           cfg.Server.BodyTimeout.D(),
		BodyMinRate:           cfg.Server.BodyMinRate,
		MaxConnections:        cfg.Server.MaxConnections,
	}
	for _, rc := range cfg.Routes {
		u := rc.UpstreamURL
		if u == nil {
			var err error
			if u, err = url.Parse(rc.Upstream); err != nil {
				t.Fatalf("route %q: %v", rc.Name, err)
			}
		}
		rt := Route{
			Name:          rc.Name,
			Hosts:         rc.Hosts,
			PathPrefix:    rc.PathPrefix,
			StripPrefix:   rc.StripPrefix,
			PreserveHost:  rc.PreserveHost,
			Upstream:      Upstream{URL: u, Timeout: rc.Timeout.D(), FlushInterval: rc.FlushInterval.D()},
			ExposeHeaders: rc.ExposeHeaders,
			Cookies: RouteCookies{
				Forward:  cookieForwardOf(rc.Cookies.Forward),
				Domain:   rc.Cookies.Domain,
				SameSite: rc.Cookies.SameSite,
			},
			EscapedSlashes: slashPolicyOf(rc.EscapedSlashes),
			Upgrades:       rc.Upgrades,
			Sandbox:        rc.Sandbox,
		}
		if rc.CORS != "" {
			pol, ok := cfg.CORS.Policies[rc.CORS]
			if !ok {
				t.Fatalf("route %q: cors policy %q does not exist", rc.Name, rc.CORS)
			}
			rt.CORS = &CORSPolicy{
				AllowedOrigins:   pol.AllowedOrigins,
				AllowedMethods:   pol.AllowedMethods,
				AllowedHeaders:   pol.AllowedHeaders,
				ExposedHeaders:   pol.ExposedHeaders,
				AllowCredentials: pol.AllowCredentials,
				MaxAge:           pol.MaxAge.D(),
			}
		}
		opts.Routes = append(opts.Routes, rt)
	}
	return opts
}

func slashPolicyOf(s string) SlashPolicy {
	switch s {
	case "reject":
		return SlashesReject
	case "unescape":
		return SlashesUnescape
	case "keep":
		return SlashesKeep
	}
	return SlashesDefault
}

// identityOptionsOf is cmd/borda's identityOptions for tests.
func identityOptionsOf(auth configs.Auth) identity.Options {
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

// cookieForwardOf is cmd/borda's cookieForward for tests.
func cookieForwardOf(fw []configs.CookieForward) []cookies.Forward {
	if fw == nil {
		return cookies.DefaultForward()
	}
	out := make([]cookies.Forward, 0, len(fw))
	for _, f := range fw {
		out = append(out, cookies.Forward{Cookie: f.Cookie, AsAuthorization: f.As == "authorization"})
	}
	return out
}
