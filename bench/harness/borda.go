package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// BordaSpec describes the borda serve a bench run needs.
type BordaSpec struct {
	Listen, Admin string // 127.0.0.1:port each
	Upstream      string // http://127.0.0.1:port
	RedisURL      string // empty: the embedded in-memory store
	KeyPrefix     string // olp-dev:bench…: (development environment)
	AMQPURL       string
	Rules         int // 0..3 rate-limit rules on the bench route (limits never reached)
	// Enforce makes the rules enforce with a limit that is reached
	// (EnforceLimit per second per client IP), for fault runs that want 429s.
	EnforceLimit int
	// Webhook enables the ingress at /webhooks/bench with its own topology
	// (Exchange, ForwardQueue, … named after Name).
	Webhook bool
	Name    string // unique run name: names the topology
	Token   string // webhook token (WEBHOOK_TOKENS)
	// DedupSize overrides webhook.dedup_size (0: the default, 20 000).
	DedupSize int
	// PublishChannels overrides webhook.publish_channels (0: the default).
	PublishChannels int
	// QueueType is webhook.queue_type for the forward queue and the DLQ
	// ("" means classic: the soak and fault runs count, not replicate).
	QueueType string
	// NoTelemetry turns the Redis counters off (telemetry.enabled: false),
	// the baseline of the telemetry-cost target.
	NoTelemetry bool
	// Sync is rate_limits.sync ("" or "0s": a store round trip per
	// request), e.g. "50ms".
	Sync string
}

// WebhookPath is where the bench's webhook ingress listens.
const WebhookPath = "/webhooks/bench"

// Topology names of a run (all unique to Name, so the shared broker's real
// queues are never touched). Retry queues are <ForwardQueue>-retry-1m.
func (s BordaSpec) Exchange() string     { return s.Name + ".events" }
func (s BordaSpec) RoutingKey() string   { return s.Name + ".legacy_forward" }
func (s BordaSpec) ForwardQueue() string { return s.Name + "-forward-queue" }
func (s BordaSpec) EventsQueue() string  { return s.Name + "-events-queue" }
func (s BordaSpec) DLQ() string          { return s.Name + "-dlq" }
func (s BordaSpec) RetryQueues() []string {
	return []string{s.ForwardQueue() + "-retry-1m"}
}

// Env is the environment borda serve runs with.
func (s BordaSpec) Env() []string {
	env := []string{"ENVIRONMENT=development", "BORDA_LOG_LEVEL=warn",
		"REDIS_URL=", "UPSTASH_REDIS_REST_URL=", "UPSTASH_REDIS_REST_TOKEN=", "DATABASE_URL="}
	if s.RedisURL != "" {
		env = append(env, "REDIS_URL="+s.RedisURL)
	}
	if s.AMQPURL != "" {
		env = append(env, "AMQP_URL="+s.AMQPURL)
	}
	if s.Token != "" {
		env = append(env, "WEBHOOK_TOKENS="+s.Token)
	}
	return env
}

