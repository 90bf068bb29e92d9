package publish

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/olp-edu/borda/webhook/topology"
)

// TestPublisher_NackedChannelIsReplacedSoTheOverflowDoesNotOutliveTheQueue
// (attack S04): RabbitMQ 3.10 keeps a quorum queue's reject-publish
// state in the publishing channel's queue client (rabbit_fifo_client): a
// channel that was nacked while the queue was over a max-length policy
// goes on nacking every publish to that queue after the policy is
// cleared and the queue is empty, while a fresh channel is accepted.
// Borda never reopened its channels, so the replica that published
// during the overflow answered 503 NACK for minutes (others 200) and
// /readyz said ready. Now a channel that receives a broker nack is
// retired and replaced before it is used again (at most one per
// confirm_timeout): once the queue has room, publishes are confirmed.
func TestPublisher_NackedChannelIsReplacedSoTheOverflowDoesNotOutliveTheQueue(t *testing.T) {
	opts, v, admin := vhostOptions(t, topology.Quorum)
	v.SetPolicy("cap", "^fwd$", `{"max-length":2}`)
	p := newTestPublisher(t, opts)
	publish := func(i int) error {
		return p.Publish(context.Background(), Message{ID: "s04-" + strconv.Itoa(i), Body: []byte(`{}`)})
	}
	// The policy may take a moment to reach the queue.
	var nacked int
	for i := 0; nacked < 3; i++ {
		err := publish(i)
		if err != nil && !errors.Is(err, ErrNack) {
			t.Fatalf("publish %d during the overflow: %v", i, err)
		}
		if errors.Is(err, ErrNack) {
			nacked++
		}
		if i > 50 {
			t.Fatal("the max-length policy never refused a publish")
		}
	}
	v.ClearPolicy("cap")
	ch, err := admin.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueuePurge("fwd", false); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	if n := vhostCount(t, admin, "fwd"); n != 0 {
		t.Fatalf("forward queue holds %d after the purge", n)
	}
	// The queue is empty and has no limit: within one confirm_timeout
	// (the replacement's bound) every publish is confirmed again.
	deadline := time.Now().Add(opts.ConfirmTimeout + 3*time.Second)
	var last error
	for i := 100; ; i++ {
		last = publish(i)
		if last == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queue is empty and has no policy, yet publishes are still refused: %v (the nacked channel keeps the quorum queue's reject-publish state)", last)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := range 10 {
		if err := publish(200 + i); err != nil {
			t.Fatalf("publish %d after the queue drained: %v", i, err)
		}
	}
	if err := p.Ready(); err != nil {
		t.Errorf("Ready = %v", err)
	}
}

// TestPublisher_PersistentNacksAreBoundedAndShownInReadiness (S04): under
// a real overflow that lasts (a max-length policy kept, the queue full)
// every publish is nacked, fresh channel or not. The replacement must
// not become a channel-open storm: at most one channel per confirm
// timeout is replaced, however many publishes are nacked. Once nacks
// have persisted for 3 confirm timeouts Ready fails with ErrNack (the
// replica cannot take events: /readyz says so); when no nack has come for
// one confirm timeout (traffic moved away) it is ready again, so it is
// tried again.
func TestPublisher_PersistentNacksAreBoundedAndShownInReadiness(t *testing.T) {
	opts, v, _ := vhostOptions(t, topology.Quorum)
	opts.ConfirmTimeout = 500 * time.Millisecond
	v.SetPolicy("cap", "^fwd$", `{"max-length":1}`)
	p := newTestPublisher(t, opts)
	start := time.Now()
	var nacks int
	notReady := false
	for i := 0; time.Since(start) < 4*opts.ConfirmTimeout; i++ {
		err := p.Publish(context.Background(), Message{ID: "pn-" + strconv.Itoa(i), Body: []byte(`{}`)})
		if errors.Is(err, ErrNack) {
			nacks++
		} else if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if rerr := p.Ready(); rerr != nil {
			if !errors.Is(rerr, ErrNack) {
				t.Fatalf("Ready = %v, want nil or ErrNack", rerr)
			}
			notReady = true
		}
	}
	elapsed := time.Since(start)
	if nacks < 50 {
		t.Fatalf("only %d nacks in %s: the overflow did not persist", nacks, elapsed)
	}
	replaced := value(t, p.metrics.retired)
	if max := float64(elapsed/opts.ConfirmTimeout) + 1; replaced > max || replaced < 1 {
		t.Errorf("%v channels replaced for %d nacks in %s, want 1..%v (one per confirm timeout)", replaced, nacks, elapsed, max)
	}
	if !notReady {
		t.Errorf("Ready stayed nil through %s of nacks only", elapsed)
	}
	time.Sleep(opts.ConfirmTimeout + 100*time.Millisecond)
	if err := p.Ready(); err != nil {
		t.Errorf("Ready = %v one confirm timeout after the last nack, want nil (tried again)", err)
	}
}
