package denylist

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
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
// user agent at any version (essentialAgents: `*`, "mozilla", "chrome/14",
// "axios"...).
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
		if a, ok := p.matchesEssential(); ok {
			return fmt.Errorf("user-agent pattern %q matches %s (%q, at some version): it would refuse most clients; name the client it is meant for", p.pattern, a.name, a.example())
		}
	}
	return nil
}

// An agentShape is a user agent no deny list may refuse, at every version:
// its lower-cased text with each version a slot, '#' standing for one or
// more of [0-9._] (any version: "131.0.0.0", "18_6_2", "20100101") and
// '%' for one or more hex digits (a build, a hook id). A pattern that matches the shape with any slot values
// is refused, so no pattern can refuse a browser release train that
// shipped after the shapes were written ("chrome/14" refuses Chrome
// 140-149: fresh attack pass A71, when the guard held Chrome/131 samples).
type agentShape struct{ name, shape string }

// example is the shape with plausible values in its slots, for messages.
func (a agentShape) example() string {
	return strings.NewReplacer("#", "N", "%", "x").Replace(a.shape)
}

// essentialAgents are the browsers most visitors use, on each platform,
// and the webhook providers Borda takes events from (Evolution API sends
// with axios). Generic HTTP libraries (python-requests, okhttp,
// Go-http-client, curl) are not among them: refusing them is a common
// deny list's purpose, and no provider Borda serves sends with them.
var essentialAgents = []agentShape{
	{"Chrome on Windows", "mozilla/# (windows nt #; win64; x64) applewebkit/# (khtml, like gecko) chrome/# safari/#"},
	{"Chrome on macOS", "mozilla/# (macintosh; intel mac os x #) applewebkit/# (khtml, like gecko) chrome/# safari/#"},
	{"Chrome on Linux", "mozilla/# (x11; linux x86_64) applewebkit/# (khtml, like gecko) chrome/# safari/#"},
	{"Chrome on Android", "mozilla/# (linux; android #; k) applewebkit/# (khtml, like gecko) chrome/# mobile safari/#"},
	{"Chrome on iPhone", "mozilla/# (iphone; cpu iphone os # like mac os x) applewebkit/# (khtml, like gecko) crios/# mobile/% safari/#"},
	{"Edge on Windows", "mozilla/# (windows nt #; win64; x64) applewebkit/# (khtml, like gecko) chrome/# safari/# edg/#"},
	{"Opera on Windows", "mozilla/# (windows nt #; win64; x64) applewebkit/# (khtml, like gecko) chrome/# safari/# opr/#"},
	{"Samsung Internet", "mozilla/# (linux; android #; samsung sm-s918b) applewebkit/# (khtml, like gecko) samsungbrowser/# chrome/# mobile safari/#"},
	{"Firefox on Windows", "mozilla/# (windows nt #; win64; x64; rv:#) gecko/# firefox/#"},
	{"Firefox on macOS", "mozilla/# (macintosh; intel mac os x #; rv:#) gecko/# firefox/#"},
	{"Firefox on Linux", "mozilla/# (x11; linux x86_64; rv:#) gecko/# firefox/#"},
	{"Firefox on Android", "mozilla/# (android #; mobile; rv:#) gecko/# firefox/#"},
	// ChromeOS (the schools' Chromebooks) and Linux distributions' own
	// spellings (fresh attack pass 6 G01/G02: "cros" and "ubuntu" passed
	// the guard and refused every Chromebook or Ubuntu Firefox).
	{"Chrome on ChromeOS", "mozilla/# (x11; cros x86_64 #) applewebkit/# (khtml, like gecko) chrome/# safari/#"},
	{"Chrome on ChromeOS (ARM)", "mozilla/# (x11; cros aarch64 #) applewebkit/# (khtml, like gecko) chrome/# safari/#"},
	{"Firefox on Ubuntu", "mozilla/# (x11; ubuntu; linux x86_64; rv:#) gecko/# firefox/#"},
	{"Firefox on Fedora", "mozilla/# (x11; fedora; linux x86_64; rv:#) gecko/# firefox/#"},
	{"Firefox on iPhone", "mozilla/# (iphone; cpu iphone os # like mac os x) applewebkit/# (khtml, like gecko) fxios/# mobile/% safari/#"},
	{"Safari on iPhone", "mozilla/# (iphone; cpu iphone os # like mac os x) applewebkit/# (khtml, like gecko) version/# mobile/% safari/#"},
	{"Safari on iPad", "mozilla/# (ipad; cpu os # like mac os x) applewebkit/# (khtml, like gecko) version/# mobile/% safari/#"},
	{"Safari on macOS", "mozilla/# (macintosh; intel mac os x #) applewebkit/# (khtml, like gecko) version/# safari/#"},
	// Android WebView and the in-app browsers of Instagram, Facebook, the
	// Google app, LINE and WeChat open every link tapped in those apps;
	// IE 11 is still on school computers; Dalvik is Android's own HTTP
	// stack, the user agent of many apps' requests (fresh attack pass 3
	// G01: "Build/", "wv)", "Instagram", "FBAN", "GSA/" passed the guard).
	// The device and build are one real model's ("SM-S918B
	// Build/UP1A.…"): a pattern naming one device model is not refused.
	{"Android WebView", "mozilla/# (linux; android #; sm-s918b build/up1a.#; wv) applewebkit/# (khtml, like gecko) version/# chrome/# mobile safari/#"},
	{"Instagram on Android", "mozilla/# (linux; android #; sm-s918b build/up1a.#; wv) applewebkit/# (khtml, like gecko) version/# chrome/# mobile safari/# instagram # android (#/#; #dpi; #x#; samsung; sm-s918b; dm3q; qcom; pt_br; #)"},
	{"Instagram on iPhone", "mozilla/# (iphone; cpu iphone os # like mac os x) applewebkit/# (khtml, like gecko) mobile/% instagram # (iphone15,2; ios #; pt_br; pt; scale=#; #x#; #)"},
	{"Facebook on Android", "mozilla/# (linux; android #; sm-s918b build/up1a.#; wv) applewebkit/# (khtml, like gecko) version/# chrome/# mobile safari/# [fb_iab/fb4a;fbav/#;]"},
	{"Facebook on iPhone", "mozilla/# (iphone; cpu iphone os # like mac os x) applewebkit/# (khtml, like gecko) mobile/% [fban/fbios;fbav/#;fbbv/#;fbdv/iphone15,2;fbmd/iphone;fbsn/ios;fbsv/#;fbss/#;fbcr/;fbid/phone;fblc/pt_br;fbop/5]"},
	{"Google app on Android", "mozilla/# (linux; android #; sm-s918b build/up1a.#; wv) applewebkit/# (khtml, like gecko) version/# chrome/# mobile safari/# gsa/#.arm64"},
	{"Google app on iPhone", "mozilla/# (iphone; cpu iphone os # like mac os x) applewebkit/# (khtml, like gecko) gsa/# mobile/% safari/#"},
	{"LINE on Android", "mozilla/# (linux; android #; sm-s918b build/up1a.#; wv) applewebkit/# (khtml, like gecko) version/# chrome/# mobile safari/# line/#/iab"},
	{"LINE on iPhone", "mozilla/# (iphone; cpu iphone os # like mac os x) applewebkit/# (khtml, like gecko) mobile/% safari line/#"},
	{"WeChat on Android", "mozilla/# (linux; android #; sm-s918b build/up1a.#; wv) applewebkit/# (khtml, like gecko) version/# chrome/# mobile safari/# micromessenger/#(0x%) nettype/wifi language/zh_cn abi/arm64"},
	{"WeChat on iPhone", "mozilla/# (iphone; cpu iphone os # like mac os x) applewebkit/# (khtml, like gecko) mobile/% micromessenger/#(0x%) nettype/wifi language/zh_cn"},
	{"Internet Explorer 11", "mozilla/# (windows nt #; wow64; trident/#; rv:#) like gecko"},
	{"Internet Explorer 11 (64-bit)", "mozilla/# (windows nt #; win64; x64; trident/#; rv:#) like gecko"},
	{"Dalvik (Android apps)", "dalvik/# (linux; u; android #; sm-s918b build/up1a.#)"},
	{"Evolution API's webhooks (axios)", "axios/#"},
	{"GitHub's webhooks", "github-hookshot/%"},
	{"Stripe's webhooks", "stripe/# (+https://stripe.com/docs/webhooks)"},
	{"Standard Webhooks (Svix)", "svix-webhooks/# (sender-%; +https://www.svix.com/http-sender/)"},
}

