package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// bareResult is what the bare publisher measured.
type bareResult struct {
	confirmed int64
	elapsed   time.Duration
	lat       []time.Duration // publish → confirm, sorted
}

func (r bareResult) rps() float64 { return float64(r.confirmed) / r.elapsed.Seconds() }

func (r bareResult) quantile(q float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[min(len(r.lat)-1, int(q*float64(len(r.lat))))]
}

// barePublish is the ceiling: a bare amqp091-go publisher on one
// confirm-mode channel with inFlight publishes outstanding, persistent
// messages of body, for d, to the same exchange and routing key as borda.
// Every message must be acked; a nack or a return fails the run.
func barePublish(ctx context.Context, amqpURL, exchange, key string, body []byte, inFlight int, d time.Duration) (bareResult, error) {
	conn, err := amqp.Dial(amqpURL)
	if err != nil {
		return bareResult{}, fmt.Errorf("bare publisher: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return bareResult{}, fmt.Errorf("bare publisher: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		return bareResult{}, fmt.Errorf("bare publisher: %w", err)
	}
	var (
		mu      sync.Mutex
		lat     []time.Duration
		failure error
		wg      sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if failure == nil {
			failure = err
		}
		mu.Unlock()
	}
	// Read returns as they come: amqp091-go delivers them from its reader
	// goroutine, which would block (and with it every confirm) on a full
	// buffer nobody reads.
	returns := ch.NotifyReturn(make(chan amqp.Return, inFlight))
	returnsDone := make(chan struct{})
	go func() {
		defer close(returnsDone)
		for r := range returns { // closed when the channel closes
			fail(fmt.Errorf("bare publisher: message returned (%d %s)", r.ReplyCode, r.ReplyText))
		}
	}()
	sem := make(chan struct{}, inFlight)
	start := time.Now()
	for i := 0; time.Since(start) < d && ctx.Err() == nil; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		t0 := time.Now()
		dc, err := ch.PublishWithDeferredConfirm(exchange, key, true, false, amqp.Publishing{
			DeliveryMode: amqp.Persistent, ContentType: "application/json", MessageId: fmt.Sprint("bare-", i), Body: body})
		if err != nil {
			return bareResult{}, fmt.Errorf("bare publisher: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			acked, err := dc.WaitContext(ctx)
			took := time.Since(t0)
			switch {
			case err != nil:
				fail(fmt.Errorf("bare publisher: waiting for a confirm: %w", err))
			case !acked:
				fail(fmt.Errorf("bare publisher: nack"))
			default:
				mu.Lock()
				lat = append(lat, took)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	_ = ch.Close() // every return was read before its ack; this ends the reader
	<-returnsDone
	mu.Lock()
	defer mu.Unlock()
	if failure != nil {
		return bareResult{}, failure
	}
	slices.Sort(lat)
	return bareResult{confirmed: int64(len(lat)), elapsed: elapsed, lat: lat}, nil
}
