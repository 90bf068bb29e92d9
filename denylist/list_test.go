package denylist

import (
	"math/rand/v2"
	"net/netip"
	"runtime"
	"strings"
	"testing"
)

func build(t *testing.T, k Kind, entries ...string) *List {
	t.Helper()
	var b Builder
	for _, e := range entries {
		if err := b.Add(k, e); err != nil {
			t.Fatal(err)
		}
	}
	return b.List()
}

func TestDeniesAddrEverySpelling(t *testing.T) {
	l := build(t, Addresses, "203.0.113.7", "198.51.100.0/24", "2001:db8::/32", "::ffff:192.0.2.0/120", " 10.1.2.3 # a comment", "fe80::1/128")
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"203.0.113.7", true}, {"203.0.113.8", false},
		{"::ffff:203.0.113.7", true}, // the IPv4-mapped form of a denied IPv4
		{"198.51.100.255", true}, {"198.51.101.0", false},
		{"2001:db8:ffff::1", true}, {"2001:db9::1", false},
		{"192.0.2.9", true}, {"::ffff:192.0.2.9", true}, // a mapped prefix counts as IPv4
		{"10.1.2.3", true},
		{"fe80::1%eth0", true}, // a zone does not hide an address
		{"::1", false}, {"0.0.0.0", false},
	} {
		if got := l.DeniesAddr(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("DeniesAddr(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
	var nilList *List
	if nilList.DeniesAddr(netip.MustParseAddr("1.2.3.4")) || nilList.DeniesAgent("x") || nilList.Len() != 0 {
		t.Error("a nil list denies something")
	}
}

func TestAddRefusesWhatIsNotAnAddress(t *testing.T) {
	for _, e := range []string{"203.0.113", "example.org", "203.0.113.0/33", "fe80::1%eth0", "::ffff:0.0.0.0/80", "1.2.3.4/-1"} {
		var b Builder
		if err := b.Add(Addresses, e); err == nil || !strings.Contains(err.Error(), e) {
			t.Errorf("Add(%q) = %v, want an error naming the entry", e, err)
		}
	}
}

// TestAddRefusesAPrefixThatDeniesTooMuch: one line 0.0.0.0/0 (or ::/0)
// in a feed refused every client, webhooks included, within one refresh
// (fresh attack pass A102). Every spelling of a prefix wider than /8
// (IPv4) or /16 (IPv6) is refused, and a feed answer holding one is a
// failed fetch (TestFeedKeepsTheLastGoodListOnEveryFailure).
func TestAddRefusesAPrefixThatDeniesTooMuch(t *testing.T) {
	for _, e := range []string{"0.0.0.0/0", "::/0", "0.0.0.0/1", "128.0.0.0/7", "10.0.0.0/7", "::ffff:0:0/96",
		"::ffff:0.0.0.0/103", "2000::/3", "2001::/15", "fc00::/7", "::/1"} {
		var b Builder
		if err := b.Add(Addresses, e); err == nil || !strings.Contains(err.Error(), "wider than") {
			t.Errorf("Add(%q) = %v, want a refusal as too wide", e, err)
		}
	}
	for _, e := range []string{"10.0.0.0/8", "::ffff:10.0.0.0/104", "2001::/16", "2001:db8::/32", "203.0.113.7"} {
		var b Builder
		if err := b.Add(Addresses, e); err != nil {
			t.Errorf("Add(%q) = %v, want it accepted", e, err)
		}
	}
}

// The invariant: an address is denied exactly when a listed prefix
// contains it (its IPv4-mapped form counting as IPv4), checked against a
// plain scan over generated lists and addresses of both families.
func TestDeniesAddrMatchesAScan(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 5))
	randAddr := func() netip.Addr {
		if r.IntN(2) == 0 {
			return netip.AddrFrom4([4]byte{byte(r.IntN(4)), byte(r.IntN(4)), byte(r.IntN(256)), byte(r.IntN(256))})
		}
		var b [16]byte
		b[0], b[1], b[15] = 0x20, byte(r.IntN(4)), byte(r.IntN(256))
		if r.IntN(4) == 0 { // an IPv4-mapped address
			b = [16]byte{10: 0xff, 11: 0xff, 12: byte(r.IntN(4)), 13: byte(r.IntN(4)), 14: byte(r.IntN(256)), 15: byte(r.IntN(256))}
		}
		return netip.AddrFrom16(b)
	}
	for range 200 {
		var b Builder
		var prefixes []netip.Prefix
		for range 1 + r.IntN(30) {
			a := randAddr()
			bits := MinIPv4Bits + r.IntN(33-MinIPv4Bits)
			switch {
			case a.Is4In6():
				bits = 96 + MinIPv4Bits + r.IntN(33-MinIPv4Bits)
			case a.Is6():
				bits = MinIPv6Bits + r.IntN(129-MinIPv6Bits)
			}
			p := netip.PrefixFrom(a, bits)
			if err := b.Add(Addresses, p.String()); err != nil {
				t.Fatal(err)
			}
			if a.Is4In6() {
				p = netip.PrefixFrom(a.Unmap(), bits-96)
			}
			prefixes = append(prefixes, p.Masked())
		}
		l := b.List()
		for range 300 {
			a := randAddr()
			want := false
			for _, p := range prefixes {
				want = want || p.Contains(a.Unmap())
			}
			if got := l.DeniesAddr(a); got != want {
				t.Fatalf("DeniesAddr(%s) = %v, scan says %v over %v", a, got, want, prefixes)
			}
		}
	}
}

