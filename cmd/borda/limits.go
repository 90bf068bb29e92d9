package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/internal/redact"
	"github.com/olp-edu/borda/keyspace"
	"github.com/olp-edu/borda/ratelimit"
	"github.com/olp-edu/borda/ratelimit/relaxaudit"
	"github.com/olp-edu/borda/redisconn"
	"github.com/olp-edu/borda/schema"
)

// limitsTimeout bounds each store call of `borda limits`.
const limitsTimeout = 5 * time.Second

// runLimits is `borda limits relax|show|probe|suggest`:
//
//	borda limits relax --rule NAME --factor F --for DURATION --operator NAME --reason TEXT
//	borda limits show
//
// show prints the configured rules and each one's live relax; when the
// store does not answer it still prints the rules, with RELAX "?" and a
// note saying the live values are unavailable (exit 0).
//
// relax records the relax in PostgreSQL limit_relaxes (who, why, origin
// cli; relaxaudit), then writes {prefix}cfg:relax:{rule} = F with TTL
// DURATION; every running instance multiplies that rule's limit by F
// within rate_limits.relax_poll and drops it when the key expires. F is in
// [1, 100]. The operator page's relax form runs the same code.
func runLimits(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, groupUsage("limits"))
		return 2
	}
	if isHelp(args[0]) {
		fmt.Fprintln(stdout, groupUsage("limits"))
		return 0
	}
	switch args[0] {
	case "relax":
		return runLimitsRelax(ctx, args[1:], stdout, stderr)
	case "show":
		return runLimitsShow(ctx, args[1:], stdout, stderr)
	case "probe":
		return runLimitsProbe(ctx, args[1:], stdout, stderr)
	case "suggest":
		return runLimitsSuggest(ctx, args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "borda limits: unknown subcommand %q (want relax, show, probe or suggest)\n", args[0])
		return 2
	}
}

func runLimitsRelax(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, cfgPath := newFlags("limits relax", stderr)
	var req relaxaudit.Request
	fs.StringVar(&req.Rule, "rule", "", "rule name (rate_limits.rules[].name)")
	fs.StringVar(&req.Factor, "factor", "", fmt.Sprintf("multiply the rule's limit by this factor (1 to %d)", ratelimit.MaxRelaxFactor))
	fs.StringVar(&req.For, "for", "", "how long the relax lasts (e.g. 15m; at most 24h)")
	fs.StringVar(&req.Operator, "operator", "", "who relaxes (recorded in limit_relaxes; required)")
	fs.StringVar(&req.Reason, "reason", "", "why (recorded in limit_relaxes; required)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg, code, ok := loadConfig(*cfgPath, stderr)
	if !ok {
		return code
	}
	rx, problems := relaxaudit.Parse(req, ruleNames(cfg))
	for _, p := range problems {
		fmt.Fprintf(stderr, "borda limits relax: --%s: %s\n", p.Field, p.Message)
	}
	usable := len(problems) == 0
	if cfg.Database.URL == "" {
		fmt.Fprintln(stderr, "borda limits relax: every relax is recorded in limit_relaxes and needs database.url (or DATABASE_URL)")
		usable = false
	}
	if !usable {
		return 2
	}
	store, ks, closeStore, err := sharedStore(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "borda limits relax: %v\n", err)
		return 1
	}
	defer closeStore()
	pool, err := pgxpool.New(ctx, cfg.Database.URL.Reveal())
	if err != nil {
		fmt.Fprintf(stderr, "borda limits relax: parsing database.url: %v\n", redact.Error(err))
		return 2
	}
	defer pool.Close()
	cctx, cancel := context.WithTimeout(ctx, limitsTimeout)
	defer cancel()
	a, err := relaxaudit.Apply(cctx, relaxaudit.Target{Store: store, Keys: ks, DB: pool, Environment: cfg.Environment,
		Origin: relaxaudit.OriginCLI}, rx)
	if err != nil {
		fmt.Fprintf(stderr, "borda limits relax: %v\n", redact.Error(schema.Hint(err)))
		return 1
	}
	fmt.Fprintf(stdout, "relaxed %s ×%s for %v until %s (key %s, audit #%d); running instances apply it within %v\n",
		rx.Rule, fmt.Sprint(rx.Factor), rx.For, a.Until.Format(time.RFC3339), ks.Relax(rx.Rule), a.AuditID, cfg.RateLimits.RelaxPoll)
	if a.Unrecorded != nil {
		fmt.Fprintf(stderr, "borda limits relax: warning: the relax is in force, but %v\n", redact.Error(a.Unrecorded))
	}
	return 0
}

