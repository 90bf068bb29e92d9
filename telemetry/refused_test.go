package telemetry

import (
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/olp-edu/borda/keyspace"
)

// TestRefusedRequestsOnManyDistinctPathsMakeFewKeys (issue 22 B28):
// requests that were 429'd (or 400, 403, 404, 431, 503...) made one
// telemetry key per distinct path, and filled the route's cap so the
// route's real endpoints counted as other. For each refused status, 5 000
// refused requests on distinct paths of one route in one minute add at
// most maxRefusedTemplates keys to that route (the rest count as
// {route}:refused, in borda_telemetry_endpoints_folded_total{reason=
// "refused"}), the route's answered endpoints keep their own keys, and a
// refused request on an answered endpoint counts under it.
func TestRefusedRequestsOnManyDistinctPathsMakeFewKeys(t *testing.T) {
	t.Parallel()
	for _, status := range []int{400, 403, 404, 405, 413, 414, 429, 431, 503} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			ks := keyspace.MustNew("olp-dev:t:")
			sink := &memSink{}
			cfg := testConfig(65536)
			cfg.MaxEndpointsPerRoute = 10
			r, reg := newTestRecorder(t, cfg, ks, sink)
			if err := r.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			at := time.Date(2026, 3, 4, 5, 6, 30, 0, time.UTC)
			r.Record(Event{Served: true, Time: at, Route: "portal", Path: "/api/alunos/1", Status: 200})
			const flood = 5000
			for i := range flood {
				r.Record(Event{Served: true, Time: at, Route: "portal", Path: fmt.Sprintf("/scan/w%dx", i), Status: status, Blocked: status == 429})
			}
			r.Record(Event{Served: true, Time: at, Route: "portal", Path: "/api/alunos/2", Status: status})
			for i := range 5 {
				r.Record(Event{Served: true, Time: at, Route: "portal", Path: fmt.Sprintf("/api/n%d", i), Status: 200})
			}
			if err := r.Stop(t.Context()); err != nil {
				t.Fatal(err)
			}
			endpoints := 0
			for k := range sink.counts {
				if strings.HasPrefix(k, "olp-dev:t:m:portal:") {
					endpoints++
				}
			}
			// /api/alunos/{id}, 5 /api/n*, up to 16 /scan/*, portal:refused.
			if max := 1 + 5 + maxRefusedTemplates + 1; endpoints > max {
				t.Errorf("%d endpoint keys for the route, want at most %d", endpoints, max)
			}
			if got := sink.get("olp-dev:t:m:portal:/api/alunos/{id}:202603040506"); got != 2 {
				t.Errorf("answered endpoint = %d, want 2 (the refused one on it counts under it)", got)
			}
			for i := range 5 {
				if got := sink.get(fmt.Sprintf("olp-dev:t:m:portal:/api/n%d:202603040506", i)); got != 1 {
					t.Errorf("/api/n%d = %d after the flood, want its own key", i, got)
				}
			}
			refused := sink.get("olp-dev:t:m:portal:refused:202603040506")
			if refused != flood-maxRefusedTemplates {
				t.Errorf("portal:refused = %d, want %d", refused, flood-maxRefusedTemplates)
			}
			var m dto.Metric
			if err := r.metrics.foldedRefused.Write(&m); err != nil {
				t.Fatal(err)
			}
			if got := m.GetCounter().GetValue(); got != float64(refused) {
				t.Errorf("borda_telemetry_endpoints_folded_total{reason=refused} = %v, want %d", got, refused)
			}
			if series(t, reg, "borda_telemetry_endpoints_folded_total") != 2 {
				t.Error("borda_telemetry_endpoints_folded_total lacks its cap and refused series")
			}
		})
	}
}

// TestAnsweredOverflowIsCounted: answered requests over the route's cap
// count as {route}:other and in
// borda_telemetry_endpoints_folded_total{reason="cap"}.
func TestAnsweredOverflowIsCounted(t *testing.T) {
	t.Parallel()
	sink := &memSink{}
	cfg := testConfig(1000)
	cfg.MaxEndpointsPerRoute = 3
	r, _ := newTestRecorder(t, cfg, keyspace.MustNew("olp-dev:t:"), sink)
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 4, 5, 6, 30, 0, time.UTC)
	for i := range 50 {
		r.Record(Event{Served: true, Time: at, Route: "portal", Path: fmt.Sprintf("/p%d", i), Status: 200})
	}
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := sink.get("olp-dev:t:m:portal:other:202603040506"); got != 47 {
		t.Errorf("portal:other = %d, want 47", got)
	}
	var m dto.Metric
	if err := r.metrics.foldedCap.Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 47 {
		t.Errorf("folded{reason=cap} = %v, want 47", got)
	}
}
