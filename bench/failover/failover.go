// Package failover proves that Borda rides through the loss of a RabbitMQ
// cluster node (issue 23, item 6): `borda serve` and `borda forward` run
// against a private three-node cluster (internal/brokernode) under a
// steady open-loop webhook load, and each scenario stops one node
// mid-stream:
//
//   - connected: the node `borda serve`'s publishing connection is on;
//   - leader: the node that leads the forward queue (a quorum queue), moved
//     first, when it can be, off the nodes serve and forward are connected
//     to, so the leader change is seen alone.
//
// At the end of a scenario (the node restarted, the load stopped) it
// reconciles what the legacy stand-in received against the ingress's
// answers: every 200 PUBLISHED_CONFIRMED must reach the stand-in exactly
// once (by Idempotency-Key), nothing may be dead-lettered, every other
// answer must be a 503 (never a 200 without a confirm, never a 5xx of
// another kind), and both processes must still be the ones started (no
// restart). It measures the longest run without a 200 and the longest
// wait of a confirmed event for its POST from the stop: how long serve and
// forward took to resume.
//
// bench/cmd/failover runs it at 200 events/s; e2e runs a short version.
package failover

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/bench/harness"
	"github.com/olp-edu/borda/bench/webhookload"
	"github.com/olp-edu/borda/internal/brokernode"
)

// Config is one run.
type Config struct {
	Borda    string // the borda binary
	Dir      string // working directory (configs, logs, node data)
	RedisURL string // the forwarder's idempotency store (keys under a unique prefix)
	// Rate is the webhook load in events per second (open loop).
	Rate int
	// Before is the load before the stop, Down how long the node stays
	// down under load, After the load once it is back.
	Before, Down, After time.Duration
	// Settle bounds the wait, after the load, for every confirmed event to
	// reach the stand-in.
	Settle time.Duration
	// ClusterBase and ClusterPrefix place the cluster (node i: AMQP
	// ClusterBase+i, distribution ClusterBase+10+i, name Prefix-i); 0 and
	// "": free ports, "borda-failover".
	ClusterBase   int
	ClusterPrefix string
	// Ports for serve's listeners, forward's admin and the stand-in
	// ("": free loopback ports).
	Listen, Admin, ForwardAdmin, Legacy string
	// Scenarios to run, in order ("connected", "leader"); nil: both.
	Scenarios []string
	// Log receives progress lines (nil: discarded).
	Log io.Writer
}

// Scenario is the reconciliation of one node stop.
type Scenario struct {
	Name          string
	Stopped       string // the node stopped
	ServeNode     string // serve's publishing connection's node, before the stop
	ForwardNodes  []string
	LeaderBefore  string
	LeaderAfter   string
	LeaderMoved   bool // the leader was moved off serve's and forward's nodes first
	Sent          int
	Confirmed     int            // 200 PUBLISHED_CONFIRMED
	Unavailable   int            // 503
	Other         map[string]int // anything else (a failure)
	Reasons       map[string]int // 503 reasons
	Lost          int            // confirmed, never POSTed (nor dead-lettered)
	Duplicates    int            // POSTs beyond the first per key answered 200
	Unconfirmed   int            // answered 503, POSTed anyway (stored; allowed)
	Strangers     int            // POSTs of keys never sent
	DeadLettered  int
	ServeResume   time.Duration // from the stop to the first 200 answered after the last 503 (0: no 503)
	NoConfirmFor  time.Duration // longest run without a 200 answered, from the stop (includes the load generator's own stalls)
	SlowestAnswer time.Duration // the longest request → answer from the stop
	SlowestAt     time.Duration // when (from the stop) that request was sent
	ForwardResume time.Duration // longest wait, confirm → POST, of an event confirmed from the stop
	First503      time.Duration // first and last 503 answer from the stop (-1: none)
	Last503       time.Duration
	Restarted     bool // serve or forward exited (a failure)
}

