package gateway

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the gateway's Prometheus collectors (docs/telemetry.md, "Prometheus metrics"), all
// registered on the injected Registerer.
type metrics struct {
	requests *prometheus.CounterVec   // borda_http_requests_total{route,code,method}
	duration *prometheus.HistogramVec // borda_http_request_duration_seconds{route}
	upstream *prometheus.CounterVec   // borda_upstream_errors_total{route,kind}
	client   *prometheus.CounterVec   // borda_client_errors_total{route,kind}
	conns    prometheus.Gauge         // borda_http_connections_open

	connsRefused   *prometheus.CounterVec // borda_http_connections_refused_total{listener,reason}
	connsReclaimed *prometheus.CounterVec // borda_http_connections_reclaimed_total{listener}
	denied         *prometheus.CounterVec // borda_denied_total{list,route}
}

// Upstream error kinds (borda_upstream_errors_total{kind}).
const (
	kindTimeout     = "timeout"     // per-route timeout or a network timeout: 504
	kindUnreachable = "unreachable" // dial failed or refused: 502
	kindProtocol    = "protocol"    // any other transport error: 502
)

// Route labels for requests that matched no configured route.
const (
	labelUnrouted = "unrouted"
	labelWebhook  = "webhook"
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "borda_http_requests_total",
			Help: "HTTP requests answered by the public listener, by route, status code (499: client went away) and method.",
		}, []string{"route", "code", "method"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "borda_http_request_duration_seconds",
			Help:    "Time from request received to response finished, in seconds (whole connection for upgrades and streams).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route"}),
		upstream: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "borda_upstream_errors_total",
			Help: "Upstream exchanges that failed before a response, by route and kind (timeout, unreachable, protocol).",
		}, []string{"route", "kind"}),
		client: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "borda_client_errors_total",
			Help: "Requests refused for the client's fault, by route and kind (body_timeout: 408, malformed_body: 400, bad_request: HTTP/2 preface 505 or a target that is not a path 400).",
		}, []string{"route", "kind"}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "borda_http_connections_open",
			Help: "Client connections the public listener holds open (server.max_connections caps it).",
		}),
		connsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "borda_http_connections_refused_total",
			Help: "Connections answered 503 and closed on accept, by listener (public, admin) and reason (per_ip: over server.max_connections_per_ip).",
		}, []string{"listener", "reason"}),
		connsReclaimed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "borda_http_connections_reclaimed_total",
			Help: "Idle keep-alive connections closed to make room for a new one (listener at its cap, or the client IP at its own), by listener.",
		}, []string{"listener"}),
		denied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "borda_denied_total",
			Help: "Requests answered 403 by a deny list (deny, routes[].deny), by list and route (unrouted: the top-level lists, before routing).",
		}, []string{"list", "route"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.upstream, m.client, m.conns, m.connsRefused, m.connsReclaimed, m.denied} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// codeLabels avoids an allocation per request for common status codes.
var codeLabels = func() [600]string {
	var t [600]string
	for i := 100; i < 600; i++ {
		t[i] = strconv.Itoa(i)
	}
	return t
}()

func codeLabel(code int) string {
	if code >= 100 && code < 600 {
		return codeLabels[code]
	}
	return strconv.Itoa(code)
}

// methodLabel bounds the method label to the registered methods.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "OTHER"
}

// labelMetrics are the request metrics of one route label, with the
// label lookups of the hot path cached: the duration histogram's child,
// made on first use, and the requests counter of the last code and method
// seen (on a busy route nearly every request is the same pair). A request
// with another pair looks its counter up and becomes the cached one. The
// series exported are exactly those WithLabelValues would make.
type labelMetrics struct {
	m        *metrics
	label    string
	duration atomic.Pointer[prometheus.Observer]
	last     atomic.Pointer[codeMethodCounter]
}

type codeMethodCounter struct {
	code   int
	method string
	c      prometheus.Counter
}

func (m *metrics) forLabel(label string) *labelMetrics {
	return &labelMetrics{m: m, label: label}
}

// record counts one answered request with its status code, method label
// (methodLabel) and duration.
func (lm *labelMetrics) record(code int, method string, d time.Duration) {
	c := lm.last.Load()
	if c == nil || c.code != code || c.method != method {
		c = &codeMethodCounter{code: code, method: method, c: lm.m.requests.WithLabelValues(lm.label, codeLabel(code), method)}
		lm.last.Store(c)
	}
	c.c.Inc()
	obs := lm.duration.Load()
	if obs == nil {
		o := lm.m.duration.WithLabelValues(lm.label)
		obs = &o
		lm.duration.Store(obs)
	}
	(*obs).Observe(d.Seconds())
}
