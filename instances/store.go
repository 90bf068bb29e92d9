package instances

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// execer is the part of *pgxpool.Pool (or *pgx.Conn) the Store uses.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Begin(ctx context.Context) (pgx.Tx, error)
}

// upsertSQL inserts the instance or updates it only when the event is
// newer than the stored one; an equal or older event changes nothing.
const upsertSQL = `
INSERT INTO whatsapp_instances (instance, state, state_reason, event_time, updated_at)
VALUES ($1, $2, $3, $4, now())
ON CONFLICT (instance) DO UPDATE
SET state = EXCLUDED.state,
    state_reason = EXCLUDED.state_reason,
    event_time = EXCLUDED.event_time,
    updated_at = now()
WHERE whatsapp_instances.event_time < EXCLUDED.event_time`

// errUnstorable marks an Apply error that is the update's own fault: the
// database refused its values (SQLSTATE class 22, data exception, or 23,
// integrity constraint violation), so no retry can store it.
var errUnstorable = errors.New("the database refuses this update's values")

// Store writes whatsapp_instances.
type Store struct {
	db execer
}

// NewStore returns a Store over db (a *pgxpool.Pool).
func NewStore(db execer) *Store { return &Store{db: db} }

// Apply upserts u. applied is false when the stored event is as new or
// newer (the update was skipped). An error wraps errUnstorable when the
// database refused u's values; any other error may be the database's
// (down, read-only, not migrated) and is worth retrying.
func (s *Store) Apply(ctx context.Context, u Update) (applied bool, err error) {
	tag, err := s.db.Exec(ctx, upsertSQL, u.Instance, u.State, u.Reason, u.EventTime)
	if err != nil {
		if dataError(err) {
			return false, fmt.Errorf("upserting whatsapp_instances %q: %w: %w", u.Instance, errUnstorable, err)
		}
		return false, fmt.Errorf("upserting whatsapp_instances %q: %w", u.Instance, err)
	}
	return tag.RowsAffected() == 1, nil
}

// dataError reports whether err is PostgreSQL refusing the values
// themselves: SQLSTATE class 22 (data exception: invalid byte sequence,
// numeric out of range, ...) or 23 (integrity constraint violation).
func dataError(err error) bool {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || len(pg.Code) != 5 {
		return false
	}
	class := pg.Code[:2]
	return class == "22" || class == "23"
}

// Accepts reports whether the database accepts a valid update now: the
// same upsert for a canary instance of its own, in a transaction that is
// rolled back (nothing is written). A nil error while an event's own
// upsert keeps failing means the event, not the database, is at fault.
func (s *Store) Accepts(ctx context.Context) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var b [8]byte
	_, _ = rand.Read(b[:])
	_, err = tx.Exec(ctx, upsertSQL, "borda-canary-"+hex.EncodeToString(b[:]), "open", nil, time.Unix(0, 0).UTC())
	return err
}
