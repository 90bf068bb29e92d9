package gateway

import (
	"net/http"
	"net/netip"
	"sync/atomic"

	"github.com/olp-edu/borda/denylist"
)

// DenySource is one deny list by name: a static list (inline entries and
// files) or a feed's current list. List is called on every request and
// must not block (a Feed's List is an atomic load); nil denies nothing.
type DenySource struct {
	// Name labels borda_denied_total{list} and the operator page
	// ("global", "route:app", "feed:…").
	Name string
	List func() *denylist.List
}

// Deny is the deny lists of the gateway (Global, on every request,
// webhooks included) and of each route (Routes, by route name), checked
// before any other work: path policy, identity, rate limits, upstream.
// Allow exempts addresses from the Global lists (a provider's).
type Deny struct {
	Global []DenySource
	Allow  *denylist.List
	Routes map[string][]DenySource
}

// denyState is the Deny in force, swapped whole by SetDeny (SIGHUP).
type denyState struct {
	deny atomic.Pointer[Deny]
}

// SetDeny puts d in force for the requests that start from now on.
func (s *Server) SetDeny(d Deny) { s.deny.deny.Store(&d) }

// denied returns the name of the first of sources that denies the client
// address a or the user agent ua, "" when none does.
func denied(sources []DenySource, a netip.Addr, ua string) string {
	for _, src := range sources {
		l := src.List()
		if l.DeniesAddr(a) || l.DeniesAgent(ua) {
			return src.Name
		}
	}
	return ""
}

// deniedGlobally checks the top-level lists (the Allow list exempts).
func (s *Server) deniedGlobally(ex *exchange, r *http.Request) string {
	d := s.deny.deny.Load()
	if d == nil || len(d.Global) == 0 || d.Allow.DeniesAddr(ex.client) {
		return ""
	}
	return denied(d.Global, ex.client, r.Header.Get("User-Agent"))
}

// deniedOnRoute checks the lists of the route named name.
func (s *Server) deniedOnRoute(name string, ex *exchange, r *http.Request) string {
	d := s.deny.deny.Load()
	if d == nil || len(d.Routes[name]) == 0 {
		return ""
	}
	return denied(d.Routes[name], ex.client, r.Header.Get("User-Agent"))
}

// refuseDenied answers 403 for a request a deny list refused, counted
// by list and route.
func (s *Server) refuseDenied(w http.ResponseWriter, ex *exchange, list string) {
	if ex.label == "" {
		ex.label = labelUnrouted
	}
	s.metrics.denied.WithLabelValues(list, ex.label).Inc()
	mergeVary(w.Header(), "Origin")
	writeProblem(w, problemDenied, ex.id)
}
