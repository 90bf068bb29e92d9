package relaxaudit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/keyspace"
	"github.com/olp-edu/borda/ratelimit"
)

// DB is the part of *pgxpool.Pool Apply uses.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Outcomes recorded in limit_relaxes.outcome.
const (
	OutcomePending = "pending" // recorded, the store not yet written
	OutcomeApplied = "applied" // written to the store
	OutcomeFailed  = "failed"  // the store refused or did not answer; error says why
)

// ErrNotRecorded wraps the error of an audit row that could not be
// written: the relax was not applied (nothing relaxed without its row).
var ErrNotRecorded = errors.New("relaxaudit: the relax was not applied, because it could not be recorded in limit_relaxes")

// ErrStore wraps the store's error: the relax was recorded as failed and
// is not in force.
var ErrStore = errors.New("relaxaudit: the relax was not applied, because the rate-limit store did not take it")

// Target is where a relax is written and recorded.
type Target struct {
	Store ratelimit.Store
	Keys  keyspace.Keyspace
	DB    DB
	// Environment is recorded with each row (environment: in the file).
	Environment string
	// Origin is OriginCLI or OriginPage (recorded).
	Origin string
	// Clock is the clock of the recorded times (nil: the wall clock).
	Clock clock.Clock
}

// Applied is a relax in the store and its audit row.
type Applied struct {
	Relax
	// AuditID is the limit_relaxes row; Until is when the relax ends (the
	// store's key expires then, within a round trip).
	AuditID int64
	Until   time.Time
	// Unrecorded is set when the store took the relax (it is in force) but
	// the row's outcome could not be written: the row stays "pending".
	Unrecorded error
}

// Apply records rx in limit_relaxes (outcome pending), writes it to the
// store with ratelimit.Relax, and records the outcome (applied, or failed
// with the error). Errors: ErrNotRecorded (no row, nothing written),
// ErrStore (row failed, nothing in force); on success Applied.Unrecorded
// may still say the outcome stayed pending.
func Apply(ctx context.Context, t Target, rx Relax) (Applied, error) {
	clk := clock.Or(t.Clock)
	at := clk.Now().UTC()
	a := Applied{Relax: rx, Until: at.Add(rx.For)}
	err := t.DB.QueryRow(ctx, `INSERT INTO limit_relaxes
 (environment, rule, factor, lasts, operator, reason, origin, requested_at, ends_at, outcome)
VALUES ($1, $2, $3, make_interval(secs => $4), $5, $6, $7, $8, $9, $10) RETURNING id`,
		t.Environment, rx.Rule, rx.Factor, rx.For.Seconds(), rx.Operator, rx.Reason, t.Origin, at, a.Until, OutcomePending).Scan(&a.AuditID)
	if err != nil {
		return a, fmt.Errorf("%w: %w", ErrNotRecorded, err)
	}
	if err := ratelimit.Relax(ctx, t.Store, t.Keys, rx.Rule, rx.Factor, rx.For); err != nil {
		// Recorded on a context of its own: the store's failure may be
		// the caller's deadline running out.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, uerr := t.DB.Exec(rctx, `UPDATE limit_relaxes SET outcome = $1, error = $2 WHERE id = $3`, OutcomeFailed, err.Error(), a.AuditID); uerr != nil {
			return a, fmt.Errorf("%w: %w (and the row #%d stays pending: %w)", ErrStore, err, a.AuditID, uerr)
		}
		return a, fmt.Errorf("%w: %w", ErrStore, err)
	}
	a.Until = clk.Now().UTC().Add(rx.For)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := t.DB.Exec(rctx, `UPDATE limit_relaxes SET outcome = $1, ends_at = $2 WHERE id = $3`, OutcomeApplied, a.Until, a.AuditID); err != nil {
		a.Unrecorded = fmt.Errorf("recording the relax's outcome (row #%d stays pending): %w", a.AuditID, err)
	}
	return a, nil
}
