package main

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/olp-edu/borda/adminui"
	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/internal/redact"
	"github.com/olp-edu/borda/keyspace"
	"github.com/olp-edu/borda/ratelimit"
	"github.com/olp-edu/borda/ratelimit/relaxaudit"
	"github.com/olp-edu/borda/schema"
)

// opsRelaxer is the operator page's relax form (adminui.RelaxSource): the
// request parsed as `borda limits relax` parses its flags, recorded in
// limit_relaxes (origin page) and written to the limiter's own store by
// relaxaudit, then read back by this process's limiter at once.
type opsRelaxer struct {
	cfg     *atomic.Pointer[configs.Config]
	store   ratelimit.Store
	ks      keyspace.Keyspace
	db      *pgxpool.Pool // nil: no audit, so no relax
	limiter *ratelimit.Limiter
}

var _ adminui.RelaxSource = (*opsRelaxer)(nil)

func (o *opsRelaxer) Unavailable() string {
	switch {
	case o.cfg.Load().StoreKind() == "memory":
		return "this gateway runs the embedded store, whose relax would reach no other process; relaxes need a shared store (REDIS_URL, or UPSTASH_REDIS_REST_URL and _TOKEN)"
	case o.db == nil:
		return "every relax is recorded in limit_relaxes, and this gateway has no database: set database.url (DATABASE_URL)"
	}
	return ""
}

func (o *opsRelaxer) Relax(ctx context.Context, req adminui.RelaxRequest) (adminui.RelaxResult, error) {
	if why := o.Unavailable(); why != "" {
		return adminui.RelaxResult{}, errors.New(why)
	}
	cfg := o.cfg.Load()
	rx, problems := relaxaudit.Parse(relaxaudit.Request{Rule: req.Rule, Factor: req.Factor, For: req.For, Operator: req.Operator, Reason: req.Reason},
		ruleNames(*cfg))
	if problems != nil {
		bad := &adminui.BadRelax{}
		for _, p := range problems {
			bad.Problems = append(bad.Problems, adminui.FieldProblem{Field: p.Field, Message: p.Message})
		}
		return adminui.RelaxResult{}, bad
	}
	a, err := relaxaudit.Apply(ctx, relaxaudit.Target{Store: o.store, Keys: o.ks, DB: o.db, Environment: cfg.Environment,
		Origin: relaxaudit.OriginPage}, rx)
	if err != nil {
		return adminui.RelaxResult{}, redact.Error(schema.Hint(err))
	}
	o.limiter.RefreshRelax(ctx)
	res := adminui.RelaxResult{Rule: rx.Rule, Factor: rx.Factor, Until: a.Until, AuditID: a.AuditID}
	if a.Unrecorded != nil {
		res.Warning = "The relax is in force, but " + redact.Error(a.Unrecorded).Error()
	}
	return res, nil
}