// Failures lists what broke the scenario's invariants.
func (s Scenario) Failures() []string {
	var f []string
	if s.Lost > 0 {
		f = append(f, fmt.Sprintf("%d confirmed events never reached the legacy stand-in", s.Lost))
	}
	if s.Duplicates > 0 {
		f = append(f, fmt.Sprintf("%d duplicate POSTs", s.Duplicates))
	}
	if s.Strangers > 0 {
		f = append(f, fmt.Sprintf("%d POSTs of events never sent", s.Strangers))
	}
	if s.DeadLettered > 0 {
		f = append(f, fmt.Sprintf("%d dead letters", s.DeadLettered))
	}
	for k, n := range s.Other {
		f = append(f, fmt.Sprintf("%d answers %s (want only 200 PUBLISHED_CONFIRMED or 503)", n, k))
	}
	if s.Restarted {
		f = append(f, "borda serve or borda forward exited")
	}
	if s.Confirmed == 0 {
		f = append(f, "no event confirmed")
	}
	return f
}

// String is the scenario's one-paragraph summary.
func (s Scenario) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario %s: stopped %s (serve on %s, forward on %s, forward-queue leader %s → %s%s)\n",
		s.Name, s.Stopped, s.ServeNode, strings.Join(s.ForwardNodes, "+"), s.LeaderBefore, s.LeaderAfter,
		map[bool]string{true: ", moved off serve's and forward's nodes first"}[s.LeaderMoved])
	fmt.Fprintf(&b, "  sent %d, 200 %d, 503 %d %v, other %v\n", s.Sent, s.Confirmed, s.Unavailable, s.Reasons, s.Other)
	fmt.Fprintf(&b, "  lost %d, duplicates %d, dead-lettered %d, 503 but stored and forwarded %d, strangers %d\n",
		s.Lost, s.Duplicates, s.DeadLettered, s.Unconfirmed, s.Strangers)
	w503 := "none"
	if s.First503 >= 0 {
		w503 = fmt.Sprintf("%s … %s after the stop", s.First503.Round(time.Millisecond), s.Last503.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "  serve: resumed (first 200 after the last 503) %s after the stop; 503s %s; longest run without a 200 %s; slowest answer %s (sent %s after the stop)\n",
		s.ServeResume.Round(time.Millisecond), w503, s.NoConfirmFor.Round(time.Millisecond), s.SlowestAnswer.Round(time.Millisecond), s.SlowestAt.Round(time.Millisecond))
	fmt.Fprintf(&b, "  forward: longest confirm → POST wait of an event confirmed from the stop %s\n", s.ForwardResume.Round(time.Millisecond))
	fmt.Fprintf(&b, "  processes restarted: %t\n", s.Restarted)
	return b.String()
}

// Run starts the cluster, the stand-in, serve and forward, runs the
// scenarios and stops everything it started. An error means the run could
// not be made (the cluster did not start, …); broken invariants are in
// the scenarios' Failures.
func Run(ctx context.Context, cfg Config) ([]Scenario, error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.ClusterPrefix == "" {
		cfg.ClusterPrefix = "borda-failover"
	}
	if cfg.Scenarios == nil {
		cfg.Scenarios = []string{"connected", "leader"}
	}
	logf := func(format string, a ...any) {
		fmt.Fprintf(cfg.Log, "%s failover: "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05.000")}, a...)...)
	}
	logf("starting a three-node cluster %s-1..3", cfg.ClusterPrefix)
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	cluster, err := brokernode.StartClusterAt(cctx, filepath.Join(cfg.Dir, "cluster"), cfg.ClusterPrefix, 3, 256, cfg.ClusterBase)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("starting the cluster: %w", err)
	}
	defer cluster.Stop()
	r := &run{cfg: cfg, cluster: cluster, logf: logf, id: fmt.Sprint(time.Now().UnixNano() % 1e9)}
	if err := r.start(ctx); err != nil {
		r.stop()
		return nil, err
	}
	defer r.stop()
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = harness.DeleteKeys(dctx, cfg.RedisURL, "olp-dev:failover"+r.id+":")
	}()
	var out []Scenario
	for i, name := range cfg.Scenarios {
		s, err := r.scenario(ctx, i, name)
		if err != nil {
			return out, fmt.Errorf("scenario %s: %w", name, err)
		}
		logf("%s", s.String())
		out = append(out, s)
	}
	return out, nil
}

type run struct {
	cfg     Config
	cluster *brokernode.Cluster
	logf    func(string, ...any)
	id      string

	queue, dlq string
	serveURL   string
	serve, fwd *proc
	legacy     *standIn
	legacySrv  *http.Server
}

