package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
)

// gcraBurstLimits are GCRA limits per hour whose emission interval
// (3 600 000 / limit ms) float64 sums inexactly: before the rounding
// slack (docs/rate-limiting.md, "GCRA arithmetic"), a burst of each
// passed one request less than its limit on the embedded store or on
// Redis, depending on the moment, and showed one less remaining.
var gcraBurstLimits = []int{7, 11, 13, 21, 26, 34, 46, 49}

// TestOperatorGCRARuleOfLimitPassesItsLimitInABurst: an operator who
// configures a GCRA rule of L an hour gets exactly L requests of a burst
// through, each showing L − k remaining, and the next one a 429, on the
// embedded store and on Redis. It runs the real binary.
func TestOperatorGCRARuleOfLimitPassesItsLimitInABurst(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(up.Close)
	upstream := up.URL
	routes, rules := "", ""
	for _, l := range gcraBurstLimits {
		routes += fmt.Sprintf("  - {name: g%d, path_prefix: /g%d/, upstream: %q, expose_headers: true}\n", l, l, upstream)
		rules += fmt.Sprintf("    - {name: g%d, scope: ip, algorithm: gcra, limit: %d, window: 1h, routes: [g%d]}\n", l, l, l)
	}
	redisURL := servicetest.RedisURL(t)
	for store, preamble := range map[string]string{
		"embedded": string(replicaPreamble("", "")),
		"redis":    string(replicaPreamble(redisURL, servicetest.KeyPrefix(t))),
	} {
		t.Run(store, func(t *testing.T) {
			p := startServe(t, preamble+routes+"rate_limits:\n  timeout: 1s\n  rules:\n"+rules)
			client := &http.Client{Timeout: 10 * time.Second}
			for _, l := range gcraBurstLimits {
				for k := 1; k <= l+1; k++ {
					req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/g%d/x", p.public, l), nil)
					req.Header.Set("X-Real-IP", "203.0.113.77")
					resp, err := client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					remaining, _ := strconv.Atoi(resp.Header.Get("X-RateLimit-Remaining"))
					switch {
					case k <= l && (resp.StatusCode != http.StatusOK || remaining != l-k):
						t.Fatalf("limit %d an hour: request %d of a burst got %d with %q remaining; want 200 with %d",
							l, k, resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"), l-k)
					case k > l && resp.StatusCode != http.StatusTooManyRequests:
						t.Fatalf("limit %d an hour: request %d of a burst got %d, want 429", l, k, resp.StatusCode)
					}
				}
			}
		})
	}
}
