package harness

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
)

// PinSelf re-executes the running program under `taskset -c cpus` (once;
// BORDA_BENCH_PINNED marks the second run), so the load generator and the
// upstream stay off the CPUs the proxy under test is pinned to. Without
// taskset, or with cpus empty, it does nothing.
func PinSelf(cpus string) error {
	if cpus == "" || os.Getenv("BORDA_BENCH_PINNED") == "1" {
		return nil
	}
	ts, err := exec.LookPath("taskset")
	if err != nil {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding own executable: %w", err)
	}
	argv := append([]string{ts, "-c", cpus, exe}, os.Args[1:]...)
	return syscall.Exec(ts, argv, append(os.Environ(), "BORDA_BENCH_PINNED=1"))
}

// Machine describes the machine a figure was measured on.
func Machine() string {
	model, cpus := "unknown CPU", 0
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), ":")
			switch strings.TrimSpace(k) {
			case "model name":
				model = strings.TrimSpace(v)
			case "processor":
				cpus++ // every CPU, not only those this process is pinned to
			}
		}
		f.Close()
	}
	if cpus == 0 {
		cpus = runtime.NumCPU()
	}
	var u syscall.Utsname
	kernel := ""
	if syscall.Uname(&u) == nil {
		var b strings.Builder
		for _, c := range u.Release {
			if c == 0 {
				break
			}
			b.WriteByte(byte(c))
		}
		kernel = b.String()
	}
	return fmt.Sprintf("%d CPUs (%s), Linux %s, %s", cpus, model, kernel, runtime.Version())
}

// Median returns the median of v (the mean of the two middle values for
// an even count; 0 for none), sorting v in place. Bench commands report
// the median of their rounds, so one noisy round moves nothing.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
