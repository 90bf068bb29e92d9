package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// A45 (attack report 2): two replicas with rate_limits.sync: 50ms; a
// client opens 40 connections alternating between them and sends every
// request at once. Before, each replica gave itself the whole limit for a
// key it had not read, and the burst passed 13-15 of a per-user limit of
// 10 and 21-25 of a per-IP limit of 20.

// burstRules are the rules of the burst test: the attack's two fixed
// windows (10 and 20) and the same limit on the other algorithms.
var burstRules = []struct {
	name, alg string
	limit     int
}{
	{"fixed10", "fixed_window", 10},
	{"fixed20", "fixed_window", 20},
	{"sliding10", "sliding_window", 10},
	{"gcra10", "gcra", 10},
	// Limits below the replicas (fresh attack pass 7 R02/R03: 2 of 1
	// passed over two replicas, in every window a client waited out):
	// the store decides them, exactly.
	{"fixed1", "fixed_window", 1},
	{"sliding1", "sliding_window", 1},
}

const burstWindow = 3 * time.Second

func burstConfig(upstream, redisURL, prefix string) string {
	b := replicaPreamble(redisURL, prefix)
	b = fmt.Appendf(b, "  - {name: warm, path_prefix: /warm/, upstream: %q}\n", upstream)
	for _, r := range burstRules {
		b = fmt.Appendf(b, "  - {name: %s, path_prefix: /%s/, upstream: %q}\n", r.name, r.name, upstream)
	}
	b = fmt.Appendf(b, "rate_limits:\n  timeout: 250ms\n  sync: 50ms\n  rules:\n")
	b = fmt.Appendf(b, "    - {name: warm, scope: ip, algorithm: fixed_window, limit: 50, window: 2s, routes: [warm]}\n")
	for _, r := range burstRules {
		b = fmt.Appendf(b, "    - {name: %s, scope: ip, algorithm: %s, limit: %d, window: %s, routes: [%s]}\n",
			r.name, r.alg, r.limit, burstWindow, r.name)
	}
	return string(b)
}

// concurrentBurst opens n connections, alternating between the replicas,
// then sends GET /{path}/x from ip on every one at once and returns how
// many passed (200) and how many passed on each replica.
func concurrentBurst(t *testing.T, replicas []*process, path, ip string, n int) (int, []int) {
	t.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.DialTimeout("tcp", hostPort(replicas[i%len(replicas)].public), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	raw := fmt.Sprintf("GET /%s/x HTTP/1.1\r\nHost: localhost\r\nX-Real-IP: %s\r\nConnection: close\r\n\r\n", path, ip)
	start := make(chan struct{})
	status := make([]int, n)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			<-start
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(c, raw); err != nil {
				t.Error(err)
				return
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			status[i] = resp.StatusCode
		})
	}
	close(start)
	wg.Wait()
	passed, per := 0, make([]int, len(replicas))
	for i, s := range status {
		switch s {
		case http.StatusOK:
			passed++
			per[i%len(replicas)]++
		case http.StatusTooManyRequests:
		default:
			t.Errorf("%s: status %d", path, s)
		}
	}
	return passed, per
}

// startBurstReplicas starts n replicas on one Redis under a fresh prefix
// and waits until they count each other.
func startBurstReplicas(t *testing.T, n int) []*process {
	t.Helper()
	replicas, _, _ := startSyncReplicas(t, n, burstConfig)
	return replicas
}

// Two replicas, a concurrent burst of 40 requests spread over both, in a
// key's first window and again two windows later. The bound the docs
// promise (docs/rate-limiting.md, "Quota leasing", known gap (1)): a
// window in which a replica starts the key with a share it gave itself
// (limit / N, a key it has not read or whose last lease was left
// unspent) passes at most limit + (N − 1) × floor(limit / N): another
// replica's asks lease from a store that does not hold that share until
// its replica's first exchange, which a burst within one round trip
// precedes. Before (A45) each replica gave itself the whole limit (up to
// N × limit; 13-15 of 10 and 21-25 of 20 measured). The passes are
// logged per window; a first burst never passes fewer than limit − (N − 1)
// (leasing leaves at most what it cannot split unspent); a later burst
// may pass fewer (asks at once halve what is left; docs/rate-limiting.md's
// table shows 9 of 10), never more than the bound.
// TestHostileConcurrentBurstOnOneReplicaPassesExactlyTheLimit is the
// one-replica case.
func TestHostileConcurrentBurstOverTwoReplicasPassesTheLimit(t *testing.T) {
	started := time.Now()
	replicas := startBurstReplicas(t, 2)
	t.Logf("replicas started and counting each other in %v", time.Since(started).Round(time.Millisecond))
	for i, r := range burstRules {
		t.Run(r.name, func(t *testing.T) {
			ip := fmt.Sprintf("198.51.100.%d", 10+i)
			// Start just after a clock-aligned window edge (the sliding
			// window's windows are aligned to it).
			time.Sleep(time.Until(time.Now().Truncate(burstWindow).Add(burstWindow + 50*time.Millisecond)))
			first, per := concurrentBurst(t, replicas, r.name, ip, 40)
			// The next window: the replicas' leases of the first are
			// spent; the sliding window's previous count weighs on it, so
			// its burst is sent a whole window after the first.
			time.Sleep(time.Until(time.Now().Truncate(burstWindow).Add(2*burstWindow + 50*time.Millisecond)))
			second, per2 := concurrentBurst(t, replicas, r.name, ip, 40)
			t.Logf("%s (%s, limit %d): first window %d passed %v, two windows later %d passed %v",
				r.name, r.alg, r.limit, first, per, second, per2)
			n := len(replicas)
			bound := r.limit + (n-1)*(r.limit/n)
			if first > bound {
				t.Errorf("%s: the first burst passed %d of a limit of %d, want ≤ %d", r.name, first, r.limit, bound)
			}
			if second > bound {
				t.Errorf("%s: the later burst passed %d of a limit of %d, want ≤ %d", r.name, second, r.limit, bound)
			}
			// Leasing may leave the last requests that cannot be shared
			// (limit mod N) unspent; it must not refuse more.
			if first < r.limit-len(replicas)+1 {
				t.Errorf("%s: the first burst passed %d of a limit of %d: leasing refused more than the share it cannot split", r.name, first, r.limit)
			}
		})
	}
}

// One replica (the registry counts only it) decides a concurrent burst
// exactly as sync: 0 does: the limit passes, not one less.
func TestHostileConcurrentBurstOnOneReplicaPassesExactlyTheLimit(t *testing.T) {
	replicas := startBurstReplicas(t, 1)
	for i, r := range burstRules {
		t.Run(r.name, func(t *testing.T) {
			ip := fmt.Sprintf("198.51.100.%d", 60+i)
			time.Sleep(time.Until(time.Now().Truncate(burstWindow).Add(burstWindow + 50*time.Millisecond)))
			passed, _ := concurrentBurst(t, replicas, r.name, ip, 40)
			t.Logf("%s (%s, limit %d): one replica passed %d", r.name, r.alg, r.limit, passed)
			if passed != r.limit {
				t.Errorf("%s: one replica passed %d of a concurrent burst, want exactly the limit %d", r.name, passed, r.limit)
			}
		})
	}
}
