package main

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/gateway"
	"github.com/olp-edu/borda/identity"
	"github.com/olp-edu/borda/ratelimit"
	"github.com/olp-edu/borda/telemetry"
)

// The gateway's collaborators, checked where they meet (docs/architecture.md,
// "The import rule").
var (
	_ gateway.Limiter          = (*ratelimit.Limiter)(nil)
	_ gateway.IdentityVerifier = (*identity.Verifier)(nil)
	_ gateway.Recorder         = (*telemetry.Recorder)(nil)
)

// gatewayOptions maps a validated configuration (configs.Load) into the
// gateway's options. It fails only on a configuration that did not pass
// Validate (trusted_proxies not parsed, an upstream that is no absolute
// URL).
func gatewayOptions(cfg configs.Config) (gateway.Options, error) {
	if len(cfg.TrustedPrefixes) == 0 && len(cfg.TrustedProxies) > 0 {
		return gateway.Options{}, errors.New("trusted_proxies not parsed (call Config.Validate first)")
	}
	opts := gateway.Options{
		TrustedProxies:        cfg.TrustedPrefixes,
		ClientIPHeader:        cfg.ClientIPHeader,
		IPv6PrefixLen:         cfg.IPv6PrefixLen,
		KeepUnderscoreHeaders: cfg.HeadersWithUnderscores == "allow",
		EscapedSlashes:        slashPolicy(cfg.EscapedSlashes),
		Pprof:                 gateway.Pprof{Mode: pprofMode(cfg.AdminPprof), Token: cfg.AdminPprofToken.Reveal()},
		BodyTimeout:           cfg.Server.BodyTimeout.D(),
		SendTimeout:           cfg.Server.SendTimeout.D(),
		BodyMinRate:           cfg.Server.BodyMinRate,
		MaxConnections:        cfg.Server.MaxConnections,
		MaxConnectionsPerIP:   cfg.Server.MaxConnectionsPerIP,
	}
	for _, rc := range cfg.Routes {
		u := rc.UpstreamURL
		if u == nil {
			var err error
			if u, err = url.Parse(rc.Upstream); err != nil || u.Host == "" {
				return gateway.Options{}, fmt.Errorf("route %q: upstream %q is not an absolute URL", rc.Name, rc.Upstream)
			}
		}
		rt := gateway.Route{
			Name:          rc.Name,
			Hosts:         rc.Hosts,
			PathPrefix:    rc.PathPrefix,
			StripPrefix:   rc.StripPrefix,
			PreserveHost:  rc.PreserveHost,
			Upstream:      gateway.Upstream{URL: u, Timeout: rc.Timeout.D(), FlushInterval: rc.FlushInterval.D()},
			ExposeHeaders: rc.ExposeHeaders,
			Cookies: gateway.RouteCookies{
				Forward:  cookieForward(rc.Cookies.Forward),
				Domain:   rc.Cookies.Domain,
				SameSite: rc.Cookies.SameSite,
			},
			EscapedSlashes: slashPolicy(rc.EscapedSlashes),
			Upgrades:       rc.Upgrades,
			Sandbox:        rc.Sandbox,
		}
		if rc.CORS != "" {
			pol, ok := cfg.CORS.Policies[rc.CORS]
			if !ok {
				return gateway.Options{}, fmt.Errorf("route %q: cors policy %q does not exist", rc.Name, rc.CORS)
			}
			rt.CORS = &gateway.CORSPolicy{
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
	return opts, nil
}

// slashPolicy maps escaped_slashes ("" on a route: the top level's).
func slashPolicy(s string) gateway.SlashPolicy {
	switch s {
	case "reject":
		return gateway.SlashesReject
	case "unescape":
		return gateway.SlashesUnescape
	case "keep":
		return gateway.SlashesKeep
	}
	return gateway.SlashesDefault
}

// pprofMode maps admin_pprof ("" is loopback).
func pprofMode(s string) gateway.PprofMode {
	switch s {
	case configs.PprofToken:
		return gateway.PprofToken
	case configs.PprofOff:
		return gateway.PprofOff
	}
	return gateway.PprofLoopback
}

// buildGateway builds a.verifier (the JWT verifier of cfg.Auth, nil when
// neither a secret nor a JWKS URL is set; app.close stops its JWKS
// refresh) and a.gateway from cfg and deps.
func (a *app) buildGateway(cfg configs.Config, deps gateway.Deps) error {
	v, err := startVerifier(cfg.Auth, a.log.With("component", "gateway"))
	if err != nil {
		return fmt.Errorf("building identity verifier: %w", err)
	}
	if v != nil {
		a.verifier, deps.Verifier = v, v
	}
	opts, err := gatewayOptions(cfg)
	if err != nil {
		return err
	}
	if opts.Deny, err = a.deny.build(cfg, a.log); err != nil {
		return fmt.Errorf("deny lists: %w", err)
	}
	a.gateway, err = gateway.New(opts, deps)
	return err
}
