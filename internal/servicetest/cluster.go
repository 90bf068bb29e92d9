package servicetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// clusterMasters is the size of the private Redis Cluster: three masters,
// so the 16 384 slots are split and one request's keys land on different
// nodes.
const clusterMasters = 3

// RedisCluster is a private Redis Cluster: clusterMasters redis-server
// processes on free loopback ports (no persistence), joined by redis-cli
// --cluster create. Tests share one per test binary; StopRedisCluster (from
// TestMain) stops it by PID.
type RedisCluster struct {
	// URL is a cluster seed URL for redis.ParseClusterURL:
	// redis://127.0.0.1:P1?addr=127.0.0.1:P2&addr=127.0.0.1:P3.
	URL  string
	dir  string
	cmds []*exec.Cmd
}

var (
	clusterOnce sync.Once
	cluster     *RedisCluster
	clusterErr  error
)

// StartedRedisCluster returns the binary's private Redis Cluster, starting
// it on first use; it skips the test (fails when BORDA_REQUIRE_SERVICES=1)
// when redis-server or redis-cli is missing or the cluster does not form
// within 20 s.
func StartedRedisCluster(t testing.TB) *RedisCluster {
	t.Helper()
	clusterOnce.Do(func() { cluster, clusterErr = startRedisCluster() })
	if clusterErr != nil {
		if Required() {
			t.Fatalf("private Redis Cluster: %v", clusterErr)
		}
		t.Skipf("private Redis Cluster unavailable: %v", clusterErr)
	}
	return cluster
}

// StopRedisCluster stops the private cluster if one was started: its
// processes by PID, then its directory. Call it from TestMain after m.Run.
func StopRedisCluster() {
	if cluster == nil {
		return
	}
	for _, c := range cluster.cmds {
		_ = c.Process.Signal(syscall.SIGCONT)
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	_ = os.RemoveAll(cluster.dir)
}

func startRedisCluster() (*RedisCluster, error) {
	server, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not installed: %w", err)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redis-cli not installed: %w", err)
	}
	dir, err := os.MkdirTemp("", "borda-redis-cluster-")
	if err != nil {
		return nil, err
	}
	c := &RedisCluster{dir: dir}
	fail := func(err error) (*RedisCluster, error) {
		cluster = c
		StopRedisCluster()
		cluster = nil
		return nil, err
	}
	var addrs []string
	for i := range clusterMasters {
		port, err := clusterPort()
		if err != nil {
			return fail(err)
		}
		nodeDir := filepath.Join(dir, fmt.Sprint(i))
		if err := os.Mkdir(nodeDir, 0o755); err != nil {
			return fail(err)
		}
		cmd := exec.Command(server, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000", "--dir", nodeDir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return fail(fmt.Errorf("starting redis-server: %w", err))
		}
		c.cmds = append(c.cmds, cmd)
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", port))
	}
	for _, a := range addrs {
		if err := waitTCP(a, 5*time.Second); err != nil {
			return fail(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("redis-cli --cluster create: %w: %s", err, out))
	}
	for _, a := range addrs { // every node must see the whole cluster
		host, port, _ := net.SplitHostPort(a)
		for {
			out, _ := exec.CommandContext(ctx, cli, "-h", host, "-p", port, "cluster", "info").Output()
			if strings.Contains(string(out), "cluster_state:ok") {
				break
			}
			if ctx.Err() != nil {
				return fail(fmt.Errorf("node %s: cluster_state not ok within 20 s: %s", a, out))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	c.URL = "redis://" + addrs[0] + "?addr=" + strings.Join(addrs[1:], "&addr=")
	return c, nil
}

// clusterPort returns a free loopback port whose cluster bus port (+10000)
// is free too.
func clusterPort() (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port+10000 > 65535 {
			continue
		}
		if bus, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+10000)); err == nil {
			bus.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port pair (port, port+10000) for a cluster node")
}

func waitTCP(addr string, d time.Duration) error {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return nil
		}
	}
	return fmt.Errorf("%s not listening within %s", addr, d)
}
