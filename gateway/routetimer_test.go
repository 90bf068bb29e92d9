package gateway

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The route timeout is a pooled runtime timer (routetimer.go): it must
// fire at its deadline, not on a coarser tick, for the wait for headers
// and for the upload alike, and a timer back in the pool must never
// cancel the request that uses it next.

// timeoutSlack is how late a route timeout may answer. The timer is a
// runtime timer (a few milliseconds late at most on a quiet machine); the
// bound is wide so a loaded CI machine does not fail the test, and still
// catches a coarse tick (a timer wheel of 1 s would answer up to 1 s
// late). The minimum of a few tries is compared.
const timeoutSlack = 250 * time.Millisecond

func minOf(tries int, f func() time.Duration) time.Duration {
	best := time.Duration(1<<63 - 1)
	for range tries {
		best = min(best, f())
	}
	return best
}

func TestRouteTimeoutAnswersAtItsDeadline(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	slow := testRoute(t, "slow", up.URL)
	slow.Upstream.Timeout = 100 * time.Millisecond
	h := newHarness(t, routes(slow))
	h.do(t, h.newRequest(t, http.MethodGet, "", "/warm")) // the upstream connection is open
	got := minOf(5, func() time.Duration {
		start := time.Now()
		res := h.do(t, h.newRequest(t, http.MethodGet, "", "/"))
		_, _ = io.Copy(io.Discard, res.Body)
		if res.StatusCode != http.StatusGatewayTimeout {
			t.Fatalf("status %d, want 504", res.StatusCode)
		}
		return time.Since(start)
	})
	if got < 100*time.Millisecond || got > 100*time.Millisecond+timeoutSlack {
		t.Errorf("504 after %v (best of 5), want within %v of the 100ms route timeout", got, timeoutSlack)
	}
}

func TestRouteTimeoutCutsAStalledUploadAtItsDeadline(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // waits for the client's body
	})
	upload := testRoute(t, "upload", up.URL)
	upload.Upstream.Timeout = 100 * time.Millisecond
	h := newHarness(t, Options{BodyTimeout: 10 * time.Second, BodyMinRate: 500, Routes: []Route{upload}})
	addr := strings.TrimPrefix(h.front.URL, "http://")
	got := minOf(3, func() time.Duration {
		start := time.Now()
		// Two of the ten announced bytes, then nothing: only the route
		// timeout can end the wait (body_timeout is 10 s).
		res, _, _ := rawRequest(t, addr, "POST /u HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab")
		res.Body.Close()
		if res.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("status %d, want 408", res.StatusCode)
		}
		return time.Since(start)
	})
	if got < 100*time.Millisecond || got > 100*time.Millisecond+timeoutSlack {
		t.Errorf("408 after %v (best of 3), want within %v of the 100ms route timeout", got, timeoutSlack)
	}
}

// TestPooledRouteTimerNeverCancelsTheNextRequest arms timers that expire
// while (or just before) they are disarmed, the race where a late firing
// could reach the timer's next user, then checks that a request armed
// after them is not cancelled.
func TestPooledRouteTimerNeverCancelsTheNextRequest(t *testing.T) {
	t.Parallel()
	for i := range 300 {
		var stale atomic.Int32
		a := &exchange{cancel: func(error) { stale.Add(1) }}
		rt := armRouteTimer(a, time.Duration(i%5)*50*time.Microsecond)
		for end := time.Now().Add(time.Duration(i%7) * 30 * time.Microsecond); time.Now().Before(end); {
		}
		timedOut := rt.disarm()

		var cut atomic.Pointer[error]
		b := &exchange{}
		b.cancel = func(err error) { cut.Store(&err) }
		next := armRouteTimer(b, time.Hour)
		// A late firing reaches the next request only through a reused
		// expired timer: assert the reuse cannot happen (the pool hands
		// this goroutine back what it just put), rather than waiting a
		// fixed time for a firing that may come later still.
		if timedOut && next == rt {
			t.Fatalf("round %d: an expired timer went back to the pool and was armed for the next request", i)
		}
		if err := cut.Load(); err != nil {
			t.Fatalf("round %d: the next request was cancelled (%v) by an earlier arming", i, *err)
		}
		if next.disarm() {
			t.Fatalf("round %d: a one-hour timeout reported as passed", i)
		}
		if !timedOut && stale.Load() != 0 {
			t.Fatalf("round %d: a timer stopped in time cancelled its request", i)
		}
	}
}

