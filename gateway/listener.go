package gateway

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Listener wraps the public listener ln so that at most
// server.max_connections client connections are open at once, idle
// keep-alive and upgraded (WebSocket) connections included, and counts
// them in borda_http_connections_open (docs/edge.md, "Client
// connections"). Under pressure idle keep-alive connections go first: a
// new connection at the cap closes the longest-idle one (Envoy's overload
// manager and net/http's own Shutdown reclaim idle connections the same
// way) and waits for a slot only when none is idle, so one client holding
// thousands of idle keep-alives cannot keep provider webhooks out. One
// client IP holds at most server.max_connections_per_ip (nginx
// limit_conn): above it its own idle connection is reclaimed, or the new
// one is answered 503 and closed (borda_http_connections_refused_total,
// a warn log line). Trusted proxies are exempt (every client comes through
// them). Closing the returned listener ends a waiting Accept. The
// servers using it must track idle connections: HTTPServer sets the
// ConnState hook that does.
func (s *Server) Listener(ln net.Listener) net.Listener {
	return s.newLimitListener(ln, "public", s.maxConns, s.maxConnsPerIP, s.metrics.conns)
}

// AdminListener wraps the admin listener with a cap of its own, capacity
// connections (0: no cap; server.admin_max_connections) and at most
// capacity/4 from one IP, so the admin port
// cannot take the file descriptors the public listener needs (Envoy
// bounds its admin listener the same way) and a flood of the admin port
// reclaims idle connections first, as Listener does.
func (s *Server) AdminListener(ln net.Listener, capacity int) net.Listener {
	perIP := 0
	if capacity > 0 {
		perIP = max(1, capacity/4)
	}
	return s.newLimitListener(ln, "admin", capacity, perIP, nil)
}

// newLimitListener caps ln at n open connections (n ≤ 0: no cap) and
// perIP from one client (0: none).
func (s *Server) newLimitListener(ln net.Listener, name string, n, perIP int, open prometheus.Gauge) *limitListener {
	if n <= 0 {
		n = math.MaxInt32 // a channel of empty structs: no buffer is allocated
	}
	return &limitListener{Listener: ln, name: name, sem: make(chan struct{}, n), done: make(chan struct{}), s: s,
		perIPCap: perIP, open: open, idle: map[*limitConn]time.Time{}, perIP: map[netip.Addr][]*limitConn{},
		refusing: make(chan struct{}, maxRefusing), linger: refuseLinger, burst: newBurstRelease()}
}

// maxRefusing bounds the connections being answered 503 at once; above
// it a refused connection is closed without the answer (still counted and
// logged). refuseLinger bounds each answer's write and the read that
// waits for the client's close.
const (
	maxRefusing  = 64
	refuseLinger = 250 * time.Millisecond
)

type limitListener struct {
	net.Listener
	name      string
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	s         *Server
	open      prometheus.Gauge // nil: not counted
	perIPCap  int              // 0: no per-IP cap
	refusing  chan struct{}
	linger    time.Duration // refuseLinger; tests lengthen it
	burst     *burstRelease // memory back to the OS after a burst (listener_release.go)

	mu         sync.Mutex
	idle       map[*limitConn]time.Time // idle keep-alive connections, since when
	perIP      map[netip.Addr][]*limitConn
	lastWarn   time.Time
	suppressed int
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitConn{Conn: c, l: l}
		if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
			lc.ip = ap.Addr().Unmap()
			lc.key = perIPKey(lc.ip, l.s.ip.v6Bits)
		}
		if !l.admitIP(lc) {
			l.refuse(c, "per_ip")
			continue
		}
		if !l.acquire() {
			l.forgetIP(lc)
			c.Close()
			return nil, net.ErrClosed
		}
		if l.open != nil {
			l.open.Inc()
		}
		l.burst.opened(len(l.sem))
		// A new connection that stays silent for silentAfter is
		// reclaimable until its first request starts (StateActive), as
		// net/http's Shutdown treats one: it holds nothing in flight.
		l.mu.Lock()
		l.idle[lc] = time.Now().Add(silentAfter)
		l.mu.Unlock()
		return lc, nil
	}
}

// silentAfter is how long a new connection that has sent nothing is
// spared by reclaim (a client's request follows its connect within a
// round trip); reclaimEvery is how often a full listener looks again.
const (
	silentAfter  = time.Second
	reclaimEvery = 250 * time.Millisecond
)

// acquire takes a connection slot: at the cap it reclaims the longest-idle
// connection, and looks again every reclaimEvery while it waits for one
// to close; false when the listener closed.
func (l *limitListener) acquire() bool {
	select {
	case l.sem <- struct{}{}:
		return true
	default:
	}
	var tick *time.Ticker
	for {
		l.reclaim()
		if tick == nil {
			tick = time.NewTicker(reclaimEvery)
			defer tick.Stop()
		}
		select {
		case l.sem <- struct{}{}:
			return true
		case <-l.done:
			return false
		case <-tick.C:
		}
	}
}

// admitIP counts lc against its IP's cap, reclaiming one of that IP's
// idle connections when the cap is reached; false: refuse lc.
func (l *limitListener) admitIP(lc *limitConn) bool {
	if l.perIPCap <= 0 || !lc.ip.IsValid() || l.s.ip.isTrusted(lc.ip) {
		return true
	}
	l.mu.Lock()
	if len(l.perIP[lc.key]) >= l.perIPCap {
		var oldest *limitConn
		now := time.Now()
		for _, c := range l.perIP[lc.key] {
			if since, ok := l.idle[c]; ok && since.Before(now) && (oldest == nil || since.Before(l.idle[oldest])) {
				oldest = c
			}
		}
		if oldest == nil {
			l.mu.Unlock()
			return false
		}
		l.mu.Unlock()
		l.countReclaimed()
		oldest.Close()
		l.mu.Lock()
	}
	lc.counted = true
	l.perIP[lc.key] = append(l.perIP[lc.key], lc)
	l.mu.Unlock()
	return true
}

