// Command scale measures, on loopback, how the real borda binary's costs
// grow. The routes curves (issue 28, under two minutes): configuration
// size (`config check` time and peak RSS, `serve` start time and RSS,
// 1 000 to 50 000 routes), path routes on one host (requests/s to the
// first and the last of N routes), and idle keep-alive connections (RSS
// per connection while open, and what stays once they left). The
// keyspace curve (issue 27, keyspace.go): rate_limits.sync 50ms on one
// replica and a private redis-server against 10 000 to 1 000 000
// distinct client IPs (keys reaching the store within two intervals,
// throughput, p99, RSS). The deny curve: the local deny cache against a
// growing number of refused client IPs (store calls per request,
// throughput). Each prints one Markdown table; -write puts it in
// docs/performance.md between its "<curve>:begin" and "<curve>:end"
// markers (the routes table: "scale"). The dedup table's curve is an
// in-process benchmark (BenchmarkDedupMemoryFollowsEntries in
// webhook/ingress).
//
//	go run ./bench/cmd/scale                          # the routes table
//	go run ./bench/cmd/scale -curves keyspace,deny    # the rate-limit key-space tables
//	go run ./bench/cmd/scale -write                   # and write them into docs/performance.md
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	bin := flag.String("borda", "", "borda binary (default: go build ./cmd/borda into a temporary directory)")
	write := flag.Bool("write", false, "write the tables into docs/performance.md")
	curves := flag.String("curves", "routes", "comma-separated curves to run: routes (configuration size, path routes, idle connections; under 2 minutes), keyspace (sync 50ms against 10 000-1 000 000 client IPs; about 10 minutes), deny (the deny cache against refused IPs; about 5 minutes)")
	keyspacePoints := flag.String("keyspace-points", "10000,100000,1000000", "distinct client IPs of the keyspace curve")
	denyPoints := flag.String("deny-points", "10000,50000,100000,200000", "refused client IPs of the deny curve")
	denyCache := flag.Int("deny-cache-size", 0, "rate_limits.deny_cache_size of the deny curve (0: the default)")
	port := flag.Int("port", 18380, "the gateway's port on 127.0.0.1 (the admin listener's is the next)")
	flag.Parse()
	listenAddr, adminAddr = fmt.Sprintf("127.0.0.1:%d", *port), fmt.Sprintf("127.0.0.1:%d", *port+1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	dir, err := os.MkdirTemp("", "borda-scale-")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(dir)
	if *bin == "" {
		*bin = filepath.Join(dir, "borda")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", *bin, "./cmd/borda").CombinedOutput(); err != nil {
			fatal(fmt.Errorf("go build: %v\n%s", err, out))
		}
	}
	up, err := startUpstream()
	if err != nil {
		fatal(err)
	}
	for _, c := range strings.Split(*curves, ",") {
		var table, marker string
		switch c {
		case "routes":
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Minute)
			table, marker = routesCurves(rctx, *bin, dir, up), "scale"
			rcancel()
		case "keyspace":
			pts, err := keyspaceCurve(ctx, *bin, dir, up, ints(*keyspacePoints), 100_000)
			if err != nil {
				fatal(err)
			}
			table, marker = keyspaceTable(pts), "keyspace"
		case "deny":
			pts, err := denyCurve(ctx, *bin, dir, up, ints(*denyPoints), *denyCache)
			if err != nil {
				fatal(err)
			}
			table, marker = denyTable(pts, *denyCache), "deny"
		default:
			fatal(fmt.Errorf("unknown curve %q (want routes, keyspace, deny)", c))
		}
		fmt.Print(table)
		if *write {
			if err := writeDoc("docs/performance.md", marker, table); err != nil {
				fatal(err)
			}
		}
	}
}

// routesCurves measures configuration size, path routes and idle
// connections, and returns their table.
func routesCurves(ctx context.Context, bin, dir, up string) string {
	var rows []string
	add := func(curve, point, metric, value string) {
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s |", curve, point, metric, value))
		fmt.Fprintln(os.Stderr, curve, point, metric, value)
	}
	for _, n := range []int{1000, 10000, 50000} {
		path := filepath.Join(dir, fmt.Sprintf("r%d.yaml", n))
		if err := os.WriteFile(path, routesConfig(n, up), 0o600); err != nil {
			fatal(err)
		}
		st, _ := os.Stat(path)
		secs, rssKB, err := configCheck(ctx, bin, path)
		if err != nil {
			fatal(err)
		}
		pt := fmt.Sprintf("%d routes (%.1f MiB)", n, float64(st.Size())/(1<<20))
		add("config check", pt, "time / peak RSS", fmt.Sprintf("%.2f s / %d MB", secs, rssKB>>10))
		p, start, err := startServe(ctx, bin, path)
		if err != nil {
			fatal(err)
		}
		add("serve", pt, "start / RSS", fmt.Sprintf("%.2f s / %d MB", start.Seconds(), rss(p.Process.Pid)>>10))
		first := rate(ctx, "/p0/x", time.Second)
		last := rate(ctx, fmt.Sprintf("/p%d/x", n-1), time.Second)
		add("path routes, one host", fmt.Sprintf("%d routes", n), "last / first route req/s", fmt.Sprintf("%.0f / %.0f = %.2f ×", last, first, last/first))
		stop(p)
	}
	path := filepath.Join(dir, "r10.yaml")
	if err := os.WriteFile(path, routesConfig(10, up), 0o600); err != nil {
		fatal(err)
	}
	for _, n := range []int{1000, 4000} {
		p, _, err := startServe(ctx, bin, path)
		if err != nil {
			fatal(err)
		}
		before := rss(p.Process.Pid)
		conns, err := idle(n)
		if err != nil {
			fatal(err)
		}
		held := rss(p.Process.Pid)
		for _, c := range conns {
			c.Close()
		}
		time.Sleep(3 * time.Second) // the scavenger returns freed pages in the background
		after := rss(p.Process.Pid)
		add("idle connections", fmt.Sprintf("%d", n), "RSS per connection open / after they left",
			fmt.Sprintf("%.1f KB / %+.1f KB", float64(held-before)/float64(n), float64(after-before)/float64(n)))
		stop(p)
	}
	return "| curve | point | metric | value |\n|---|---|---|---|\n" + strings.Join(rows, "\n") + "\n"
}

