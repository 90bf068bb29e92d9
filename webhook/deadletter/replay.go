package deadletter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/webhook/dlqheader"
)

// db is the part of *pgxpool.Pool replay uses.
type db interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Selection picks dead letters: by event ID (the id or its Printed form,
// SameID), or every one dead-lettered at or after Since.
type Selection struct {
	ID    string
	Since time.Time
}

func (s Selection) matches(l Letter) bool {
	if s.ID != "" {
		return SameID(l.ID, s.ID)
	}
	return !l.DeadLetteredAt.IsZero() && !l.DeadLetteredAt.Before(s.Since)
}

// ReplayOptions configure Replay.
type ReplayOptions struct {
	// DLQ is read; ForwardQueue receives the replays through the default
	// exchange (routing key = the queue's name), so no other consumer of
	// the events exchange sees them again.
	DLQ, ForwardQueue string
	Select            Selection
	// Operator and Reason are recorded in webhook_replays (required).
	Operator, Reason string
	// Force makes the forwarder POST even when the event was forwarded
	// before (its idempotency key says "forwarded"); recorded.
	Force bool
	// Limit bounds the pass over the DLQ (0: DefaultLimit).
	Limit int
}

// Outcome is one replayed dead letter.
type Outcome struct {
	Letter   Letter
	AuditID  int64
	Outcome  string // republished or failed
	Err      error
	Replayed time.Time
}

// Outcomes recorded in webhook_replays.outcome.
const (
	OutcomeRepublished = "republished"
	OutcomeFailed      = "failed"
	outcomePending     = "pending"
)

// ErrNoSelection: neither an id nor a since time was given.
var ErrNoSelection = errors.New("deadletter: give --id or --all-since")

// Replay republishes the selected dead letters to the forward queue, same
// body and event id, a fresh retry ladder and the HeaderReplay header (the
// audit row's id), and records each in webhook_replays before (pending)
// and after (republished or failed) the publish. A dead letter leaves the
// DLQ only once its republish is confirmed. Replaying an event twice does
// not POST it twice: the forwarder's idempotency key holds, unless Force.
// conn reads the DLQ; pub republishes (and puts back what is not
// replayed).
func Replay(ctx context.Context, conn *amqp.Connection, pub Republisher, pg db, opts ReplayOptions) ([]Outcome, error) {
	if opts.Select.ID == "" && opts.Select.Since.IsZero() {
		return nil, ErrNoSelection
	}
	if strings.TrimSpace(opts.Operator) == "" || strings.TrimSpace(opts.Reason) == "" {
		return nil, errors.New("deadletter: --operator and --reason are required")
	}
	if err := canPutBack(ctx, pub); err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("opening channel: %w", err)
	}
	defer ch.Close()
	got, err := pass(ctx, ch, opts.DLQ, opts.Limit)
	var out []Outcome
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, d := range got {
		l := FromDelivery(d)
		if err != nil || !opts.Select.matches(l) {
			if perr := putBack(ctx, pub, opts.DLQ, d); perr != nil {
				errs = append(errs, perr)
			}
			continue
		}
		o := replayOne(ctx, pub, pg, d, l, opts)
		out = append(out, o)
		if o.Outcome == OutcomeRepublished {
			_ = d.Ack(false)
		} else if perr := putBack(ctx, pub, opts.DLQ, d); perr != nil {
			errs = append(errs, perr)
		}
	}
	return out, errors.Join(errs...)
}

func replayOne(ctx context.Context, pub Republisher, pg db, d amqp.Delivery, l Letter, opts ReplayOptions) Outcome {
	o := Outcome{Letter: l, Replayed: time.Now().UTC()}
	// The id and source are message data: recorded Printed, since a text
	// column refuses invalid UTF-8 and NUL, which would make such a letter
	// impossible to replay (the audit row comes first).
	err := pg.QueryRow(ctx, `INSERT INTO webhook_replays (event_id, source, operator, reason, forced, replayed_at, outcome)
VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`, Printed(l.ID), Printed(l.Source), opts.Operator, opts.Reason, opts.Force, o.Replayed, outcomePending).Scan(&o.AuditID)
	if err != nil {
		o.Outcome, o.Err = OutcomeFailed, fmt.Errorf("recording the replay: %w", err)
		return o // nothing published without its audit row
	}
	msg := dlqheader.Republishing(d)
	for _, h := range []string{dlqheader.Attempt, dlqheader.FirstFailure, dlqheader.FirstReason, dlqheader.DLQReason,
		dlqheader.DLQStatus, dlqheader.DLQExcerpt, dlqheader.DeadLetteredAt, dlqheader.ReplayForce, "x-death",
		"x-first-death-exchange", "x-first-death-queue", "x-first-death-reason", "x-last-death-exchange", "x-last-death-queue", "x-last-death-reason"} {
		delete(msg.Headers, h)
	}
	msg.Headers[dlqheader.Replay] = strconv.FormatInt(o.AuditID, 10)
	if opts.Force {
		msg.Headers[dlqheader.ReplayForce] = true
	}
	if msg.MessageId == "" {
		msg.MessageId = l.ID
	}
	o.Outcome = OutcomeRepublished
	if o.Err = pub.PublishTo(ctx, "", opts.ForwardQueue, msg); o.Err != nil {
		o.Outcome = OutcomeFailed
	}
	errText := ""
	if o.Err != nil {
		errText = o.Err.Error()
	}
	if _, err := pg.Exec(ctx, `UPDATE webhook_replays SET outcome = $1, error = $2 WHERE id = $3`, o.Outcome, errText, o.AuditID); err != nil && o.Err == nil {
		// Published but not recorded as such: the row stays "pending".
		o.Err = fmt.Errorf("recording the replay's outcome (row %d stays pending): %w", o.AuditID, err)
		o.Outcome = OutcomeRepublished
	}
	return o
}

// ParseSince reads --all-since: a Go duration before now ("1h", "30m") or
// an RFC 3339 time.
func ParseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("--all-since %q: want a positive duration", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--all-since %q: want a duration (1h) or an RFC 3339 time", s)
	}
	return t, nil
}
