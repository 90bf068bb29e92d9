// Command chaos runs the whole webhook pipeline (two `borda serve`, two
// `borda forward`, `borda consume-events`) under steady webhook load while it
// injects scheduled faults, then reconciles every acknowledged event
// (issue 23, item 7):
//
//	go run ./bench/cmd/chaos                      # 6 minutes: 8 s faults, 12 s gaps, cycles repeated
//	go run ./bench/cmd/chaos -ci                  # one cycle, 2 s faults: about a minute and a half, for CI
//	go run ./bench/cmd/chaos -duration 10m -rate 60 -port-base 24000
//
// Everything it changes is its own: a private RabbitMQ node
// (internal/brokernode, named borda-chaos-<pid>, so it meets neither
// scripts/rabbitmq-cluster.sh's borda-cluster-N nor another run's node), a
// private redis-server with an append-only file (so a restart is a restart,
// not a wipe), a database of its own (borda_chaos_<id>) on the local
// PostgreSQL reached through a fault proxy (the shared server is never
// stopped: the proxy closing every connection and refusing new ones is
// what a stopped server looks like to a client), and an in-process legacy
// stand-in that checks both HMAC signatures independently (its own code,
// not webhook/forward's) and answers 200, 503 in bursts, or hangs. Every
// borda process reaches the broker through a second fault proxy: the
// network cut.
//
// Load: -rate events per second, sent alternately to the two serve
// processes. Every fourth event is also sent, byte for byte (so with the
// same id), to a second source (zapster): the two are distinct events
// (issue 23, item 1). Every tenth is a connection.update for one of eight
// instances, which consume-events writes to PostgreSQL. One in fifty carries
// "chaos_reject": true, which the legacy stand-in refuses for good (422),
// so the dead-letter path runs under the faults too. A sender that gets
// anything but a 200 sends the same event again to the other serve process
// (backoff 250 ms × attempt, at most 2 s), as a provider retries, until it
// gets a 200: so a 503 whose publish did reach the queue leaves two copies
// of one event, which the forwarder must deliver once.
//
// Faults, each held -fault long, then lifted; the run waits (at most
// -recover-bound) until the pipeline works again and records how long that
// took, then leaves -gap of calm before the next:
//
//	broker-node-stop   the private node stopped (SIGTERM to its VM), then started again
//	redis-restart      redis-server stopped by PID, then started on the same port and file
//	postgres-stop      every PostgreSQL connection of consume-events cut, new ones refused
//	legacy-5xx-bursts  the legacy endpoint answers 503 for 700 ms out of every second
//	legacy-hang        the legacy endpoint holds every POST past forward.timeout
//	network-cut        every broker connection of the five borda processes cut, new ones refused
//
// At the end the load stops, the senders finish (each event gets its 200),
// the queues drain, and the run reconciles per (source, id): each event
// answered 200 must be exactly one accepted legacy POST or exactly one
// dead letter (never both, never two); nothing else may have reached
// legacy (no id the run did not send, no bad signature); the events queue
// is drained and whatsapp_instances holds, for every instance, the state
// of its latest acknowledged connection.update. 503s are allowed and
// counted. Exit status 1 when any check fails (lost, duplicated,
// unexpected, bad signature, a fault not recovered within -recover-bound).
//
// Ports: every address it binds is free when asked (loopback), or, with
// -port-base N, taken in turn from N upwards.
package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/bench/harness"
	"github.com/olp-edu/borda/bench/loadgen"
	"github.com/olp-edu/borda/internal/brokernode"
	"github.com/olp-edu/borda/webhook/envelope"
)

type options struct {
	duration, fault, gap, warmup, recoverBound time.Duration
	rate, portBase                             int
	borda, pgURL                               string
	ci                                         bool
}

func main() {
	var o options
	flag.BoolVar(&o.ci, "ci", false, "short run for CI: one cycle of the six faults, 2 s each")
	flag.DurationVar(&o.duration, "duration", 6*time.Minute, "how long to inject faults (cycles repeat until then)")
	flag.DurationVar(&o.fault, "fault", 8*time.Second, "how long each fault is held")
	flag.DurationVar(&o.gap, "gap", 12*time.Second, "calm after each fault recovered")
	flag.DurationVar(&o.warmup, "warmup", 10*time.Second, "load before the first fault")
	flag.DurationVar(&o.recoverBound, "recover-bound", 90*time.Second, "a fault not recovered within this fails the run")
	flag.IntVar(&o.rate, "rate", 40, "events per second (plus the zapster copies, one in four)")
	flag.IntVar(&o.portBase, "port-base", 0, "take every bound port from here upwards (0: free ephemeral ports)")
	flag.StringVar(&o.borda, "borda", "", "borda binary (default: go build ./cmd/borda)")
	pgDefault := "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	if v := os.Getenv("BORDA_TEST_DATABASE_URL"); v != "" {
		pgDefault = v
	}
	flag.StringVar(&o.pgURL, "postgres", pgDefault, "PostgreSQL where the run creates (and drops) its own database (default $BORDA_TEST_DATABASE_URL, else the local server)")
	flag.Parse()
	if o.ci {
		o.duration, o.fault, o.gap, o.warmup, o.rate = 0, 2*time.Second, time.Second, 2*time.Second, 25
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, o))
}

// ports hands out the addresses the run binds.
type ports struct{ next int }

func (p *ports) addr() string {
	if p.next == 0 {
		a, _ := harness.FreeAddr()
		return a
	}
	for {
		a := fmt.Sprintf("127.0.0.1:%d", p.next)
		p.next++
		if l, err := net.Listen("tcp", a); err == nil {
			l.Close()
			return a
		}
	}
}

func (p *ports) port() int { return harness.Port(p.addr()) }

const (
	flatSource   = "whatsapp"
	secondSource = "zapster"
	instances    = 8
)

