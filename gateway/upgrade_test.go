package gateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// looseH2CUpstream accepts an h2c upgrade the way a lenient server
// would (any Upgrade: h2c, HTTP2-Settings or not) and then writes
// "h2c-tunnel" on the switched connection; with always101 it switches
// for every request. It records the headers it saw.
type looseH2CUpstream struct {
	ln     net.Listener
	mu     sync.Mutex
	seen   []http.Header
	wg     sync.WaitGroup
	always bool
}

func newLooseH2CUpstream(t *testing.T, always101 bool) *looseH2CUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &looseH2CUpstream{ln: ln, always: always101}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for i := 0; i < 100; i++ { // bounded
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				u.mu.Lock()
				u.seen = append(u.seen, req.Header.Clone())
				u.mu.Unlock()
				if u.always || strings.EqualFold(req.Header.Get("Upgrade"), "h2c") {
					_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\nh2c-tunnel")
					return
				}
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nplain")
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); u.wg.Wait() })
	return u
}

func (u *looseH2CUpstream) headers() []http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]http.Header(nil), u.seen...)
}

// An h2c upgrade (HTTP2-Settings left out of Connection, or any case or
// list spelling) was tunnelled to a lenient upstream, which then served
// HTTP/2 on a connection the gateway no longer looked at. Now the
// upstream sees a plain request without Upgrade or HTTP2-Settings.
func TestH2CUpgradeIsNeverTunnelled(t *testing.T) {
	t.Parallel()
	up := newLooseH2CUpstream(t, false)
	h := newHarness(t, routes(testRoute(t, "app", "http://"+up.ln.Addr().String())))
	for _, hs := range [][]string{
		{"Connection: Upgrade", "Upgrade: h2c", "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA"},
		{"Connection: Upgrade, HTTP2-Settings", "Upgrade: h2c", "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA"},
		{"Connection: upgrade", "Upgrade: H2C"},
		{"Connection: Upgrade", "Upgrade: websocket, h2c"},
		{"Connection: Upgrade", "Upgrade: h2c", "Upgrade: websocket"},
	} {
		n := len(up.headers())
		res, body := rawGet(t, h, "/", hs...)
		if res.StatusCode == http.StatusSwitchingProtocols || strings.Contains(body, "h2c-tunnel") {
			t.Errorf("%q: tunnelled (%d %q)", hs, res.StatusCode, body)
			continue
		}
		seen := up.headers()
		if len(seen) != n+1 {
			t.Errorf("%q: upstream saw %d requests, want 1", hs, len(seen)-n)
			continue
		}
		if got := seen[n]; got.Get("Upgrade") != "" || got.Get("Http2-Settings") != "" {
			t.Errorf("%q: upstream saw Upgrade %q, HTTP2-Settings %q", hs, got.Get("Upgrade"), got.Get("Http2-Settings"))
		}
	}
}

// An upstream that answers 101 to a request that asked for no (allowed)
// upgrade gets a 502, not a tunnel.
func TestUnsolicitedSwitchingProtocolsIsBadGateway(t *testing.T) {
	t.Parallel()
	up := newLooseH2CUpstream(t, true)
	h := newHarness(t, routes(testRoute(t, "app", "http://"+up.ln.Addr().String())))
	for _, hs := range [][]string{nil, {"Connection: Upgrade", "Upgrade: h2c"}} {
		if res, body := rawGet(t, h, "/", hs...); res.StatusCode != http.StatusBadGateway || strings.Contains(body, "h2c-tunnel") {
			t.Errorf("%q: got %d %q, want 502", hs, res.StatusCode, body)
		}
	}
}

// upgrades: [] tunnels nothing, not even websocket, and neither does a
// nil list (the websocket default is the configuration's); upgrades lists
// are matched case-insensitively.
func TestRouteUpgradesListDecidesWhatIsTunnelled(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	none, custom := under(testRoute(t, "none", up.URL), "/none"), under(testRoute(t, "custom", up.URL), "/custom")
	zero := under(testRoute(t, "zero", up.URL), "/zero")
	none.Upgrades, custom.Upgrades, zero.Upgrades = []string{}, []string{"Custom-Proto"}, nil
	h := newHarness(t, routes(none, custom, zero))
	for _, tc := range []struct {
		path, upgrade string
		kept          bool
	}{
		{"/none", "websocket", false},
		{"/zero", "websocket", false},
		{"/custom", "websocket", false},
		{"/custom", "custom-proto", true},
	} {
		rawGet(t, h, tc.path, "Connection: Upgrade", "Upgrade: "+tc.upgrade)
		if got := up.last(t).Header.Get("Upgrade"); (got != "") != tc.kept {
			t.Errorf("%s Upgrade: %s: upstream saw Upgrade %q, kept want %v", tc.path, tc.upgrade, got, tc.kept)
		}
	}
}
