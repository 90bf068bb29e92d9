package loadgen

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	var l Latencies
	for i := 1; i <= 100; i++ {
		l = append(l, time.Duration(i))
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50}, {0.99, 99}, {1, 100}, {0, 1}} {
		if got := l.Quantile(tc.q); got != tc.want {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := Latencies(nil).Quantile(0.5); got != 0 {
		t.Errorf("empty Quantile = %v, want 0", got)
	}
}

func TestSaturateAndFixed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "bench.local" {
			w.WriteHeader(http.StatusTeapot)
		}
	}))
	defer srv.Close()
	c := NewClient(8, time.Second)
	build := Get(srv.URL, "bench.local")
	ctx := context.Background()
	sat := Saturate(ctx, c, build, 4, 20*time.Millisecond, 200*time.Millisecond)
	if sat.Requests == 0 || sat.Status[200] != sat.Requests || sat.Errors != 0 {
		t.Fatalf("Saturate = %d requests, status %v, %d errors", sat.Requests, sat.Status, sat.Errors)
	}
	fixed := Fixed(ctx, c, build, 200, 16, 50*time.Millisecond, 500*time.Millisecond)
	// 200/s for 0.5 s is 100 requests; allow scheduling slack either way.
	if fixed.Requests < 80 || fixed.Requests > 110 || fixed.Errors != 0 {
		t.Fatalf("Fixed(200/s, 0.5s) = %d requests, %d errors, want ≈100", fixed.Requests, fixed.Errors)
	}
}
