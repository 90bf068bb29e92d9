package telemetry

import (
	"strconv"
	"strings"
)

// Kind is the kind of a counter, as stored in gateway_metrics.kind.
type Kind string

// Kinds of counters (docs/telemetry.md, "Keys").
const (
	KindEndpoint   Kind = "endpoint"    // dimension: "{route}:{template}"
	KindEscola     Kind = "escola"      // dimension: escola_id
	KindBlocked    Kind = "blocked"     // dimension: endpoint
	KindWouldBlock Kind = "would_block" // dimension: endpoint
	KindStatus     Kind = "status"      // dimension: status code ("429")
)

// unroutedRoute is the route of an Event with an empty Route. It and the
// kinds other than endpoint are ReservedRouteNames.
const unroutedRoute = "unrouted"

// ReservedRouteNames are the route names a counter key would misread: the
// kinds other than endpoint (a route "status" would give the dimension
// "status:/x") and the route of unrouted events. The configuration
// refuses them (configs.ReservedRouteNames; cmd/borda checks that it
// holds every one), so no configured route's counters can be read as
// another kind's.
func ReservedRouteNames() []string {
	return []string{string(KindEscola), string(KindBlocked), string(KindWouldBlock), string(KindStatus), unroutedRoute}
}

// otherTemplate replaces the template of an endpoint over the per-route cap.
const otherTemplate = "other"

// counter identifies one Redis counter before its key is built: a kind,
// its dimension and its UTC minute (Unix seconds / 60). It is a map key,
// so folding an event allocates nothing for escola, status or blocked.
type counter struct {
	kind   Kind
	a, b   string // endpoint: route, template; escola: escola_id
	status int
	minute int64
}

// dimension returns the key's dimension: what keyspace.Metric puts
// between "m:" and the minute.
func (c counter) dimension() string {
	switch c.kind {
	case KindEscola:
		return string(KindEscola) + ":" + c.a
	case KindStatus:
		return string(KindStatus) + ":" + strconv.Itoa(c.status)
	case KindBlocked, KindWouldBlock:
		return string(c.kind) + ":" + c.a + ":" + c.b
	default:
		return c.a + ":" + c.b
	}
}

// ParseDimension splits a counter key's dimension (keyspace.MetricDimension)
// into its kind and the value stored in gateway_metrics.dimension:
//
//	"escola:123"              → escola, "123"
//	"status:429"              → status, "429"
//	"blocked:portal:/x"       → blocked, "portal:/x"
//	"would_block:portal:/x"   → would_block, "portal:/x"
//	"portal:/api/alunos/{id}" → endpoint, "portal:/api/alunos/{id}"
//
// ok is false for a dimension no Recorder writes (empty value, or an
// endpoint without "{route}:").
func ParseDimension(dim string) (kind Kind, value string, ok bool) {
	head, rest, found := strings.Cut(dim, ":")
	if !found || head == "" || rest == "" {
		return "", "", false
	}
	switch Kind(head) {
	case KindEscola, KindBlocked, KindWouldBlock:
		return Kind(head), rest, true
	case KindStatus:
		if n, err := strconv.Atoi(rest); err != nil || n < 100 || n > 999 {
			return "", "", false
		}
		return KindStatus, rest, true
	}
	return KindEndpoint, dim, true
}
