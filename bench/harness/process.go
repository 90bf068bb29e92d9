// Package harness starts, watches and stops the processes the bench
// commands measure (upstream, bare proxy, nginx, borda, a private
// redis-server), all on 127.0.0.1, each stopped by its own PID.
package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is a child process the harness started. Its stdout and stderr go
// to <dir>/<name>.log.
type Process struct {
	Name string
	Log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start runs argv with env appended to the harness's environment. When cpus
// is not empty ("1", "0-1") and taskset is installed, the process is pinned
// to those CPUs.
func Start(dir, name, cpus string, env []string, argv ...string) (*Process, error) {
	if cpus != "" {
		if ts, err := exec.LookPath("taskset"); err == nil {
			argv = append([]string{ts, "-c", cpus}, argv...)
		}
	}
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating %s log: %w", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// PID is the process id (of taskset's exec'd child: taskset execs, so the
// PID is the program's own).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended, and its error.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Signal sends sig to the process (SIGSTOP, SIGCONT, …).
func (p *Process) Signal(sig syscall.Signal) error {
	return p.cmd.Process.Signal(sig)
}

// Stop sends SIGTERM, waits up to grace, then SIGKILL. It is safe to call
// twice.
func (p *Process) Stop(grace time.Duration) {
	if p == nil {
		return
	}
	if ok, _ := p.Exited(); ok {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // a stopped process cannot handle SIGTERM
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Tail returns the last n bytes of the process log, for error messages.
func (p *Process) Tail(n int64) string {
	f, err := os.Open(p.Log)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, _ := f.Stat()
	off := max(st.Size()-n, 0)
	buf := make([]byte, st.Size()-off)
	_, _ = f.ReadAt(buf, off)
	return string(buf)
}

// FreeAddr returns a free 127.0.0.1:port (free when asked; a race with
// another process taking it is possible but unlikely).
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Port returns the port of a host:port address.
func Port(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

// WaitTCP waits until addr accepts a connection.
func WaitTCP(ctx context.Context, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: %w", addr, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Build compiles the Go package pkg (e.g. "./cmd/borda") from the module
// root into dir and returns the binary's path.
func Build(ctx context.Context, root, dir, pkg string) (string, error) {
	out := filepath.Join(dir, filepath.Base(pkg))
	argv := []string{"go", "build", "-o", out, pkg}
	// The bench may run pinned to one CPU (PinSelf); let the compiler use
	// every online CPU.
	if online, err := os.ReadFile("/sys/devices/system/cpu/online"); err == nil {
		if ts, err := exec.LookPath("taskset"); err == nil {
			argv = append([]string{ts, "-c", strings.TrimSpace(string(online))}, argv...)
		}
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// ModuleRoot finds the directory holding go.mod, from the working
// directory up.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found: run from inside the borda module")
		}
		dir = parent
	}
}
