package deadletter

import (
	"context"
	"testing"
	"time"

	"github.com/olp-edu/borda/webhook/publish"
)

// newRepublisher starts the publisher `borda dlq` uses (5 s confirms),
// ready, stopped in Cleanup.
func newRepublisher(t *testing.T, amqpURL string) *publish.Publisher {
	t.Helper()
	p, err := publish.New(publish.Options{URL: amqpURL, ConnectionName: "borda-dlq-test", Channels: 1, MaxInFlight: 64, ConfirmTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Stop(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		t.Fatalf("republisher not ready: %v", err)
	}
	return p
}
