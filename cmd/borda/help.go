package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// commandHelp is what `borda <command> --help` prints before the flags.
type commandHelp struct {
	usage   string   // the whole usage line, starting "borda <command>"
	about   []string // what the command does, one to three lines
	signals []string // for long-running commands: "SIGNAL  effect" lines
	env     []string // the environment variables the command uses (keys of envDoc)
	envNote string   // an extra line under env, if any
}

// envDoc describes every environment variable a command's help may name.
// The config overrides are configs.ApplyEnv's (docs/configuration.md);
// TestHelpNamesOnlyVariablesTheCodeReads checks the list against it.
var envDoc = map[string]string{
	"BORDA_CONFIG":               "default for --config (else configs/local.yaml)",
	"BORDA_LOG_LEVEL":            "debug, info, warn or error (default info)",
	"BORDA_LISTEN":               "listen: the public listener address (--listen wins)",
	"BORDA_ADMIN_LISTEN":         "admin_listen (serve) or the admin listener (forward); --admin-listen wins",
	"ENVIRONMENT":                "environment: production, staging or development; fixes the Redis key prefix",
	"REDIS_URL":                  "redis.url (redis:// or rediss://)",
	"UPSTASH_REDIS_REST_URL":     "redis.rest_url: the Upstash REST store, with the token, when REDIS_URL is unset",
	"UPSTASH_REDIS_REST_TOKEN":   "redis.rest_token",
	"AMQP_URL":                   "amqp.url",
	"AMQP_MANAGEMENT_URL":        "amqp.management_url: the RabbitMQ management API, read for the queues' effective overflow",
	"DATABASE_URL":               "database.url",
	"WEBHOOK_TOKENS":             "the webhook ingress's tokens, comma-separated (no file key; without one the ingress answers 503)",
	"LEGACY_WEBHOOK_URL":         "forward.url: the legacy endpoint",
	"LEGACY_WEBHOOK_HMAC_SECRET": "the secret that signs each POST to the legacy endpoint",
	"AUTH_JWKS_URL":              "auth.jwks_url",
	"AUTH_JWT_SECRET":            "the HS256 secret (the variable auth.jwt_secret_env names)",
	"ADMIN_PPROF_TOKEN":          "the bearer token for /debug/pprof/ when admin_pprof: token",
	"ADMIN_TOKEN":                "the operator token the operator page (/ui) needs to replay a dead letter",
}

// configEnv is every config override, in docs/configuration.md's order.
var configEnv = []string{"ENVIRONMENT", "REDIS_URL", "UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN",
	"AMQP_URL", "AMQP_MANAGEMENT_URL", "DATABASE_URL", "WEBHOOK_TOKENS", "LEGACY_WEBHOOK_URL", "LEGACY_WEBHOOK_HMAC_SECRET",
	"AUTH_JWKS_URL", "ADMIN_PPROF_TOKEN", "ADMIN_TOKEN", "AUTH_JWT_SECRET"}

const stopSignals = "SIGTERM, SIGINT"

