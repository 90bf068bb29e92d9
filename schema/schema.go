// Package schema holds Borda's PostgreSQL migrations and applies them.
//
// Migrations are goose v3 SQL files embedded in the binary, numbered
// sequentially (00001_gateway_metrics.sql, 00002_..., each with
// "-- +goose Up" and "-- +goose Down" sections). `borda migrate` calls Up;
// goose records the applied versions in goose_db_version and serializes
// concurrent runs with a PostgreSQL advisory lock.
package schema

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var migrations embed.FS

// Result is one applied migration.
type Result struct {
	Version  int64
	Source   string        // file name, "00001_gateway_metrics.sql"
	Duration time.Duration // time the migration took
}

// Up applies every pending migration to the database at databaseURL
// (postgres:// URL or key=value DSN, opened with pgx's database/sql
// driver). Errors name the step that failed: connecting, locking or the
// migration's file.
func Up(ctx context.Context, databaseURL string) error {
	_, err := Apply(ctx, databaseURL, nil)
	return err
}

// Apply is Up returning the migrations it applied, in order (none when the
// schema is current). A non-nil logger receives goose's progress lines.
func Apply(ctx context.Context, databaseURL string, logger *slog.Logger) ([]Result, error) {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parsing database url: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	p, err := newProvider(db, logger)
	if err != nil {
		return nil, err
	}
	applied, err := p.Up(ctx)
	out := make([]Result, 0, len(applied))
	for _, r := range applied {
		if r == nil || r.Source == nil {
			continue
		}
		out = append(out, Result{Version: r.Source.Version, Source: r.Source.Path, Duration: r.Duration})
	}
	if err != nil {
		return out, fmt.Errorf("applying migrations: %w", err)
	}
	return out, nil
}

func newProvider(db *sql.DB, logger *slog.Logger) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fmt.Errorf("creating migration lock: %w", err)
	}
	opts := []goose.ProviderOption{goose.WithSessionLocker(locker)}
	if logger != nil {
		opts = append(opts, goose.WithSlog(logger))
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading migrations: %w", err)
	}
	return p, nil
}
