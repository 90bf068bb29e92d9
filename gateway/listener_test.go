package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// capServer serves a 200 handler on a loopback listener wrapped by
// Listener with the given caps.
func capServer(t *testing.T, maxConns, perIP int) (*Server, string) {
	t.Helper()
	s, addr, _ := capServerListener(t, maxConns, perIP)
	return s, addr
}

// capServerListener is capServer that also returns its limit listener.
func capServerListener(t *testing.T, maxConns, perIP int) (*Server, string, *limitListener) {
	t.Helper()
	h, addr, lim := capHarness(t, maxConns, perIP, nil)
	return h.srv, addr, lim
}

// capHarness is capServerListener with the harness (its logs), and tweak
// (nil: none) applied to the listener before it serves.
func capHarness(t *testing.T, maxConns, perIP int, tweak func(*limitListener)) (*harness, string, *limitListener) {
	t.Helper()
	h := newHarness(t, routes(testRoute(t, "api", "http://127.0.0.1:1")))
	s := h.srv
	s.maxConns, s.maxConnsPerIP = maxConns, perIP
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := s.HTTPServer("", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	}))
	lim := s.Listener(ln).(*limitListener)
	if tweak != nil {
		tweak(lim)
	}
	go func() { _ = srv.Serve(lim) }()
	t.Cleanup(func() { srv.Close() })
	return h, ln.Addr().String(), lim
}

// waitIdle waits until l holds at least n idle keep-alives (reclaimable
// now): net/http marks a connection idle after its answer is written, so
// a client may read the answer before (a CI run saw the next connection
// refused 503 as if every one of the client's connections were busy).
func waitIdle(t *testing.T, l *limitListener, n int) {
	t.Helper()
	idle := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		k, now := 0, time.Now()
		for _, since := range l.idle {
			if since.Before(now) {
				k++
			}
		}
		return k
	}
	if !eventually(t, 3*time.Second, func() bool { return idle() >= n }) {
		t.Fatalf("%d idle keep-alives, want %d", idle(), n)
	}
}

// waitOpen waits until the listener holds exactly n connections.
func waitOpen(t *testing.T, l *limitListener, n int) {
	t.Helper()
	if !eventually(t, 3*time.Second, func() bool { return len(l.sem) == n }) {
		t.Fatalf("%d connections open, want %d", len(l.sem), n)
	}
}

// idleConn opens a connection and completes one keep-alive request on it,
// leaving it idle.
func idleConn(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("idle connection's request: %v", err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return c, br
}

// busyConn opens a connection whose request waits on its body.
func busyConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nx"); err != nil {
		t.Fatal(err)
	}
	return c
}

func status(t *testing.T, addr string) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer above the cap (silence): %v", err)
	}
	res.Body.Close()
	return res.StatusCode
}

func closedByPeer(c net.Conn, br *bufio.Reader) bool {
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err := br.ReadByte()
	return err == io.EOF || (err != nil && !isTimeout(err))
}

func waitCounter(t *testing.T, c prometheus.Counter, want float64) {
	t.Helper()
	if !eventually(t, 3*time.Second, func() bool { return counterValue(c) >= want }) {
		t.Fatalf("counter %v, want %v", counterValue(c), want)
	}
}

// TestOneClientsIdleKeepAlivesCannotFillTheListener: one client holding
// max_connections idle keep-alives kept every other client out (provider
// webhooks timed out). For several caps, a new connection at the cap
// closes the longest-idle one and is served.
func TestOneClientsIdleKeepAlivesCannotFillTheListener(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{1, 4, 32} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			s, addr, lim := capServerListener(t, limit, 0)
			type held struct {
				c  net.Conn
				br *bufio.Reader
			}
			var idle []held
			for i := range limit {
				c, br := idleConn(t, addr)
				idle = append(idle, held{c, br})
				// The server marks a connection idle after the client
				// has read its response: wait for the mark, so that the
				// first connection is the longest idle and not only the
				// first opened.
				waitIdle(t, lim, i+1)
			}
			if got := status(t, addr); got != 200 {
				t.Fatalf("a new client at the cap got %d", got)
			}
			waitCounter(t, s.metrics.connsReclaimed.WithLabelValues("public"), 1)
			if !closedByPeer(idle[0].c, idle[0].br) {
				t.Error("the longest-idle connection was not the one reclaimed")
			}
		})
	}
}

// TestPerIPConnectionCapAnswers503: above max_connections_per_ip the
// client's own idle connection is reclaimed first; when all of them are
// busy the new one gets a 503 problem (never silence), counted.
func TestPerIPConnectionCapAnswers503(t *testing.T) {
	t.Parallel()
	for _, perIP := range []int{1, 3, 8} {
		t.Run(fmt.Sprint(perIP), func(t *testing.T) {
			s, addr, lim := capServerListener(t, 100, perIP)
			for range perIP {
				idleConn(t, addr)
			}
			waitIdle(t, lim, perIP)
			if got := status(t, addr); got != 200 {
				t.Fatalf("with idle connections of its own, a new one got %d", got)
			}
			waitCounter(t, s.metrics.connsReclaimed.WithLabelValues("public"), 1)
			// The served connection (Connection: close) must be gone
			// before the busy ones: still counted, it would get one of
			// them refused, and the cap would never be full of busy ones.
			waitOpen(t, lim, perIP-1)
			for range perIP {
				busyConn(t, addr)
			}
			// The busy ones are accepted asynchronously: wait until the
			// next is refused.
			var got int
			eventually(t, 3*time.Second, func() bool { got = status(t, addr); return got == 503 })
			if got != 503 {
				t.Fatalf("over the per-IP cap with every connection busy: %d, want 503", got)
			}
			if counterValue(s.metrics.connsRefused.WithLabelValues("public", "per_ip")) < 1 {
				t.Error("the refusal was not counted")
			}
			if !strings.Contains(string(refusedAnswer), "Content-Length: "+fmt.Sprint(len(refusedBody))) {
				t.Error("the 503's Content-Length is not its body's")
			}
		})
	}
}

