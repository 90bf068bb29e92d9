package forward

import "testing"

// TestForward_RepublishInFlightFollowsThePrefetch: the republishing
// connection lets twice the prefetch await their confirms, and never
// fewer than 64: a prefetch of 40 must not be held to 64.
func TestForward_RepublishInFlightFollowsThePrefetch(t *testing.T) {
	for _, c := range []struct{ prefetch, want int }{{1, 64}, {20, 64}, {32, 64}, {40, 80}, {500, 1000}} {
		if got := republishOptions(Options{Prefetch: c.prefetch}).MaxInFlight; got != c.want {
			t.Errorf("prefetch %d: MaxInFlight %d, want %d", c.prefetch, got, c.want)
		}
	}
}
