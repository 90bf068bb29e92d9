package harness

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// WrkPath returns the wrk binary, or "" when it is not installed
// (apt-get install -y wrk).
func WrkPath() string {
	p, _ := exec.LookPath("wrk")
	return p
}

// WrkRun is one closed-loop wrk run: one thread, Conns keep-alive
// connections, for Duration (whole seconds, at least 1).
type WrkRun struct {
	URL      string
	CPUs     string // taskset CPU list; empty: not pinned
	Conns    int
	Duration time.Duration
	Script   string // path of a Lua script (-s), e.g. one that POSTs; empty: GET
}

// WrkResult is what wrk reported.
type WrkResult struct {
	RPS          float64 // requests per second over the run
	Requests     int64   // responses received
	Non2xx       int64   // responses other than 2xx/3xx
	SocketErrors int64   // connect, read, write and timeout errors (a timeout may still complete)
	Bad          int64   // Non2xx + SocketErrors
	P50, P99     time.Duration
}

// Wrk runs wrk (one thread, conns connections, for d) against url, pinned
// to cpus, and returns the requests per second it reports and the count of
// non-2xx/3xx responses and socket errors. wrk's C event loop needs a
// fraction of the CPU a Go client does, so on a small machine it keeps the
// proxy under test, not the generator, the bottleneck.
func Wrk(ctx context.Context, cpus string, conns int, d time.Duration, url string) (rps float64, bad int64, err error) {
	r, err := RunWrk(ctx, WrkRun{URL: url, CPUs: cpus, Conns: conns, Duration: d})
	return r.RPS, r.Bad, err
}

// RunWrk runs w and parses wrk's report (with --latency, for p50/p99).
// It returns an error when wrk fails or prints no Requests/sec line.
func RunWrk(ctx context.Context, w WrkRun) (WrkResult, error) {
	argv := []string{WrkPath(), "-t1", "-c" + strconv.Itoa(w.Conns), "-d" + strconv.Itoa(max(int(w.Duration.Seconds()), 1)) + "s", "--latency"}
	if w.Script != "" {
		argv = append(argv, "-s", w.Script)
	}
	argv = append(argv, w.URL)
	if w.CPUs != "" {
		if ts, err := exec.LookPath("taskset"); err == nil {
			argv = append([]string{ts, "-c", w.CPUs}, argv...)
		}
	}
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return WrkResult{}, fmt.Errorf("running wrk: %w: %s", err, out)
	}
	r := parseWrk(out)
	if r.RPS == 0 {
		return r, fmt.Errorf("running wrk: no Requests/sec in its output: %s", out)
	}
	return r, nil
}

func parseWrk(out []byte) WrkResult {
	var r WrkResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		fields := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "Requests/sec:"):
			r.RPS, _ = strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, "Requests/sec:")), 64)
		case strings.HasPrefix(line, "Non-2xx or 3xx responses:"):
			r.Non2xx, _ = strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "Non-2xx or 3xx responses:")), 10, 64)
		case strings.HasPrefix(line, "Socket errors:"):
			// Socket errors: connect 0, read 0, write 0, timeout 0
			for _, f := range strings.Split(strings.TrimPrefix(line, "Socket errors:"), ",") {
				parts := strings.Fields(f)
				if len(parts) == 2 {
					n, _ := strconv.ParseInt(parts[1], 10, 64)
					r.SocketErrors += n
				}
			}
		case len(fields) >= 3 && fields[1] == "requests" && fields[2] == "in":
			// 123456 requests in 10.00s, 12.34MB read
			r.Requests, _ = strconv.ParseInt(fields[0], 10, 64)
		case len(fields) == 2 && (fields[0] == "50%" || fields[0] == "99%"):
			d := parseWrkDuration(fields[1])
			if fields[0] == "50%" {
				r.P50 = d
			} else {
				r.P99 = d
			}
		}
	}
	r.Bad = r.Non2xx + r.SocketErrors
	return r
}

// parseWrkDuration reads wrk's latency units: "635.91us", "1.17ms", "2.01s",
// "1.50m", "1.00h" (rounded to the nanosecond).
func parseWrkDuration(s string) time.Duration {
	if strings.HasSuffix(s, "m") && !strings.HasSuffix(s, "ms") {
		s = strings.TrimSuffix(s, "m") + "min"
	}
	for _, u := range []struct {
		suffix string
		unit   time.Duration
	}{{"us", time.Microsecond}, {"ms", time.Millisecond}, {"min", time.Minute}, {"s", time.Second}, {"h", time.Hour}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0
			}
			return time.Duration(math.Round(f * float64(u.unit)))
		}
	}
	return 0
}

// StartNginxUpstream runs nginx as the bench's upstream: 200 with a
// 128-byte JSON body on every path, one worker. It costs the shared
// client CPU far less than a Go server would.
func StartNginxUpstream(dir, cpus, listen string) (*Process, error) {
	return startNginx(dir, "nginx-upstream", cpus, listen, `location / {
            default_type application/json;
            return 200 '{"upstream":"bench","pad":"`+strings.Repeat("x", 98)+`"}\n';
        }`, "")
}
