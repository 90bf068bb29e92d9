package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/olp-edu/borda/internal/redact"
	"github.com/olp-edu/borda/webhook/deadletter"
)

// runDLQShow is `borda dlq show [--config FILE] [--limit N] ID`: one dead
// letter in full (deadletter.Show), left in the queue. The id may come
// first or last; flags after it are still read. Exit 1 when no dead letter
// has the id, 2 on usage.
func runDLQShow(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, path := newFlags("dlq show", stderr)
	limit := fs.Int("limit", deadletter.DefaultLimit, "read at most N dead letters")
	var id string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:]
	} else if n := len(args); n > 0 && !strings.HasPrefix(args[n-1], "-") && (n < 2 || !flagTakesValue(args[n-2])) {
		id, args = args[n-1], args[:n-1]
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if id == "" {
		fmt.Fprintln(stderr, "usage: "+helps["dlq show"].usage)
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
	entries, err := deadletter.Show(ctx, conn, pub, cfg.Forward.DLQ, id, *limit)
	for i, e := range entries {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		writeEntry(stdout, e, time.Now())
	}
	switch {
	case errors.Is(err, deadletter.ErrNotFound):
		fmt.Fprintf(stderr, "borda: no dead letter %s in %s (looked at up to %d; `borda dlq list` shows the ids)\n", printable(id), cfg.Forward.DLQ, *limit)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "borda: reading %s: %s\n", cfg.Forward.DLQ, printable(err.Error()))
		return 1
	}
	return 0
}

// flagTakesValue reports whether arg is a dlq show flag followed by its
// value ("--config x ID": x is the flag's, ID the positional).
func flagTakesValue(arg string) bool {
	name := strings.TrimLeft(arg, "-")
	return !strings.Contains(name, "=") && (name == "config" || name == "limit")
}

// writeEntry prints one dead letter as "field: value" lines, every value
// through printable (message data cannot move the cursor or fake a line).
func writeEntry(w io.Writer, e deadletter.Entry, now time.Time) {
	line := func(k, v string) { fmt.Fprintf(w, "%-22s %s\n", k+":", printable(v)) }
	when := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339) + " (" + now.Sub(t).Round(time.Second).String() + " ago)"
	}
	line("id", e.ID)
	line("source", e.Source)
	// The envelope's event is the one the URL named (Evolution's
	// "webhook by events"); "event: -" read as if the letter had none,
	// beside a body whose own "event" names it.
	line("url event", e.Event)
	line("received", when(e.ReceivedAt))
	line("first failure", when(e.FirstFailure))
	line("first reason", e.FirstReason)
	line("dead-lettered", when(e.DeadLetteredAt))
	line("reason", e.Reason)
	line("attempts", fmt.Sprint(e.Attempts))
	line("last status", fmt.Sprint(e.Status))
	line("reply excerpt", e.Excerpt)
	line("content type", e.ContentType)
	line("content encoding", e.ContentEncoding)
	line("type", e.Type)
	line("app id", e.AppID)
	line("timestamp", when(e.Timestamp))
	line("message bytes", fmt.Sprint(e.MessageBytes))
	line("received type", e.ReceivedContentType)
	line("body bytes", fmt.Sprint(e.BodyBytes))
	line("body sha256", e.SHA256)
	fmt.Fprintln(w, "headers:")
	for _, k := range sortedKeys(e.Headers) {
		fmt.Fprintf(w, "  %-20s %s\n", printable(k)+":", printable(redact.URLs(fmt.Sprint(e.Headers[k]))))
	}
	if len(e.ReceivedHeaders) > 0 {
		fmt.Fprintln(w, "received headers:")
		for _, k := range sortedKeys(e.ReceivedHeaders) {
			fmt.Fprintf(w, "  %-20s %s\n", printable(k)+":", printable(e.ReceivedHeaders[k]))
		}
	}
	line("body preview", e.Preview)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
