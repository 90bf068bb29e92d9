package telemetry

import (
	"slices"
	"testing"
	"time"

	"github.com/olp-edu/borda/keyspace"
)

func TestParseDimension(t *testing.T) {
	t.Parallel()
	tests := []struct {
		dim   string
		kind  Kind
		value string
		ok    bool
	}{
		{"escola:123", KindEscola, "123", true},
		{"escola:a:b", KindEscola, "a:b", true},
		{"status:429", KindStatus, "429", true},
		{"status:42", "", "", false},
		{"status:99", "", "", false},
		{"status:100", KindStatus, "100", true},
		{"status:999", KindStatus, "999", true},
		{"status:1000", "", "", false},
		{"status:abc", "", "", false},
		{"blocked:portal:/x/{id}", KindBlocked, "portal:/x/{id}", true},
		{"would_block:portal:/x", KindWouldBlock, "portal:/x", true},
		{"portal:/api/alunos/{id}", KindEndpoint, "portal:/api/alunos/{id}", true},
		{"portal:other", KindEndpoint, "portal:other", true},
		{"distribution:user:10", KindDistribution, "user:10", true},
		{"distribution:user:0", KindDistribution, "user:0", true},
		{"distribution:user:-1", "", "", false},
		{"distribution:user:01", "", "", false},
		{"distribution:user:", "", "", false},
		{"distribution::5", "", "", false},
		{"distribution:user", "", "", false},
		{"escola:", "", "", false},
		{"portal", "", "", false},
		{":x", "", "", false},
		{"", "", "", false},
	}
	for _, tt := range tests {
		kind, value, ok := ParseDimension(tt.dim)
		if kind != tt.kind || value != tt.value || ok != tt.ok {
			t.Errorf("ParseDimension(%q) = %q, %q, %v; want %q, %q, %v", tt.dim, kind, value, ok, tt.kind, tt.value, tt.ok)
		}
	}
}

// Every counter a Recorder writes parses back, through the key, into the
// kind and value the aggregation stores.
func TestCounterKeysParseBack(t *testing.T) {
	t.Parallel()
	ks := keyspace.MustNew("olp-dev:t1:")
	minute := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	m := minute.Unix() / 60
	tests := []struct {
		c     counter
		key   string
		kind  Kind
		value string
	}{
		{counter{kind: KindEndpoint, a: "portal", b: "/a/{id}", minute: m}, "olp-dev:t1:m:portal:/a/{id}:202601020304", KindEndpoint, "portal:/a/{id}"},
		{counter{kind: KindEscola, a: "e-9", minute: m}, "olp-dev:t1:m:escola:e-9:202601020304", KindEscola, "e-9"},
		{counter{kind: KindBlocked, a: "portal", b: "/a", minute: m}, "olp-dev:t1:m:blocked:portal:/a:202601020304", KindBlocked, "portal:/a"},
		{counter{kind: KindWouldBlock, a: "portal", b: "other", minute: m}, "olp-dev:t1:m:would_block:portal:other:202601020304", KindWouldBlock, "portal:other"},
		{counter{kind: KindStatus, status: 503, minute: m}, "olp-dev:t1:m:status:503:202601020304", KindStatus, "503"},
		{counter{kind: KindDistribution, a: "user", status: 150, minute: m}, "olp-dev:t1:m:distribution:user:150:202601020304", KindDistribution, "user:150"},
	}
	for _, tt := range tests {
		key := ks.Metric(tt.c.dimension(), time.Unix(tt.c.minute*60, 0))
		if key != tt.key {
			t.Errorf("key = %q, want %q", key, tt.key)
		}
		dim, got, ok := ks.MetricDimension(key)
		if !ok || !got.Equal(minute) {
			t.Fatalf("MetricDimension(%q) = %q, %v, %v", key, dim, got, ok)
		}
		kind, value, ok := ParseDimension(dim)
		if !ok || kind != tt.kind || value != tt.value {
			t.Errorf("ParseDimension(%q) = %q, %q, %v; want %q, %q", dim, kind, value, ok, tt.kind, tt.value)
		}
	}
}

// ReservedRouteNames holds every route name whose endpoint dimension
// ParseDimension reads as another kind, and the route of unrouted events.
func TestReservedRouteNamesCoverEveryKindPrefix(t *testing.T) {
	t.Parallel()
	reserved := ReservedRouteNames()
	for _, k := range Kinds {
		dim := counter{kind: KindEndpoint, a: string(k), b: "/x"}.dimension()
		kind, _, _ := ParseDimension(dim)
		if misread := kind != KindEndpoint; misread != slices.Contains(reserved, string(k)) {
			t.Errorf("route %q: its endpoint dimension %q reads as %q; reserved = %v", k, dim, kind, slices.Contains(reserved, string(k)))
		}
	}
	if !slices.Contains(reserved, unroutedRoute) {
		t.Errorf("ReservedRouteNames lacks %q", unroutedRoute)
	}
}

func FuzzParseDimension(f *testing.F) {
	for _, s := range []string{"escola:1", "status:200", "blocked:r:/x", "r:/x", "::", "status:", "distribution:user:10", "distribution::1", "distribution:u:01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dim string) {
		kind, value, ok := ParseDimension(dim)
		if !ok {
			return
		}
		if value == "" {
			t.Fatalf("ParseDimension(%q) ok with an empty value", dim)
		}
		if kind == KindEndpoint && value != dim {
			t.Fatalf("endpoint value %q != dimension %q", value, dim)
		}
		if kind != KindEndpoint && string(kind)+":"+value != dim {
			t.Fatalf("ParseDimension(%q) = %q, %q does not rebuild the dimension", dim, kind, value)
		}
	})
}
