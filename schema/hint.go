package schema

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// undefinedTable is PostgreSQL's SQLSTATE for "relation … does not exist".
const undefinedTable = "42P01"

// ErrNotMigrated wraps an error PostgreSQL returned because a table Borda
// needs does not exist (SQLSTATE 42P01): the database was never migrated.
var ErrNotMigrated = errors.New("run `borda migrate` first: it creates gateway_metrics, whatsapp_instances, webhook_replays and limit_relaxes")

// Hint returns err wrapped with ErrNotMigrated when it is (or wraps)
// PostgreSQL's undefined_table error, as
// "…: relation \"gateway_metrics\" does not exist …; run `borda migrate`
// first: …"; any other error (nil included) unchanged.
func Hint(err error) error {
	var pe *pgconn.PgError
	if err == nil || !errors.As(err, &pe) || pe.Code != undefinedTable || errors.Is(err, ErrNotMigrated) {
		return err
	}
	return fmt.Errorf("%w; %w", err, ErrNotMigrated)
}