// TestExpiredRouteTimerIsNotReused: a timer whose Stop came too late may
// still run its function; back in the pool, that late firing would cancel
// the timer's next request.
func TestExpiredRouteTimerIsNotReused(t *testing.T) {
	t.Parallel()
	fired := make(chan struct{})
	rt := armRouteTimer(&exchange{cancel: func(error) { close(fired) }}, time.Nanosecond)
	<-fired // the timer expired and its function ran: Stop is now too late
	if !rt.disarm() {
		t.Fatal("disarm after the deadline: timedOut = false")
	}
	var next []*routeTimer
	for range 8 {
		got := armRouteTimer(&exchange{cancel: func(error) {}}, time.Hour)
		next = append(next, got)
		if got == rt {
			t.Error("an expired timer went back to the pool")
		}
	}
	for _, n := range next {
		if n.disarm() {
			t.Error("a one-hour timeout reported as passed")
		}
	}
}

func TestRouteTimeoutCauseReachesTheErrorHandler(t *testing.T) {
	t.Parallel()
	ex := &exchange{}
	ctx, cancel := context.WithCancelCause(context.Background())
	ex.cancel = cancel
	rt := armRouteTimer(ex, time.Millisecond)
	<-ctx.Done()
	if !rt.disarm() {
		t.Error("disarm after the deadline: timedOut = false")
	}
	if !errors.Is(context.Cause(ctx), errUpstreamTimeout) {
		t.Errorf("cause %v, want errUpstreamTimeout", context.Cause(ctx))
	}
}

// TestForwardedHeadersFollowEachRequestOnAKeepAliveConnection: the
// forwarding values are remembered per connection (proxy.go, forwarded);
// a request with another Host on the same connection gets its own.
func TestForwardedHeadersFollowEachRequestOnAKeepAliveConnection(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	srv := newServer(t, routes(testRoute(t, "any", up.URL)), Deps{})
	front := httptest.NewUnstartedServer(srv.Handler())
	front.Config.ConnContext = srv.HTTPServer("", nil).ConnContext
	front.Start()
	t.Cleanup(front.Close)
	conn, err := net.Dial("tcp", strings.TrimPrefix(front.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) { return conn, nil }, // one connection
	}}
	for _, host := range []string{"a.example.org", "a.example.org", "b.example.org", "a.example.org"} {
		req, _ := http.NewRequest(http.MethodGet, front.URL+"/", nil)
		req.Host = host
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		seen := up.last(t).Header
		if got := seen.Get("X-Forwarded-Host"); got != host {
			t.Errorf("X-Forwarded-Host %q, want %q", got, host)
		}
		if want := `for=127.0.0.1;host="` + host + `";proto=http`; seen.Get("Forwarded") != want {
			t.Errorf("Forwarded %q, want %q", seen.Get("Forwarded"), want)
		}
		if seen.Get("X-Real-Ip") != "127.0.0.1" || seen.Get("X-Forwarded-For") != "127.0.0.1" {
			t.Errorf("X-Real-Ip %q X-Forwarded-For %q", seen.Get("X-Real-Ip"), seen.Get("X-Forwarded-For"))
		}
	}
}

// TestWebhookSeesTheGatewayRequestID: the id goes on the webhook's
// request (its envelope carries x-request-id, docs/webhooks.md) although
// proxied requests get theirs only on the outgoing copy.
func TestWebhookSeesTheGatewayRequestID(t *testing.T) {
	t.Parallel()
	var seen atomic.Pointer[string]
	wh := &headerWebhook{seen: &seen}
	h := newHarness(t, Options{}, func(d *Deps) { d.Webhook = wh })
	res := h.do(t, h.newRequest(t, http.MethodPost, "", "/webhooks/whatsapp"))
	id := res.Header.Get("X-Request-Id")
	if got := seen.Load(); id == "" || got == nil || *got != id {
		t.Errorf("webhook saw X-Request-Id %v, response %q", got, id)
	}
}

type headerWebhook struct {
	fakeWebhook
	seen *atomic.Pointer[string]
}

func (f *headerWebhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v := r.Header.Get("X-Request-Id")
	f.seen.Store(&v)
	w.WriteHeader(http.StatusOK)
}
