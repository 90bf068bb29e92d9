package main

import (
	"context"
	"fmt"
	"io"

	"github.com/olp-edu/borda/schema"
)

// runMigrate is `borda migrate --config FILE`: apply the embedded
// PostgreSQL migrations (gateway_metrics, whatsapp_instances,
// webhook_replays, limit_relaxes) to database.url (DATABASE_URL). Exit 0 when the schema
// is current, 1 when a migration failed, 2 on usage or config errors.
func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, path := newFlags("migrate", stderr)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg, code, ok := loadConfig(*path, stderr)
	if !ok {
		return code
	}
	if cfg.Database.URL == "" {
		fmt.Fprintln(stderr, "borda: migrate needs database.url (or DATABASE_URL)")
		return 2
	}
	applied, err := schema.Apply(ctx, cfg.Database.URL.Reveal(), nil)
	for _, r := range applied {
		fmt.Fprintf(stdout, "applied %s in %s\n", r.Source, r.Duration.Round(1e6))
	}
	if err != nil {
		fmt.Fprintf(stderr, "borda: migrate: %v\n", err)
		return 1
	}
	if len(applied) == 0 {
		fmt.Fprintln(stdout, "schema is up to date")
	}
	return 0
}
