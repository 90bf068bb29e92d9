package e2e

import (
	"net/http"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// forwardProcess is a running `borda forward`.
type forwardProcess struct {
	admin string // its admin listener, host:port
	logs  *syncBuffer
	stop  func() // SIGTERM, then a kill after 20 s; idempotent
}

// startForward starts `borda forward --config path` with the test's clean
// environment plus env, its admin listener on a free port. It is stopped
// (and its logs shown when the test failed) at cleanup.
func startForward(t *testing.T, path string, env ...string) *forwardProcess {
	t.Helper()
	p := &forwardProcess{admin: freePort(t), logs: &syncBuffer{}}
	cmd := exec.Command(borda(t), "forward", "--config", path, "--admin", p.admin)
	cmd.Env, cmd.Stdout, cmd.Stderr = append(cleanEnv(), env...), p.logs, p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	p.stop = func() {
		if cmd.ProcessState != nil {
			return
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill() // only the process this test started
			<-exited
		}
	}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("borda forward logs:\n%s", p.logs.String())
		}
	})
	return p
}

// waitReady waits (30 s at most) until the forwarder's /readyz answers 200.
func (p *forwardProcess) waitReady(t *testing.T) {
	t.Helper()
	eventually(t, 30*time.Second, "borda forward ready", func() bool {
		resp, err := http.Get("http://" + p.admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}