// essentialText is every shape's text, for matchesEssential's quick
// refusal of patterns sharing no literal text with any shape.
var essentialText = func() string {
	var b strings.Builder
	for _, a := range essentialAgents {
		b.WriteString(a.shape)
		b.WriteByte('\n')
	}
	return b.String()
}()

// matchesEssential returns the first essential agent p matches at some
// version. A run of pattern characters no slot takes (neither '*', a
// hex digit, '.' nor '_') can only match shape text as it is, so a pattern with such a
// run found in no shape matches none, without running the matcher: a
// feed of a million scanner names ("sqlmap": "sqlm") costs a few
// substring searches each.
func (p agentPattern) matchesEssential() (agentShape, bool) {
	for _, piece := range strings.FieldsFunc(p.pattern, func(r rune) bool {
		return r == '*' || r < utf8.RuneSelf && (slotAccepts('%', byte(r)) || slotAccepts('#', byte(r)))
	}) {
		if !strings.Contains(essentialText, piece) {
			return agentShape{}, false
		}
	}
	shapes := compiledShapes()
	for k := range shapes {
		if shapeMatches(p.pattern, p.glob, &shapes[k]) {
			return essentialAgents[k], true
		}
	}
	return agentShape{}, false
}

// slotAccepts reports whether the slot kind k ('#' or '%') takes c.
func slotAccepts(k, c byte) bool {
	if '0' <= c && c <= '9' {
		return true
	}
	if k == '#' {
		return c == '.' || c == '_'
	}
	return 'a' <= c && c <= 'f'
}