func runLimitsShow(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, cfgPath := newFlags("limits show", stderr)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg, code, ok := loadConfig(*cfgPath, stderr)
	if !ok {
		return code
	}
	names := ruleNames(cfg)
	relax := make([]ratelimit.RelaxValue, len(names))
	note := ""
	unknown := false // the store did not answer: relaxes unknown
	if store, ks, closeStore, err := sharedStore(cfg); err != nil {
		note = "relax: " + err.Error()
	} else {
		defer closeStore()
		cctx, cancel := context.WithTimeout(ctx, limitsTimeout)
		defer cancel()
		if relax, err = ratelimit.ReadRelaxes(cctx, store, ks, names); err != nil {
			// The configured rules are still worth seeing in an
			// incident, which is when the store is most likely down.
			relax, unknown = make([]ratelimit.RelaxValue, len(names)), true
			note = fmt.Sprintf("relax: unavailable, the %s store did not answer (%v); RELAX ? = live relaxes unknown, the rules above are the configured ones", cfg.StoreKind(), err)
		}
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tSCOPE\tALGORITHM\tLIMIT\tWINDOW\tMODE\tROUTES\tRELAX")
	for i, r := range cfg.RateLimits.Rules {
		rx := "-"
		if unknown {
			rx = "?"
		} else if relax[i].Factor >= 1 {
			rx = fmt.Sprintf("×%s for %v", fmt.Sprint(relax[i].Factor), relax[i].TTL.Round(time.Second))
		}
		limit := fmt.Sprint(r.Limit)
		if r.ObserveLimit > 0 {
			limit += fmt.Sprintf(" (observe %d)", r.ObserveLimit)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%s\t%s\t%s\n", r.Name, r.Scope, r.Algorithm, limit, r.Window, r.Mode,
			strings.Join(ruleRoutes(cfg, r), ","), rx)
	}
	_ = tw.Flush()
	if note != "" {
		fmt.Fprintln(stdout, note)
	}
	return 0
}

// ruleNames are the names of cfg's rate-limit rules, in order.
func ruleNames(cfg configs.Config) []string {
	names := make([]string, len(cfg.RateLimits.Rules))
	for i, r := range cfg.RateLimits.Rules {
		names[i] = r.Name
	}
	return names
}

// ruleRoutes lists the routes a rule applies to: its own routes and the
// routes that name it.
func ruleRoutes(cfg configs.Config, r configs.Rule) []string {
	out := append([]string(nil), r.Routes...)
	for _, rt := range cfg.Routes {
		for _, n := range rt.RateLimits {
			if n == r.Name {
				out = append(out, rt.Name)
			}
		}
	}
	if len(out) == 0 {
		out = []string{"-"}
	}
	return out
}

// sharedStore opens the store every instance reads relax keys from. The
// embedded store is refused: a relax written there would reach no other
// process.
func sharedStore(cfg configs.Config) (ratelimit.Store, keyspace.Keyspace, func(), error) {
	ks, err := keyspace.New(cfg.KeyPrefix())
	if err != nil {
		return nil, ks, nil, err
	}
	if cfg.StoreKind() == "memory" {
		return nil, ks, nil, errors.New("no shared store configured (set REDIS_URL or UPSTASH_REDIS_REST_URL + UPSTASH_REDIS_REST_TOKEN); the embedded store lives inside each borda serve process")
	}
	var rdb redis.UniversalClient
	closeStore := func() {}
	if cfg.StoreKind() == "redis" {
		ro := redisOptions(cfg.Redis)
		ro.Cold = true // one shot: no pool warmed in the background
		if rdb, err = redisconn.New(ro); err != nil {
			return nil, ks, nil, err
		}
		closeStore = func() { _ = rdb.Close() }
	}
	store, err := newStore(cfg, rdb, nil)
	if err != nil {
		closeStore()
		return nil, ks, nil, err
	}
	return store, ks, closeStore, nil
}
