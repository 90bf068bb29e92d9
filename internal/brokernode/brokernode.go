// Package brokernode starts private RabbitMQ nodes (and clusters of them)
// from the Debian rabbitmq-server package, on loopback, each with its own
// node name, AMQP and distribution ports, data directory and Erlang cookie.
//
// Tests and benches that change node-wide broker state (the memory
// watermark, policies, stopping a node) use such a node and never the
// shared broker: every node-wide operation here refuses a node whose AMQP
// port is the shared broker's (5672, or the port of BORDA_TEST_AMQP_URL),
// and the private cookie (HOME is the node's own directory for the server
// and for rabbitmqctl) means rabbitmqctl run from here cannot even
// authenticate to another node.
package brokernode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Where the Debian package installs the scripts (the /usr/sbin wrappers
// switch to the rabbitmq user and its cookie, which is the shared node's).
const (
	serverBin = "/usr/lib/rabbitmq/bin/rabbitmq-server"
	ctlBin    = "/usr/lib/rabbitmq/bin/rabbitmqctl"
	queuesBin = "/usr/lib/rabbitmq/bin/rabbitmq-queues"
)

// SharedPort is the AMQP port of the machine's shared broker.
const SharedPort = 5672

// ErrShared is returned by every node-wide operation aimed at the shared
// broker.
var ErrShared = errors.New("brokernode: refusing to change node-wide state on the shared broker")

// NodeWide are the rabbitmqctl commands that change a node for every
// client of it; servicetest.Rabbitmqctl refuses them on the shared broker.
var NodeWide = map[string]bool{
	"set_vm_memory_high_watermark": true, "set_disk_free_limit": true,
	"set_policy": true, "clear_policy": true, "set_operator_policy": true, "clear_operator_policy": true,
	"stop": true, "stop_app": true, "shutdown": true, "reset": true, "force_reset": true,
	"set_cluster_name": true, "join_cluster": true, "close_all_connections": true,
}

// Options configure one node.
type Options struct {
	// Dir is the node's directory (created; data, logs, config, cookie).
	Dir string
	// Name is the node's short name; the node is Name@localhost.
	Name string
	// Port and DistPort are the AMQP and Erlang distribution ports; 0 picks
	// a free loopback port.
	Port, DistPort int
	// Cookie is the Erlang cookie; nodes of one cluster share it. "" makes
	// a random one.
	Cookie string
	// MemoryMiB is vm_memory_high_watermark.absolute in MiB (default 256).
	MemoryMiB int
	// RemoveDir removes Dir when the node stops for good (Stop, Kill, or
	// this process's exit); a node that will be restarted must keep it.
	RemoveDir bool
	// Management enables the rabbitmq_management plugin, its HTTP API
	// listening on 127.0.0.1:ManagementPort (0 picks a free port); Start
	// then waits for the API too (Node.ManagementURL).
	Management     bool
	ManagementPort int
}

// Node is a running private RabbitMQ node.
type Node struct {
	// Name is the Erlang node name (borda-x@localhost).
	Name string
	// Port and DistPort are its AMQP and distribution ports.
	Port, DistPort int
	// URL is amqp://guest:guest@127.0.0.1:Port/.
	URL string
	// ManagementURL is http://guest:guest@127.0.0.1:<management port>/
	// with Options.Management; "" without.
	ManagementURL string

	opts Options
	home string
	cmd  *exec.Cmd
	exit chan struct{}

	stdinClose func() error
}

// Available reports why private nodes cannot be started here, or nil.
func Available() error {
	for _, b := range []string{serverBin, ctlBin} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("rabbitmq-server (Debian package) not installed: %w", err)
		}
	}
	return nil
}

// Shared reports whether the AMQP URL (or host:port) is the shared broker:
// port 5672, or the port of BORDA_TEST_AMQP_URL or AMQP_URL.
func Shared(port int) bool {
	if port == SharedPort {
		return true
	}
	for _, env := range []string{"BORDA_TEST_AMQP_URL", "AMQP_URL"} {
		for _, raw := range strings.Split(os.Getenv(env), ",") {
			if p := urlPort(strings.TrimSpace(raw)); p != 0 && p == port {
				return true
			}
		}
	}
	return false
}

func urlPort(raw string) int {
	if raw == "" {
		return 0
	}
	u, err := url.Parse(raw)
	if err != nil {
		return 0
	}
	if u.Port() == "" {
		if u.Scheme == "amqps" {
			return 5671
		}
		return SharedPort
	}
	p, _ := strconv.Atoi(u.Port())
	return p
}

