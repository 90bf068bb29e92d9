package harness

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// Stats is one sample of a process's resources.
type Stats struct {
	At         time.Time
	RSSBytes   int64 // VmRSS from /proc/<pid>/status
	FDs        int   // entries in /proc/<pid>/fd
	Goroutines int   // from /debug/pprof/goroutine?debug=1; -1 when unavailable
}

// Sample reads pid's RSS and open fds, and the goroutine count from the
// pprof endpoint at pprofBase (http://127.0.0.1:9091), when not empty.
func Sample(pid int, pprofBase string) (Stats, error) {
	s := Stats{At: time.Now(), Goroutines: -1}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, fmt.Errorf("reading process status: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				s.RSSBytes = kb << 10
			}
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, fmt.Errorf("listing open fds: %w", err)
	}
	s.FDs = len(fds)
	if pprofBase != "" {
		n, err := Goroutines(pprofBase)
		if err != nil {
			return s, err
		}
		s.Goroutines = n
	}
	return s, nil
}

// Goroutines reads "goroutine profile: total N" from
// <base>/debug/pprof/goroutine?debug=1.
func Goroutines(base string) (int, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(base + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return 0, fmt.Errorf("reading goroutine profile: %w", err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(io.LimitReader(resp.Body, 4096)).ReadString('\n')
	if err != nil && line == "" {
		return 0, fmt.Errorf("reading goroutine profile: %w", err)
	}
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "goroutine profile: total ")
	if !ok {
		return 0, fmt.Errorf("reading goroutine profile: unexpected first line %q (status %s)", line, resp.Status)
	}
	return strconv.Atoi(rest)
}
