package denylist

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

// TestCheckRefusesAListThatDeniesEveryone (fresh attack pass A028): each
// entry may span at most a /8 or /16, but entries add up: the 256 IPv4
// /8s refused every client. A list that covers more than the bound of the
// public space is refused, whatever the entries' shape; real lists (a few
// /8s of special-purpose space, thousands of small prefixes) pass.
func TestCheckRefusesAListThatDeniesEveryone(t *testing.T) {
	t.Parallel()
	all8 := make([]string, 256)
	for i := range all8 {
		all8[i] = fmt.Sprintf("%d.0.0.0/8", i)
	}
	half16 := make([]string, 0, 32768)
	for i := range 32768 {
		half16 = append(half16, fmt.Sprintf("%d.%d.0.0/16", i>>8, i&255))
	}
	special := []string{"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.168.0.0/16", "224.0.0.0/8", "225.0.0.0/8", "240.0.0.0/8", "250.0.0.0/8"}
	smalls := make([]string, 0, 20000)
	for i := range 20000 {
		smalls = append(smalls, fmt.Sprintf("%d.%d.%d.0/24", 1+i%200, (i/200)%256, i%256))
	}
	v6all := make([]string, 0, 8192)
	for i := range 8192 {
		v6all = append(v6all, fmt.Sprintf("%x::/16", 0x2000+i))
	}
	for _, tc := range []struct {
		name    string
		entries []string
		share   float64
		refused bool
	}{
		{"the 256 /8s", all8, 0.10, true},
		{"the 256 /8s with the bound at 100 %", all8, 1, false},
		{"half the space in /16s", half16, 0.10, true},
		{"half the space in /16s with the bound at 60 %", half16, 0.60, false},
		{"twenty-six /8s of public space", all8[1:27], 0.10, true},
		{"three public /8s", all8[1:4], 0.10, false},
		{"special-purpose space only", special, 0.10, false},
		{"20 000 /24s and the same again nested", append(append([]string{}, smalls...), smalls...), 0.10, false},
		{"a /8 and everything inside it", append([]string{"11.0.0.0/8"}, smalls[:500]...), 0.10, false},
		{"every IPv6 /16 of 2000::/3", v6all, 0.10, true},
		{"just under a tenth of 2000::/3", v6all[:819], 0.10, false},
		{"just over a tenth of 2000::/3", v6all[:820], 0.10, true},
		{"IPv6 outside 2000::/3", []string{"fc00::/16", "fe80::/16", "ff00::/16"}, 0.10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := build(t, Addresses, tc.entries...).Check(tc.share)
			if (err != nil) != tc.refused {
				t.Fatalf("Check(%v) = %v, want refused %v", tc.share, err, tc.refused)
			}
		})
	}
}

// TestCheckRefusesAgentPatternsThatMatchEveryone (fresh attack passes
// A043, A71): a user-agent line "*" refused every browser and every
// webhook provider, and "chrome/14" every Chrome 140-149. A pattern that
// matches a common browser's or a provider's user agent at any version is
// refused, in every spelling; a scanner's or HTTP library's name passes.
func TestCheckRefusesAgentPatternsThatMatchEveryone(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"*", "**", "*/*", "Mozilla", "mozilla/5.0*", "*Chrome*", "applewebkit", "Safari", "gecko",
		"Android", "iPhone", "Windows", "axios", "axios/*", "github-hookshot", "stripe", "svix", "a", "e", " ", "/", "5.0", "(", "*)",
		"chrome/14", "Chrome/1", "firefox/15", "version/18.2", "axios/0.21.1", "axios/1.7.9", "github-hookshot/a1b2", "edg/14", "*chrome/14*"} {
		l := build(t, Agents, p)
		if strings.TrimSpace(p) == "" {
			if l.Len() != 0 {
				t.Fatalf("blank pattern %q kept", p)
			}
			continue
		}
		if err := l.Check(DefaultMaxShare); err == nil {
			t.Errorf("pattern %q: Check = nil, want refused", p)
		}
	}
	for _, p := range []string{"sqlmap", "nikto", "curl/*", "python-requests", "masscan", "zgrab", "Go-http-client/1.1", "*nuclei*", "libwww-perl*",
		"okhttp", "node-fetch", "HeadlessChrome", "*bot*", "spider", "python-requests/*", "scrapy/*", "wget/*", "java/*", "petalbot"} {
		if err := build(t, Agents, p).Check(DefaultMaxShare); err != nil {
			t.Errorf("pattern %q: %v, want accepted", p, err)
		}
	}
}

