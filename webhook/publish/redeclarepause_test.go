package publish

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/webhook/internal/brokertest"
)

// TestPublisher_AReturnRedeclaresAtMostOncePerPause: a basic.return asks
// for the topology again (a queue deleted under the gateway), at most
// once per redeclareEvery since the last declare. On a clock the test
// drives: once the pause has passed, a return brings a deleted queue
// back at once, not at the next 5 s redeclare; returns within the pause
// redeclare nothing, and the first one after it does.
func TestPublisher_AReturnRedeclaresAtMostOncePerPause(t *testing.T) {
	opts := testOptions(t)
	top := *opts.Topology
	opts.Registerer = prometheus.NewRegistry()
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p.clock = clk
	// Until the session's first periodic redeclare, only a return
	// redeclares (no queue check here).
	firstTick := time.Now().Add(topologyEvery)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Stop(ctx)
	})
	brokertest.WaitReady(t, p, 10*time.Second)

	admin := brokertest.NewAdmin(t)
	exists := func() bool {
		ch := admin.Channel()
		defer ch.Close()
		_, err := ch.QueueDeclarePassive(top.ForwardQueue, true, false, false, false, nil)
		return err == nil
	}
	remove := func() {
		ch := admin.Channel()
		defer ch.Close()
		if _, err := ch.QueueDelete(top.ForwardQueue, false, false, false); err != nil {
			t.Fatal(err)
		}
	}
	// ret is a basic.return's request, once the session loop took it.
	ret := func() {
		p.requestRedeclare()
		brokertest.Eventually(t, 5*time.Second, "the session took the redeclare request", func() bool { return len(p.redeclare) == 0 })
	}
	idle := func() {
		brokertest.Eventually(t, 5*time.Second, "no declare running", func() bool { return !p.declaring.Load() })
	}

	ret() // within the pause: nothing; the session loop is past its first declare
	idle()
	clk.Advance(redeclareEvery)
	remove()
	p.requestRedeclare()
	for !exists() {
		if time.Now().After(firstTick) {
			t.Fatalf("a return %s after the last declare did not redeclare the deleted queue", redeclareEvery)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if time.Now().After(firstTick) {
		servicetest.Inconclusive(t, "the queue came back after the session's first periodic redeclare (%s): the return's redeclare is not shown", topologyEvery)
	}

	idle()
	remove()
	ret()
	ret()
	idle()
	if time.Now().After(firstTick) {
		servicetest.Inconclusive(t, "the session's first periodic redeclare (%s) came before the returns within the pause were checked", topologyEvery)
	}
	if exists() {
		t.Errorf("returns within %s of the last declare redeclared the topology", redeclareEvery)
	}
	clk.Advance(redeclareEvery)
	p.requestRedeclare()
	brokertest.Eventually(t, 5*time.Second, "the queue redeclared by the first return after the pause", exists)
}
