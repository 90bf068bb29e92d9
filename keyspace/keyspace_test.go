package keyspace_test

import (
	"testing"
	"time"

	"github.com/olp-edu/borda/keyspace"
)

func TestKeysMatchTheContract(t *testing.T) {
	t.Parallel()
	ks := keyspace.MustNew("olp:")
	minute := time.Date(2026, 1, 1, 6, 50, 59, 0, time.FixedZone("BRT", -3*3600))
	tests := []struct {
		name, got, want string
	}{
		{"burst", ks.RateLimit("burst", "203.0.113.9"), "olp:rl:burst:203.0.113.9"},
		{"user", ks.RateLimitAt("api", "u-42", minute), "olp:rl:api:u-42:202601010950"},
		{"escola", ks.RateLimitAt("escola", "77", minute), "olp:rl:escola:77:202601010950"},
		{"relax", ks.Relax("burst"), "olp:cfg:relax:burst"},
		{"metric", ks.Metric("portal:/api/{id}", minute), "olp:m:portal:/api/{id}:202601010950"},
		{"metric escola", ks.Metric("escola:77", minute), "olp:m:escola:77:202601010950"},
		{"lock", ks.AggregateLock(), "olp:lock:aggregate"},
		{"forward (legacy)", ks.Forward("evt-1"), "olp:wh:fwd:evt-1"},
		{"forward event", ks.ForwardEvent("whatsapp", "evt-1"), "olp:wh:fwd2:whatsapp:evt-1"},
		{"forward event, escaped source", ks.ForwardEvent("a:b%", "c"), "olp:wh:fwd2:a%3Ab%25:c"},
		{"metric pattern", ks.MetricPattern(), "olp:m:*"},
		{"rate-limit replicas", ks.RateLimitReplicas(), "olp:rlsync:replicas"},
		{"rate-limit exchange marker", ks.RateLimitExchange("0a1b"), "olp:rlsync:x:0a1b:"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: key = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

func TestMetricDimensionRoundTrips(t *testing.T) {
	t.Parallel()
	ks := keyspace.MustNew("olp-stg:t1:")
	minute := time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC)
	for _, dim := range []string{"portal:/a/{id}", "escola:9", "status:429", "blocked:api:/x:y"} {
		d, m, ok := ks.MetricDimension(ks.Metric(dim, minute))
		if !ok || d != dim || !m.Equal(minute) {
			t.Errorf("MetricDimension(Metric(%q)) = %q, %v, %v", dim, d, m, ok)
		}
	}
	for _, bad := range []string{"olp:m:x:202603040506", "olp-stg:t1:m:nominute", "olp-stg:t1:m::202603040506", "olp-stg:t1:rl:x:1"} {
		if _, _, ok := ks.MetricDimension(bad); ok {
			t.Errorf("MetricDimension(%q) ok, want not a counter of this keyspace", bad)
		}
	}
}

func TestNewRefusesAPrefixWithoutColon(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"", "olp", "olp:x"} {
		if _, err := keyspace.New(p); err == nil {
			t.Errorf("New(%q) = nil error, want an error", p)
		}
	}
}

// FuzzForwardEventKeysAreDistinct: two different (source, id) pairs never
// share a forward key, and no forward key is a legacy (source-less) one.
func FuzzForwardEventKeysAreDistinct(f *testing.F) {
	ks := keyspace.MustNew("olp:")
	f.Add("a", "b:c", "a:b", "c")
	f.Add("whatsapp", "msg_1", "zapster", "msg_1")
	f.Add("a%3A", "x", "a:", "x")
	f.Add("", "a:b", "a", "b")
	f.Fuzz(func(t *testing.T, s1, id1, s2, id2 string) {
		k1, k2 := ks.ForwardEvent(s1, id1), ks.ForwardEvent(s2, id2)
		if (s1 != s2 || id1 != id2) && k1 == k2 {
			t.Fatalf("(%q,%q) and (%q,%q) share the key %q", s1, id1, s2, id2, k1)
		}
		if k1 == ks.Forward(id2) {
			t.Fatalf("forward key %q is also the legacy key of %q", k1, id2)
		}
	})
}