// A feed answer that denies too much is a failed fetch: the last good
// list stays in force, and the status says why.
func TestFeedRefusesAnAnswerThatDeniesEveryone(t *testing.T) {
	var answer atomic.Value
	answer.Store("203.0.113.0/24\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, answer.Load().(string))
	}))
	defer srv.Close()
	var all strings.Builder
	for i := range 256 {
		fmt.Fprintf(&all, "%d.0.0.0/8\n", i)
	}
	for _, tc := range []struct {
		kind  Kind
		first string
		bad   string
		probe func(*List) bool
	}{
		{Addresses, "203.0.113.0/24\n", all.String(), func(l *List) bool { return l.DeniesAddr(netip.MustParseAddr("203.0.113.9")) }},
		{Agents, "sqlmap\n", "*\n", func(l *List) bool { return l.DeniesAgent("sqlmap/1.7") }},
	} {
		answer.Store(tc.first)
		f := NewFeed(FeedOptions{URL: srv.URL, Kind: tc.kind, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err := f.Refresh(context.Background()); err != nil || !tc.probe(f.List()) {
			t.Fatalf("first fetch: %v", err)
		}
		answer.Store(tc.bad)
		err := f.Refresh(context.Background())
		_, _, last := f.Status()
		if err == nil || !strings.Contains(last, "refused the answer") {
			t.Errorf("answer %.20q: Refresh = %v, status %q; want it refused", tc.bad, err, last)
		}
		if !tc.probe(f.List()) {
			t.Errorf("answer %.20q replaced the last good list", tc.bad)
		}
		if f.List().DeniesAddr(netip.MustParseAddr("8.8.8.8")) || f.List().DeniesAgent("Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0 Safari/537.36") {
			t.Errorf("answer %.20q is in force", tc.bad)
		}
	}
}

// realAgents are user agents browsers and providers sent in 2025-2026,
// verbatim: each must be one of the shapes (the shapes model them).
var realAgents = []string{
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/143.0.0.0 Safari/537.36",
	"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/142.0.0.0 Mobile Safari/537.36",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36",
	"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/139.0.0.0 Safari/537.36",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 18_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/140.0.7339.101 Mobile/15E148 Safari/604.1",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/141.0.0.0 Safari/537.36 Edg/141.0.0.0",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36 OPR/124.0.0.0",
	"Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/28.0 Chrome/130.0.0.0 Mobile Safari/537.36",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:145.0) Gecko/20100101 Firefox/145.0",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:144.0) Gecko/20100101 Firefox/144.0",
	"Mozilla/5.0 (X11; Linux x86_64; rv:143.0) Gecko/20100101 Firefox/143.0",
	"Mozilla/5.0 (Android 15; Mobile; rv:145.0) Gecko/145.0 Firefox/145.0",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 18_6_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) FxiOS/143.0 Mobile/15E148 Safari/605.1.15",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 18_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.6 Mobile/15E148 Safari/604.1",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 26_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/26.1 Mobile/15E148 Safari/604.1",
	"Mozilla/5.0 (iPad; CPU OS 18_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.6 Mobile/15E148 Safari/604.1",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/26.0 Safari/605.1.15",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.3.1 Safari/605.1.15",
	// Android WebView and in-app browsers (fresh attack pass 3 G01).
	"Mozilla/5.0 (Linux; Android 14; SM-S918B Build/UP1A.231005.007; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/131.0.6778.135 Mobile Safari/537.36",
	"Mozilla/5.0 (Linux; Android 14; SM-S918B Build/UP1A.231005.007; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/131.0.6778.135 Mobile Safari/537.36 Instagram 357.0.0.42.90 Android (34/14; 480dpi; 1080x2340; samsung; SM-S918B; dm3q; qcom; pt_BR; 662398583)",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Instagram 357.0.0.22.93 (iPhone15,2; iOS 18_1; pt_BR; pt; scale=3.00; 1179x2556; 661234567)",
	"Mozilla/5.0 (Linux; Android 14; SM-S918B Build/UP1A.231005.007; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/131.0.6778.135 Mobile Safari/537.36 [FB_IAB/FB4A;FBAV/490.0.0.48.109;]",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [FBAN/FBIOS;FBAV/490.0.0.40.110;FBBV/660812345;FBDV/iPhone15,2;FBMD/iPhone;FBSN/iOS;FBSV/18.1;FBSS/3;FBCR/;FBID/phone;FBLC/pt_BR;FBOP/5]",
	"Mozilla/5.0 (Linux; Android 14; SM-S918B Build/UP1A.231005.007; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/131.0.6778.135 Mobile Safari/537.36 GSA/15.47.26.29.arm64",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) GSA/343.0.695551749 Mobile/15E148 Safari/604.1",
	"Mozilla/5.0 (Linux; Android 14; SM-S918B Build/UP1A.231005.007; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/131.0.6778.135 Mobile Safari/537.36 Line/14.19.1/IAB",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Safari Line/14.19.0",
	"Mozilla/5.0 (Linux; Android 14; SM-S918B Build/UP1A.231005.007; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/131.0.6778.135 Mobile Safari/537.36 MicroMessenger/8.0.47.2560(0x28002F35) NetType/WIFI Language/zh_CN ABI/arm64",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 MicroMessenger/8.0.50(0x1800323c) NetType/WIFI Language/zh_CN",
	"Mozilla/5.0 (Windows NT 10.0; WOW64; Trident/7.0; rv:11.0) like Gecko",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64; Trident/7.0; rv:11.0) like Gecko",
	"Dalvik/2.1.0 (Linux; U; Android 14; SM-S918B Build/UP1A.231005.007)",
	"axios/1.7.9", "axios/1.12.2", "GitHub-Hookshot/a1b2c3d", "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
	"Svix-Webhooks/1.57.0 (sender-abcde; +https://www.svix.com/http-sender/)",
}