func run(ctx context.Context, o options) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "chaos:", err); return 1 }
	dir, err := os.MkdirTemp("", "borda-bench-chaos-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	bordaBin := o.borda
	if bordaBin == "" {
		root, err := harness.ModuleRoot()
		if err != nil {
			return fail(err)
		}
		if bordaBin, err = harness.Build(ctx, root, dir, "./cmd/borda"); err != nil {
			return fail(err)
		}
	}
	pp := &ports{next: o.portBase}
	id := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	name := "chaos-" + id

	// Redis: private, append-only, fsync on every write.
	redisAddr := pp.addr()
	startRedis := func(n int) (*harness.Process, error) {
		p, err := harness.Start(dir, fmt.Sprintf("redis-%d", n), "", nil, "redis-server",
			"--bind", "127.0.0.1", "--port", fmt.Sprint(harness.Port(redisAddr)), "--save", "",
			"--appendonly", "yes", "--appendfsync", "always", "--dir", dir, "--appendfilename", "chaos.aof")
		if err != nil {
			return nil, err
		}
		if err := harness.WaitTCP(ctx, redisAddr, 10*time.Second); err != nil {
			p.Stop(time.Second)
			return nil, fmt.Errorf("redis-server: %w", err)
		}
		return p, nil
	}
	redisProc, err := startRedis(1)
	if err != nil {
		return fail(err)
	}
	defer func() { redisProc.Stop(2 * time.Second) }()
	redisURL := "redis://" + redisAddr + "/0"

	// RabbitMQ: a private node.
	startCtx, cancelStart := context.WithTimeout(ctx, 120*time.Second)
	node, err := brokernode.Start(startCtx, brokernode.Options{Dir: filepath.Join(dir, "rabbitmq"),
		Name: fmt.Sprintf("borda-chaos-%d", os.Getpid()), Port: pp.port(), DistPort: pp.port(), MemoryMiB: 512})
	cancelStart()
	if err != nil {
		return fail(fmt.Errorf("private RabbitMQ node: %w", err))
	}
	defer node.Stop()
	brokerAddr := fmt.Sprintf("127.0.0.1:%d", node.Port)
	amqpProxy, err := harness.NewFaultProxyOn(pp.addr(), brokerAddr)
	if err != nil {
		return fail(err)
	}
	defer amqpProxy.Close()
	proxiedAMQP := strings.Replace(node.URL, brokerAddr, amqpProxy.Addr(), 1)

	// PostgreSQL: a database of our own, reached through a fault proxy.
	db, dropDB, err := createDatabase(ctx, o.pgURL, "borda_chaos_"+id)
	if err != nil {
		return fail(err)
	}
	defer dropDB()
	pgProxy, err := harness.NewFaultProxyOn(pp.addr(), db.Host)
	if err != nil {
		return fail(err)
	}
	defer pgProxy.Close()
	proxiedDB := strings.Replace(db.URL, db.Host, pgProxy.Addr(), 1)

	// The legacy stand-in.
	secret := "chaos-hmac-" + id
	leg := newLegacy([]byte(secret))
	legAddr := pp.addr()
	legLn, err := net.Listen("tcp", legAddr)
	if err != nil {
		return fail(err)
	}
	legSrv := &http.Server{Handler: leg, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = legSrv.Serve(legLn) }()
	defer legSrv.Close()

	top := topologyNames{name: name}
	tokens := [2]string{"chaos-token-" + id, "chaos-zapster-" + id}
	cfg := filepath.Join(dir, "borda.yaml")
	if err := os.WriteFile(cfg, []byte(configYAML(top, "http://"+legAddr+"/legacy")), 0o644); err != nil {
		return fail(err)
	}
	env := []string{"ENVIRONMENT=development", "BORDA_LOG_LEVEL=warn", "UPSTASH_REDIS_REST_URL=", "UPSTASH_REDIS_REST_TOKEN=",
		"REDIS_URL=" + redisURL, "AMQP_URL=" + proxiedAMQP, "WEBHOOK_TOKENS=" + tokens[0], "CHAOS_ZAPSTER_TOKENS=" + tokens[1],
		"LEGACY_WEBHOOK_HMAC_SECRET=" + secret, "DATABASE_URL="}
	migrate := runOnce(ctx, bordaBin, append(env, "DATABASE_URL="+db.URL), "migrate", "--config", cfg)
	if migrate != nil {
		return fail(fmt.Errorf("borda migrate: %w", migrate))
	}

	var procs []*harness.Process
	defer func() {
		for _, p := range procs {
			p.Stop(15 * time.Second)
		}
	}()
	var serveURLs [2]string
	var readyURLs, forwardAdmins []string
	for i := range 2 {
		listen, admin := pp.addr(), pp.addr()
		c := filepath.Join(dir, fmt.Sprintf("serve-%d.yaml", i+1))
		body := fmt.Sprintf("listen: %q\nadmin_listen: %q\n", listen, admin) + configYAML(top, "http://"+legAddr+"/legacy")
		if err := os.WriteFile(c, []byte(body), 0o644); err != nil {
			return fail(err)
		}
		p, err := harness.Start(dir, fmt.Sprintf("serve-%d", i+1), "", env, bordaBin, "serve", "--config", c)
		if err != nil {
			return fail(err)
		}
		procs = append(procs, p)
		serveURLs[i] = "http://" + listen
		readyURLs = append(readyURLs, "http://"+listen+"/readyz")
	}
	for i := range 2 {
		admin := pp.addr()
		p, err := harness.Start(dir, fmt.Sprintf("forward-%d", i+1), "", env, bordaBin, "forward", "--config", cfg, "--admin-listen", admin)
		if err != nil {
			return fail(err)
		}
		procs = append(procs, p)
		readyURLs = append(readyURLs, "http://"+admin+"/readyz")
		forwardAdmins = append(forwardAdmins, "http://"+admin)
	}
	ceAdmin := pp.addr()
	ce, err := harness.Start(dir, "consume-events", "", append(env, "DATABASE_URL="+proxiedDB), bordaBin, "consume-events", "--config", cfg, "--admin", ceAdmin)
	if err != nil {
		return fail(err)
	}
	procs = append(procs, ce)
	readyURLs = append(readyURLs, "http://"+ceAdmin+"/readyz")
	for i, u := range readyURLs {
		if err := loadgen.WaitReady(ctx, u, 60*time.Second); err != nil {
			return fail(fmt.Errorf("%s not ready on %s: %w; log tail: %s", procs[i].Name, u, err, strings.TrimSpace(procs[i].Tail(800))))
		}
	}
	fmt.Printf("machine: %s\nchaos: %d events/s (+1 in 4 copied to %s) to 2 serve, 2 forward, consume-events; faults %s each, gaps %s, recovery bound %s\n",
		harness.Machine(), o.rate, secondSource, o.fault, o.gap, o.recoverBound)
	fmt.Printf("  broker %s (node %s) via %s; redis-server pid %d on %s (appendonly); PostgreSQL database %s via %s; legacy on %s\n\n",
		brokerAddr, node.Name, amqpProxy.Addr(), redisProc.PID(), redisAddr, db.Name, pgProxy.Addr(), legAddr)

	// Load.
	snd := newSender(serveURLs, tokens, id)
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	go func() { snd.run(loadCtx, o.rate); close(loadDone) }()

	// Faults.
	restartNode := func() error {
		c, cancel := context.WithTimeout(ctx, 120*time.Second)
		defer cancel()
		return node.Restart(c)
	}
	redisN := 1
	faults := []fault{
		{name: "broker-node-stop", ingress: true, apply: func() error { node.Stop(); return nil }, clear: restartNode},
		{name: "redis-restart", apply: func() error { redisProc.Stop(5 * time.Second); return nil }, clear: func() error {
			redisN++
			p, err := startRedis(redisN)
			if err == nil {
				redisProc = p
			}
			return err
		}},
		{name: "postgres-stop", consumer: true, apply: func() error { pgProxy.Cut(); return nil }, clear: func() error { pgProxy.Restore(); return nil }},
		{name: "legacy-5xx-bursts", apply: func() error { leg.bursts(true); return nil }, clear: func() error { leg.bursts(false); return nil }},
		{name: "legacy-hang", apply: func() error { leg.setMode(modeHang); return nil }, clear: func() error { leg.setMode(modeOK); return nil }},
		{name: "network-cut", ingress: true, apply: func() error { amqpProxy.Cut(); return nil }, clear: func() error { amqpProxy.Restore(); return nil }},
	}
	probe := recoveryProbe{snd: snd, leg: leg, amqpURL: node.URL, eventsQueue: top.eventsQueue()}
	var records []faultRecord
	ok := true
	sleepCtx(ctx, o.warmup)
	start := time.Now()
	for cycle := 1; ctx.Err() == nil; cycle++ {
		for _, f := range faults {
			if ctx.Err() != nil {
				break
			}
			r, err := f.inject(ctx, o.fault, o.recoverBound, probe)
			if err != nil {
				fmt.Printf("FAIL: %s: %v\n", f.name, err)
				ok = false
			}
			r.cycle = cycle
			records = append(records, r)
			fmt.Println(r.line())
			if r.recovered < 0 {
				ok = false
			}
			sleepCtx(ctx, o.gap)
		}
		if time.Since(start) >= o.duration {
			break
		}
	}
	if ctx.Err() != nil {
		stopLoad()
		return 1
	}
	faultTime := time.Since(start)

	// Drain: stop new events, let every sender get its 200, then let the
	// queues empty.
	stopLoad()
	<-loadDone
	fmt.Printf("\nload stopped after %s of faults; waiting for the senders and the queues\n", faultTime.Round(time.Second))
	drainStart := time.Now()
	if err := snd.wait(ctx, 120*time.Second); err != nil {
		fmt.Println("FAIL:", err)
		ok = false
	}
	queues := append([]string{top.forwardQueue()}, top.retryQueues()...)
	if err := waitDrained(ctx, node.URL, queues, top.eventsQueue(), leg, 180*time.Second); err != nil {
		fmt.Println("FAIL:", err)
		ok = false
	}
	fmt.Printf("drained in %s\n", time.Since(drainStart).Round(100*time.Millisecond))
	dead, err := readDLQ(node.URL, top.dlq())
	if err != nil {
		fmt.Println("FAIL: reading the DLQ:", err)
		ok = false
	}
	rec := reconcile(snd.ledger(), leg.ledger(), dead)
	fmt.Print(rec.report(snd, leg))
	if !rec.ok() || !leg.clean() {
		ok = false
	}
	fmt.Printf("  forwarders: %s\n", forwarderCounts(forwardAdmins))
	if !checkInstances(ctx, db.URL, id, snd.latestStates()) {
		ok = false
	}
	for _, p := range procs {
		if exited, err := p.Exited(); exited {
			fmt.Printf("FAIL: %s exited during the run (%v); log tail: %s\n", p.Name, err, strings.TrimSpace(p.Tail(600)))
			ok = false
		}
	}
	printSummary(records, o, faultTime)
	if ok {
		fmt.Println("chaos: PASS")
		return 0
	}
	fmt.Println("chaos: FAIL")
	return 1
}

