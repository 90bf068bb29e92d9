// Package prometheus_test validates the operator files in deploy/: the
// Prometheus alerting rules (alerts.yml) and the Grafana dashboard
// (../grafana/borda.json). Every expression must parse with the Prometheus
// parser and select a metric; that each metric is one a Borda command
// really exports is checked against the commands' own registries in
// cmd/borda (TestDashboardAndAlertsSelectOnlyExportedMetrics). Each alert
// links a runbook section of docs/runbooks.md that exists; the dashboard
// has unique panel ids, a Prometheus datasource on every panel and query,
// and panels that do not overlap.
package prometheus_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"text/template"
	"time"
	"unicode"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// promql is the parser Prometheus uses for rule files, default options.
var promql = parser.NewParser(parser.Options{})

// checkExpr parses expr, checks it selects at least one metric and
// returns the metric names it selects.
func checkExpr(t *testing.T, where, expr string) []string {
	t.Helper()
	e, err := promql.ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, expr, err)
		return nil
	}
	var names []string
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name != model.MetricNameLabel {
				continue
			}
			names = append(names, m.Value)
		}
		return nil
	})
	if len(names) == 0 {
		t.Errorf("%s: %q selects no metric", where, expr)
	}
	return names
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
	anchors := runbookAnchors(t)
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
			checkRunbook(t, where, r.Annotations["runbook_url"], anchors)
		}
	}
	// The alerts issue 4 asks for, and the pipeline's of issue 15.
	for _, name := range []string{"BordaRateLimitStoreErrors", "BordaTelemetryDropping", "BordaAggregationStale", "BordaWebhook503Rate", "BordaLatencyP95High",
		"BordaForwardBreakerOpen", "BordaDLQGrowing", "BordaForwardQueueOldestAgeHigh", "BordaBrokerBlocked", "BordaBrokerDisconnected",
		"BordaWebhookPublishFailures", "BordaWebhookConfirmLatencyHigh",
		"BordaEventsQueueNoConsumer", "BordaWebhookForwardQueueMissing"} { // issue 23
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

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	GridPos    struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr       string      `json:"expr"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
}

// promDatasource is the dashboard's datasource variable: every panel and
// query reads the Prometheus the importer picks.
var promDatasource = datasource{Type: "prometheus", UID: "${datasource}"}

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
	ids := map[int]string{}
	var placed []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if prev, dup := ids[p.ID]; dup || p.ID <= 0 {
				t.Errorf("panel %q: id %d is missing or also %q's", p.Title, p.ID, prev)
			}
			ids[p.ID] = p.Title
			g := p.GridPos
			if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
				t.Errorf("panel %q: gridPos %+v is not within the 24-column grid", p.Title, g)
			}
			for _, q := range placed {
				h := q.GridPos
				if g.X < h.X+h.W && h.X < g.X+g.W && g.Y < h.Y+h.H && h.Y < g.Y+g.H {
					t.Errorf("panels %q and %q overlap", p.Title, q.Title)
				}
			}
			placed = append(placed, p)
			if p.Type == "row" {
				continue
			}
			if p.Datasource == nil || *p.Datasource != promDatasource {
				t.Errorf("panel %q: datasource %v, want %v", p.Title, p.Datasource, promDatasource)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				if tg.Datasource == nil || *tg.Datasource != promDatasource {
					t.Errorf("panel %q: query datasource %v, want %v", p.Title, tg.Datasource, promDatasource)
				}
				expr := grafanaVars.Replace(tg.Expr)
				if v := leftover.FindString(expr); v != "" {
					t.Errorf("panel %q: unknown variable %s in %q", p.Title, v, tg.Expr)
				}
				for _, name := range checkExpr(t, "panel "+p.Title, expr) {
					for _, suffix := range []string{"_bucket", "_count", "_sum"} {
						name = strings.TrimSuffix(name, suffix)
					}
					used[name] = true
				}
			}
		}
	}
	walk(d.Panels)
	for _, name := range []string{
		"borda_http_requests_total", "borda_http_request_duration_seconds", "borda_ratelimit_decisions_total",
		"borda_ratelimit_store_duration_seconds", "borda_ratelimit_store_errors_total", "borda_telemetry_dropped_total",
		"webhook_ingress_requests_total", "webhook_ingress_latency_seconds",
		// The pipeline (issue 15): forwarder, broker, queues, DLQ, and the
		// metrics of the round before.
		"borda_forward_outcomes_total", "borda_forward_breaker_state", "borda_forward_queue_depth",
		"borda_forward_queue_oldest_age_seconds", "borda_forward_dlq_depth", "borda_webhook_broker_connected",
		"borda_webhook_broker_blocked", "borda_webhook_publish_failures_total", "borda_client_errors_total",
		"borda_http_connections_open", "borda_webhook_auth_failures_total", "borda_webhook_auth_throttled_total",
		"borda_telemetry_invalid_values_total",
	} {
		if !used[name] {
			t.Errorf("the dashboard has no panel over %s", name)
		}
	}
}

// runbookPrefix is where alerts link docs/runbooks.md.
const runbookPrefix = "https://github.com/olp-edu/borda/blob/main/docs/runbooks.md#"

// runbookAnchors are the anchors GitHub gives the headings of
// docs/runbooks.md: lower case, punctuation other than "-" and "_"
// dropped, spaces as "-".
func runbookAnchors(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile("../../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		h, ok := strings.CutPrefix(line, "## ")
		if !ok {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(h)) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

// checkRunbook checks an alert links a section of docs/runbooks.md.
func checkRunbook(t *testing.T, where, url string, anchors map[string]bool) {
	t.Helper()
	anchor, ok := strings.CutPrefix(url, runbookPrefix)
	if !ok {
		t.Errorf("%s: runbook_url %q, want %s<section>", where, url, runbookPrefix)
		return
	}
	if !anchors[anchor] {
		t.Errorf("%s: runbook_url names #%s, which is no section of docs/runbooks.md", where, anchor)
	}
}