// versionedAgents returns, for every major version 1-300, the user agent
// of each browser family and provider at that version, and the
// "<product>/<version>" tokens that name it.
func versionedAgents() (agents, tokens []string) {
	formats := []string{
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%[1]d.0.0.0 Safari/537.36",
		"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%[1]d.0.0.0 Mobile Safari/537.36",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%[1]d.0.0.0 Safari/537.36",
		"Mozilla/5.0 (iPhone; CPU iPhone OS %[2]d_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/%[1]d.0.6778.73 Mobile/15E148 Safari/604.1",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%[1]d.0.0.0 Safari/537.36 Edg/%[1]d.0.0.0",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%[1]d.0.0.0 Safari/537.36 OPR/%[2]d.0.0.0",
		"Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/%[2]d.0 Chrome/%[1]d.0.0.0 Mobile Safari/537.36",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:%[1]d.0) Gecko/20100101 Firefox/%[1]d.0",
		"Mozilla/5.0 (Android 15; Mobile; rv:%[1]d.0) Gecko/%[1]d.0 Firefox/%[1]d.0",
		"Mozilla/5.0 (iPhone; CPU iPhone OS %[2]d_%[3]d like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/%[2]d.%[3]d Mobile/15E148 Safari/604.1",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/%[2]d.%[3]d.1 Safari/605.1.15",
		"Mozilla/5.0 (Linux; Android %[2]d; SM-S918B Build/UP1A.%[1]d.007; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/%[1]d.0.6778.135 Mobile Safari/537.36 Instagram %[1]d.0.0.42.90 Android (34/%[2]d; 480dpi; 1080x2340; samsung; SM-S918B; dm3q; qcom; pt_BR; 662398583)",
		"Mozilla/5.0 (iPhone; CPU iPhone OS %[2]d_%[3]d like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [FBAN/FBIOS;FBAV/%[1]d.0.0.40.110;FBBV/660812345;FBDV/iPhone15,2;FBMD/iPhone;FBSN/iOS;FBSV/%[2]d.%[3]d;FBSS/3;FBCR/;FBID/phone;FBLC/pt_BR;FBOP/5]",
		"Mozilla/5.0 (iPhone; CPU iPhone OS %[2]d_%[3]d like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) GSA/%[1]d.0.695551749 Mobile/15E148 Safari/604.1",
		"Mozilla/5.0 (Linux; Android %[2]d; SM-S918B Build/UP1A.231005.007; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/%[1]d.0.6778.135 Mobile Safari/537.36 Line/%[2]d.%[1]d.1/IAB",
		"Mozilla/5.0 (Linux; Android %[2]d; SM-S918B Build/UP1A.231005.007; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/%[1]d.0.6778.135 Mobile Safari/537.36 MicroMessenger/8.0.%[1]d(0x28002F35) NetType/WIFI Language/zh_CN ABI/arm64",
		"Mozilla/5.0 (Windows NT 10.0; WOW64; Trident/%[3]d.0; rv:%[1]d.0) like Gecko",
		"Dalvik/2.1.%[1]d (Linux; U; Android %[2]d; SM-S918B Build/UP1A.231005.007)",
		"axios/%[2]d.%[3]d.%[1]d",
		"Svix-Webhooks/%[2]d.%[1]d.0 (sender-abcde; +https://www.svix.com/http-sender/)",
	}
	products := []string{"chrome/", "crios/", "edg/", "opr/", "samsungbrowser/", "firefox/", "rv:", "version/", "iphone os ", "axios/", "instagram ", "fbav/", "gsa/", "line/", "micromessenger/", "trident/", "dalvik/"}
	for v := 1; v <= 300; v++ {
		for _, f := range formats {
			ua := fmt.Sprintf(f, v, v%40, v%10)
			agents = append(agents, ua)
			lower := strings.ToLower(ua)
			for _, p := range products {
				if i := strings.Index(lower, p); i >= 0 {
					end := i + len(p)
					for end < len(lower) && lower[end] != ' ' && lower[end] != ')' && lower[end] != ';' {
						end++
					}
					// "chrome/14", "chrome/143.0", "chrome/143.0.0.0": every
					// prefix of the version that ends at a digit.
					for k := i + len(p) + 1; k <= end; k++ {
						if c := lower[k-1]; '0' <= c && c <= '9' {
							tokens = append(tokens, lower[i:k])
						}
					}
				}
			}
		}
	}
	return agents, tokens
}

