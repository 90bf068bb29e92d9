package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/amqpaddr"
	"github.com/olp-edu/borda/internal/redact"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/schema"
	"github.com/olp-edu/borda/webhook/deadletter"
	"github.com/olp-edu/borda/webhook/publish"
)

// runDLQ is `borda dlq list|show|replay`. list prints the dead letters
// and leaves them in the queue; show prints one in full (dlq_show.go);
// replay republishes the chosen ones to the forward queue and records each
// in webhook_replays (DATABASE_URL).
func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintln(stdout, groupUsage("dlq"))
		return 0
	}
	if len(args) == 0 || (args[0] != "list" && args[0] != "show" && args[0] != "replay") {
		fmt.Fprintln(stderr, groupUsage("dlq"))
		return 2
	}
	switch args[0] {
	case "list":
		return runDLQList(ctx, args[1:], stdout, stderr)
	case "show":
		return runDLQShow(ctx, args[1:], stdout, stderr)
	}
	return runDLQReplay(ctx, args[1:], stdout, stderr)
}

func runDLQList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, path := newFlags("dlq list", stderr)
	limit := fs.Int("limit", deadletter.DefaultLimit, "show at most N dead letters (0: only count them)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *limit < 0 {
		fmt.Fprintf(stderr, "borda: --limit %d: want 0 (count only) or more\n", *limit)
		return 2
	}
	cfg, code, ok := loadConfig(*path, stderr)
	if !ok {
		return code
	}
	conn, pub, closeDLQ, ok := openDLQ(ctx, cfg, stderr)
	if !ok {
		return 1
	}
	defer closeDLQ()
	// The depth before the pass: while it runs, the letters it holds are
	// unacked, not ready.
	inQueue, countErr := deadletter.Count(conn, cfg.Forward.DLQ)
	if countErr != nil {
		inQueue = -1
	}
	if *limit == 0 {
		if countErr != nil {
			fmt.Fprintf(stderr, "borda: %s\n", printable(countErr.Error()))
			return 1
		}
		fmt.Fprintln(stdout, deadletter.Summary(cfg.Forward.DLQ, 0, inQueue, 0, nil))
		return 0
	}
	letters, err := deadletter.List(ctx, conn, pub, cfg.Forward.DLQ, *limit)
	if err != nil {
		fmt.Fprintf(stderr, "borda: listing %s: %s\n", cfg.Forward.DLQ, printable(err.Error()))
		return 1
	}
	now := time.Now()
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSOURCE\tATTEMPTS\tAGE\tDEAD-LETTERED\tFIRST FAILURE\tLAST STATUS\tREPLY EXCERPT")
	for _, l := range letters {
		dl := "-"
		if !l.DeadLetteredAt.IsZero() {
			dl = l.DeadLetteredAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%d\t%s\n", printable(l.ID), printable(l.Source), l.Attempts,
			l.Age(now).Round(time.Second), dl, printable(l.FirstReason), l.Status, printable(l.Excerpt))
	}
	tw.Flush()
	fmt.Fprintln(stdout, printable(deadletter.Summary(cfg.Forward.DLQ, len(letters), inQueue, *limit, countErr)))
	return 0
}

func runDLQReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, path := newFlags("dlq replay", stderr)
	id := fs.String("id", "", "replay the dead letter with this event id")
	since := fs.String("all-since", "", "replay every dead letter dead-lettered since this time (1h, or RFC 3339)")
	operator := fs.String("operator", "", "who replays (recorded; required)")
	reason := fs.String("reason", "", "why (recorded; required)")
	force := fs.Bool("force", false, "POST even events already forwarded (recorded)")
	limit := fs.Int("limit", deadletter.DefaultLimit, "read at most N dead letters")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if (*id == "") == (*since == "") || strings.TrimSpace(*operator) == "" || strings.TrimSpace(*reason) == "" {
		fmt.Fprintln(stderr, "usage: "+helps["dlq replay"].usage)
		return 2
	}
	sel := deadletter.Selection{ID: *id}
	if *since != "" {
		t, err := deadletter.ParseSince(*since, time.Now())
		if err != nil {
			fmt.Fprintf(stderr, "borda: %v\n", err)
			return 2
		}
		sel.Since = t
	}
	cfg, code, ok := loadConfig(*path, stderr)
	if !ok {
		return code
	}
	if cfg.Database.URL == "" {
		fmt.Fprintln(stderr, "borda: dlq replay records to webhook_replays and needs database.url (or DATABASE_URL)")
		return 2
	}
	pool, err := pgxpool.New(ctx, cfg.Database.URL.Reveal())
	if err != nil {
		fmt.Fprintf(stderr, "borda: parsing database.url: %v\n", err)
		return 2
	}
	defer pool.Close()
	conn, pub, closeDLQ, ok := openDLQ(ctx, cfg, stderr)
	if !ok {
		return 1
	}
	defer closeDLQ()
	out, err := deadletter.Replay(ctx, conn, pub, pool, deadletter.ReplayOptions{
		DLQ: cfg.Forward.DLQ, ForwardQueue: cfg.Forward.Queue, Select: sel,
		Operator: *operator, Reason: *reason, Force: *force, Limit: *limit,
	})
	err = schema.Hint(err)
	failed := 0
	for _, o := range out {
		msg := ""
		if o.Err != nil {
			msg = ": " + printable(schema.Hint(o.Err).Error())
			failed++
		}
		fmt.Fprintf(stdout, "%s %s (audit #%d)%s\n", printable(o.Letter.ID), o.Outcome, o.AuditID, msg)
	}
	if err != nil {
		fmt.Fprintf(stderr, "borda: replaying: %s\n", printable(err.Error()))
		return 1
	}
	fmt.Fprintf(stdout, "%d replayed, %d failed\n", len(out)-failed, failed)
	if failed > 0 {
		return 1
	}
	if len(out) == 0 {
		// An operator who named an id (or a time) expects something to be
		// replayed: nothing is an error, not a success.
		fmt.Fprintf(stderr, "borda: no dead letter matched in %s (looked at up to %d)\n", cfg.Forward.DLQ, *limit)
		return 1
	}
	return 0
}

// printable is s for a terminal: "-" when empty, else deadletter.Printed
// (Go-quoted unless every rune is printable), so message data can neither
// move the cursor, recolour, hide text nor break the table's columns.
func printable(s string) string {
	if s == "" {
		return "-"
	}
	return deadletter.Printed(s)
}

// openDLQ dials the broker for one pass over the DLQ (conn reads it) and
// starts the confirm publisher that puts letters back or replays them
// (pub). close releases both; false means the error is printed on
// stderr and the command exits 1.
func openDLQ(ctx context.Context, cfg configs.Config, stderr io.Writer) (conn *amqp.Connection, pub *publish.Publisher, close func(), ok bool) {
	conn, err := amqpaddr.Dial(cfg.AMQP.URL.Reveal())
	if err != nil {
		fmt.Fprintf(stderr, "borda: dialing amqp: %v\n", redact.Error(err))
		return nil, nil, nil, false
	}
	pub, err = startDLQPublisher(ctx, cfg)
	if err != nil {
		_ = conn.Close()
		fmt.Fprintf(stderr, "borda: %v\n", err)
		return nil, nil, nil, false
	}
	return conn, pub, func() { stopDLQPublisher(pub); _ = conn.Close() }, true
}
