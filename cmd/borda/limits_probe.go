package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/limitprobe"
	"github.com/olp-edu/borda/ratelimit"
)

// runLimitsProbe is `borda limits probe --target URL`: each enforce or
// observe rule that a route applies is driven until it limits, and its
// answer checked (limitprobe). Exit 0 when every probed rule's checks
// hold, 1 with a report of each failed check, 2 for bad flags or a
// production target without --force.
func runLimitsProbe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, cfgPath := newFlags("limits probe", stderr)
	target := fs.String("target", "", "the gateway's public URL to probe (http://staging-host:8080)")
	only := fs.String("rule", "", "probe only this rule (default: every rule a route applies)")
	token := fs.String("token", "", "a Bearer token for user and escola rules (default: one minted with the auth.jwt_secret_env secret)")
	force := fs.Bool("force", false, "probe even when the config's environment is production")
	maxReq := fs.Int("max-requests", 0, "requests at most per rule (default 4 × limit + 20)")
	maxDur := fs.Duration("max-duration", 0, "time at most per rule, waits included (default 2 × window + 30s)")
	format := fs.String("format", "table", "report format: table or json")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	base, err := url.Parse(*target)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		fmt.Fprintln(stderr, "borda limits probe: --target must be an http(s) URL with a host")
		return 2
	}
	if *format != "table" && *format != "json" {
		fmt.Fprintln(stderr, "borda limits probe: --format must be table or json")
		return 2
	}
	cfg, code, ok := loadConfig(*cfgPath, stderr)
	if !ok {
		return code
	}
	if cfg.Environment == configs.EnvProduction && !*force {
		fmt.Fprintln(stderr, "borda limits probe: the config's environment is production: a probe exhausts real limits; use a staging config, or --force")
		return 2
	}
	targets, skipped := probeTargets(cfg, *only, *token, time.Now())
	if *only != "" && len(targets) == 0 && len(skipped) == 0 {
		fmt.Fprintf(stderr, "borda limits probe: --rule %q: not an enforce or observe rule any route applies\n", *only)
		return 2
	}
	opts := limitprobe.Options{BaseURL: base, MaxRequests: *maxReq, MaxDuration: *maxDur}
	var results []limitprobe.Result
	failed := false
	for _, t := range targets {
		r := limitprobe.Probe(ctx, opts, t)
		results = append(results, r)
		failed = failed || !r.OK()
	}
	writeProbeReport(stdout, *format, results, skipped)
	if failed || len(results) == 0 {
		if len(results) == 0 {
			fmt.Fprintln(stderr, "borda limits probe: no rule could be probed")
		}
		return 1
	}
	return 0
}

// probeTargets maps the config's rules to the targets a probe can reach:
// one route that applies each rule (its first exact host, its prefix), the
// rule's message or its scope's default, and for user and escola rules a
// Bearer token (given, or an HS256 token minted with the configured
// secret for a subject of the probe's own). skipped says why a rule is
// left out.
func probeTargets(cfg configs.Config, only, token string, now time.Time) ([]limitprobe.Target, []string) {
	var out []limitprobe.Target
	var skipped []string
	for _, rule := range cfg.RateLimits.Rules {
		if only != "" && rule.Name != only {
			continue
		}
		mode := rule.Mode
		if mode == "" {
			mode = "enforce"
		}
		if mode == "off" {
			continue
		}
		rt, ok := routeApplying(cfg, rule)
		if !ok {
			skipped = append(skipped, rule.Name+": no route applies it")
			continue
		}
		msg := rule.Message
		if msg == "" {
			msg = ratelimit.DefaultMessage(ruleScopes[rule.Scope])
		}
		t := limitprobe.Target{
			Rule: rule.Name, Scope: rule.Scope, Limit: rule.Limit, Window: time.Duration(rule.Window),
			Observe: mode == "observe", Message: msg, Host: probeHost(rt), Path: rt.PathPrefix,
		}
		if t.Path == "" {
			t.Path = "/"
		}
		if rule.Scope == "user" || rule.Scope == "escola" {
			tok := token
			if tok == "" {
				var err error
				// The probe's bound for the rule (limitprobe's default
				// MaxDuration) and a minute of slack.
				if tok, err = mintProbeToken(cfg, now, 2*time.Duration(rule.Window)+90*time.Second); err != nil {
					skipped = append(skipped, rule.Name+": "+err.Error())
					continue
				}
			}
			t.Header = http.Header{"Authorization": {"Bearer " + tok}}
		}
		out = append(out, t)
	}
	return out, skipped
}