// TestCheckRefusesWebViewAndInAppBrowserPatterns (fresh attack pass 3
// G01): patterns that match Android WebView and the in-app browsers of
// Instagram, Facebook, the Google app, LINE and WeChat, IE 11 and Dalvik
// passed the guard and refused that whole population ("Build/" 403'd
// every Instagram link). Each is refused now, in any case and as a glob;
// a device model or a scanner's name still passes.
func TestCheckRefusesWebViewAndInAppBrowserPatterns(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"Build/", "wv)", "; wv", "Instagram", "FBAN", "FBAV/", "FB_IAB", "FBIOS", "GSA/", "Line/", "MicroMessenger",
		"Dalvik", "Trident", "Trident/7.0", "like Gecko", "Version/4.0 Chrome", "*Instagram*", "*; wv)*", "dalvik/*", "NetType/WIFI", "Build/UP1A",
		// Fresh attack pass 6 G01/G02: Chromebooks and distributions' Firefox.
		"cros", "CrOS x86_64", "CrOS aarch64", "ubuntu", "*Ubuntu*", "Fedora"} {
		for _, v := range []string{p, strings.ToUpper(p), strings.ToLower(p)} {
			if err := build(t, Agents, v).Check(DefaultMaxShare); err == nil {
				t.Errorf("pattern %q: Check = nil, want refused", v)
			}
		}
	}
	for _, p := range []string{"sqlmap", "SM-A146M", "facebookexternalhit", "python-requests", "Go-http-client"} {
		if err := build(t, Agents, p).Check(DefaultMaxShare); err != nil {
			t.Errorf("pattern %q: Check = %v, want accepted", p, err)
		}
	}
}

