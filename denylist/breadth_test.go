package denylist

import (
	"context"
	"fmt"
	"io"
	"log/slog"
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

// TestCheckRefusesAgentPatternsThatMatchEveryone (fresh attack pass
// A043): a user-agent line "*" refused every browser and every webhook
// provider. A pattern that matches a common browser's or a provider's
// user agent is refused, in every spelling; a scanner's name passes.
func TestCheckRefusesAgentPatternsThatMatchEveryone(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"*", "**", "*/*", "Mozilla", "mozilla/5.0*", "*Chrome*", "applewebkit", "Safari", "gecko",
		"Android", "iPhone", "Windows", "axios", "axios/*", "github-hookshot", "stripe", "svix", "a", "e", " ", "/", "5.0", "(", "*)"} {
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
	for _, p := range []string{"sqlmap", "nikto", "curl/*", "python-requests", "masscan", "zgrab", "axios/0.21.1", "Go-http-client/1.1", "*nuclei*", "libwww-perl*"} {
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