// Start starts a node and waits (bounded by ctx) until it accepts AMQP.
func Start(ctx context.Context, o Options) (*Node, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if o.Name == "" || strings.Contains(o.Name, "@") || strings.HasPrefix(o.Name, "rabbit") {
		return nil, fmt.Errorf("brokernode: bad node name %q (a short name, not rabbit*)", o.Name)
	}
	var err error
	if o.Port == 0 {
		if o.Port, err = freePort(); err != nil {
			return nil, err
		}
	}
	if o.DistPort == 0 {
		if o.DistPort, err = freePort(); err != nil {
			return nil, err
		}
	}
	if o.Management && o.ManagementPort == 0 {
		if o.ManagementPort, err = freePort(); err != nil {
			return nil, err
		}
	}
	if Shared(o.Port) {
		return nil, fmt.Errorf("%w: AMQP port %d", ErrShared, o.Port)
	}
	// A fixed port someone already listens on (another cluster, another
	// bench) would make wait see that node accept AMQP as if it were ours.
	if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", o.Port), time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("brokernode: port %d is already in use", o.Port)
	}
	if o.MemoryMiB == 0 {
		o.MemoryMiB = 256
	}
	if o.Cookie == "" {
		o.Cookie = NewCookie()
	}
	n := &Node{Name: o.Name + "@localhost", Port: o.Port, DistPort: o.DistPort, opts: o,
		URL: fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", o.Port), home: filepath.Join(o.Dir, "home")}
	if o.Management {
		n.ManagementURL = fmt.Sprintf("http://guest:guest@127.0.0.1:%d/", o.ManagementPort)
	}
	if err := n.writeFiles(); err != nil {
		return nil, err
	}
	if err := n.spawn(); err != nil {
		return nil, err
	}
	if err := n.wait(ctx); err != nil {
		n.Kill()
		return nil, err
	}
	return n, nil
}

// NewCookie returns a random Erlang cookie.
func NewCookie() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "BORDA" + strings.ToUpper(hex.EncodeToString(b))
}

