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
	// HeapLiveBytes is the Go heap still reachable right after a forced
	// collection (HeapAlloc from /debug/pprof/heap?gc=1&debug=1); -1 when
	// unavailable. Unlike RSS it does not move with the GC pacer's target
	// or with pages the allocator keeps: what a leak grows.
	HeapLiveBytes int64
}

// Sample reads pid's RSS and open fds, and the goroutine count and live
// heap from the pprof endpoint at pprofBase (http://127.0.0.1:9091), when
// not empty.
func Sample(pid int, pprofBase string) (Stats, error) {
	s := Stats{At: time.Now(), Goroutines: -1, HeapLiveBytes: -1}
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
		live, err := HeapLive(pprofBase)
		if err != nil {
			return s, err
		}
		s.HeapLiveBytes = live
	}
	return s, nil
}

// HeapLive forces a collection in the process behind base and reads the
// heap still allocated after it: the "# HeapAlloc = N" line (bytes) of
// <base>/debug/pprof/heap?gc=1&debug=1 (net/http/pprof runs runtime.GC
// before a heap profile asked with gc=1).
func HeapLive(base string) (int64, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(base + "/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		return 0, fmt.Errorf("reading heap profile: %w", err)
	}
	defer resp.Body.Close()
	return heapAlloc(io.LimitReader(resp.Body, 64<<20), resp.Status)
}

// heapAlloc finds "# HeapAlloc = N" in a debug=1 heap profile.
func heapAlloc(r io.Reader, status string) (int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "# HeapAlloc = "); ok {
			return strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading heap profile: %w", err)
	}
	return 0, fmt.Errorf("reading heap profile: no HeapAlloc line (status %s)", status)
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
