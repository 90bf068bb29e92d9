package servicetest

import (
	"strings"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// FaultProxy puts an in-process toxiproxy on a free 127.0.0.1 port in
// front of upstream (host:port) and returns it with its listen address,
// stopped at the end of the test. Faults are added with AddToxic.
func FaultProxy(t testing.TB, upstream string) (*toxiproxy.Proxy, string) {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, Name(t), "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("starting the fault proxy: %v", err)
	}
	t.Cleanup(p.Stop)
	return p, p.Listen
}

// AddToxic adds a toxic given as toxiproxy's JSON, e.g. 500 ms on every
// reply: {"name":"slow","type":"latency","stream":"downstream","attributes":{"latency":500}}.
func AddToxic(t testing.TB, p *toxiproxy.Proxy, spec string) {
	t.Helper()
	if _, err := p.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil {
		t.Fatalf("adding the toxic %s: %v", spec, err)
	}
}
