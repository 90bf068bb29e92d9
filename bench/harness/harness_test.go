package harness

import (
	"bufio"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/internal/servicetest"
)

func TestBordaSpecWritesValidConfig(t *testing.T) {
	for _, spec := range []BordaSpec{
		{Listen: "127.0.0.1:1", Admin: "127.0.0.1:2", Upstream: "http://127.0.0.1:3"},
		{Listen: "127.0.0.1:1", Admin: "127.0.0.1:2", Upstream: "http://127.0.0.1:3", RedisURL: "redis://127.0.0.1:6379/0",
			KeyPrefix: "olp-dev:bench1:", Rules: 3, Webhook: true, Name: "bench-1", Token: "t", AMQPURL: "amqp://guest:guest@127.0.0.1:5672/"},
		{Listen: "127.0.0.1:1", Admin: "127.0.0.1:2", Upstream: "http://127.0.0.1:3", Rules: 1, EnforceLimit: 50},
	} {
		path, err := spec.WriteConfig(t.TempDir(), "borda")
		if err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(path)
		env := map[string]string{}
		for _, kv := range spec.Env() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		cfg, err := configs.Parse(data, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if err != nil {
			t.Fatalf("config for %+v: %v\n%s", spec, err, data)
		}
		if len(cfg.RateLimits.Rules) != spec.Rules {
			t.Errorf("rules = %d, want %d", len(cfg.RateLimits.Rules), spec.Rules)
		}
		if spec.KeyPrefix != "" && cfg.KeyPrefix() != spec.KeyPrefix {
			t.Errorf("key prefix = %q, want %q", cfg.KeyPrefix(), spec.KeyPrefix)
		}
		if spec.Webhook && (cfg.Webhook.Path != WebhookPath || cfg.Forward.Queue != spec.ForwardQueue()) {
			t.Errorf("webhook = %+v, forward queue %q", cfg.Webhook.Path, cfg.Forward.Queue)
		}
	}
}

func TestFaultProxyCutAndRestore(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s := bufio.NewScanner(c)
				for s.Scan() {
					c.Write([]byte(s.Text() + "\n"))
				}
			}()
		}
	}()
	p, err := NewFaultProxy(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	echo := func() error {
		c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return err
		}
		_, err = bufio.NewReader(c).ReadString('\n')
		return err
	}
	if err := echo(); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	c, _ := net.Dial("tcp", p.Addr())
	time.Sleep(50 * time.Millisecond)
	p.Cut()
	c.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("an open connection survived Cut")
	}
	if err := echo(); err == nil {
		t.Error("a new connection got through while cut")
	}
	p.Restore()
	if err := echo(); err != nil {
		t.Fatalf("after Restore: %v", err)
	}
}

func TestParseWrkReport(t *testing.T) {
	out := []byte(`Running 2s test @ http://127.0.0.1:8080/
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     9.21ms    3.10ms  41.07ms   80.12%
    Req/Sec     7.01k   512.33     7.80k    75.00%
  Latency Distribution
     50%    8.80ms
     75%   10.32ms
     90%   12.76ms
     99%   20.01ms
  13952 requests in 2.00s, 2.13MB read
  Socket errors: connect 0, read 1, write 0, timeout 2
  Non-2xx or 3xx responses: 4
Requests/sec:   6975.12
Transfer/sec:      1.07MB
`)
	r := parseWrk(out)
	if r.RPS != 6975.12 || r.Requests != 13952 || r.Non2xx != 4 || r.SocketErrors != 3 || r.Bad != 7 || r.P50 != 8800*time.Microsecond || r.P99 != 20010*time.Microsecond {
		t.Fatalf("parseWrk = %+v", r)
	}
	for in, want := range map[string]time.Duration{"635.91us": 635910 * time.Nanosecond, "2.01ms": 2010 * time.Microsecond, "2.00s": 2 * time.Second, "1.50m": 90 * time.Second, "1.00h": time.Hour} {
		if got := parseWrkDuration(in); got != want {
			t.Errorf("parseWrkDuration(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// DeleteTopology ignored every error: a delete that RabbitMQ failed left
// the run's queues and exchange behind without a word.
func TestDeleteTopologyChecksEverythingIsGone(t *testing.T) {
	url := servicetest.AMQPURL(t)
	spec := BordaSpec{Name: "bench-harness-" + servicetest.Name(t)}
	err := withChannel(url, func(ch *amqp.Channel) error {
		if err := ch.ExchangeDeclare(spec.Exchange(), "topic", true, false, false, false, nil); err != nil {
			return err
		}
		for _, q := range []string{spec.ForwardQueue(), spec.DLQ()} {
			if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if left := DeleteTopology(url, spec); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	for _, q := range []string{spec.ForwardQueue(), spec.DLQ()} {
		if _, err := QueueDepth(url, q); err == nil {
			t.Errorf("queue %s still exists", q)
		}
	}
	if left := DeleteTopology(url, spec); len(left) != 0 { // nothing there: nothing left, no error
		t.Fatalf("second DeleteTopology: left %v", left)
	}
}

// With the broker unreachable, DeleteTopology dialled twice per entity and
// per try (about 100 s with a broker that accepts and never answers); it
// now dials once and names everything it could not delete.
func TestDeleteTopologyWithTheBrokerUnreachableDialsOnce(t *testing.T) {
	spec := BordaSpec{Name: "bench-harness-unreachable"}
	left := DeleteTopology("amqp://guest:guest@127.0.0.1:1/", spec)
	if len(left) != 5 { // forward, events, dlq, one retry queue, the exchange
		t.Fatalf("left = %v, want the 4 queues and the exchange", left)
	}
}
