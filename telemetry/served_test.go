package telemetry

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/olp-edu/borda/keyspace"
)

// TestUnservedAnswersNeverTakeAnEndpointsPlace (fresh attack pass A016):
// answers the gateway made on its own (CORS preflights 204, OPTIONS with
// Max-Forwards: 0 as 200, loop refusals 508, a failed exchange's 502 or
// 504) filled the route's cap, so the route's real endpoints counted as
// {route}:other for the rest of the minute. For every status the gateway
// can answer with, 300 unserved requests on distinct paths add at most
// maxRefusedTemplates keys, and a served request afterwards still gets its
// own key.
func TestUnservedAnswersNeverTakeAnEndpointsPlace(t *testing.T) {
	t.Parallel()
	for _, status := range []int{200, 204, 301, 400, 404, 429, 500, 502, 503, 504, 508} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			c := newEndpointCap(10)
			const minute = 1000
			for i := range 300 {
				c.endpoint("api", fmt.Sprintf("/api/zz%dw", i), status, false, minute)
			}
			if _, tmpl := c.endpoint("api", "/api/alunos/42/notas", 200, true, minute); tmpl != "/api/alunos/{id}/notas" {
				t.Fatalf("served endpoint after the flood counted as %q, want its own template", tmpl)
			}
			rm := c.minutes[minute]["api"]
			if len(rm.refused) > maxRefusedTemplates {
				t.Errorf("unserved answers made %d templates, want at most %d", len(rm.refused), maxRefusedTemplates)
			}
			if len(rm.placed) != 1 {
				t.Errorf("%d templates hold places, want 1 (the served endpoint)", len(rm.placed))
			}
			// An unserved answer on a served endpoint counts under it.
			if _, tmpl := c.endpoint("api", "/api/alunos/7/notas", status, false, minute); tmpl != "/api/alunos/{id}/notas" {
				t.Errorf("unserved answer on a served endpoint counted as %q", tmpl)
			}
		})
	}
}

// TestKnownEndpointsKeepTheirPlacesUnderACatchAllSpray: an upstream that
// answers every path (a single-page app's catch-all) turns a client's
// path spray into served requests. Templates served in two different
// minutes are known and keep their places: a spray that comes first in a
// minute fills only the places the known ones leave.
func TestKnownEndpointsKeepTheirPlacesUnderACatchAllSpray(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ cap, endpoints int }{{10, 5}, {10, 7}, {200, 120}, {200, 150}, {4, 3}} {
		t.Run(fmt.Sprintf("cap%d-endpoints%d", tc.cap, tc.endpoints), func(t *testing.T) {
			c := newEndpointCap(tc.cap)
			real := func(m int64) (own int) {
				for i := range tc.endpoints {
					tmpl := fmt.Sprintf("/api/e%c", 'a'+i%26) + strings.Repeat("x", i/26)
					if _, got := c.endpoint("app", tmpl, 200, true, m); got == tmpl {
						own++
					}
				}
				return own
			}
			// Two quiet minutes make the endpoints known.
			for m := int64(100); m < 102; m++ {
				if got := real(m); got != min(tc.endpoints, tc.cap) {
					t.Fatalf("minute %d: %d endpoints with their own key, want %d", m, got, min(tc.endpoints, tc.cap))
				}
			}
			// Then, for an hour, each minute opens with a spray of 1 000
			// distinct paths the upstream answers 200.
			for m := int64(102); m < 162; m++ {
				for i := range 1000 {
					c.endpoint("app", fmt.Sprintf("/spray/m%d-%d", m, i), 200, true, m)
				}
				if got := real(m); got != tc.endpoints {
					t.Fatalf("minute %d: %d of %d known endpoints kept their own key under the spray", m, got, tc.endpoints)
				}
				if placed := len(c.minutes[m]["app"].placed); placed > tc.cap {
					t.Fatalf("minute %d: %d templates hold places, cap %d", m, placed, tc.cap)
				}
			}
			if n := len(c.known["app"]); n > c.maxKnown() {
				t.Errorf("%d known templates, at most %d", n, c.maxKnown())
			}
		})
	}
}

// TestKnownTemplatesAreForgottenAfterAnHour: a known template not served
// for knownMinutes gives its reserved place back, so a route whose
// endpoints changed is not held to its old ones.
func TestKnownTemplatesAreForgottenAfterAnHour(t *testing.T) {
	t.Parallel()
	c := newEndpointCap(4)
	for m := int64(10); m < 12; m++ {
		for _, p := range []string{"/a", "/b", "/c"} {
			c.endpoint("app", p, 200, true, m)
		}
	}
	if n := len(c.known["app"]); n != 3 {
		t.Fatalf("%d known, want 3", n)
	}
	c.endpoint("app", "/other", 200, true, 11+knownMinutes-1)
	if n := len(c.known["app"]); n != 3 {
		t.Fatalf("%d known a minute before the hour, want 3", n)
	}
	c.endpoint("app", "/another", 200, true, 11+knownMinutes)
	if n := len(c.known["app"]); n != 0 {
		t.Fatalf("%d known an hour after they were last served, want 0", n)
	}
	// New templates fit the cap again (two already hold places).
	for _, p := range []string{"/w", "/x"} {
		if _, tmpl := c.endpoint("app", p, 200, true, 11+knownMinutes+1); tmpl != p {
			t.Errorf("%s counted as %q, want its own key", p, tmpl)
		}
	}
}

// TestServedFlagReachesTheCap pins the recorder's fold: an event without
// Served is not a served request (the safe default for any producer that
// forgets it).
func TestServedFlagReachesTheCap(t *testing.T) {
	t.Parallel()
	ks := keyspace.MustNew("olp-dev:t:")
	sink := &memSink{}
	cfg := testConfig(65536)
	cfg.MaxEndpointsPerRoute = 2
	r, _ := newTestRecorder(t, cfg, ks, sink)
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 4, 5, 6, 30, 0, time.UTC)
	for i := range 40 {
		r.Record(Event{Time: at, Route: "portal", Path: fmt.Sprintf("/pre%dx", i), Status: 204})
	}
	r.Record(Event{Served: true, Time: at, Route: "portal", Path: "/api/a", Status: 200})
	r.Record(Event{Served: true, Time: at, Route: "portal", Path: "/api/b", Status: 200})
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/api/a", "/api/b"} {
		if got := sink.get("olp-dev:t:m:portal:" + p + ":202603040506"); got != 1 {
			t.Errorf("%s = %d, want its own key with 1", p, got)
		}
	}
	if got := sink.get("olp-dev:t:m:portal:refused:202603040506"); got != 40-maxRefusedTemplates {
		t.Errorf("portal:refused = %d, want %d", got, 40-maxRefusedTemplates)
	}
}
