package instances

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// execer is the part of *pgxpool.Pool (or *pgx.Conn) the Store uses.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
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

// Store writes whatsapp_instances.
type Store struct {
	db execer
}

// NewStore returns a Store over db (a *pgxpool.Pool).
func NewStore(db execer) *Store { return &Store{db: db} }

// Apply upserts u. applied is false when the stored event is as new or
// newer (the update was skipped).
func (s *Store) Apply(ctx context.Context, u Update) (applied bool, err error) {
	tag, err := s.db.Exec(ctx, upsertSQL, u.Instance, u.State, u.Reason, u.EventTime)
	if err != nil {
		return false, fmt.Errorf("upserting whatsapp_instances %q: %w", u.Instance, err)
	}
	return tag.RowsAffected() == 1, nil
}