// proc is a borda process this run started.
type proc struct {
	cmd  *exec.Cmd
	logs *lockedBuffer
	done chan struct{}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stopProc sends SIGTERM to the process this run started, then kills it
// (by PID) after 20 s.
func stopProc(p *proc) {
	if p == nil || p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func freeAddr(want string) (string, error) {
	if want != "" {
		return want, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func (r *run) start(ctx context.Context) error {
	var err error
	addrs := make([]string, 4)
	for i, want := range []string{r.cfg.Listen, r.cfg.Admin, r.cfg.ForwardAdmin, r.cfg.Legacy} {
		if addrs[i], err = freeAddr(want); err != nil {
			return err
		}
	}
	listen, admin, fwdAdmin, legacyAddr := addrs[0], addrs[1], addrs[2], addrs[3]
	r.legacy = newStandIn()
	ln, err := net.Listen("tcp", legacyAddr)
	if err != nil {
		return fmt.Errorf("legacy stand-in: %w", err)
	}
	r.legacySrv = &http.Server{Handler: r.legacy, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.legacySrv.Serve(ln) }()

	name := "bench-failover-" + r.id
	r.queue, r.dlq = name+"-forward-queue", name+"-dlq"
	// One source (the flat default, Evolution-style events: the
	// Idempotency-Key is the bare event id), quorum queues, no events
	// queue (the forward queue is the only one the key reaches), a short
	// retry rung, and a confirm timeout the ingress answers 503 after.
	config := fmt.Sprintf(`environment: development
listen: %q
admin_listen: %q
trusted_proxies: []
redis:
  url: %q
  key_prefix: "olp-dev:failover%s:"
telemetry:
  enabled: false
routes:
  - name: none
    upstream: "http://127.0.0.1:9"
webhook:
  path: %s
  exchange: %s.events
  routing_key: %s.legacy_forward
  queue_type: quorum
  confirm_timeout: 3s
forward:
  queue: %s
  dlq: %s
  events_queue: ""
  retry_delays: [1s]
  url: "http://%s/legacy"
`, listen, admin, r.cfg.RedisURL, r.id, harness.WebhookPath, name, name, r.queue, r.dlq, legacyAddr)
	path := filepath.Join(r.cfg.Dir, "borda.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		return err
	}
	env := append(cleanEnv(), "ENVIRONMENT=development", "BORDA_LOG_LEVEL=info",
		"AMQP_URL="+strings.Join(r.cluster.URLs(), ","),
		"WEBHOOK_TOKENS=failover-token-"+r.id, "LEGACY_WEBHOOK_HMAC_SECRET=failover-secret-"+r.id)
	spawn := func(args ...string) (*proc, error) {
		p := &proc{logs: &lockedBuffer{}, done: make(chan struct{})}
		f, err := os.Create(filepath.Join(r.cfg.Dir, args[0]+".log"))
		if err != nil {
			return nil, err
		}
		p.cmd = exec.Command(r.cfg.Borda, args...)
		w := io.MultiWriter(p.logs, f)
		p.cmd.Env, p.cmd.Stdout, p.cmd.Stderr = env, w, w
		if err := p.cmd.Start(); err != nil {
			return nil, err
		}
		go func() { _ = p.cmd.Wait(); f.Close(); close(p.done) }()
		return p, nil
	}
	if r.serve, err = spawn("serve", "--config", path); err != nil {
		return err
	}
	r.serveURL = "http://" + listen + harness.WebhookPath
	if err := waitOK(ctx, "http://"+listen+"/readyz/webhook", r.serve, 60*time.Second); err != nil {
		return fmt.Errorf("borda serve: %w; log tail: %s", err, tail(r.serve.logs.String(), 1500))
	}
	if r.fwd, err = spawn("forward", "--config", path, "--admin", fwdAdmin); err != nil {
		return err
	}
	if err := waitOK(ctx, "http://"+fwdAdmin+"/readyz", r.fwd, 60*time.Second); err != nil {
		return fmt.Errorf("borda forward: %w; log tail: %s", err, tail(r.fwd.logs.String(), 1500))
	}
	r.logf("serve pid %d and forward pid %d ready; AMQP_URL lists %d nodes", r.serve.cmd.Process.Pid, r.fwd.cmd.Process.Pid, len(r.cluster.Nodes))
	return nil
}

func (r *run) stop() {
	stopProc(r.fwd)
	stopProc(r.serve)
	if r.legacySrv != nil {
		_ = r.legacySrv.Close()
	}
}

// Logs returns the tails of serve's and forward's logs (for a failure).
func (r *run) logsTail() string {
	var b strings.Builder
	if r.serve != nil {
		fmt.Fprintf(&b, "--- borda serve ---\n%s\n", tail(r.serve.logs.String(), 3000))
	}
	if r.fwd != nil {
		fmt.Fprintf(&b, "--- borda forward ---\n%s\n", tail(r.fwd.logs.String(), 3000))
	}
	return b.String()
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func waitOK(ctx context.Context, url string, p *proc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if p.exited() {
			return errors.New("exited at start")
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s not 200 within %s", url, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cleanEnv drops the variables that would override the run's config.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "ENVIRONMENT", "REDIS_URL", "UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN", "AMQP_URL",
			"DATABASE_URL", "WEBHOOK_TOKENS", "LEGACY_WEBHOOK_URL", "LEGACY_WEBHOOK_HMAC_SECRET",
			"AUTH_JWT_SECRET", "AUTH_JWKS_URL", "BORDA_CONFIG", "ADMIN_PPROF_TOKEN", "ADMIN_TOKEN", "BORDA_LOG_LEVEL":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// where returns serve's publishing node, forward's nodes and the forward
// queue's leader, asked of node n.
func (r *run) where(n *brokernode.Node) (serve string, fwd []string, leader string, err error) {
	s, err := brokernode.ConnectionNodes(n, "borda-webhook-publisher/")
	if err != nil {
		return "", nil, "", err
	}
	if len(s) != 1 {
		out, _ := n.Ctl("list_connections", "-q", "--no-table-headers", "pid", "client_properties")
		return "", nil, "", fmt.Errorf("want one serve publishing connection, found %v in %s", s, tail(out, 2000))
	}
	f, err := brokernode.ConnectionNodes(n, "borda-forward")
	if err != nil {
		return "", nil, "", err
	}
	sort.Strings(f)
	leader, err = brokernode.QueueLeader(n, r.queue)
	return s[0], f, leader, err
}

// moveLeader moves the forward queue's leadership off the nodes in avoid,
// when it can: deleting the leader's member makes the others elect a
// leader among themselves, and adding it back restores three replicas. It
// tries a few times (the election is not ours to choose) and reports
// whether the leader ends up outside avoid.
func (r *run) moveLeader(avoid map[string]bool) (bool, error) {
	for try := 0; try < 4; try++ {
		n := r.cluster.Nodes[0]
		leader, err := brokernode.QueueLeader(n, r.queue)
		if err != nil {
			return false, err
		}
		if !avoid[leader] {
			return true, nil
		}
		ln := r.cluster.ByName(leader)
		if ln == nil {
			return false, fmt.Errorf("leader %s is not a cluster node", leader)
		}
		if _, err := ln.Queues("delete_member", r.queue, leader); err != nil {
			return false, err
		}
		if _, err := ln.Queues("add_member", r.queue, leader); err != nil {
			return false, err
		}
		if err := r.waitMembers(n, 3, 30*time.Second); err != nil {
			return false, err
		}
	}
	return false, nil
}

// waitMembers waits until the forward queue has want online members.
func (r *run) waitMembers(n *brokernode.Node, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		out, err := n.Ctl("list_queues", "-q", "--no-table-headers", "name", "online")
		if err == nil {
			for _, line := range strings.Split(out, "\n") {
				f := strings.Fields(line)
				if len(f) >= 1 && f[0] == r.queue && strings.Count(line, "@localhost") >= want {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the forward queue has not %d online members within %s: %s %v", want, timeout, out, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// answer is one webhook request's outcome.
type answer struct {
	key   string
	class string // "200" | "503" | other
	why   string
	sent  time.Time
	at    time.Time
}

func (r *run) scenario(ctx context.Context, index int, name string) (Scenario, error) {
	s := Scenario{Name: name, Other: map[string]int{}, Reasons: map[string]int{}, First503: -1, Last503: -1}
	n0 := r.cluster.Nodes[0]
	if err := r.waitMembers(n0, 3, 60*time.Second); err != nil {
		return s, err
	}
	serveNode, fwdNodes, leader, err := r.where(n0)
	if err != nil {
		return s, err
	}
	if name == "leader" {
		avoid := map[string]bool{serveNode: true}
		for _, f := range fwdNodes {
			avoid[f] = true
		}
		if len(avoid) == 3 { // every node carries a connection: keep serve's off it at least
			avoid = map[string]bool{serveNode: true}
		}
		moved, err := r.moveLeader(avoid)
		if err != nil {
			return s, fmt.Errorf("moving the leader: %w", err)
		}
		s.LeaderMoved = moved && avoid[leader] // it had to move, and did
		if serveNode, fwdNodes, leader, err = r.where(n0); err != nil {
			return s, err
		}
	}
	s.ServeNode, s.ForwardNodes, s.LeaderBefore = serveNode, fwdNodes, leader
	var target *brokernode.Node
	switch name {
	case "connected":
		target = r.cluster.ByName(serveNode)
	case "leader":
		target = r.cluster.ByName(leader)
	default:
		return s, fmt.Errorf("unknown scenario %q", name)
	}
	if target == nil {
		return s, fmt.Errorf("node %s/%s not in the cluster", serveNode, leader)
	}
	s.Stopped = target.Name
	r.logf("scenario %s: serve on %s, forward on %v, leader %s; stopping %s after %s", name, serveNode, fwdNodes, leader, target.Name, r.cfg.Before)

	run := fmt.Sprintf("fo%s-%d", r.id, index)
	var (
		mu      sync.Mutex
		answers []answer
		wg      sync.WaitGroup
	)
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 512}}
	req := webhookload.Request(r.serveURL, "failover-token-"+r.id, run)
	total := r.cfg.Before + r.cfg.Down + r.cfg.After
	var seq atomic.Int64
	loadDone := make(chan struct{})
	start := time.Now()
	var loadEnd time.Time // written before loadDone is closed
	go func() {
		defer close(loadDone)
		defer func() { loadEnd = time.Now() }()
		interval := time.Second / time.Duration(r.cfg.Rate)
		next := time.Now()
		for time.Since(start) < total && ctx.Err() == nil {
			i := seq.Add(1)
			wg.Add(1)
			go func(i int64) {
				defer wg.Done()
				a := answer{key: fmt.Sprintf("%s-%d", run, i), sent: time.Now()}
				hr, err := req(ctx, i)
				if err == nil {
					var resp *http.Response
					if resp, err = client.Do(hr); err == nil {
						body, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						switch resp.StatusCode {
						case 200:
							if webhookload.Classify(200, body) == webhookload.Confirmed {
								a.class = "200"
							} else {
								a.class = "200 " + webhookload.Classify(200, body)
							}
						case 503:
							a.class, a.why = "503", webhookload.ClassifyReason(503, body)
						default:
							a.class = webhookload.ClassifyReason(resp.StatusCode, body)
						}
					}
				}
				if err != nil {
					a.class = "transport error"
					a.why = err.Error()
				}
				a.at = time.Now()
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
			}(i)
			next = next.Add(interval)
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
		}
	}()

	select {
	case <-time.After(r.cfg.Before):
	case <-ctx.Done():
		return s, ctx.Err()
	}
	stoppedAt := time.Now()
	r.logf("scenario %s: stopping %s", name, target.Name)
	target.Stop()
	r.logf("scenario %s: %s stopped in %s", name, target.Name, time.Since(stoppedAt).Round(time.Millisecond))
	// No rabbitmqctl while the node is down: each run boots an Erlang VM
	// (seconds of CPU on a two-core machine), which would be measured.
	select {
	case <-time.After(time.Until(stoppedAt.Add(r.cfg.Down))):
	case <-ctx.Done():
		return s, ctx.Err()
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err = target.Restart(rctx)
	cancel()
	if err != nil {
		return s, fmt.Errorf("restarting %s: %w", target.Name, err)
	}
	r.logf("scenario %s: %s back after %s", name, target.Name, time.Since(stoppedAt).Round(time.Millisecond))
	<-loadDone
	wg.Wait()

	confirmed := map[string]time.Time{}
	sentKeys := map[string]bool{}
	var okTimes []time.Time
	for _, a := range answers {
		if a.at.After(stoppedAt) && a.at.Sub(a.sent) > s.SlowestAnswer {
			s.SlowestAnswer, s.SlowestAt = a.at.Sub(a.sent), a.sent.Sub(stoppedAt)
		}
		s.Sent++
		sentKeys[a.key] = true
		switch a.class {
		case "200":
			s.Confirmed++
			confirmed[a.key] = a.at
			okTimes = append(okTimes, a.at)
		case "503":
			s.Unavailable++
			_, why, _ := strings.Cut(a.why, "/")
			s.Reasons[why]++
			if a.at.After(stoppedAt) {
				d := a.at.Sub(stoppedAt)
				if s.First503 < 0 || d < s.First503 {
					s.First503 = d
				}
				s.Last503 = max(s.Last503, d)
			}
		default:
			s.Other[a.class]++
		}
	}
	// Wait for every confirmed event to be POSTed (or the deadline).
	deadline := time.Now().Add(r.cfg.Settle)
	for {
		missing := 0
		for k := range confirmed {
			if _, ok := r.legacy.first(k); !ok {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A quiet moment, so a late duplicate would show.
	time.Sleep(time.Second)
	posts := r.legacy.snapshot()
	for k, at := range confirmed {
		p, ok := posts[k]
		if !ok {
			s.Lost++
			continue
		}
		s.Duplicates += p.ok - 1
		if at.After(stoppedAt) || at.Equal(stoppedAt) {
			s.ForwardResume = max(s.ForwardResume, p.firstAt.Sub(at))
		}
	}
	for k, p := range posts {
		if !strings.HasPrefix(k, run+"-") {
			continue
		}
		if !sentKeys[k] {
			s.Strangers++
		} else if _, ok := confirmed[k]; !ok && p.ok > 0 {
			s.Unconfirmed++
			s.Duplicates += p.ok - 1
		}
	}
	// The longest run without a 200, from the stop to the end of the load.
	sort.Slice(okTimes, func(i, j int) bool { return okTimes[i].Before(okTimes[j]) })
	prev := stoppedAt
	for _, t := range okTimes {
		if t.Before(stoppedAt) {
			continue
		}
		s.NoConfirmFor = max(s.NoConfirmFor, t.Sub(prev))
		prev = t
	}
	s.NoConfirmFor = max(s.NoConfirmFor, loadEnd.Sub(prev)) // no 200 until the load ended counts whole
	if s.Last503 >= 0 {
		s.ServeResume = loadEnd.Sub(stoppedAt) // never resumed within the load, unless a 200 follows
		for _, t := range okTimes {
			if t.Sub(stoppedAt) > s.Last503 {
				s.ServeResume = t.Sub(stoppedAt)
				break
			}
		}
	}
	if d, err := r.depth(r.dlq); err == nil {
		s.DeadLettered = d
	} else {
		return s, err
	}
	s.Restarted = r.serve.exited() || r.fwd.exited()
	_, _, s.LeaderAfter, _ = r.where(n0)
	if len(s.Failures()) > 0 {
		r.logf("scenario %s failed:\n%s", name, r.logsTail())
	}
	return s, nil
}

// depth counts a queue's messages (a passive declare on node 1).
func (r *run) depth(queue string) (int, error) {
	conn, err := amqp.Dial(r.cluster.Nodes[0].URL)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return 0, err
	}
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
	if err != nil {
		return 0, err
	}
	return q.Messages, nil
}

// standIn is the legacy endpoint: it answers 200 to every POST and
// records, per Idempotency-Key, how many it took and when the first came.
type standIn struct {
	mu    sync.Mutex
	posts map[string]*post
}

type post struct {
	ok      int
	firstAt time.Time
}

func newStandIn() *standIn { return &standIn{posts: map[string]*post{}} }

func (l *standIn) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	// The flat source's Idempotency-Key is the event id, which for an
	// Evolution-style event is instance:event:data.key.id; the run's keys
	// are the data.key.id part.
	key := req.Header.Get("Idempotency-Key")
	if i := strings.LastIndexByte(key, ':'); i >= 0 {
		key = key[i+1:]
	}
	l.mu.Lock()
	p := l.posts[key]
	if p == nil {
		p = &post{firstAt: time.Now()}
		l.posts[key] = p
	}
	p.ok++
	l.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (l *standIn) first(key string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.posts[key]
	if p == nil {
		return time.Time{}, false
	}
	return p.firstAt, true
}

func (l *standIn) snapshot() map[string]post {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]post, len(l.posts))
	for k, p := range l.posts {
		out[k] = *p
	}
	return out
}