// runOnce runs borda once (migrate) and returns its error with its output.
func runOnce(ctx context.Context, bin string, env []string, args ...string) error {
	c, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	p, err := harness.Start(os.TempDir(), "chaos-migrate-"+strconv.Itoa(os.Getpid()), "", env, append([]string{bin}, args...)...)
	if err != nil {
		return err
	}
	defer os.Remove(p.Log)
	for {
		if done, err := p.Exited(); done {
			if err != nil {
				return fmt.Errorf("%w: %s", err, strings.TrimSpace(p.Tail(600)))
			}
			return nil
		}
		if c.Err() != nil {
			p.Stop(time.Second)
			return c.Err()
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// topologyNames are the run's queue and exchange names (all on the
// private node).
type topologyNames struct{ name string }

func (t topologyNames) exchange() string     { return t.name + ".events" }
func (t topologyNames) routingKey() string   { return t.name + ".events.legacy_forward" }
func (t topologyNames) forwardQueue() string { return t.name + "-forward-queue" }
func (t topologyNames) eventsQueue() string  { return t.name + "-events-queue" }
func (t topologyNames) dlq() string          { return t.name + "-dlq" }

var retryDelays = []string{"1s", "2s", "4s"}

func (t topologyNames) retryQueues() []string {
	var out []string
	for _, d := range retryDelays {
		out = append(out, t.forwardQueue()+"-retry-"+d)
	}
	return out
}

// configYAML is the configuration every process shares (serve adds its
// listeners). The events queue keeps its default binding (the routing
// key's last word replaced by #): it gets every event, as in production.
func configYAML(t topologyNames, legacyURL string) string {
	return fmt.Sprintf(`environment: development
trusted_proxies: []
redis:
  key_prefix: "olp-dev:%[1]s:"
telemetry:
  enabled: false
routes:
  - name: unused
    path_prefix: "/api/"
    upstream: %[2]q
webhook:
  path: /webhooks/whatsapp
  exchange: %[3]s
  routing_key: %[4]s
  confirm_timeout: 3s
  queue_type: quorum
  sources:
    - name: %[5]s
      path: /webhooks/zapster
      tokens_env: CHAOS_ZAPSTER_TOKENS
forward:
  queue: %[6]s
  dlq: %[7]s
  events_queue: %[8]s
  prefetch: 20
  timeout: 2s
  retry_delays: [%[9]s]
  breaker: {failures: 10, open_for: 2s}
  url: %[2]q
`, t.name, legacyURL, t.exchange(), t.routingKey(), secondSource, t.forwardQueue(), t.dlq(), t.eventsQueue(), strings.Join(retryDelays, ", "))
}

// database is the run's own PostgreSQL database.
type database struct{ Name, URL, Host string }

func createDatabase(ctx context.Context, adminURL, name string) (database, func(), error) {
	cfg, err := pgx.ParseConfig(adminURL)
	if err != nil {
		return database{}, nil, err
	}
	c, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(c, cfg)
	if err != nil {
		return database{}, nil, fmt.Errorf("PostgreSQL at %s:%d: %w", cfg.Host, cfg.Port, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(c, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return database{}, nil, fmt.Errorf("creating database %s: %w", name, err)
	}
	host := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	url := fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", cfg.User, host, name)
	drop := func() {
		dc, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		conn, err := pgx.ConnectConfig(dc, cfg)
		if err != nil {
			fmt.Printf("WARNING: database %s not dropped: %v\n", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(dc, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			fmt.Printf("WARNING: database %s not dropped: %v\n", name, err)
		}
	}
	return database{Name: name, URL: url, Host: host}, drop, nil
}

// ---------------------------------------------------------------- legacy

const (
	modeOK int32 = iota
	mode5xx
	modeHang
)

// key names one event: its source and its id (the run's data.key.id).
type key struct{ source, id string }

func (k key) String() string { return k.source + "/" + k.id }

// legacy is the stand-in for the legacy endpoint. A POST counts as
// delivered only when it was answered 200.
type legacy struct {
	secret []byte
	mode   atomic.Int32
	stopB  chan struct{}

	lastAccept atomic.Int64 // unix nanoseconds
	mu         sync.Mutex
	accepted   map[key]int
	rejected   int64 // answered 503 (bursts)
	refused    int64 // answered 422: the events marked chaos_reject, dead-lettered at once
	hung       int64 // held until the forwarder gave up
	badSig     int64
	badSigLast string
	noID       int64
}

func newLegacy(secret []byte) *legacy {
	return &legacy{secret: secret, accepted: map[key]int{}}
}

func (l *legacy) setMode(m int32) { l.mode.Store(m) }

// bursts starts (or stops) answering 503 for 700 ms of every second.
func (l *legacy) bursts(on bool) {
	if !on {
		close(l.stopB)
		l.setMode(modeOK)
		return
	}
	l.stopB = make(chan struct{})
	stop := l.stopB
	go func() {
		for {
			l.setMode(mode5xx)
			select {
			case <-stop:
				return
			case <-time.After(700 * time.Millisecond):
			}
			l.setMode(modeOK)
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
}

func (l *legacy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	if why := verify(l.secret, r.Header, body, time.Now()); why != "" {
		l.mu.Lock()
		l.badSig++
		l.badSigLast = why
		l.mu.Unlock()
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var ev struct {
		Reject bool `json:"chaos_reject"`
		Data   struct {
			Key struct {
				ID string `json:"id"`
			} `json:"key"`
		} `json:"data"`
	}
	k := key{source: r.Header.Get("X-Borda-Source")}
	if json.Unmarshal(body, &ev) == nil {
		k.id = ev.Data.Key.ID
	}
	mode := l.mode.Load()
	if ev.Reject && mode == modeOK {
		l.mu.Lock()
		l.refused++
		l.mu.Unlock()
		l.lastAccept.Store(time.Now().UnixNano()) // the endpoint answers
		http.Error(w, "refused for good (chaos)", http.StatusUnprocessableEntity)
		return
	}
	switch mode {
	case mode5xx:
		l.mu.Lock()
		l.rejected++
		l.mu.Unlock()
		http.Error(w, "legacy down (chaos)", http.StatusServiceUnavailable)
		return
	case modeHang:
		for l.mode.Load() == modeHang && r.Context().Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		l.mu.Lock()
		l.hung++
		l.mu.Unlock()
		http.Error(w, "legacy hung (chaos)", http.StatusServiceUnavailable)
		return
	}
	l.mu.Lock()
	if k.id == "" || k.source == "" {
		l.noID++
	} else {
		l.accepted[k]++
	}
	l.mu.Unlock()
	l.lastAccept.Store(time.Now().UnixNano())
	w.WriteHeader(http.StatusOK)
}

// verify checks X-Webhook-Signature (v1: HMAC-SHA256 over timestamp "."
// body) and X-Webhook-Signature-V2 (over timestamp, Idempotency-Key,
// Content-Type and body, newline-separated), both sent by default, as a
// receiver would (docs/forwarder.md, "The POST"): written here from the
// documentation, not with webhook/forward's code. "" when both verify.
func verify(secret []byte, h http.Header, body []byte, now time.Time) string {
	ts := h.Get("X-Webhook-Timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "no timestamp"
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return "stale timestamp"
	}
	mac := func(parts ...[]byte) string {
		m := hmac.New(sha256.New, secret)
		for _, p := range parts {
			m.Write(p)
		}
		return hex.EncodeToString(m.Sum(nil))
	}
	v1 := mac([]byte(ts), []byte("."), body)
	if !hmac.Equal([]byte(v1), []byte(h.Get("X-Webhook-Signature"))) {
		return "v1 signature mismatch"
	}
	v2 := mac([]byte(ts), []byte("\n"), []byte(h.Get("Idempotency-Key")), []byte("\n"), []byte(h.Get("Content-Type")), []byte("\n"), body)
	if !hmac.Equal([]byte(v2), []byte(h.Get("X-Webhook-Signature-V2"))) {
		return "v2 signature mismatch"
	}
	return ""
}

// clean reports whether every POST legacy saw was signed right and
// named its event (source and id): anything else reached legacy that
// should not have.
func (l *legacy) clean() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.badSig == 0 && l.noID == 0
}

func (l *legacy) ledger() map[key]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[key]int, len(l.accepted))
	for k, v := range l.accepted {
		out[k] = v
	}
	return out
}

func (l *legacy) total() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, v := range l.accepted {
		n += int64(v)
	}
	return n
}

// ---------------------------------------------------------------- sender

// sent is what the sender knows of one event.
type sent struct {
	attempts int
	acked    bool
	status   string // the 200's JSON status
}

// sender sends every event until it is answered 200, alternating the two
// serve processes.
type sender struct {
	urls   [2]string
	tokens [2]string
	runID  string
	client *http.Client
	base   time.Time

	lastOK [2]atomic.Int64 // unix nanoseconds of the last 200 from each serve
	mu     sync.Mutex
	events map[key]*sent
	// answers by class over the whole run ("200 PUBLISHED_CONFIRMED",
	// "503 CONFIRM_TIMEOUT", "error", …)
	classes  map[string]int64
	states   map[string]stateAt // instance → latest acked connection.update
	inFlight sync.WaitGroup
	n503     atomic.Int64
	nOK      atomic.Int64
	nOther   atomic.Int64
	seq      atomic.Int64
}

type stateAt struct {
	state string
	at    time.Time
}

func newSender(urls [2]string, tokens [2]string, run string) *sender {
	return &sender{urls: urls, tokens: tokens, runID: run,
		client: loadgen.NewClient(128, 15*time.Second), base: time.Now().UTC().Add(-time.Hour).Truncate(time.Second),
		events: map[key]*sent{}, classes: map[string]int64{}, states: map[string]stateAt{}}
}

var states = []string{"connecting", "open", "close"}

// body is event seq's body, and for a connection.update its instance,
// state and date_time.
func (s *sender) body(seq int64) ([]byte, string, stateAt) {
	id := fmt.Sprintf("%s-%d", s.runID, seq)
	if seq%10 == 0 {
		inst := fmt.Sprintf("chaos-%s-%d", s.runID, (seq/10)%instances)
		st := stateAt{state: states[(seq/10/instances)%int64(len(states))], at: s.base.Add(time.Duration(seq) * time.Millisecond)}
		b := fmt.Sprintf(`{"event":"connection.update","instance":%q,"data":{"instance":%q,"state":%q,"statusReason":200,"key":{"id":%q}},"date_time":%q}`,
			inst, inst, st.state, id, st.at.Format("2006-01-02T15:04:05.000Z"))
		return []byte(b), inst, st
	}
	if seq%50 == 7 {
		// legacy refuses it for good (422): dead-lettered at once
		return []byte(fmt.Sprintf(`{"event":"messages.upsert","instance":"chaos","chaos_reject":true,"data":{"key":{"id":%q},"message":{"conversation":"olá %d"}}}`, id, seq)), "", stateAt{}
	}
	return []byte(fmt.Sprintf(`{"event":"messages.upsert","instance":"chaos","data":{"key":{"id":%q},"message":{"conversation":"olá %d"}}}`, id, seq)), "", stateAt{}
}

// run sends rate events per second until ctx ends.
func (s *sender) run(ctx context.Context, rate int) {
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		seq := s.seq.Add(1)
		body, inst, st := s.body(seq)
		id := fmt.Sprintf("%s-%d", s.runID, seq)
		s.start(key{flatSource, id}, seq, body, inst, st)
		if seq%4 == 0 {
			s.start(key{secondSource, id}, seq+1, body, "", stateAt{})
		}
	}
}

func (s *sender) start(k key, seq int64, body []byte, inst string, st stateAt) {
	s.mu.Lock()
	s.events[k] = &sent{}
	s.mu.Unlock()
	s.inFlight.Add(1)
	go func() {
		defer s.inFlight.Done()
		s.deliver(k, seq, body, inst, st)
	}()
}

// deliver sends one event until a 200 (a provider's retries: same body,
// the other serve process each time).
func (s *sender) deliver(k key, seq int64, body []byte, inst string, st stateAt) {
	path, token := "/webhooks/whatsapp", s.tokens[0]
	if k.source == secondSource {
		path, token = "/webhooks/zapster", s.tokens[1]
	}
	for attempt := 0; ; attempt++ {
		target := int(seq+int64(attempt)) % 2
		class, status := s.post(s.urls[target]+path, token, body)
		s.mu.Lock()
		e := s.events[k]
		e.attempts++
		s.classes[class]++
		if status == http.StatusOK {
			e.acked, e.status = true, class
			if inst != "" {
				if cur, ok := s.states[inst]; !ok || st.at.After(cur.at) {
					s.states[inst] = st
				}
			}
		}
		s.mu.Unlock()
		switch {
		case status == http.StatusOK:
			s.nOK.Add(1)
			s.lastOK[target].Store(time.Now().UnixNano())
			return
		case status == http.StatusServiceUnavailable:
			s.n503.Add(1)
		default:
			s.nOther.Add(1)
		}
		time.Sleep(min(time.Duration(attempt+1)*250*time.Millisecond, 2*time.Second))
	}
}

func (s *sender) post(url, token string, body []byte) (string, int) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "error", 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := s.client.Do(req)
	if err != nil {
		return "transport error", 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var v struct {
		Status string `json:"status"`
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(b, &v)
	class := fmt.Sprintf("%d %s", resp.StatusCode, v.Status)
	if v.Reason != "" {
		class += "/" + v.Reason
	}
	return class, resp.StatusCode
}

// wait waits (bounded) until every event started has its 200.
func (s *sender) wait(ctx context.Context, bound time.Duration) error {
	done := make(chan struct{})
	go func() { s.inFlight.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(bound):
		s.mu.Lock()
		defer s.mu.Unlock()
		n := 0
		for _, e := range s.events {
			if !e.acked {
				n++
			}
		}
		return fmt.Errorf("%d events still without a 200 after %s of calm", n, bound)
	}
}

func (s *sender) ledger() map[key]sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[key]sent, len(s.events))
	for k, e := range s.events {
		out[k] = *e
	}
	return out
}

func (s *sender) latestStates() map[string]stateAt {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]stateAt, len(s.states))
	for k, v := range s.states {
		out[k] = v
	}
	return out
}

// ---------------------------------------------------------------- faults

type fault struct {
	name string
	// ingress: the ingress answers 503 while it lasts and must answer
	// 200 again from both serve processes; consumer: consume-events must
	// catch up (its queue back under 20 ready messages).
	ingress, consumer bool
	apply, clear      func() error
}

type faultRecord struct {
	name                string
	cycle               int
	held                time.Duration
	clearTook           time.Duration // e.g. the node's restart
	recovered           time.Duration // from the fault lifted to working again; −1: not within the bound
	ingressAt, legacyAt time.Duration // when both serve processes answered 200 again, when legacy got a POST again
	consumerAt          time.Duration // when consume-events's queue was back under 20 ready messages
	ok200, s503, other  int64         // ingress answers from the fault's start to its recovery
	legacyAccepted      int64         // legacy 200s in that window
}

func (r faultRecord) line() string {
	rec := "NOT RECOVERED"
	if r.recovered >= 0 {
		rec = "recovered in " + r.recovered.Round(10*time.Millisecond).String()
	}
	extra := ""
	if r.clearTook > time.Second {
		extra = fmt.Sprintf(" (lifting took %s)", r.clearTook.Round(100*time.Millisecond))
	}
	at := func(d time.Duration) string {
		if d < 0 {
			return "-"
		}
		return d.Round(10 * time.Millisecond).String()
	}
	return fmt.Sprintf("cycle %d %-18s held %-5s %s%s [ingress %s, legacy %s, consumer %s] | ingress %5d × 200, %4d × 503, %d other | legacy accepted %d",
		r.cycle, r.name, r.held.Round(100*time.Millisecond), rec, extra, at(r.ingressAt), at(r.legacyAt), at(r.consumerAt),
		r.ok200, r.s503, r.other, r.legacyAccepted)
}

type recoveryProbe struct {
	snd         *sender
	leg         *legacy
	amqpURL     string
	eventsQueue string
}

// inject applies f, holds it, lifts it, and waits until the pipeline
// works again: a legacy 200 after the lift (every fault: the forwarders
// deliver again), both serve processes answering 200 after it (broker
// faults), consume-events's queue under 20 ready messages (PostgreSQL).
func (f fault) inject(ctx context.Context, hold, bound time.Duration, p recoveryProbe) (faultRecord, error) {
	r := faultRecord{name: f.name, recovered: -1}
	ok0, s0, o0, l0 := p.snd.nOK.Load(), p.snd.n503.Load(), p.snd.nOther.Load(), p.leg.total()
	t0 := time.Now()
	if err := f.apply(); err != nil {
		return r, fmt.Errorf("applying: %w", err)
	}
	sleepCtx(ctx, hold)
	r.held = time.Since(t0)
	t1 := time.Now()
	if err := f.clear(); err != nil {
		return r, fmt.Errorf("lifting: %w", err)
	}
	r.clearTook = time.Since(t1)
	// Recovery counts from the fault lifted (the node accepting AMQP
	// again, redis-server listening, the link restored), not from the
	// start of lifting it.
	t1 = time.Now()
	lifted := t1.UnixNano()
	r.ingressAt, r.legacyAt, r.consumerAt = -1, -1, -1
	for time.Since(t1) < bound && ctx.Err() == nil {
		if r.legacyAt < 0 && p.leg.lastAccept.Load() > lifted {
			r.legacyAt = time.Since(t1)
		}
		if r.ingressAt < 0 && p.snd.lastOK[0].Load() > lifted && p.snd.lastOK[1].Load() > lifted {
			r.ingressAt = time.Since(t1)
		}
		if r.consumerAt < 0 && f.consumer {
			if n, err := harness.QueueDepth(p.amqpURL, p.eventsQueue); err == nil && n < 20 {
				r.consumerAt = time.Since(t1)
			}
		}
		if r.legacyAt >= 0 && (!f.ingress || r.ingressAt >= 0) && (!f.consumer || r.consumerAt >= 0) {
			r.recovered = max(r.legacyAt, r.ingressAt, r.consumerAt)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.ok200, r.s503, r.other = p.snd.nOK.Load()-ok0, p.snd.n503.Load()-s0, p.snd.nOther.Load()-o0
	r.legacyAccepted = p.leg.total() - l0
	return r, nil
}

// waitDrained waits until the forward and retry queues are empty (ready
// and unacknowledged: the passive declare counts ready ones, so it also
// waits for the legacy count to stay still for 3 s) and the events queue
// is empty.
func waitDrained(ctx context.Context, amqpURL string, queues []string, eventsQueue string, leg *legacy, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	var last int64 = -1
	stillSince := time.Now()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		empty := true
		for _, q := range append(queues, eventsQueue) {
			n, err := harness.QueueDepth(amqpURL, q)
			if err != nil || n > 0 {
				empty = false
			}
		}
		if n := leg.total(); n != last {
			last, stillSince = n, time.Now()
		}
		if empty && time.Since(stillSince) >= 3*time.Second {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("queues %s not drained within %s", strings.Join(append(queues, eventsQueue), ", "), bound)
}

// readDLQ takes every dead letter out of the DLQ and returns how many
// there are per (source, id).
func readDLQ(amqpURL, dlq string) (map[key]int, error) {
	conn, err := amqp.DialConfig(amqpURL, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	out := map[key]int{}
	for {
		d, ok, err := ch.Get(dlq, true)
		if err != nil {
			return out, err
		}
		if !ok {
			return out, nil
		}
		env, err := envelope.Decode(d.Body)
		if err != nil {
			out[key{source: "?", id: "undecodable " + d.MessageId}]++
			continue
		}
		out[key{source: env.Source, id: idOf(env.Body)}]++
	}
}

func idOf(body []byte) string {
	var ev struct {
		Data struct {
			Key struct {
				ID string `json:"id"`
			} `json:"key"`
		} `json:"data"`
	}
	_ = json.Unmarshal(body, &ev)
	return ev.Data.Key.ID
}

// ---------------------------------------------------------------- reconcile

// reconciliation is the end-of-run accounting.
type reconciliation struct {
	sent, acked, unacked          int
	delivered, deadLettered       int      // acked events accounted exactly once
	lost, duplicated, both        []string // acked events: in neither; twice or more; in legacy and DLQ
	unexpected                    []string // at legacy or in the DLQ, never sent
	extraUnacked                  int      // never answered 200, but delivered once (allowed: a 503 promises nothing)
	duplicatedUnacked             []string // never answered 200, delivered more than once
	legacyPosts, deadLetters      int
	acceptedByStatus              map[string]int
	attemptsTotal, retriedEventsN int
}

func reconcile(sentBy map[key]sent, legacy map[key]int, dlq map[key]int) reconciliation {
	r := reconciliation{acceptedByStatus: map[string]int{}}
	for _, n := range legacy {
		r.legacyPosts += n
	}
	for _, n := range dlq {
		r.deadLetters += n
	}
	for k, s := range sentBy {
		r.sent++
		r.attemptsTotal += s.attempts
		if s.attempts > 1 {
			r.retriedEventsN++
		}
		l, d := legacy[k], dlq[k]
		if !s.acked {
			r.unacked++
			switch {
			case l+d == 1:
				r.extraUnacked++
			case l+d > 1:
				r.duplicatedUnacked = append(r.duplicatedUnacked, fmt.Sprintf("%s (legacy %d, dlq %d)", k, l, d))
			}
			continue
		}
		r.acked++
		r.acceptedByStatus[s.status]++
		switch {
		case l == 1 && d == 0:
			r.delivered++
		case l == 0 && d == 1:
			r.deadLettered++
		case l == 0 && d == 0:
			r.lost = append(r.lost, k.String())
		case l >= 1 && d >= 1:
			r.both = append(r.both, fmt.Sprintf("%s (legacy %d, dlq %d)", k, l, d))
		default:
			r.duplicated = append(r.duplicated, fmt.Sprintf("%s (legacy %d, dlq %d)", k, l, d))
		}
	}
	for _, m := range []map[key]int{legacy, dlq} {
		for k := range m {
			if _, ok := sentBy[k]; !ok {
				r.unexpected = append(r.unexpected, k.String())
			}
		}
	}
	sort.Strings(r.lost)
	sort.Strings(r.duplicated)
	sort.Strings(r.both)
	sort.Strings(r.unexpected)
	sort.Strings(r.duplicatedUnacked)
	return r
}

func (r reconciliation) ok() bool {
	return len(r.lost) == 0 && len(r.duplicated) == 0 && len(r.both) == 0 && len(r.unexpected) == 0 &&
		len(r.duplicatedUnacked) == 0 && r.unacked == 0 && r.acked > 0
}

func (r reconciliation) report(s *sender, l *legacy) string {
	var b strings.Builder
	s.mu.Lock()
	var classes []string
	for c, n := range s.classes {
		classes = append(classes, fmt.Sprintf("%d × %s", n, c))
	}
	s.mu.Unlock()
	sort.Strings(classes)
	l.mu.Lock()
	rejected, refused, hung, badSig, badWhy, noID := l.rejected, l.refused, l.hung, l.badSig, l.badSigLast, l.noID
	l.mu.Unlock()
	fmt.Fprintf(&b, "\nreconciliation (per source and id)\n")
	fmt.Fprintf(&b, "  sent:        %d events (%d requests; %d events needed more than one), %d answered 200, %d never\n",
		r.sent, r.attemptsTotal, r.retriedEventsN, r.acked, r.unacked)
	fmt.Fprintf(&b, "  answers:     %s\n", strings.Join(classes, ", "))
	fmt.Fprintf(&b, "  legacy:      %d POSTs accepted (200), %d refused for good (422, one event in 50), %d answered 503 (bursts), %d held until the forwarder gave up, %d bad signatures%s, %d without an id\n",
		r.legacyPosts, refused, rejected, hung, badSig, map[bool]string{true: " (last: " + badWhy + ")", false: ""}[badSig > 0], noID)
	fmt.Fprintf(&b, "  dead letters: %d\n", r.deadLetters)
	fmt.Fprintf(&b, "  each 200:    %d delivered once, %d dead-lettered once; lost %d, duplicated %d, both delivered and dead-lettered %d\n",
		r.delivered, r.deadLettered, len(r.lost), len(r.duplicated), len(r.both))
	fmt.Fprintf(&b, "  not sent by this run, yet delivered: %d; never answered 200 yet delivered once: %d, more than once: %d\n",
		len(r.unexpected), r.extraUnacked, len(r.duplicatedUnacked))
	show := func(what string, v []string) {
		if len(v) > 0 {
			fmt.Fprintf(&b, "  FAIL: %s: %s\n", what, strings.Join(v[:min(len(v), 10)], ", "))
		}
	}
	show("lost", r.lost)
	show("duplicated", r.duplicated)
	show("delivered and dead-lettered", r.both)
	show("unexpected at legacy or in the DLQ", r.unexpected)
	show("never acked, delivered more than once", r.duplicatedUnacked)
	if badSig > 0 {
		fmt.Fprintf(&b, "  FAIL: %d POSTs with a bad signature\n", badSig)
	}
	if noID > 0 {
		fmt.Fprintf(&b, "  FAIL: %d POSTs without X-Borda-Source or the event's id\n", noID)
	}
	if r.unacked > 0 {
		fmt.Fprintf(&b, "  FAIL: %d events never answered 200\n", r.unacked)
	}
	return b.String()
}

// checkInstances compares whatsapp_instances with the latest acknowledged
// connection.update of each instance.
func checkInstances(ctx context.Context, dbURL, run string, want map[string]stateAt) bool {
	c, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, err := pgx.Connect(c, dbURL)
	if err != nil {
		fmt.Println("FAIL: PostgreSQL:", err)
		return false
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(c, "SELECT instance, state, event_time FROM whatsapp_instances WHERE instance LIKE $1", "chaos-"+run+"-%")
	if err != nil {
		fmt.Println("FAIL: PostgreSQL:", err)
		return false
	}
	got := map[string]stateAt{}
	for rows.Next() {
		var inst, state string
		var at time.Time
		if err := rows.Scan(&inst, &state, &at); err != nil {
			fmt.Println("FAIL: PostgreSQL:", err)
			return false
		}
		got[inst] = stateAt{state, at}
	}
	if rows.Err() != nil {
		fmt.Println("FAIL: PostgreSQL:", rows.Err())
		return false
	}
	ok := len(got) == len(want)
	var bad []string
	for inst, w := range want {
		g, found := got[inst]
		if !found || g.state != w.state || !g.at.Equal(w.at) {
			ok = false
			bad = append(bad, fmt.Sprintf("%s: want %s at %s, got %s at %s", inst, w.state, w.at.Format(time.RFC3339Nano), g.state, g.at.Format(time.RFC3339Nano)))
		}
	}
	fmt.Printf("  consume-events: %d instances in whatsapp_instances, %d expected, %d not at their latest acknowledged state\n", len(got), len(want), len(bad))
	if !ok {
		fmt.Printf("  FAIL: whatsapp_instances: %s\n", strings.Join(bad, "; "))
	}
	return ok
}

func printSummary(records []faultRecord, o options, faultTime time.Duration) {
	type agg struct {
		n        int
		worst    time.Duration
		sum      time.Duration
		s503     int64
		failures int
	}
	by := map[string]*agg{}
	var order []string
	for _, r := range records {
		a := by[r.name]
		if a == nil {
			a = &agg{}
			by[r.name] = a
			order = append(order, r.name)
		}
		a.n++
		a.s503 += r.s503
		if r.recovered < 0 {
			a.failures++
			continue
		}
		a.sum += r.recovered
		a.worst = max(a.worst, r.recovered)
	}
	fmt.Printf("\nfaults (%s of faults, %d injections)\n", faultTime.Round(time.Second), len(records))
	fmt.Printf("  %-18s %6s %14s %14s %10s\n", "fault", "times", "mean recovery", "worst", "503s")
	for _, name := range order {
		a := by[name]
		mean := time.Duration(0)
		if a.n > a.failures {
			mean = a.sum / time.Duration(a.n-a.failures)
		}
		nr := ""
		if a.failures > 0 {
			nr = fmt.Sprintf("  (%d not recovered within %s)", a.failures, o.recoverBound)
		}
		fmt.Printf("  %-18s %6d %14s %14s %10d%s\n", name, a.n, mean.Round(10*time.Millisecond), a.worst.Round(10*time.Millisecond), a.s503, nr)
	}
}

// forwarderCounts sums, over the forwarders' /metrics, the duplicates they
// acked without a POST and their outcomes: evidence that the runs's
// faults did reach the paths the reconciliation vouches for.
func forwarderCounts(admins []string) string {
	sums := map[string]float64{}
	for _, a := range admins {
		resp, err := http.Get(a + "/metrics")
		if err != nil {
			return "metrics unavailable: " + err.Error()
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "#") {
				continue
			}
			name, rest, ok := strings.Cut(line, " ")
			if !ok {
				continue
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				continue
			}
			switch {
			case strings.HasPrefix(name, "borda_forward_duplicates_total"):
				sums["duplicates acked without a POST"] += v
			case strings.HasPrefix(name, "borda_forward_outcomes_total"):
				outcome := name
				if i := strings.Index(name, `outcome="`); i >= 0 {
					outcome = name[i+len(`outcome="`):]
					outcome = outcome[:strings.IndexByte(outcome, '"')]
				}
				sums[outcome] += v
			}
		}
	}
	var parts []string
	for k, v := range sums {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
