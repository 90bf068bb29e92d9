package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
)

// Fresh attack pass 16 R7/R10/R11 (open, docs/rate-limiting.md Known
// gaps (6)): with the store 60 ms away, two IPs flooding three replicas
// with unpaced workers from mid-window beside a client at 60 % of its
// limit: windows of 107-140 of 50 and the client refused 6-23 of ~99, with
// 14-23 sync rounds timing out per run (cause not found: a saturated
// 2-core machine, the Go delay proxy, or the rounds themselves). Opt-in
// (BORDA_E2E_SLOW_STORE_MANY=1) until it holds: it asserts what should
// hold, at most the limit + 5 in every window of every flooding IP and at
// most a tenth of the client's requests refused.
func TestHostileSlowStoreFloodsBesideAClientUnderItsLimit(t *testing.T) {
	if os.Getenv("BORDA_E2E_SLOW_STORE_MANY") != "1" {
		t.Skip("an open finding (fresh attack pass 16 R7/R10/R11) kept as its reproduction; set BORDA_E2E_SLOW_STORE_MANY=1 to run it (docs/rate-limiting.md, Known gaps (6))")
	}
	target, err := url.Parse(servicetest.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	var delay atomic.Int64
	delay.Store(int64(60 * time.Millisecond))
	slow := startDelayProxy(t, target.Host, &delay)
	replicas, _, _ := startSyncReplicas(t, replicaCount, func(upstream, _, prefix string) string {
		u := *target
		u.Host = slow
		return strings.Replace(replicasConfig(upstream, u.String(), prefix), "timeout: 250ms", "timeout: 30ms", 1)
	})
	const flooders, dur = 2, 6500 * time.Millisecond
	start := time.Now().Truncate(replicaWindow).Add(replicaWindow)
	time.Sleep(time.Until(start.Add(1500 * time.Millisecond))) // the floods start mid-window
	failedBefore := roundFailures(replicas)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	get := func(replica int, ip string) int {
		req, _ := http.NewRequest(http.MethodGet, replicas[replica%len(replicas)].public+"/sliding_window/x", nil)
		req.Header.Set("X-Real-IP", ip)
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	var (
		mu                   sync.Mutex
		passed               [flooders][8]int // per IP, per window since start
		wg                   sync.WaitGroup
		clientSent, refusals atomic.Int64
	)
	wg.Go(func() {
		for i := 0; time.Since(start) < dur; i++ {
			time.Sleep(time.Until(start.Add(1500*time.Millisecond + time.Duration(i)*66*time.Millisecond))) // 60 % of the limit
			clientSent.Add(1)
			if get(i, "203.0.113.250") == http.StatusTooManyRequests {
				refusals.Add(1)
			}
		}
	})
	for w := range 32 {
		wg.Go(func() {
			for i := w; time.Since(start) < dur; i += 32 {
				at := time.Since(start)
				if get(i/flooders, fmt.Sprintf("203.0.113.%d", 100+i%flooders)) == http.StatusOK {
					mu.Lock()
					passed[i%flooders][min(int(at/replicaWindow), 7)]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	t.Logf("sync rounds failed: %d; client at 60 %%: %d of %d refused; passed per flooding IP per window %v",
		roundFailures(replicas)-failedBefore, refusals.Load(), clientSent.Load(), passed)
	for ip := range passed {
		for w, n := range passed[ip] {
			if n > replicaLimit+replicaSlack {
				t.Errorf("flooding IP %d passed %d in window %d, want ≤ %d", ip, n, w, replicaLimit+replicaSlack)
			}
		}
	}
	if refusals.Load() > clientSent.Load()/10 {
		t.Errorf("the client under its limit was refused %d of %d, want at most a tenth", refusals.Load(), clientSent.Load())
	}
}
