// Package denylist holds the client addresses and user agents a gateway
// refuses before any other work (docs/edge.md, "Deny lists"): IPv4 and
// IPv6 addresses and CIDR prefixes, and user-agent patterns, parsed from
// entries given inline, read from files (one entry per line, '#' starts a
// comment) or fetched from a feed. A List is immutable; a Feed swaps in a
// new one when a fetch succeeds and keeps the last good one when it fails.
package denylist

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
)

// MaxEntries bounds one source (a file or a feed's answer): a source
// with more lines is refused as a whole rather than cut.
const MaxEntries = 1_000_000

// MinIPv4Bits and MinIPv6Bits are the widest prefixes an entry may name
// (/8 and /16): a wider one (0.0.0.0/0, ::/0, 0.0.0.0/1) is refused, in
// a file as in a feed, so a compromised, truncated or mistyped list
// cannot refuse every client (a feed's answer holding one is a failed
// fetch: the last good list is kept). trusted_proxies refuses /0 in
// production for the same reason.
const (
	MinIPv4Bits = 8
	MinIPv6Bits = 16
)

// List is a set of address prefixes and user-agent patterns. The zero
// value and nil deny nothing. Safe for concurrent use.
type List struct {
	// v4 and v6 hold, per prefix length present (longest first), the
	// masked addresses of that length sorted, so a lookup costs one
	// binary search per distinct length (a few), whatever the number of
	// entries, and an entry costs 4 bytes (IPv4) or 16 bytes (IPv6): a
	// feed of a million addresses is 4 MB, not the ~200 MB a map of
	// netip.Prefix took (fresh attack pass A103).
	v4     []v4Set
	v6     []v6Set
	agents []agentPattern
	size   int
}

type v4Set struct {
	bits  int
	addrs []uint32
}

type v6Set struct {
	bits  int
	addrs []v6Key
}

// v6Key is an IPv6 address as two big-endian halves (ordered as bytes).
type v6Key struct{ hi, lo uint64 }

func cmpV6(a, b v6Key) int {
	if c := cmp.Compare(a.hi, b.hi); c != 0 {
		return c
	}
	return cmp.Compare(a.lo, b.lo)
}