// WriteConfig writes the YAML config for s to dir/<name>.yaml.
func (s BordaSpec) WriteConfig(dir, name string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "environment: development\nlisten: %q\nadmin_listen: %q\n", s.Listen, s.Admin)
	b.WriteString("trusted_proxies: []\n")
	if s.KeyPrefix != "" {
		fmt.Fprintf(&b, "redis:\n  key_prefix: %q\n", s.KeyPrefix)
	}
	fmt.Fprintf(&b, "telemetry:\n  enabled: %t\n  flush_every: 1s\n", !s.NoTelemetry)
	// Limits are never reached (they measure the cost of deciding). The
	// GCRA one is at the config's bound, 10 a millisecond of its window
	// (an emission interval of 0.1 ms: docs/rate-limiting.md, "GCRA
	// arithmetic"), over a window long enough that no run spends its
	// burst of 10 000 000.
	rules := []struct {
		name, yaml string
		limit      int
	}{
		{"bench_ip", "{name: bench_ip, scope: ip, algorithm: fixed_window, limit: %d, window: 5s, mode: enforce}", 1_000_000_000},
		{"bench_route", "{name: bench_route, scope: route, algorithm: fixed_window, limit: %d, window: 60s, mode: enforce}", 1_000_000_000},
		{"bench_gcra", "{name: bench_gcra, scope: ip, algorithm: gcra, limit: %d, window: 1000s, mode: enforce}", 10_000_000},
	}
	var names []string
	if s.Rules > 0 {
		b.WriteString("rate_limits:\n  timeout: 30ms\n  on_store_error: allow\n")
		if s.Sync != "" {
			fmt.Fprintf(&b, "  sync: %s\n", s.Sync)
		}
		b.WriteString("  rules:\n")
		for i, r := range rules[:min(s.Rules, len(rules))] {
			limit := r.limit
			if i == 0 && s.EnforceLimit > 0 {
				limit = s.EnforceLimit * 5 // per 5 s window
			}
			fmt.Fprintf(&b, "    - "+r.yaml+"\n", limit)
			names = append(names, r.name)
		}
	}
	fmt.Fprintf(&b, "routes:\n  - name: bench\n    path_prefix: \"/\"\n    upstream: %q\n", s.Upstream)
	if len(names) > 0 {
		fmt.Fprintf(&b, "    rate_limits: [%s]\n", strings.Join(names, ", "))
	}
	if s.Webhook {
		queueType := s.QueueType
		if queueType == "" {
			queueType = "classic"
		}
		fmt.Fprintf(&b, "webhook:\n  path: %s\n  exchange: %s\n  routing_key: %s\n  confirm_timeout: 3s\n  queue_type: %s\n",
			WebhookPath, s.Exchange(), s.RoutingKey(), queueType)
		if s.DedupSize > 0 {
			fmt.Fprintf(&b, "  dedup_size: %d\n", s.DedupSize)
		}
		if s.PublishChannels > 0 {
			fmt.Fprintf(&b, "  publish_channels: %d\n", s.PublishChannels)
		}
		// The events queue is bound to a key the ingress never uses: no
		// bench runs consume-events, a second copy of every event would
		// double the broker's work, and the fault bench's queue-deleted
		// case needs the forward queue to be the only one the routing key
		// reaches (docs/reliability.md, "A deleted forward queue").
		fmt.Fprintf(&b, "forward:\n  queue: %s\n  dlq: %s\n  events_queue: %s\n  events_binding: %s.unused\n  retry_delays: [1m]\n",
			s.ForwardQueue(), s.DLQ(), s.EventsQueue(), s.Name)
	} else {
		b.WriteString("webhook:\n  path: \"\"\n")
	}
	path := filepath.Join(dir, name+".yaml")
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

// StartBorda writes s's config and runs `borda serve --config FILE`.
func StartBorda(dir, name, cpus, bin string, s BordaSpec) (*Process, error) {
	cfg, err := s.WriteConfig(dir, name)
	if err != nil {
		return nil, fmt.Errorf("writing borda config: %w", err)
	}
	env := append(s.Env(), "GOMAXPROCS="+gomaxprocs(cpus))
	return Start(dir, name, cpus, env, bin, "serve", "--config", cfg)
}

// gomaxprocs is the CPU count of a taskset list ("1" → 1, "0-1" → 2, ""
// → the Go default, left to the runtime by passing it through empty).
func gomaxprocs(cpus string) string {
	if cpus == "" {
		return ""
	}
	n := 0
	for _, part := range strings.Split(cpus, ",") {
		var a, b int
		if _, err := fmt.Sscanf(part, "%d-%d", &a, &b); err == nil {
			n += b - a + 1
		} else {
			n++
		}
	}
	return fmt.Sprint(n)
}