// helps is every command's help, by the words after "borda" that name it.
var helps = map[string]commandHelp{
	"serve": {
		usage: "borda serve [--config FILE] [--listen ADDR] [--admin-listen ADDR]",
		about: []string{
			"Runs the gateway until stopped: reverse proxy with host/path routing, rate limits (Redis,",
			"Upstash REST or the embedded store), and the webhook ingress, which answers 200 only once",
			"RabbitMQ has confirmed the event. Public listener `listen` (--listen, $BORDA_LISTEN), admin",
			"listener `admin_listen` (--admin-listen, $BORDA_ADMIN_LISTEN; \"off\" disables); a flag wins",
			"over the variable, the variable over the file.",
		},
		signals: []string{
			stopSignals + "  graceful shutdown: readiness 503, stop accepting, finish in-flight requests,",
			"                 await outstanding AMQP confirms, flush telemetry, exit",
			"SIGHUP           reload the rate-limit rules from the same file (an invalid file is logged",
			"                 and the running rules stay; routes and listeners need a restart)",
		},
		env: []string{"BORDA_CONFIG", "BORDA_LISTEN", "BORDA_ADMIN_LISTEN", "BORDA_LOG_LEVEL", "ENVIRONMENT", "REDIS_URL", "UPSTASH_REDIS_REST_URL",
			"UPSTASH_REDIS_REST_TOKEN", "AMQP_URL", "AMQP_MANAGEMENT_URL", "DATABASE_URL", "WEBHOOK_TOKENS", "AUTH_JWKS_URL", "AUTH_JWT_SECRET",
			"ADMIN_PPROF_TOKEN", "ADMIN_TOKEN"},
		envNote: "and the variables named by webhook.sources[].tokens_env and webhook.sources[].signature.secret_env",
	},
	"forward": {
		usage: "borda forward [--config FILE] [--admin-listen ADDR]",
		about: []string{
			"Re-delivers the webhooks of forward.queue to the legacy endpoint, HMAC-signed, with a retry",
			"ladder (forward.retry_delays), a dead-letter queue and a circuit breaker. Needs redis.url",
			"or the Upstash REST URL and token for its idempotency keys; --admin-listen (alias --admin; default $BORDA_ADMIN_LISTEN, else",
			"127.0.0.1:9092) serves /metrics, /healthz and /readyz (503 naming what it waits for: amqp,",
			"redis, breaker, publish, consumer). It has no public listener.",
		},
		signals: []string{
			stopSignals + "  stop consuming, give buffered deliveries back, finish the ones in flight, exit 0",
		},
		env: []string{"BORDA_CONFIG", "BORDA_ADMIN_LISTEN", "BORDA_LOG_LEVEL", "ENVIRONMENT", "REDIS_URL", "UPSTASH_REDIS_REST_URL",
			"UPSTASH_REDIS_REST_TOKEN", "AMQP_URL", "LEGACY_WEBHOOK_URL", "LEGACY_WEBHOOK_HMAC_SECRET"},
	},
	"consume-events": {
		usage: "borda consume-events [--config FILE] [--admin ADDR]",
		about: []string{
			"Keeps the PostgreSQL table whatsapp_instances current from the connection.update events of",
			"forward.events_queue. Needs database.url and `borda migrate`.",
		},
		signals: []string{
			stopSignals + "  finish the delivery in hand, exit 0",
		},
		env: []string{"BORDA_CONFIG", "BORDA_LOG_LEVEL", "AMQP_URL", "DATABASE_URL"},
	},
	"aggregate": {
		usage: "borda aggregate [--config FILE]",
		about: []string{
			"Folds the Redis telemetry counters into PostgreSQL gateway_metrics once, for cron (`borda",
			"serve` also does it every telemetry.aggregate_every). Exits 0 too when another process holds",
			"the aggregation lock.",
		},
		env: []string{"BORDA_CONFIG", "BORDA_LOG_LEVEL", "ENVIRONMENT", "REDIS_URL", "UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN", "DATABASE_URL"},
	},
	"migrate": {
		usage: "borda migrate [--config FILE]",
		about: []string{
			"Applies the embedded PostgreSQL migrations (gateway_metrics, whatsapp_instances,",
			"webhook_replays, limit_relaxes) to database.url.",
		},
		env: []string{"BORDA_CONFIG", "DATABASE_URL"},
	},
	"dlq list": {
		usage: "borda dlq list [--config FILE] [--limit N]",
		about: []string{"Prints the dead-lettered webhooks of forward.dlq, with the legacy endpoint's reply excerpt",
			"(non-printable data quoted), and leaves them in the queue without spending a delivery (safe",
			"under RabbitMQ 4's delivery limit). The last line says how many are in the queue and, when",
			"--limit shows fewer, how many are shown; --limit 0 only counts them."},
		env: []string{"BORDA_CONFIG", "AMQP_URL"},
	},
	"dlq show": {
		usage: "borda dlq show [--config FILE] [--limit N] ID",
		about: []string{"Prints one dead letter of forward.dlq in full: why it failed, the legacy endpoint's reply, every",
			"header, and a redacted body preview. Leaves it in the queue, like list."},
		env: []string{"BORDA_CONFIG", "AMQP_URL"},
	},
	"dlq replay": {
		usage: "borda dlq replay [--config FILE] (--id ID | --all-since 1h|RFC3339) --operator NAME --reason TEXT [--force] [--limit N]",
		about: []string{
			"Republishes the chosen dead letters to forward.queue and records each replay (operator, reason,",
			"outcome) in webhook_replays.",
		},
		env: []string{"BORDA_CONFIG", "AMQP_URL", "DATABASE_URL"},
	},
	"limits relax": {
		usage: "borda limits relax [--config FILE] --rule NAME --factor F --for DURATION --operator NAME --reason TEXT",
		about: []string{
			"Multiplies a rate-limit rule's limit by F (1 to 100) for a while (an incident valve), in the shared",
			"store: every running `borda serve` applies it within rate_limits.relax_poll and drops it when it",
			"expires. Records who, why and the outcome in limit_relaxes first (database.url, `borda migrate`),",
			"as the operator page's relax form does; nothing is relaxed without its record.",
		},
		env: []string{"BORDA_CONFIG", "ENVIRONMENT", "REDIS_URL", "UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN", "DATABASE_URL"},
	},
	"limits show": {
		usage: "borda limits show [--config FILE]",
		about: []string{"Prints the configured rate-limit rules and the relaxes in force in the shared store."},
		env:   []string{"BORDA_CONFIG", "ENVIRONMENT", "REDIS_URL", "UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN"},
	},
	"limits probe": {
		usage: "borda limits probe [--config FILE] --target URL [--rule NAME] [--token T] [--force] [--format table|json]",
		about: []string{
			"For staging: drives each rule a route applies until it limits, checks the 429 (status,",
			"Retry-After, X-RateLimit-*, RateLimit-Policy and RateLimit, problem+json with the rule's PT-BR",
			"message) and that the limit lifts after Retry-After; an observe rule is checked for its",
			"X-RateLimit-Would-Block marker. Exit 0 when all hold, 1 naming each failed check. Refuses a",
			"production config without --force. User and escola rules use --token, or a token minted with",
			"the secret auth.jwt_secret_env names, for a subject of the probe's own.",
		},
		env: []string{"BORDA_CONFIG", "AUTH_JWT_SECRET"},
	},
	"limits suggest": {
		usage: "borda limits suggest [--config FILE] [--rule NAME] [--since 28d] [--max-blocked-share 0.001] [--format table|json]",
		about: []string{
			"Calibration: from the distribution counters in gateway_metrics, per rule, the subject-windows",
			"observed, the share each threshold would have blocked, the share the current limit blocks and",
			"the smallest threshold blocking at most --max-blocked-share; prints the YAML change and warns",
			"when the data covers under four weeks (docs/rollout.md).",
		},
		env: []string{"BORDA_CONFIG", "ENVIRONMENT", "DATABASE_URL"},
	},
	"config check": {
		usage: "borda config check [--config FILE]",
		about: []string{
			"Validates the file, with the environment overrides applied, and prints the effective",
			"configuration with secrets redacted. An invalid file exits 2 listing every problem at once,",
			"one line each with its field path and line (unknown keys name the nearest valid one). Warnings",
			"(enabled parts that cannot work, with the variable to set) print on stderr and do not fail.",
		},
		env:     append([]string{"BORDA_CONFIG"}, configEnv...),
		envNote: "and the variables named by webhook.sources[].tokens_env and webhook.sources[].signature.secret_env",
	},
	"healthcheck": {
		usage: "borda healthcheck [--port N] [--path P] [--timeout D]",
		about: []string{
			"GETs http://127.0.0.1:<port><path> and exits 0 on a 2xx answer, 1 otherwise: a container",
			"HEALTHCHECK for images with no shell and no curl. Reads no config file and no environment.",
		},
	},
	"version": {
		usage: "borda version",
		about: []string{"Prints the version stamped at build time (-ldflags \"-X main.version=…\")."},
	},
}