// reclaim closes the longest-idle connection (of any IP); it reports
// whether there was one.
func (l *limitListener) reclaim() bool {
	l.mu.Lock()
	var oldest *limitConn
	var at time.Time
	now := time.Now()
	for c, since := range l.idle {
		if since.Before(now) && (oldest == nil || since.Before(at)) {
			oldest, at = c, since
		}
	}
	l.mu.Unlock()
	if oldest == nil {
		return false
	}
	l.countReclaimed()
	oldest.Close()
	return true
}

func (l *limitListener) countReclaimed() {
	if l.s.metrics != nil {
		l.s.metrics.connsReclaimed.WithLabelValues(l.name).Inc()
	}
}

// refuse answers c 503 (Connection: close, Retry-After) and closes it,
// with a metric and a warn line at most once a second.
func (l *limitListener) refuse(c net.Conn, reason string) {
	if l.s.metrics != nil {
		l.s.metrics.connsRefused.WithLabelValues(l.name, reason).Inc()
	}
	l.mu.Lock()
	now := time.Now()
	if now.Sub(l.lastWarn) >= time.Second {
		n := l.suppressed
		l.lastWarn, l.suppressed = now, 0
		l.mu.Unlock()
		l.s.log.Warn("connection refused: over the per-client-IP connection cap", "listener", l.name, "peer", c.RemoteAddr().String(),
			"reason", reason, "cap", l.perIPCap, "refused_since_last_line", n)
	} else {
		l.suppressed++
		l.mu.Unlock()
	}
	select {
	case l.refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(l.linger))
		_, _ = c.Write(refusedAnswer)
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		// Read what the client sent, briefly, so the close is not a reset
		// that would discard the answer before the client reads it.
		var buf [512]byte
		for {
			if _, err := c.Read(buf[:]); err != nil {
				return
			}
		}
	}()
}

// refusedAnswer is the 503 of a connection over its IP's cap (PT-BR, as
// every answer of the gateway).
var refusedAnswer = []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\n" +
	"Connection: close\r\nRetry-After: 1\r\nContent-Length: " + strconv.Itoa(len(refusedBody)) + "\r\n\r\n" + refusedBody)

const refusedBody = `{"type":"about:blank","title":"Conexões demais","status":503,` +
	`"detail":"Este cliente abriu conexões demais ao mesmo tempo. Feche as que não usa e tente de novo em instantes."}`

func (l *limitListener) forgetIP(c *limitConn) {
	l.mu.Lock()
	delete(l.idle, c)
	if c.counted {
		c.counted = false
		conns := l.perIP[c.key]
		for i, o := range conns {
			if o == c {
				conns[i] = conns[len(conns)-1]
				conns = conns[:len(conns)-1]
				break
			}
		}
		if len(conns) == 0 {
			delete(l.perIP, c.key)
		} else {
			l.perIP[c.key] = conns
		}
	}
	l.mu.Unlock()
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitConn struct {
	net.Conn
	l         *limitListener
	ip        netip.Addr // the TCP peer
	key       netip.Addr // what the per-IP cap counts: ip, or its IPv6 prefix
	counted   bool       // in l.perIP (guarded by l.mu)
	closeOnce sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() {
		c.l.forgetIP(c)
		if c.l.open != nil {
			c.l.open.Dec()
		}
		c.l.burst.closed(len(c.l.sem) - 1) // before the slot frees: done once len(sem) shows it
		<-c.l.sem
	})
	return err
}

// CloseWrite half-closes the connection, for net/http's lingering close
// after an answer that left a request body unread (the client then reads
// the answer before the connection resets).
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// trackIdle is the http.Server ConnState hook that tells a limitListener
// which of its connections are idle keep-alives (reclaimable); a new
// connection is reclaimable from Accept on (StateNew changes nothing).
func trackIdle(c net.Conn, state http.ConnState) {
	lc, ok := c.(*limitConn)
	if !ok {
		return
	}
	l := lc.l
	l.mu.Lock()
	switch state {
	case http.StateNew:
	case http.StateIdle:
		l.idle[lc] = time.Now()
	default:
		delete(l.idle, lc)
	}
	l.mu.Unlock()
}

// Admin listener timeouts (AdminHTTPServer): its requests are small
// reads, a replay form and pprof profiles (whose answer may take
// /debug/pprof/profile's 30 s by default, so no write timeout).
const (
	adminReadTimeout = 30 * time.Second
	adminIdleTimeout = 30 * time.Second
)

// AdminHTTPServer is HTTPServer for the admin listener with a header
// timeout of 10 s and a whole-request read timeout of 30 s (header and
// body: a trickled body cannot hold one of its few connections) and
// idle keep-alives closed after 30 s. Serve it on AdminListener.
func (s *Server) AdminHTTPServer(addr string, h http.Handler) *http.Server {
	srv := s.HTTPServer(addr, h)
	srv.ReadTimeout, srv.IdleTimeout = adminReadTimeout, adminIdleTimeout
	return srv
}

// perIPKey is what the per-IP cap counts for the peer ip: the address
// itself for IPv4, its v6Bits prefix for IPv6 (one IPv6 client holds a
// whole prefix, /64 by default, as the rate limits count it).
func perIPKey(ip netip.Addr, v6Bits int) netip.Addr {
	if !ip.Is6() || v6Bits <= 0 || v6Bits >= 128 {
		return ip
	}
	p, err := ip.Prefix(v6Bits)
	if err != nil {
		return ip
	}
	return p.Addr()
}
