package loadgen

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Request builds one request; i is its sequence number (for unique
// bodies). It must be safe for concurrent use.
type Request func(ctx context.Context, i int64) (*http.Request, error)

// Get returns a Request for GET url with an optional Host header.
func Get(url, host string) Request {
	return func(ctx context.Context, _ int64) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		if host != "" {
			req.Host = host
		}
		return req, nil
	}
}

// Classify names the outcome of one response from its status and the first
// 512 bytes of its body ("PUBLISHED_CONFIRMED", "503"); Result.Classes
// counts them.
type Classify func(status int, body []byte) string

// Result is what a run measured.
type Result struct {
	Requests  int64            // completed with a response
	Errors    int64            // transport errors (no response)
	FirstErr  string           // the first transport error, for diagnosis
	Status    map[int]int64    // responses by status code
	Classes   map[string]int64 // responses by Classify, when given
	Elapsed   time.Duration    // wall time of the run
	Latencies Latencies        // one per response (open loop: from the intended start)
}

// RPS is completed requests per second of wall time.
func (r Result) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// NewClient returns an HTTP/1.1 client keeping up to conns idle keep-alive
// connections to one host, with no proxy and no compression, and a
// per-request timeout.
func NewClient(conns int, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        conns,
			MaxIdleConnsPerHost: conns,
			MaxConnsPerHost:     conns,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
			ForceAttemptHTTP2:   false,
		},
	}
}

type recorder struct {
	mu       sync.Mutex
	classify Classify
	classes  map[string]int64
	status   map[int]int64
	lat      Latencies
	n, err   atomic.Int64
	firstErr string
}

func (r *recorder) fail(err error) {
	r.err.Add(1)
	r.mu.Lock()
	if r.firstErr == "" {
		r.firstErr = err.Error()
	}
	r.mu.Unlock()
}

func newRecorder(classify Classify) *recorder {
	return &recorder{status: map[int]int64{}, classes: map[string]int64{}, classify: classify}
}

func (r *recorder) record(status int, body []byte, d time.Duration) {
	r.n.Add(1)
	r.mu.Lock()
	r.status[status]++
	if r.classify != nil {
		r.classes[r.classify(status, body)]++
	}
	r.lat = append(r.lat, d)
	r.mu.Unlock()
}

func (r *recorder) result(elapsed time.Duration) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Result{Requests: r.n.Load(), Errors: r.err.Load(), FirstErr: r.firstErr, Status: r.status, Classes: r.classes, Elapsed: elapsed, Latencies: r.lat}
}

func do(ctx context.Context, c *http.Client, build Request, i int64, keepBody bool) (int, []byte, error) {
	req, err := build(ctx, i)
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var body []byte
	if keepBody {
		body, _ = io.ReadAll(io.LimitReader(resp.Body, 512))
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, body, nil
}

// Saturate runs workers closed-loop workers (each sends its next request
// when the previous one answers) for d, after warmup unrecorded, and
// returns what they measured.
func Saturate(ctx context.Context, c *http.Client, build Request, workers int, warmup, d time.Duration) Result {
	rec := newRecorder(nil)
	var seq atomic.Int64
	var recording atomic.Bool
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				start := time.Now()
				code, _, err := do(ctx, c, build, seq.Add(1), false)
				if !recording.Load() || ctx.Err() != nil {
					continue
				}
				if err != nil {
					rec.fail(err)
					continue
				}
				rec.record(code, nil, time.Since(start))
			}
		}()
	}
	sleep(ctx, warmup)
	recording.Store(true)
	start := time.Now()
	sleep(ctx, d)
	recording.Store(false)
	elapsed := time.Since(start)
	cancel()
	wg.Wait()
	return rec.result(elapsed)
}

// Fixed sends rate requests per second for d (open loop), after warmup
// unrecorded at the same rate. Each request's latency runs from its
// intended start. At most maxInFlight requests are outstanding; a request
// that finds none free is counted as an error ("generator saturated").
func Fixed(ctx context.Context, c *http.Client, build Request, rate int, maxInFlight int, warmup, d time.Duration) Result {
	return FixedClassify(ctx, c, build, nil, rate, maxInFlight, warmup, d)
}

// FixedClassify is Fixed counting each response's Classify outcome.
// Request numbers start at the run's start time in nanoseconds, so bodies
// built from them stay unique across calls.
func FixedClassify(ctx context.Context, c *http.Client, build Request, classify Classify, rate int, maxInFlight int, warmup, d time.Duration) Result {
	rec := newRecorder(classify)
	interval := time.Second / time.Duration(rate)
	slots := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	begin := time.Now()
	seqBase := begin.UnixNano() // unique request numbers across calls
	recordFrom := begin.Add(warmup)
	end := recordFrom.Add(d)
	for i := int64(0); ; i++ {
		intended := begin.Add(time.Duration(i) * interval)
		if !intended.Before(end) || ctx.Err() != nil {
			break
		}
		if wait := time.Until(intended); wait > 0 {
			time.Sleep(wait)
		}
		record := !intended.Before(recordFrom)
		select {
		case slots <- struct{}{}:
		default:
			if record {
				rec.fail(errSaturated)
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			code, body, err := do(ctx, c, build, seqBase+i, classify != nil)
			if !record {
				return
			}
			if err != nil {
				rec.fail(err)
				return
			}
			rec.record(code, body, time.Since(intended))
		}()
	}
	wg.Wait()
	return rec.result(d)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// errSaturated counts a request the open-loop generator could not send
// because maxInFlight requests were already outstanding.
var errSaturated = errors.New("generator saturated: max in-flight requests outstanding")

// ErrNotReady is returned by WaitReady when url never answered 2xx.
var ErrNotReady = errors.New("not ready")

// WaitReady polls url until it answers 2xx or timeout passes.
func WaitReady(ctx context.Context, url string, timeout time.Duration) error {
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		resp, err := c.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return ErrNotReady
}
