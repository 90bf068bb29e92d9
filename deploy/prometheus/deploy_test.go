// Package prometheus_test validates the operator files in deploy/: the
// Prometheus alerting rules (alerts.yml) and the Grafana dashboard
// (../grafana/borda.json). Every expression must parse with the Prometheus
// parser and name only metrics Borda exports.
package prometheus_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// exported lists the metric names Borda exports (docs/telemetry.md and docs/webhooks.md §9);
// histogram series (_bucket, _count, _sum) are derived.
var exported = map[string]bool{
	"borda_http_requests_total":                      true,
	"borda_http_request_duration_seconds":            true,
	"borda_upstream_errors_total":                    true,
	"borda_ratelimit_decisions_total":                true,
	"borda_ratelimit_store_duration_seconds":         true,
	"borda_ratelimit_store_errors_total":             true,
	"borda_telemetry_dropped_total":                  true,
	"borda_telemetry_flush_duration_seconds":         true,
	"borda_aggregate_last_success_timestamp_seconds": true,
	"webhook_ingress_requests_total":                 true,
	"webhook_ingress_latency_seconds":                true,
	"webhook_ingress_dedup_hits_total":               true,
	"webhook_ingress_unroutable_total":               true,
	"webhook_ingress_inflight_current":               true,
}

// promql is the parser Prometheus uses for rule files, default options.
var promql = parser.NewParser(parser.Options{})

// checkExpr parses expr and checks every selector names an exported
// metric.
func checkExpr(t *testing.T, where, expr string) {
	t.Helper()
	e, err := promql.ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, expr, err)
		return
	}
	n := 0
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name != model.MetricNameLabel {
				continue
			}
			n++
			name := m.Value
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if base, found := strings.CutSuffix(name, suffix); found && exported[base] {
					name = base
				}
			}
			if !exported[name] {
				t.Errorf("%s: %q selects %s, which Borda does not export", where, expr, m.Value)
			}
		}
		return nil
	})
	if n == 0 {
		t.Errorf("%s: %q selects no metric", where, expr)
	}
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func TestAlertRulesParse(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	seen := map[string]bool{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			where := "alerts.yml " + r.Alert
			if r.Alert == "" || seen[r.Alert] {
				t.Errorf("%s: alert name empty or repeated", where)
			}
			seen[r.Alert] = true
			checkExpr(t, where, r.Expr)
			if _, err := time.ParseDuration(r.For); err != nil {
				t.Errorf("%s: for %q: %v", where, r.For, err)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", where, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: summary and description annotations are required", where)
			}
			for k, v := range r.Annotations {
				checkTemplate(t, where+" annotation "+k, v)
			}
		}
	}
	// The alerts issue 4 asks for.
	for _, name := range []string{"BordaRateLimitStoreErrors", "BordaTelemetryDropping", "BordaAggregationStale", "BordaWebhook503Rate", "BordaLatencyP95High"} {
		if !seen[name] {
			t.Errorf("alerts.yml lacks %s", name)
		}
	}
}

// checkTemplate parses an annotation as Prometheus does: a Go text/template
// with $labels and $value defined and its humanize functions.
func checkTemplate(t *testing.T, where, text string) {
	t.Helper()
	stub := func(any) string { return "" }
	funcs := template.FuncMap{"humanize": stub, "humanizeDuration": stub, "humanizePercentage": stub, "humanizeTimestamp": stub}
	defs := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$value := .Value}}"
	if _, err := template.New(where).Funcs(funcs).Parse(defs + text); err != nil {
		t.Errorf("%s: template does not parse: %v", where, err)
	}
}

// grafanaVars are the dashboard's variables, replaced as Grafana would
// before the query reaches Prometheus.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$route", ".*", "${datasource}", "")

type panel struct {
	Type    string  `json:"type"`
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func TestDashboardParses(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../grafana/borda.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string  `json:"title"`
		UID    string  `json:"uid"`
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("borda.json: %v", err)
	}
	if d.Title == "" || d.UID == "" {
		t.Error("borda.json: title and uid are required")
	}
	leftover := regexp.MustCompile(`\$\w+`)
	var used = map[string]bool{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				expr := grafanaVars.Replace(tg.Expr)
				if v := leftover.FindString(expr); v != "" {
					t.Errorf("panel %q: unknown variable %s in %q", p.Title, v, tg.Expr)
				}
				checkExpr(t, "panel "+p.Title, expr)
				for name := range exported {
					if strings.Contains(expr, name) {
						used[name] = true
					}
				}
			}
		}
	}
	walk(d.Panels)
	for _, name := range []string{
		"borda_http_requests_total", "borda_http_request_duration_seconds", "borda_ratelimit_decisions_total",
		"borda_ratelimit_store_duration_seconds", "borda_ratelimit_store_errors_total", "borda_telemetry_dropped_total",
		"webhook_ingress_requests_total", "webhook_ingress_latency_seconds",
	} {
		if !used[name] {
			t.Errorf("the dashboard has no panel over %s", name)
		}
	}
}
