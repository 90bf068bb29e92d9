package gateway

import (
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestLabelMetricsCountEveryCodeAndMethod: the cached counter of the last
// code and method never takes another pair's count.
func TestLabelMetricsCountEveryCodeAndMethod(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	lm := m.forLabel("api")
	for _, rq := range []struct {
		code   int
		method string
	}{{200, "GET"}, {200, "GET"}, {404, "GET"}, {200, "POST"}, {200, "GET"}} {
		lm.record(rq.code, rq.method, time.Millisecond)
	}
	for _, want := range []struct {
		code, method string
		n            float64
	}{{"200", "GET", 3}, {"404", "GET", 1}, {"200", "POST", 1}} {
		if got := counterValue(m.requests.WithLabelValues("api", want.code, want.method)); got != want.n {
			t.Errorf("requests{api,%s,%s} = %v, want %v", want.code, want.method, got, want.n)
		}
	}
}

// BenchmarkRequestMetricsRecord is finish's metrics work for one request
// of a busy route: no allocation, no label hashing.
func BenchmarkRequestMetricsRecord(b *testing.B) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	lm := m.forLabel("bench")
	b.ReportAllocs()
	for b.Loop() {
		lm.record(200, "GET", time.Millisecond)
	}
}

// BenchmarkRequestMetricsWithLabelValues is the same work through the
// label lookups it replaces.
func BenchmarkRequestMetricsWithLabelValues(b *testing.B) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		m.requests.WithLabelValues("bench", codeLabel(200), "GET").Inc()
		m.duration.WithLabelValues("bench").Observe(time.Millisecond.Seconds())
	}
}

// TestCodeLabelIsTheStatusForEveryCode: the status label is the code's
// decimal form for every code an upstream can send (net/http relays 100
// to 999), from the precomputed table inside [100, 600) and computed
// outside it.
func TestCodeLabelIsTheStatusForEveryCode(t *testing.T) {
	for code := 0; code <= 999; code++ {
		if got := codeLabel(code); got != strconv.Itoa(code) {
			t.Fatalf("codeLabel(%d) = %q", code, got)
		}
	}
}
