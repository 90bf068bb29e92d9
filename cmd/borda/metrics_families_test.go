package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/instances"
	"github.com/olp-edu/borda/keyspace"
	"github.com/olp-edu/borda/logsink"
	"github.com/olp-edu/borda/redisconn"
	"github.com/olp-edu/borda/webhook/forward"
)

// fqName reads a metric family's name from prometheus.Desc's String (the
// Desc has no accessor for it).
var fqName = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)

// familyNames is every metric family reg describes, observed or not
// (Describe lists a vec with no series yet, which Gather would not).
func familyNames(t *testing.T, reg *prometheus.Registry) map[string]bool {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() { reg.Describe(ch); close(ch) }()
	out := map[string]bool{}
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			out[m[1]] = true
		}
	}
	return out
}

// exportedFamilies builds the registries of `borda serve`, `borda forward`
// and `borda consume-events` as their commands do (newApp with every part
// on, forward.New, instances.New, each on newCommandRegistry with the log
// sink of the real process) and returns every family they describe, by
// command. Nothing connects: each component dials in the background.
func exportedFamilies(t *testing.T) map[string]map[string]bool {
	t.Helper()
	saved := processLog
	processLog = logsink.New(io.Discard, logsink.Options{})
	t.Cleanup(func() { _ = processLog.Close(); processLog = saved })

	cfg, err := configs.Parse([]byte(`environment: development
listen: "127.0.0.1:0"
admin_listen: "127.0.0.1:0"
redis: {url: "redis://127.0.0.1:1"}
amqp: {url: "amqp://guest:guest@127.0.0.1:1/"}
database: {url: "postgres://postgres@127.0.0.1:1/test"}
telemetry: {enabled: true}
webhook: {path: /webhooks/whatsapp}
forward: {url: "http://127.0.0.1:1/hook"}
routes:
  - {name: app, path_prefix: /, upstream: "http://127.0.0.1:1"}
`), func(name string) (string, bool) {
		v, ok := map[string]string{"WEBHOOK_TOKENS": "tok", "LEGACY_WEBHOOK_HMAC_SECRET": "secret"}[name]
		return v, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	out := map[string]map[string]bool{}

	a, err := newApp(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	// The aggregator registers its gauge from the background goroutine,
	// once it has a (lazy) PostgreSQL pool: wait for it, not for a time.
	deadline := time.Now().Add(30 * time.Second)
	for out["serve"] = familyNames(t, a.registry); !out["serve"]["borda_aggregate_last_success_timestamp_seconds"]; out["serve"] = familyNames(t, a.registry) {
		if time.Now().After(deadline) {
			t.Fatal("borda serve's aggregator never registered its metrics")
		}
		time.Sleep(10 * time.Millisecond)
	}

	rdb, err := redisconn.New(redisOptions(cfg.Redis))
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	keys, err := keyspace.New(cfg.KeyPrefix())
	if err != nil {
		t.Fatal(err)
	}
	reg := newCommandRegistry()
	opts := forwardOptions(cfg)
	opts.Redis, opts.Keys, opts.Logger, opts.Registerer = rdb, keys, log, reg
	if _, err := forward.New(opts); err != nil {
		t.Fatal(err)
	}
	out["forward"] = familyNames(t, reg)

	pool, err := pgxpool.New(context.Background(), cfg.Database.URL.Reveal())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	reg = newCommandRegistry()
	if _, err := instances.New(consumerOptions(cfg, pool, log, reg)); err != nil {
		t.Fatal(err)
	}
	out["consume-events"] = familyNames(t, reg)
	return out
}

// selectedMetrics parses a PromQL expression and returns the metric names
// its selectors name.
func selectedMetrics(t *testing.T, where, expr string) []string {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, expr, err)
		return nil
	}
	var names []string
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel {
					names = append(names, m.Value)
				}
			}
		}
		return nil
	})
	return names
}

// grafanaVars are the dashboard's variables, replaced as Grafana would.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$route", ".*", "${datasource}", "")

// dashboardExprs is every query of the dashboard, by panel title.
func dashboardExprs(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile("../../deploy/grafana/borda.json")
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string            `json:"title"`
		Panels  []json.RawMessage `json:"panels"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	}
	var d struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	var walk func([]json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatal(err)
			}
			walk(p.Panels)
			for _, tg := range p.Targets {
				out["borda.json panel "+p.Title] = append(out["borda.json panel "+p.Title], grafanaVars.Replace(tg.Expr))
			}
		}
	}
	walk(d.Panels)
	return out
}

// alertExprs is every rule expression of alerts.yml, by alert name.
func alertExprs(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out["alerts.yml "+r.Alert] = append(out["alerts.yml "+r.Alert], r.Expr)
		}
	}
	return out
}

// Every metric a dashboard panel or an alert rule selects is one a Borda
// binary really exports: the families of the registries the commands
// build (histograms' _bucket, _sum and _count are their family's), not a
// hand-kept list. A renamed or removed metric fails here, not on a blank
// panel or an alert that can never fire.
func TestDashboardAndAlertsSelectOnlyExportedMetrics(t *testing.T) {
	byCommand := exportedFamilies(t)
	exported := map[string]bool{}
	for _, fams := range byCommand {
		for n := range fams {
			exported[n] = true
		}
	}
	for _, must := range []string{"borda_http_requests_total", "borda_forward_breaker_state", "borda_instances_events_total",
		"webhook_ingress_latency_seconds", "borda_log_lines_dropped_total", "borda_redis_commands_total"} {
		if !exported[must] {
			t.Errorf("the registries lack %s: is the test still building them as the commands do?", must)
		}
	}
	uses := dashboardExprs(t)
	for k, v := range alertExprs(t) {
		uses[k] = v
	}
	if len(uses) < 30 {
		t.Errorf("only %d panels and alerts read: is the dashboard still where it was?", len(uses))
	}
	where := make([]string, 0, len(uses))
	for w := range uses {
		where = append(where, w)
	}
	sort.Strings(where)
	for _, w := range where {
		for _, expr := range uses[w] {
			names := selectedMetrics(t, w, expr)
			if len(names) == 0 {
				t.Errorf("%s: %q selects no metric", w, expr)
			}
			for _, name := range names {
				base := name
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					if b, ok := strings.CutSuffix(name, suffix); ok && exported[b] {
						base = b
					}
				}
				if !exported[base] {
					t.Errorf("%s selects %s, which no Borda command exports", w, name)
				}
			}
		}
	}
}
