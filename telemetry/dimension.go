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
	// KindDistribution counts a rate-limit rule's subject-windows that
	// went past a threshold (ratelimit.DistributionThresholds); dimension
	// "{rule}:{threshold}", the key's "distribution:{rule}:{threshold}".
	KindDistribution Kind = "distribution"
)

// Kinds lists every kind, as the gateway_metrics CHECK allows them.
var Kinds = []Kind{KindEndpoint, KindEscola, KindBlocked, KindWouldBlock, KindStatus, KindDistribution}

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
	return []string{string(KindEscola), string(KindBlocked), string(KindWouldBlock), string(KindStatus), string(KindDistribution), unroutedRoute}
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
	case KindDistribution:
		return string(KindDistribution) + ":" + c.a + ":" + strconv.Itoa(c.status)
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
//	"distribution:user:10"    → distribution, "user:10"
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
	case KindDistribution:
		if _, _, ok := ParseDistribution(rest); !ok {
			return "", "", false
		}
		return KindDistribution, rest, true
	}
	return KindEndpoint, dim, true
}

// ParseDistribution splits a distribution counter's value ("{rule}:{at}")
// into the rule's name and the threshold; ok is false unless the rule is
// not empty and the threshold a non-negative integer.
func ParseDistribution(value string) (rule string, at int64, ok bool) {
	i := strings.LastIndexByte(value, ':')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(value[i+1:], 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != value[i+1:] {
		return "", 0, false
	}
	return value[:i], n, true
}
