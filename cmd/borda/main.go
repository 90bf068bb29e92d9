// Command borda is the Borda edge gateway: one binary, several commands.
//
//	borda serve            the reverse proxy, rate limits and webhook ingress
//	borda forward          re-deliver queued webhooks to the legacy endpoint
//	borda consume-events   keep whatsapp_instances current
//	borda aggregate        fold Redis counters into PostgreSQL gateway_metrics
//	borda migrate          create or update the PostgreSQL tables
//	borda dlq list|show|replay  inspect, show and replay dead letters
//	borda limits relax|show|probe|suggest  relax, show, probe and calibrate rate limits
//	borda config check     validate and print the effective config
//	borda healthcheck      probe /healthz on 127.0.0.1 (container HEALTHCHECK)
//	borda version          print the version
//
// Exit codes: 0 success, 1 runtime failure, 2 usage or invalid config.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/olp-edu/borda/logsink"
)

// processLog is the process's stderr behind logsink, set by main (nil
// when run is called from tests); its dropped-line count is exported as
// borda_log_lines_dropped_total.
var processLog *logsink.Writer

// version is stamped at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"serve", "run the gateway: proxy, rate limits, webhook ingress", runServe},
		{"forward", "re-deliver queued webhooks to the legacy endpoint (HMAC, retries, DLQ)", runForward},
		{"consume-events", "keep whatsapp_instances current from connection.update events", runConsumeEvents},
		{"aggregate", "fold Redis telemetry counters into PostgreSQL gateway_metrics once", runAggregate},
		{"migrate", "create or update the PostgreSQL tables", runMigrate},
		{"dlq", "list, show or replay dead-lettered webhooks", runDLQ},
		{"limits", "relax a rule for a while, show, probe or calibrate rate limits", runLimits},
		{"config", "validate and print the effective config", runConfig},
		{"healthcheck", "probe /healthz on 127.0.0.1 (for container HEALTHCHECKs)", runHealthcheck},
		{"version", "print the version", runVersion},
	}
}

func main() {
	// The long-running commands batch their log lines off the request
	// path (logsink); Close writes what is pending before the process
	// exits. The one-shot commands write stderr at once, in order with
	// their stdout.
	var stderr io.Writer = os.Stderr
	if len(os.Args) > 1 && longRunning[os.Args[1]] {
		processLog = logsink.New(os.Stderr, logsink.Options{})
		stderr = processLog
	}
	code := run(os.Args[1:], os.Stdout, redactingWriter{stderr})
	if processLog != nil {
		_ = processLog.Close()
	}
	os.Exit(code)
}

// longRunning are the commands whose stderr goes through logsink.
var longRunning = map[string]bool{"serve": true, "forward": true, "consume-events": true}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" {
		args[0] = "version"
	}
	for _, c := range commands() {
		if c.name == args[0] {
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "borda: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: borda <command> [flags]   (borda <command> --help: what it does, its environment and flags)")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range commands() {
		summary := c.summary
		if subs := groups[c.name]; len(subs) > 0 {
			// From the table the group's dispatch and help use, so the list
			// cannot lag behind a new subcommand.
			summary += " (" + strings.Join(subs, "|") + ")"
		}
		fmt.Fprintf(w, "  %-16s %s\n", c.name, summary)
	}
	fmt.Fprintln(w, "\nEvery command but healthcheck and version takes --config FILE (default configs/local.yaml, or $BORDA_CONFIG).")
}
