package denylist

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
)

// DefaultMaxShare is the largest share of the public IPv4 or IPv6
// unicast space one deny list may cover when the configuration names no
// other (deny.max_coverage_percent): 10 %. No single entry may be wider
// than /8 or /16 (MinIPv4Bits), but entries add up: a feed of the 256
// IPv4 /8s refused every client (fresh attack pass A028). Geo-blocking a
// large country needs more (one country may hold 9 % of IPv4): raise it.
const DefaultMaxShare = 0.10

// Check reports whether l denies too much to be a deny list rather than
// a mistake or an attack: its addresses cover more than maxShare (0-1) of
// the public IPv4 space (every address outside the special-purpose blocks
// of RFC 6890: private, loopback, link-local, documentation, multicast,
// reserved) or of the IPv6 global unicast space (2000::/3), or one of its
// user-agent patterns matches a common browser's or a webhook provider's
// user agent (essentialAgents: `*`, "mozilla", "chrome", "axios"...).
// The error names what is too broad. A feed answer that fails it is a
// failed fetch (the last good list is kept); a configured list that fails
// it is refused at start and on reload.
func (l *List) Check(maxShare float64) error {
	if l == nil {
		return nil
	}
	if s := l.v4Share(); s > maxShare {
		return fmt.Errorf("its addresses cover %.1f %% of the public IPv4 space, more than the %.1f %% a deny list may (deny.max_coverage_percent)", 100*s, 100*maxShare)
	}
	if s := l.v6Share(); s > maxShare {
		return fmt.Errorf("its addresses cover %.1f %% of the public IPv6 space (2000::/3), more than the %.1f %% a deny list may (deny.max_coverage_percent)", 100*s, 100*maxShare)
	}
	for _, p := range l.agents {
		for _, a := range essentialAgents {
			if p.matches(strings.ToLower(a.ua)) {
				return fmt.Errorf("user-agent pattern %q matches %s (%q): it would refuse most clients; name the client it is meant for", p.pattern, a.name, a.ua)
			}
		}
	}
	return nil
}

// matches reports whether the lower-cased user agent ua matches p.
func (p agentPattern) matches(ua string) bool {
	if p.glob {
		return globMatch(p.pattern, ua)
	}
	return strings.Contains(ua, p.pattern)
}

// essentialAgents are user agents no deny list may refuse: the browsers
// most visitors use and the webhook providers Borda takes events from.
var essentialAgents = []struct{ name, ua string }{
	{"Chrome on Windows", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"},
	{"Chrome on Android", "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36"},
	{"Safari on iPhone", "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1"},
	{"Safari on macOS", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15"},
	{"Firefox on Windows", "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0"},
	{"Edge on Windows", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0"},
	{"Samsung Internet", "Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 Chrome/122.0.0.0 Mobile Safari/537.36"},
	{"Evolution API's webhooks (axios)", "axios/1.7.9"},
	{"GitHub's webhooks", "GitHub-Hookshot/a1b2c3d"},
	{"Stripe's webhooks", "Stripe/1.0 (+https://stripe.com/docs/webhooks)"},
	{"Standard Webhooks (Svix)", "Svix-Webhooks/1.57.0 (sender-abcde; +https://www.svix.com/http-sender/)"},
}

// v4Special are the IPv4 special-purpose blocks of RFC 6890 and its
// updates that no internet client comes from.
var v4Special = mustPrefixes(
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
	"172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16",
	"198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
)

// v4Public is the number of public IPv4 addresses: 2^32 less v4Special.
var v4Public = func() float64 {
	n := math.Exp2(32)
	for _, p := range v4Special {
		n -= math.Exp2(float64(32 - p.Bits()))
	}
	return n
}()

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// v4Share is the share of the public IPv4 space l's addresses cover.
// Aligned prefixes either nest or are disjoint, so the union is the
// prefixes no other one contains.
func (l *List) v4Share() float64 {
	var ps []netip.Prefix
	for _, set := range l.v4 {
		for _, a := range set.addrs {
			var b [4]byte
			b[0], b[1], b[2], b[3] = byte(a>>24), byte(a>>16), byte(a>>8), byte(a)
			ps = append(ps, netip.PrefixFrom(netip.AddrFrom4(b), set.bits))
		}
	}
	covered := 0.0
	for _, p := range outermost(ps) {
		size := math.Exp2(float64(32 - p.Bits()))
		for _, s := range v4Special {
			if s.Overlaps(p) {
				size -= math.Exp2(float64(32 - max(s.Bits(), p.Bits())))
			}
		}
		covered += size
	}
	return covered / v4Public
}

// v6Global is the IPv6 global unicast space, 2000::/3.
var v6Global = netip.MustParsePrefix("2000::/3")

// v6Share is the share of 2000::/3 l's addresses cover.
func (l *List) v6Share() float64 {
	var ps []netip.Prefix
	for _, set := range l.v6 {
		for _, k := range set.addrs {
			var b [16]byte
			for i := range 8 {
				b[i] = byte(k.hi >> (56 - 8*i))
				b[8+i] = byte(k.lo >> (56 - 8*i))
			}
			ps = append(ps, netip.PrefixFrom(netip.AddrFrom16(b), set.bits))
		}
	}
	covered := 0.0
	for _, p := range outermost(ps) {
		if v6Global.Overlaps(p) {
			covered += math.Exp2(float64(3 - max(p.Bits(), 3)))
		}
	}
	return covered
}

// outermost returns the prefixes of ps that no other prefix of ps
// contains (duplicates once): their union is ps's, and they are disjoint.
func outermost(ps []netip.Prefix) []netip.Prefix {
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits() // the wider first
	})
	out := ps[:0]
	for _, p := range ps {
		if n := len(out); n > 0 && out[n-1].Bits() <= p.Bits() && out[n-1].Contains(p.Addr()) {
			continue
		}
		out = append(out, p)
	}
	return out
}