func isSlot(c byte) bool { return c == '#' || c == '%' }

// shapeWords bounds a shape's length: 64 × shapeWords - 1 bytes.
const shapeWords = 4

// bits is a set of positions in a shape, 0 to len(shape).
type bits [shapeWords]uint64

func (b bits) or(c bits) bits {
	for i := range b {
		b[i] |= c[i]
	}
	return b
}

func (b bits) and(c bits) bits {
	for i := range b {
		b[i] &= c[i]
	}
	return b
}

// next is b with every position moved one on.
func (b bits) next() bits {
	for i := shapeWords - 1; i > 0; i-- {
		b[i] = b[i]<<1 | b[i-1]>>63
	}
	b[0] <<= 1
	return b
}

func (b bits) has(j int) bool { return b[j/64]&(1<<(j%64)) != 0 }

func (b *bits) set(j int) { b[j/64] |= 1 << (j % 64) }

func (b bits) empty() bool { return b == bits{} }

// compiledShape is a shape as position sets: lit[c] the positions holding
// the literal byte c, takes[c] the slots that take c, all every position.
type compiledShape struct {
	n          int
	lit, takes [256]bits
	all, slots bits
}

var compiledShapes = sync.OnceValue(func() []compiledShape {
	out := make([]compiledShape, len(essentialAgents))
	for k, a := range essentialAgents {
		cs := &out[k]
		cs.n = len(a.shape)
		if cs.n >= 64*shapeWords {
			panic("denylist: essential agent shape too long: " + a.name)
		}
		for j := 0; j <= cs.n; j++ {
			cs.all.set(j)
		}
		for j := 0; j < cs.n; j++ {
			c := a.shape[j]
			if !isSlot(c) {
				cs.lit[c].set(j)
				continue
			}
			cs.slots.set(j)
			for x := 0; x < 256; x++ {
				if slotAccepts(c, byte(x)) {
					cs.takes[x].set(j)
				}
			}
		}
	}
	return out
})

// shapeMatches reports whether some user agent of the shape (its slots
// filled with any values) matches pattern: as a substring, or as a glob
// over the whole user agent ('*' any run). It runs the pattern over the
// shape as two position sets, out (before shape[j]) and in (inside the
// slot at shape[j], at least one character taken): a few word operations
// per pattern byte.
func shapeMatches(pattern string, glob bool, cs *compiledShape) bool {
	var out, in bits
	if glob {
		out.set(0)
	} else {
		out, in = cs.all, cs.slots // the pattern may start anywhere, inside a value too
	}
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		if c == '*' && glob {
			// Any run of characters: every position from the first held.
			cur := out.or(in)
			var from bits
			seen := false
			for j := 0; j <= cs.n; j++ {
				if seen = seen || cur.has(j); seen {
					from.set(j)
				}
			}
			out, in = from, from.and(cs.slots)
			continue
		}
		in = out.or(in).and(cs.takes[c])
		out = out.and(cs.lit[c]).next().or(in.next()) // a slot with something taken may end
		if out.empty() && in.empty() {
			return false
		}
	}
	return !glob || out.has(cs.n)
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
