package schema_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/schema"
)

func TestUpCreatesGatewayMetricsAndIsIdempotent(t *testing.T) {
	t.Parallel()
	pool, url := servicetest.IsolatedDatabase(t)
	ctx := t.Context()
	applied, err := schema.Apply(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) == 0 || applied[0].Source != "00001_gateway_metrics.sql" {
		t.Fatalf("applied = %+v, want 00001_gateway_metrics.sql first", applied)
	}
	again, err := schema.Apply(ctx, url, nil)
	if err != nil || len(again) != 0 {
		t.Fatalf("second Apply = %+v, %v; want nothing applied", again, err)
	}
	if err := schema.Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	// The primary key makes the aggregation's upsert land on one row.
	var pk string
	err = pool.QueryRow(ctx, `SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c
		WHERE c.conrelid = 'gateway_metrics'::regclass AND c.contype = 'p'`).Scan(&pk)
	if err != nil {
		t.Fatal(err)
	}
	if pk != "PRIMARY KEY (environment, kind, dimension, minute)" {
		t.Errorf("primary key = %q", pk)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO gateway_metrics (environment, kind, dimension, minute, count)
		VALUES ('development', 'bogus', 'x', now(), 1)`); err == nil {
		t.Error("a row of unknown kind was accepted")
	}
}

func TestUpNamesAnUnreachableDatabase(t *testing.T) {
	t.Parallel()
	err := schema.Up(t.Context(), "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=1")
	if err == nil {
		t.Fatal("Up against a closed port succeeded")
	}
}

// Migrations are numbered 00001, 00002, ... without gaps, so files added
// by different issues never collide or run out of order.
func TestMigrationsAreNumberedSequentially(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.sql")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`^(\d{5})_[a-z0-9_]+\.sql$`)
	for i, f := range files {
		m := name.FindStringSubmatch(f)
		if m == nil {
			t.Errorf("%s: want NNNNN_snake_case.sql", f)
			continue
		}
		if want := fmt.Sprintf("%05d", i+1); m[1] != want {
			t.Errorf("%s: number %s, want %s (no gaps, no duplicates)", f, m[1], want)
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "-- +goose Up") || !strings.Contains(string(data), "-- +goose Down") {
			t.Errorf("%s: want -- +goose Up and -- +goose Down sections", f)
		}
	}
}