// ints parses a comma-separated list of integers.
func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fatal(fmt.Errorf("%q is not a positive integer", f))
		}
		out = append(out, n)
	}
	return out
}

// routesConfig is a configuration of n path routes on one host, each
// "/p<i>" to the upstream, the shape a generator of the issue used.
func routesConfig(n int, upstream string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "environment: development\nlisten: %q\nadmin_listen: %q\nserver:\n  max_connections: 8192\n  max_connections_per_ip: 8192\nroutes:\n", listenAddr, adminAddr)
	for i := range n {
		fmt.Fprintf(&b, "  - name: r%d\n    hosts: [\"scale.example.org\"]\n    path_prefix: \"/p%d\"\n    upstream: \"%s\"\n", i, i, upstream)
	}
	return b.Bytes()
}

// configCheck runs `borda config check` and returns its wall time and peak RSS (KB).
func configCheck(ctx context.Context, bin, path string) (float64, int64, error) {
	cmd := exec.CommandContext(ctx, bin, "config", "check", "--config", path)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &errb
	t := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("config check %s: %v\n%s", path, err, errb.String())
	}
	return time.Since(t).Seconds(), cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss, nil
}

// startServe starts `borda serve` and returns once its listener answers.
func startServe(ctx context.Context, bin, path string) (*exec.Cmd, time.Duration, error) {
	cmd := exec.CommandContext(ctx, bin, "serve", "--config", path)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	// GOGC passes through, for reading how much of a point is the GC.
	if v := os.Getenv("GOGC"); v != "" {
		cmd.Env = append(cmd.Env, "GOGC="+v)
	}
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	t := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	for time.Since(t) < 20*time.Second {
		if c, err := net.DialTimeout("tcp", listenAddr, 100*time.Millisecond); err == nil {
			c.Close()
			return cmd, time.Since(t), nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop(cmd)
	return nil, 0, fmt.Errorf("serve %s did not listen in 20 s", path)
}

func stop(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// listenAddr and adminAddr are the gateway's listeners (-port).
var listenAddr, adminAddr = "127.0.0.1:18380", "127.0.0.1:18381"

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 5 * time.Second}

// rate is sequential keep-alive requests per second to path for d.
func rate(ctx context.Context, path string, d time.Duration) float64 {
	n := 0
	t := time.Now()
	for time.Since(t) < d && ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+listenAddr+path, nil)
		req.Host = "scale.example.org"
		res, err := client.Do(req)
		if err != nil {
			fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			fatal(fmt.Errorf("GET %s: %s", path, res.Status))
		}
		n++
	}
	return float64(n) / time.Since(t).Seconds()
}

// idle opens n connections, completes one keep-alive request on each and
// leaves them open.
func idle(n int) ([]net.Conn, error) {
	conns := make([]net.Conn, 0, n)
	buf := make([]byte, 4096)
	for range n {
		c, err := net.DialTimeout("tcp", listenAddr, 5*time.Second)
		if err != nil {
			return conns, err
		}
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(c, "GET /p0/x HTTP/1.1\r\nHost: scale.example.org\r\n\r\n"); err != nil {
			return conns, err
		}
		if _, err := c.Read(buf); err != nil {
			return conns, err
		}
		conns = append(conns, c)
	}
	return conns, nil
}

// rss is the process's resident set in KB (/proc/PID/status VmRSS).
// cpuTime is the user and system CPU time pid has used
// (/proc/<pid>/stat fields 14 and 15, in clock ticks of 10 ms: Linux's
// USER_HZ of 100 on every architecture Go supports there).
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	rest := string(b)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest) // f[0] is field 3
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func rss(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}

// startUpstream serves 200 "ok" on loopback.
func startUpstream() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), nil
}

// writeDoc replaces the text between the "<marker>:begin" and
// "<marker>:end" comments of path.
func writeDoc(path, marker, table string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	begin, end := "<!-- "+marker+":begin -->\n", "<!-- "+marker+":end -->"
	i, j := bytes.Index(data, []byte(begin)), bytes.Index(data, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q … %q markers", path, strings.TrimSpace(begin), end)
	}
	out := append(append(append([]byte{}, data[:i+len(begin)]...), table...), data[j:]...)
	return os.WriteFile(path, out, 0o644)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "scale:", err)
	os.Exit(1)
}