func (n *Node) writeFiles() error {
	if err := os.MkdirAll(n.home, 0o700); err != nil {
		return err
	}
	cookie := filepath.Join(n.home, ".erlang.cookie")
	_ = os.Remove(cookie)
	if err := os.WriteFile(cookie, []byte(n.opts.Cookie), 0o400); err != nil {
		return err
	}
	conf := fmt.Sprintf("listeners.tcp.default = 127.0.0.1:%d\nvm_memory_high_watermark.absolute = %dMiB\ndisk_free_limit.absolute = 50MB\nloopback_users = none\n",
		n.Port, n.opts.MemoryMiB)
	plugins := "[].\n"
	if n.opts.Management {
		conf += fmt.Sprintf("management.tcp.port = %d\nmanagement.tcp.ip = 127.0.0.1\n", n.opts.ManagementPort)
		plugins = "[rabbitmq_management].\n"
	}
	files := map[string]string{
		"rabbitmq.conf":   conf,
		"enabled_plugins": plugins,
		// An empty env file, so /etc/rabbitmq/rabbitmq-env.conf (the shared
		// node's NODENAME) is not read.
		"rabbitmq-env.conf": "",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(n.opts.Dir, name), []byte(body), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (n *Node) env() []string {
	d := n.opts.Dir
	return append(os.Environ(),
		"HOME="+n.home,
		"RABBITMQ_CONF_ENV_FILE="+filepath.Join(d, "rabbitmq-env.conf"),
		"RABBITMQ_NODENAME="+n.Name,
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+strconv.Itoa(n.Port),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(n.DistPort),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(d, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(d, "log"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(d, "rabbitmq.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(d, "enabled_plugins"),
		"RABBITMQ_PID_FILE="+filepath.Join(d, "pid"),
		"ERL_EPMD_ADDRESS=127.0.0.1",
		// One scheduler, distribution on loopback: small nodes for a
		// shared two-core machine.
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=+S 1:1 -kernel inet_dist_use_interface {127,0,0,1}",
	)
}

// spawn runs rabbitmq-server under a shell that stops it (SIGTERM to the
// Erlang VM, by the PID file) when its stdin closes, that is when this
// process exits for any reason: a killed test binary leaks no node.
func (n *Node) spawn() error {
	pidFile := filepath.Join(n.opts.Dir, "pid")
	_ = os.Remove(pidFile)
	script := `"$0" </dev/null >>"$1/server.out" 2>&1 & p=$!
read -r _
if [ -s "$1/pid" ]; then kill -TERM "$(cat "$1/pid")" 2>/dev/null; fi
kill -TERM "$p" 2>/dev/null; wait "$p"
if [ "$2" = rm ]; then rm -rf "$1"; fi`
	rm := "keep"
	if n.opts.RemoveDir {
		rm = "rm"
	}
	cmd := exec.Command("/bin/sh", "-c", script, serverBin, n.opts.Dir, rm)
	cmd.Env = n.env()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	_ = stdin // kept open by the exec.Cmd until Wait; closed on exit
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting rabbitmq-server: %w", err)
	}
	n.cmd = cmd
	n.exit = make(chan struct{})
	go func() { _ = cmd.Wait(); close(n.exit) }()
	n.stdinClose = stdin.Close
	return nil
}

func (n *Node) wait(ctx context.Context) error {
	ports := []int{n.Port}
	if n.opts.Management {
		ports = append(ports, n.opts.ManagementPort) // plugins start after the AMQP listener
	}
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0]), time.Second)
		if err == nil {
			c.Close()
			if ports = ports[1:]; len(ports) == 0 {
				return nil
			}
			continue
		}
		select {
		case <-n.exit:
			out, _ := os.ReadFile(filepath.Join(n.opts.Dir, "server.out"))
			return fmt.Errorf("brokernode: %s exited at start: %s", n.Name, tail(string(out), 600))
		case <-ctx.Done():
			return fmt.Errorf("brokernode: %s not accepting AMQP on :%d: %w", n.Name, n.Port, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Ctl runs rabbitmqctl -n Name with the node's cookie, bounded by 60 s.
// It refuses (ErrShared) when the node's port is the shared broker's.
func (n *Node) Ctl(args ...string) (string, error) {
	if Shared(n.Port) {
		return "", fmt.Errorf("%w: AMQP port %d", ErrShared, n.Port)
	}
	return n.run(ctlBin, args...)
}

// Queues runs rabbitmq-queues -n Name (quorum queue membership:
// add_member, delete_member, quorum_status), as Ctl does.
func (n *Node) Queues(args ...string) (string, error) {
	if Shared(n.Port) {
		return "", fmt.Errorf("%w: AMQP port %d", ErrShared, n.Port)
	}
	return n.run(queuesBin, args...)
}

func (n *Node) run(bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-n", n.Name}, args...)...)
	cmd.Env = n.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s -n %s %s: %w: %s", filepath.Base(bin), n.Name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// SetMemoryWatermark sets vm_memory_high_watermark (a fraction, e.g.
// "0.0000001" raises the memory alarm at once; "0.4" is 3.x's default).
func (n *Node) SetMemoryWatermark(fraction string) error {
	_, err := n.Ctl("set_vm_memory_high_watermark", fraction)
	return err
}

// SetPolicy applies a queue policy: name, pattern, definition (JSON).
func (n *Node) SetPolicy(name, pattern, definition string) error {
	_, err := n.Ctl("set_policy", "--apply-to", "queues", "--priority", "900", name, pattern, definition)
	return err
}

// ClearPolicy removes a policy.
func (n *Node) ClearPolicy(name string) error {
	_, err := n.Ctl("clear_policy", name)
	return err
}

// Stop stops the node (the Erlang VM gets SIGTERM, as rabbitmqctl stop
// would do) and waits up to 30 s, then kills it. The data directory stays
// (Restart reuses it).
func (n *Node) Stop() {
	if n.cmd == nil {
		return
	}
	n.stdinClose()
	select {
	case <-n.exit:
	case <-time.After(30 * time.Second):
		n.Kill()
	}
	n.cmd = nil
}

// Kill kills the node's VM and shell by PID at once (SIGKILL: a crash).
func (n *Node) Kill() {
	if n.cmd == nil {
		return
	}
	if b, err := os.ReadFile(filepath.Join(n.opts.Dir, "pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	_ = n.cmd.Process.Kill()
	<-n.exit
	n.cmd = nil
}

// Restart starts a stopped node again on the same ports and data
// directory (a cluster member rejoins its cluster).
func (n *Node) Restart(ctx context.Context) error {
	if n.cmd != nil {
		return fmt.Errorf("brokernode: %s is running", n.Name)
	}
	if err := n.spawn(); err != nil {
		return err
	}
	return n.wait(ctx)
}

func freePort() (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !Shared(p) && p != SharedPort+20000 {
			return p, nil
		}
	}
	return 0, errors.New("brokernode: no free port")
}
