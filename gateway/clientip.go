package gateway

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
)

// clientIP resolves the client address of a request (docs/edge.md, "Client IP"): the
// direct peer, unless the peer is a trusted proxy; then the configured
// header (X-Real-IP, CF-Connecting-IP) or, without one, the rightmost
// X-Forwarded-For entry that is not itself a trusted proxy.
type clientIP struct {
	trusted []netip.Prefix
	// header is the canonical name of the configured client-IP header;
	// empty: X-Forwarded-For.
	header string
	// v6Bits groups IPv6 clients for rate limits (64: per /64).
	v6Bits int
}

// resolve returns the client address (IPv4-mapped addresses unmapped) and
// whether the direct peer is a trusted proxy. An unparsable RemoteAddr
// (only in tests or unusual listeners) yields the zero Addr.
func (c *clientIP) resolve(remoteAddr string, h http.Header) (netip.Addr, bool) {
	return c.resolveFrom(parseHostPort(remoteAddr), h)
}

// resolveFrom is resolve with the direct peer already parsed.
func (c *clientIP) resolveFrom(peer netip.Addr, h http.Header) (netip.Addr, bool) {
	if !c.isTrusted(peer) {
		return peer, false
	}
	if c.header != "" {
		if vs := h[c.header]; len(vs) == 1 {
			if a, err := netip.ParseAddr(strings.TrimSpace(vs[0])); err == nil {
				return a.Unmap().WithZone(""), true
			}
		}
	}
	return c.rightmostUntrusted(peer, h["X-Forwarded-For"]), true
}

// rightmostUntrusted walks the X-Forwarded-For entries from the right
// (all lines, in order, as one comma-separated list), skipping trusted
// proxies. The first untrusted entry is the client. An unparsable entry
// ends the walk: nothing to its left can be believed, so the last trusted
// hop seen is the client. When every entry is trusted, the leftmost is.
func (c *clientIP) rightmostUntrusted(peer netip.Addr, lines []string) netip.Addr {
	client := peer
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		for line != "" {
			var entry string
			if j := strings.LastIndexByte(line, ','); j >= 0 {
				entry, line = line[j+1:], line[:j]
			} else {
				entry, line = line, ""
			}
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			a, ok := parseForwardedAddr(entry)
			if !ok {
				return client
			}
			client = a
			if !c.isTrusted(a) {
				return a
			}
		}
	}
	return client
}

func (c *clientIP) isTrusted(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// subject renders a client address as the rate-limit subject: IPv4 as is
// ("203.0.113.9"), IPv6 as its prefix of v6Bits ("2001:db8:1:2::/64"),
// or the bare address when v6Bits is 128. The zero Addr gives "unknown".
func (c *clientIP) subject(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "unknown"
	case a.Is4() || c.v6Bits >= 128 || c.v6Bits <= 0:
		return a.String()
	}
	p, err := a.Prefix(c.v6Bits)
	if err != nil {
		return a.String()
	}
	return p.String()
}

// parseHostPort parses "ip:port", "[ip]:port" or a bare IP, unmapping
// IPv4-mapped IPv6 and dropping zones.
func parseHostPort(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone("")
	}
	host := s
	if h, _, err := net.SplitHostPort(s); err == nil {
		host = h
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap().WithZone("")
}

// parseForwardedAddr parses one X-Forwarded-For entry: an IP, optionally
// with a port ("1.2.3.4:5", "[2001:db8::1]:443").
func parseForwardedAddr(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	return netip.Addr{}, false
}

// peerMemo remembers the parsed TCP peer of one client connection, whose
// RemoteAddr never changes, so the requests of a keep-alive connection
// parse and print it once. Server.HTTPServer puts one in every
// connection's context (peerMemoKey); safe for concurrent use. It also
// keeps the connection's last forwarding header values (proxy.go,
// forwarded).
type peerMemo struct {
	p   atomic.Pointer[parsedPeer]
	fwd atomic.Pointer[forwardedMemo]
}

type parsedPeer struct {
	remote string     // RemoteAddr as net/http gives it
	addr   netip.Addr // parseHostPort(remote)
	str    string     // addr.String(), or "unknown"
}

type peerMemoKey struct{}

// peer returns the parsed remote and its text, parsing it on the
// connection's first request.
func (m *peerMemo) peer(remote string) (netip.Addr, string) {
	if p := m.p.Load(); p != nil && p.remote == remote {
		return p.addr, p.str
	}
	p := &parsedPeer{remote: remote, addr: parseHostPort(remote), str: "unknown"}
	if p.addr.IsValid() {
		p.str = p.addr.String()
	}
	m.p.Store(p)
	return p.addr, p.str
}