// TestCheckRefusesEveryVersionOfEveryBrowser (fresh attack pass A71): the
// guard held Chrome/131 samples, so "chrome/14" passed and then refused
// every Chrome 140-149. Every browser family's and provider's user agent
// at every version 1-300, every "<product>/<version prefix>" token of
// them, random substrings and globs of them, and the real user agents of
// 2025-2026 are refused as patterns; the fallback model (DeniesAgent over
// the generated agents) agrees with the shapes on every one.
func TestCheckRefusesEveryVersionOfEveryBrowser(t *testing.T) {
	t.Parallel()
	agents, tokens := versionedAgents()
	refused := func(p string) {
		t.Helper()
		if err := build(t, Agents, p).Check(DefaultMaxShare); err == nil {
			t.Errorf("pattern %q: Check = nil, want refused", p)
		}
	}
	for _, ua := range append(append([]string{}, realAgents...), agents...) {
		refused(ua)
	}
	for _, tok := range tokens {
		refused(tok)
	}
	rng := rand.New(rand.NewPCG(71, 71))
	for range 3000 {
		ua := strings.ToLower(agents[rng.IntN(len(agents))])
		i := rng.IntN(len(ua))
		j := i + 1 + rng.IntN(len(ua)-i)
		sub := strings.TrimSpace(ua[i:j])
		if sub == "" || strings.Contains(sub, "#") {
			continue
		}
		refused(sub)
		refused("*" + sub + "*")
		refused(ua[:i] + "*")
	}
}

// FuzzAgentShapes holds the shape matcher to the plain one: a pattern
// that DeniesAgent finds in one of the generated user agents (versions
// 1-300 of every family) is refused by Check (seed corpus in
// testdata/fuzz/FuzzAgentShapes).
func FuzzAgentShapes(f *testing.F) {
	agents, _ := versionedAgents()
	agents = append(agents, realAgents...)
	for _, s := range []string{"chrome/14", "*chrome/14*", "version/18.2", "sqlmap", "curl/*", "14", "mobile/15e1", "axios/1.", "svix-webhooks/1.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, pattern string) {
		var b Builder
		if err := b.Add(Agents, pattern); err != nil {
			return
		}
		l := b.List()
		if l.Len() == 0 {
			return
		}
		denies := false
		for _, ua := range agents {
			if l.DeniesAgent(ua) {
				denies = true
				break
			}
		}
		if denies && l.Check(DefaultMaxShare) == nil {
			t.Fatalf("pattern %q denies a generated browser or provider agent, and Check accepts it", pattern)
		}
	})
}

// BenchmarkCheckAgents is the guard's cost per user-agent pattern: a
// scanner name (refused by the literal-run filter) and a pattern that
// runs the shape matcher over every shape.
func BenchmarkCheckAgents(b *testing.B) {
	for _, p := range []string{"sqlmap", "chrome-lighthouse/1", "safari/537.36 (khtml, like gecko) chrome/1"} {
		b.Run(p, func(b *testing.B) {
			var bl Builder
			_ = bl.Add(Agents, p)
			l := bl.List()
			for b.Loop() {
				_ = l.Check(DefaultMaxShare)
			}
		})
	}
}