// groups are the commands that take a subcommand.
var groups = map[string][]string{
	"config": {"check"},
	"dlq":    {"list", "show", "replay"},
	"limits": {"relax", "show", "probe", "suggest"},
}

// writeHelp writes the help of the command named name (a key of helps),
// without its flags.
func writeHelp(w io.Writer, name string) {
	h, ok := helps[name]
	if !ok {
		fmt.Fprintf(w, "usage: borda %s\n", name)
		return
	}
	fmt.Fprintf(w, "usage: %s\n\n", h.usage)
	for _, l := range h.about {
		fmt.Fprintln(w, l)
	}
	if len(h.signals) > 0 {
		fmt.Fprintln(w, "\nsignals:")
		for _, l := range h.signals {
			fmt.Fprintln(w, "  "+l)
		}
	}
	if len(h.env) > 0 {
		fmt.Fprintln(w, "\nenvironment (the config overrides are in docs/configuration.md):")
		for _, e := range h.env {
			fmt.Fprintf(w, "  %-27s %s\n", e, envDoc[e])
		}
		if h.envNote != "" {
			fmt.Fprintln(w, "  "+h.envNote)
		}
	}
}

// setUsage makes fs's usage (printed on --help and on a flag error) the
// command's help followed by its flags.
func setUsage(fs *flag.FlagSet, name string) {
	fs.Usage = func() {
		w := fs.Output()
		writeHelp(w, name)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(w, "\nflags:")
			fs.PrintDefaults()
		}
	}
}

// groupUsage is what `borda <group> --help` prints: each subcommand's
// usage line and what it does.
func groupUsage(group string) string {
	var b strings.Builder
	for i, sub := range groups[group] {
		prefix := "usage: "
		if i > 0 {
			prefix = "       "
		}
		b.WriteString(prefix + helps[group+" "+sub].usage + "\n")
	}
	for _, sub := range groups[group] {
		fmt.Fprintf(&b, "\nborda %s %s:\n", group, sub)
		for _, l := range helps[group+" "+sub].about {
			b.WriteString("  " + l + "\n")
		}
	}
	fmt.Fprintf(&b, "\n`borda %s <subcommand> --help` adds the environment and the flags.", group)
	return b.String()
}
