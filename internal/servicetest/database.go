package servicetest

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// IsolatedDatabase gives the test a PostgreSQL schema of its own, named
// after the test and dropped at cleanup: it returns a pool and the
// database URL whose search_path selects that schema (for code that opens
// its own connections, such as schema.Up). Tests never see each other's
// tables or goose history. It skips (fails when required) as DatabaseURL.
func IsolatedDatabase(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	base := DatabaseURL(t)
	name := strings.ReplaceAll(Name(t), "-", "_")
	ctx := context.Background()
	admin, err := pgxpool.New(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("creating schema %s: %v", name, err)
	}
	t.Cleanup(func() {
		a, err := pgxpool.New(context.Background(), base)
		if err != nil {
			return
		}
		defer a.Close()
		_, _ = a.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE")
	})
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	url := base + sep + "search_path=" + name
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, url
}