func routeApplying(cfg configs.Config, rule configs.Rule) (configs.Route, bool) {
	for _, rt := range cfg.Routes {
		if slices.Contains(rt.RateLimits, rule.Name) || slices.Contains(rule.Routes, rt.Name) || slices.Contains(rule.Routes, "*") {
			return rt, true
		}
	}
	return configs.Route{}, false
}

// probeHost is the first exact host of rt ("" for a route of any host:
// the target URL's host is sent).
func probeHost(rt configs.Route) string {
	for _, h := range rt.Hosts {
		if !strings.HasPrefix(h, "*") {
			return h
		}
	}
	return ""
}

// mintProbeToken signs an HS256 token with the secret auth.jwt_secret_env
// names, for a user and a school of the probe's own (so no real user's
// counts are spent), valid for ttl (the rule's probe bound, not an hour:
// the token goes to whatever --target is), with the issuer and audience the
// gateway requires.
func mintProbeToken(cfg configs.Config, now time.Time, ttl time.Duration) (string, error) {
	secret := os.Getenv(cfg.Auth.JWTSecretEnv)
	if cfg.Auth.JWTSecretEnv == "" || secret == "" {
		return "", fmt.Errorf("needs --token, or the JWT secret in $%s", cfg.Auth.JWTSecretEnv)
	}
	id := fmt.Sprintf("borda-probe-%d", now.UnixNano())
	// Short-lived: the token is sent to --target, whatever it is.
	claims := jwt.MapClaims{"exp": now.Add(ttl).Unix(), "iat": now.Unix()}
	setClaim(claims, orDefault(cfg.Auth.UserClaim, "sub"), id)
	if cfg.Auth.EscolaClaim != "" {
		setClaim(claims, cfg.Auth.EscolaClaim, id)
	}
	if cfg.Auth.Issuer != "" {
		claims["iss"] = cfg.Auth.Issuer
	}
	if cfg.Auth.Audience != "" {
		claims["aud"] = cfg.Auth.Audience
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
}

// setClaim sets a dotted claim path ("app_metadata.escola_id").
func setClaim(claims map[string]any, path, v string) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := claims[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			claims[p] = next
		}
		claims = next
	}
	claims[parts[len(parts)-1]] = v
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func writeProbeReport(w io.Writer, format string, results []limitprobe.Result, skipped []string) {
	if format == "json" {
		type check struct {
			Name   string `json:"name"`
			OK     bool   `json:"ok"`
			Detail string `json:"detail"`
		}
		type rule struct {
			Rule     string  `json:"rule"`
			Scope    string  `json:"scope"`
			OK       bool    `json:"ok"`
			Requests int     `json:"requests"`
			Checks   []check `json:"checks"`
		}
		doc := struct {
			Rules   []rule   `json:"rules"`
			Skipped []string `json:"skipped"`
		}{Rules: []rule{}, Skipped: append([]string{}, skipped...)}
		for _, r := range results {
			out := rule{Rule: r.Rule, Scope: r.Scope, OK: r.OK(), Requests: r.Requests}
			for _, c := range r.Checks {
				out.Checks = append(out.Checks, check(c))
			}
			doc.Rules = append(doc.Rules, out)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(doc)
		return
	}
	for _, r := range results {
		verdict := "ok"
		if !r.OK() {
			verdict = "FAILED"
		}
		fmt.Fprintf(w, "%s (%s): %s, %d requests\n", r.Rule, r.Scope, verdict, r.Requests)
		for _, c := range r.Checks {
			mark := "  ok    "
			if !c.OK {
				mark = "  FAIL  "
			}
			fmt.Fprintf(w, "%s%s: %s\n", mark, c.Name, c.Detail)
		}
	}
	for _, s := range skipped {
		fmt.Fprintf(w, "skipped %s\n", s)
	}
}
