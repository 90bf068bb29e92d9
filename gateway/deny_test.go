package gateway

import (
	"net/http"
	"strings"
	"testing"

	"github.com/olp-edu/borda/denylist"
)

// denyList is a list of entries of kind k.
func denyList(t *testing.T, k denylist.Kind, entries ...string) *denylist.List {
	t.Helper()
	var b denylist.Builder
	for _, e := range entries {
		if err := b.Add(k, e); err != nil {
			t.Fatal(err)
		}
	}
	return b.List()
}

func source(name string, l *denylist.List) DenySource {
	return DenySource{Name: name, List: func() *denylist.List { return l }}
}

// TestDenyListsRefuseBeforeTheUpstream: a global list refuses on every
// route (403, counted by list and route, the upstream never called)
// unless Allow exempts the address; a route's list refuses on that route
// only; addresses and user agents both; no list, nothing refused. The
// harness's client is 127.0.0.1.
func TestDenyListsRefuseBeforeTheUpstream(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	self := denyList(t, denylist.Addresses, "127.0.0.0/8")
	other := denyList(t, denylist.Addresses, "203.0.113.0/24")
	bots := denyList(t, denylist.Agents, "sqlmap")
	for _, tc := range []struct {
		name   string
		deny   Deny
		path   string
		agent  string
		denied string // the list that refuses, "" for none
	}{
		{name: "no lists", path: "/api/x"},
		{name: "global address", deny: Deny{Global: []DenySource{source("global", self)}}, path: "/api/x", denied: "global"},
		{name: "global address, unrouted", deny: Deny{Global: []DenySource{source("global", self)}}, path: "/nowhere", denied: "global"},
		{name: "global, allowed", deny: Deny{Global: []DenySource{source("global", self)}, Allow: self}, path: "/api/x"},
		{name: "global, another address", deny: Deny{Global: []DenySource{source("global", other)}, Allow: other}, path: "/api/x"},
		{name: "global agent", deny: Deny{Global: []DenySource{source("feed:bots", bots)}}, path: "/api/x", agent: "sqlmap/1.7", denied: "feed:bots"},
		{name: "global agent, another agent", deny: Deny{Global: []DenySource{source("feed:bots", bots)}}, path: "/api/x", agent: "curl/8"},
		{name: "route list on its route", deny: Deny{Routes: map[string][]DenySource{"api": {source("route:api", self)}}}, path: "/api/x", denied: "route:api"},
		{name: "route list on another route", deny: Deny{Routes: map[string][]DenySource{"api": {source("route:api", self)}}}, path: "/web/x"},
		{name: "route agent list", deny: Deny{Routes: map[string][]DenySource{"web": {source("route:web", bots)}}}, path: "/web/x", agent: "SQLMAP", denied: "route:web"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{Deny: tc.deny, Routes: []Route{
				under(testRoute(t, "api", up.URL), "/api"), under(testRoute(t, "web", up.URL), "/web")}})
			before := up.calls()
			req := h.newRequest(t, http.MethodGet, "", tc.path)
			req.Header.Set("User-Agent", tc.agent)
			res := h.do(t, req)
			called := up.calls() > before
			if tc.denied == "" {
				if res.StatusCode == http.StatusForbidden || (tc.path != "/nowhere" && !called) {
					t.Fatalf("status %d, upstream called %v; want it passed", res.StatusCode, called)
				}
				return
			}
			if res.StatusCode != http.StatusForbidden || called {
				t.Fatalf("status %d, upstream called %v; want 403 and no upstream call", res.StatusCode, called)
			}
			label := labelUnrouted // a global list refuses before routing
			if strings.HasPrefix(tc.denied, "route:") {
				label = tc.path[1:4]
			}
			if n := counterValue(h.srv.metrics.denied.WithLabelValues(tc.denied, label)); n != 1 {
				t.Errorf("borda_denied_total{list=%q,route=%q} = %v, want 1", tc.denied, label, n)
			}
		})
	}
}
