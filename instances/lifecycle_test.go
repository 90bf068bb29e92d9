package instances

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/olp-edu/borda/internal/startstop/startstoptest"
)

// TestConsumerSurvivesConcurrentStartStop: the Consumer as `borda
// consume-events` runs it (a service of internal/startstop's shape),
// started and stopped from many goroutines at once, under -race. Nothing
// answers at its broker address (port 1): it keeps reconnecting until
// stopped, which is the lifecycle under test.
func TestConsumerSurvivesConcurrentStartStop(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://unused@127.0.0.1:1/unused") // lazy: never dialled here
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	for range 5 {
		c, err := New(Options{AMQPURL: "amqp://guest:guest@127.0.0.1:1/", Queue: "unused", DB: pool, Prefetch: 1, Reconnect: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		startstoptest.Stress(t, c)
		select {
		case <-c.Done():
		default:
			t.Fatal("Done not closed after the last Stop")
		}
	}
}