func TestDeniesAgent(t *testing.T) {
	l := build(t, Agents, "sqlmap", "curl/*", "*bot*crawl*", "# only a comment", "")
	for _, tc := range []struct {
		ua   string
		want bool
	}{
		{"sqlmap/1.7#stable", true}, {"SQLMap/1.7", true}, {"Mozilla/5.0 sqlmap", true},
		{"curl/8.5.0", true}, {"CURL/7", true}, {"libcurl/8", false},
		{"Mozilla/5.0 (compatible; SomeBot/2.1; +crawl)", true}, {"Mozilla/5.0 (compatible; SomeBot/2.1)", false},
		{"", false}, {"Mozilla/5.0", false},
	} {
		if got := l.DeniesAgent(tc.ua); got != tc.want {
			t.Errorf("DeniesAgent(%q) = %v, want %v", tc.ua, got, tc.want)
		}
	}
	if l.Len() != 3 {
		t.Errorf("Len = %d, want 3 (comments and blank lines are not entries)", l.Len())
	}
}

func TestReadNamesTheBadLine(t *testing.T) {
	var b Builder
	err := b.Read(Addresses, "deny.txt", strings.NewReader("# list\n203.0.113.1\n\nnot-an-ip\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "deny.txt:4: ") {
		t.Fatalf("Read error = %v, want one naming deny.txt:4", err)
	}
}

// TestListMemoryPerEntryIsCompact: a feed of 973 989 addresses, inside
// the 16 MiB cap, held ~200 MB as a map of netip.Prefix and peaked at
// 375 MB during refreshes (fresh attack pass A103). A million IPv4
// entries now hold 4 bytes each; the bound below leaves room for the
// slice growth of the build and the heap's own slack.
func TestListMemoryPerEntryIsCompact(t *testing.T) {
	const n = 1_000_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var b Builder
	var buf [4]byte
	for i := range n {
		buf = [4]byte{byte(10 + i>>24), byte(i >> 16), byte(i >> 8), byte(i)}
		if err := b.Add(Addresses, netip.AddrFrom4(buf).String()); err != nil {
			t.Fatal(err)
		}
	}
	l := b.List()
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d entries hold %.1f MB (%.1f B each)", n, float64(held)/1e6, float64(held)/n)
	if held > 16<<20 {
		t.Errorf("%d entries hold %d bytes, want at most 16 MiB", n, held)
	}
	if !l.DeniesAddr(netip.AddrFrom4([4]byte{10, 0, 0, 7})) || l.DeniesAddr(netip.AddrFrom4([4]byte{9, 0, 0, 7})) {
		t.Error("the compact list answers wrongly")
	}
	runtime.KeepAlive(l)
}
