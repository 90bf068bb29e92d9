package schema

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestHintNamesMigrateForAMissingTable: `borda aggregate` met "relation
// gateway_metrics does not exist" and said nothing more; a 42P01 error,
// however wrapped, now says to run `borda migrate`, and no other error is
// touched.
func TestHintNamesMigrateForAMissingTable(t *testing.T) {
	missing := &pgconn.PgError{Code: "42P01", Message: `relation "gateway_metrics" does not exist`}
	for _, err := range []error{missing, fmt.Errorf("upserting 3 rows into gateway_metrics: %w", missing)} {
		got := Hint(err)
		if !errors.Is(got, ErrNotMigrated) || !errors.Is(got, missing) || !strings.Contains(got.Error(), "run `borda migrate` first") {
			t.Errorf("Hint(%v) = %v", err, got)
		}
		if again := Hint(got); again.Error() != got.Error() {
			t.Errorf("Hint twice: %v", again)
		}
	}
	for _, err := range []error{nil, errors.New("dial tcp: refused"), &pgconn.PgError{Code: "23514"}} {
		if got := Hint(err); got != err {
			t.Errorf("Hint(%v) = %v, want it unchanged", err, got)
		}
	}
}