// TestPerIPCapCountsAnIPv6PrefixAsOneClient: one IPv6 client holds a
// /64; counted per address it could open max_connections_per_ip from
// each of 2^64 addresses.
func TestPerIPCapCountsAnIPv6PrefixAsOneClient(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		bits int
		same bool
	}{
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff::9", 64, true},
		{"2001:db8:1:2::1", "2001:db8:1:3::1", 64, false},
		{"2001:db8:1:2::1", "2001:db8:1:3::1", 48, true},
		{"2001:db8::1", "2001:db8::2", 128, false},
		{"2001:db8::1", "2001:db8::2", 0, false},
		{"203.0.113.1", "203.0.113.2", 64, false},
		{"203.0.113.1", "203.0.113.1", 64, true},
	} {
		ka := perIPKey(netip.MustParseAddr(c.a), c.bits)
		kb := perIPKey(netip.MustParseAddr(c.b), c.bits)
		if (ka == kb) != c.same {
			t.Errorf("%s and %s with /%d: same client %v, want %v", c.a, c.b, c.bits, ka == kb, c.same)
		}
	}
}

// TestOpenConnectionsGaugeFollowsThePublicListener:
// borda_http_connections_open counts the public listener's accepted
// connections and returns to zero when they close; the admin listener
// (not counted) accepts and serves without touching it.
func TestOpenConnectionsGaugeFollowsThePublicListener(t *testing.T) {
	t.Parallel()
	s, addr := capServer(t, 10, 0)
	gauge := func() float64 {
		var m dto.Metric
		_ = s.metrics.conns.Write(&m)
		return m.GetGauge().GetValue()
	}
	var conns []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
			t.Fatal(err)
		}
	}
	if g := gauge(); g != 3 {
		t.Fatalf("borda_http_connections_open = %v with 3 connections served, want 3", g)
	}
	for _, c := range conns {
		c.Close()
	}
	if !eventually(t, 5*time.Second, func() bool { return gauge() == 0 }) {
		t.Fatalf("borda_http_connections_open = %v after every connection closed, want 0", gauge())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	admin := &http.Server{Handler: s.AdminHandler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = admin.Serve(s.AdminListener(ln, 4)) }()
	t.Cleanup(func() { admin.Close() })
	res, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || gauge() != 0 {
		t.Fatalf("admin /healthz = %d, gauge %v; want 200 and 0", res.StatusCode, gauge())
	}
}

// TestPerIPCapFreesTheSlotsOfClosedConnections: a client that reached
// its cap and closed its connections opens as many again (a slot that
// stayed counted after its connection closed refused the client for good).
func TestPerIPCapFreesTheSlotsOfClosedConnections(t *testing.T) {
	t.Parallel()
	for _, perIP := range []int{1, 3} {
		t.Run(fmt.Sprint(perIP), func(t *testing.T) {
			_, addr, lim := capServerListener(t, 100, perIP)
			for round := range 2 {
				var held []net.Conn
				for range perIP {
					held = append(held, busyConn(t, addr))
				}
				var got int
				eventually(t, 3*time.Second, func() bool { got = status(t, addr); return got == 503 })
				if got != 503 {
					t.Fatalf("round %d: over the cap: %d, want 503", round, got)
				}
				for _, c := range held {
					c.Close()
				}
				if !eventually(t, 5*time.Second, func() bool {
					lim.mu.Lock()
					defer lim.mu.Unlock()
					return len(lim.perIP) == 0
				}) {
					t.Fatalf("round %d: the closed connections still count against their IP", round)
				}
			}
		})
	}
}

// TestRefusedConnectionsAreLoggedOnceASecond: a client refused over and
// over within a second is one warn line, not one per connection.
func TestRefusedConnectionsAreLoggedOnceASecond(t *testing.T) {
	t.Parallel()
	h, addr, _ := capHarness(t, 100, 1, nil)
	busyConn(t, addr)
	start := time.Now()
	refused := 0
	for range 6 {
		if status(t, addr) == 503 {
			refused++
		}
	}
	if refused < 5 {
		t.Fatalf("%d of 6 connections refused, want at least 5", refused)
	}
	lines := strings.Count(h.logs.String(), "connection refused: over the per-client-IP connection cap")
	// Each second may start one line: at least one, at most one per
	// second begun since the first refusal.
	if most := int(time.Since(start)/time.Second) + 1; lines < 1 || lines > most {
		t.Fatalf("%d warn lines for %d refusals in %v, want 1 to %d", lines, refused, time.Since(start), most)
	}
}

// TestRefusedConnectionIsHalfClosedAfterItsAnswer: the 503 is followed at
// once by the end of the stream (a half-close), so the client reads the
// answer and its end while the gateway still drains what it sent, instead
// of waiting for the close (here an hour away).
func TestRefusedConnectionIsHalfClosedAfterItsAnswer(t *testing.T) {
	t.Parallel()
	_, addr, _ := capHarness(t, 100, 1, func(l *limitListener) { l.linger = time.Hour })
	busyConn(t, addr)
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	all, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading the refusal to its end: %v (got %q)", err, all)
	}
	if !strings.HasPrefix(string(all), "HTTP/1.1 503 ") {
		t.Fatalf("answer %q, want the 503", all)
	}
	if _, err := io.WriteString(c, "more"); err != nil {
		t.Fatalf("the gateway stopped reading after its half-close: %v", err)
	}
}