func v4Of(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func v6Of(a netip.Addr) v6Key {
	b := a.As16()
	return v6Key{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// agentPattern is a lower-cased user-agent pattern: a glob over the whole
// user agent when it holds '*', else a substring of it.
type agentPattern struct {
	pattern string
	glob    bool
}

// Kind says what a source's entries are.
type Kind uint8

const (
	// Addresses are IPv4 or IPv6 addresses or CIDR prefixes
	// ("203.0.113.7", "198.51.100.0/24", "2001:db8::/32"); an IPv4-mapped
	// IPv6 address counts as its IPv4 address.
	Addresses Kind = iota
	// Agents are user-agent patterns, matched case-insensitively: with a
	// '*' a glob over the whole user agent ("curl/*"), else a substring
	// ("sqlmap").
	Agents
)

// Builder accumulates entries into a List.
type Builder struct {
	l  List
	v4 map[int][]uint32
	v6 map[int][]v6Key
}

// Add parses one entry of kind k (surrounding spaces ignored, "" and
// comments skipped); the error names the entry.
func (b *Builder) Add(k Kind, entry string) error {
	entry = strings.TrimSpace(entry)
	if i := strings.IndexByte(entry, '#'); i >= 0 {
		entry = strings.TrimSpace(entry[:i])
	}
	if entry == "" {
		return nil
	}
	switch k {
	case Agents:
		p := strings.ToLower(entry)
		b.l.agents = append(b.l.agents, agentPattern{pattern: p, glob: strings.Contains(p, "*")})
	default:
		pfx, err := parsePrefix(entry)
		if err != nil {
			return err
		}
		if a := pfx.Addr(); a.Is4() {
			if b.v4 == nil {
				b.v4 = map[int][]uint32{}
			}
			b.v4[pfx.Bits()] = append(b.v4[pfx.Bits()], v4Of(a))
		} else {
			if b.v6 == nil {
				b.v6 = map[int][]v6Key{}
			}
			b.v6[pfx.Bits()] = append(b.v6[pfx.Bits()], v6Of(a))
		}
	}
	b.l.size++
	return nil
}

// Read adds every line of r as an entry of kind k; name labels errors
// ("file.txt:12: …"). More than MaxEntries lines is an error.
func (b *Builder) Read(k Kind, name string, r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for n := 1; sc.Scan(); n++ {
		if n > MaxEntries {
			return fmt.Errorf("%s: more than %d lines", name, MaxEntries)
		}
		if err := b.Add(k, sc.Text()); err != nil {
			return fmt.Errorf("%s:%d: %w", name, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// List returns the list built so far; the Builder must not be used after.
func (b *Builder) List() *List {
	for bits, addrs := range b.v4 {
		slices.Sort(addrs)
		b.l.v4 = append(b.l.v4, v4Set{bits, slices.Clip(slices.Compact(addrs))})
	}
	for bits, addrs := range b.v6 {
		slices.SortFunc(addrs, cmpV6)
		b.l.v6 = append(b.l.v6, v6Set{bits, slices.Clip(slices.Compact(addrs))})
	}
	slices.SortFunc(b.l.v4, func(x, y v4Set) int { return y.bits - x.bits })
	slices.SortFunc(b.l.v6, func(x, y v6Set) int { return y.bits - x.bits })
	l := b.l
	*b = Builder{}
	return &l
}

// parsePrefix reads an address ("203.0.113.7": a /32, "2001:db8::1": a
// /128) or a CIDR prefix, masked; an IPv4-mapped IPv6 form is turned into
// its IPv4 form, so "::ffff:203.0.113.0/120" is "203.0.113.0/24". A zone
// ("fe80::1%eth0") is refused: a client address has none.
func parsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q is not an IP address or CIDR prefix", s)
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an IP address or CIDR prefix", s)
	}
	if a := p.Addr(); a.Is4In6() {
		if p.Bits() < 96 {
			return netip.Prefix{}, fmt.Errorf("%q: an IPv4-mapped prefix shorter than /96 spans more than IPv4", s)
		}
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	if min := MinIPv4Bits; p.Addr().Is6() {
		min = MinIPv6Bits
		if p.Bits() < min {
			return netip.Prefix{}, fmt.Errorf("%q is wider than /%d: an IPv6 deny entry may span at most a /%d", s, min, min)
		}
	} else if p.Bits() < min {
		return netip.Prefix{}, fmt.Errorf("%q is wider than /%d: an IPv4 deny entry may span at most a /%d", s, min, min)
	}
	return p.Masked(), nil
}

// Len is the number of entries of l.
func (l *List) Len() int {
	if l == nil {
		return 0
	}
	return l.size
}

// DeniesAddr reports whether a (its IPv4-mapped form counting as IPv4)
// lies in one of l's prefixes.
func (l *List) DeniesAddr(a netip.Addr) bool {
	if l == nil || !a.IsValid() {
		return false
	}
	a = a.Unmap().WithZone("")
	if a.Is4() {
		for _, set := range l.v4 {
			p, err := a.Prefix(set.bits)
			if err != nil {
				continue
			}
			if _, ok := slices.BinarySearch(set.addrs, v4Of(p.Addr())); ok {
				return true
			}
		}
		return false
	}
	for _, set := range l.v6 {
		p, err := a.Prefix(set.bits)
		if err != nil {
			continue
		}
		if _, ok := slices.BinarySearchFunc(set.addrs, v6Of(p.Addr()), cmpV6); ok {
			return true
		}
	}
	return false
}

// DeniesAgent reports whether the user agent ua matches one of l's
// patterns (case-insensitively).
func (l *List) DeniesAgent(ua string) bool {
	if l == nil || len(l.agents) == 0 || ua == "" {
		return false
	}
	lower := strings.ToLower(ua)
	for _, p := range l.agents {
		if p.glob {
			if globMatch(p.pattern, lower) {
				return true
			}
		} else if strings.Contains(lower, p.pattern) {
			return true
		}
	}
	return false
}

// globMatch reports whether s matches pattern as a whole, each '*'
// standing for any run of bytes, '/' included (path.Match's '*' stops at
// '/', which every user agent holds).
func globMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	first, last := parts[0], parts[len(parts)-1]
	if !strings.HasPrefix(s, first) {
		return false
	}
	s = s[len(first):]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return strings.HasSuffix(s, last)
}
