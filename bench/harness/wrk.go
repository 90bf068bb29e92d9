package harness

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
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

// Wrk runs wrk (one thread, conns connections, for d) against url, pinned
// to cpus, and returns the requests per second it reports and the count of
// non-2xx/3xx responses and socket errors. wrk's C event loop needs a
// fraction of the CPU a Go client does, so on a small machine it keeps the
// proxy under test, not the generator, the bottleneck.
func Wrk(ctx context.Context, cpus string, conns int, d time.Duration, url string) (rps float64, bad int64, err error) {
	argv := []string{WrkPath(), "-t1", "-c" + strconv.Itoa(conns), "-d" + strconv.Itoa(max(int(d.Seconds()), 1)) + "s", url}
	if cpus != "" {
		if ts, err := exec.LookPath("taskset"); err == nil {
			argv = append([]string{ts, "-c", cpus}, argv...)
		}
	}
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("running wrk: %w: %s", err, out)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "Requests/sec:"):
			rps, _ = strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, "Requests/sec:")), 64)
		case strings.HasPrefix(line, "Non-2xx or 3xx responses:"):
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "Non-2xx or 3xx responses:")), 10, 64)
			bad += n
		case strings.HasPrefix(line, "Socket errors:"):
			// Socket errors: connect 0, read 0, write 0, timeout 0
			for _, f := range strings.Split(strings.TrimPrefix(line, "Socket errors:"), ",") {
				parts := strings.Fields(f)
				if len(parts) == 2 {
					n, _ := strconv.ParseInt(parts[1], 10, 64)
					bad += n
				}
			}
		}
	}
	if rps == 0 {
		return 0, bad, fmt.Errorf("running wrk: no Requests/sec in its output: %s", out)
	}
	return rps, bad, nil
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
