// Package e2e runs the real `borda` binary against real upstreams, Redis and
// RabbitMQ on 127.0.0.1.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// borda builds the binary once per test run and returns its path.
func borda(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "borda-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "borda")
		out, err := exec.Command("go", "build", "-race", "-o", binPath, "../cmd/borda").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// freePort returns a loopback address nobody listens on, for a process the
// test starts next. It is taken below Linux's ephemeral range (32768-60999
// by default), where the kernel also picks the source port of every
// outgoing connection: a port probed with ":0" and closed could be handed
// to a Redis or HTTP client before the child binds it (CI run of stop 31:
// "bind: address already in use" on the admin listener). The ports one test
// binary hands out are never handed out twice, and each is probed first.
func freePort(t *testing.T) string {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range portSpan {
		port := portLow + portNext%portSpan
		portNext++
		if portsGiven[port] {
			continue
		}
		portsGiven[port] = true
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	t.Fatal("no free loopback port below the ephemeral range")
	return ""
}

const (
	portLow  = 20000
	portSpan = 32768 - portLow
)

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
	portNext   = os.Getpid() * 7919 % portSpan // apart from another test binary's ports
)

// process is a running `borda serve`.
type process struct {
	cmd    *exec.Cmd
	public string // http://127.0.0.1:port
	admin  string
	logs   *syncBuffer
	done   chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServe writes config (with LISTEN and ADMIN placeholders replaced) and
// starts `borda serve`, waiting for /healthz. It is stopped with SIGTERM at
// the end of the test.
func startServe(t *testing.T, config string, env ...string) *process {
	t.Helper()
	bin := borda(t)
	pub, adm := freePort(t), freePort(t)
	config = strings.NewReplacer("{LISTEN}", pub, "{ADMIN}", adm).Replace(config)
	path := filepath.Join(t.TempDir(), "borda.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &process{public: "http://" + pub, admin: "http://" + adm, logs: &syncBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(bin, "serve", "--config", path)
	p.cmd.Env = append(cleanEnv(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("borda serve logs:\n%s", failureLogs(p.logs.String()))
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-p.done:
			t.Fatalf("borda serve exited early: %v\n%s", err, p.logs.String())
		default:
		}
		if resp, err := http.Get(p.public + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("borda serve did not answer /healthz within 15 s\n%s", p.logs.String())
	return nil
}

// failureLogs is a failed test's view of a process's logs: every line but
// the access log's ("http request"), whose lines are counted instead. A
// flood logs thousands of them, and CI shows the end of a failed test's
// output: the assertion that failed must stay in view.
func failureLogs(logs string) string {
	var b strings.Builder
	access := 0
	for line := range strings.Lines(logs) {
		if strings.Contains(line, `"msg":"http request"`) {
			access++
			continue
		}
		b.WriteString(line)
	}
	if access > 0 {
		fmt.Fprintf(&b, "(%d access-log lines left out)\n", access)
	}
	return b.String()
}

// stop sends SIGTERM and waits up to 15 s, then kills (by PID: only the
// process this test started).
func (p *process) stop(t *testing.T) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("borda serve did not stop within 15 s of SIGTERM")
	}
}

// cleanEnv is the test's environment without the variables that override
// the config file, so a developer's shell cannot change what a test sees.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "ENVIRONMENT", "REDIS_URL", "UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN", "AMQP_URL",
			"DATABASE_URL", "WEBHOOK_TOKENS", "LEGACY_WEBHOOK_URL", "LEGACY_WEBHOOK_HMAC_SECRET",
			"AUTH_JWT_SECRET", "AUTH_JWKS_URL", "BORDA_CONFIG", "ADMIN_PPROF_TOKEN", "ADMIN_TOKEN", "BORDA_ALLOW_WEAK_PRODUCTION":
			continue
		}
		out = append(out, kv)
	}
	return out
}

func get(t *testing.T, url, host string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
