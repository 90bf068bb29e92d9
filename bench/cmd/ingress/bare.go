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
	returns := ch.NotifyReturn(make(chan amqp.Return, 1))
	sem := make(chan struct{}, inFlight)
	var (
		mu      sync.Mutex
		lat     []time.Duration
		failure error
		wg      sync.WaitGroup
	)
	start := time.Now()
	for i := 0; time.Since(start) < d && ctx.Err() == nil; i++ {
		sem <- struct{}{}
		t0 := time.Now()
		dc, err := ch.PublishWithDeferredConfirm(exchange, key, true, false, amqp.Publishing{
			DeliveryMode: amqp.Persistent, ContentType: "application/json", MessageId: fmt.Sprint("bare-", i), Body: body})
		if err != nil {
			return bareResult{}, fmt.Errorf("bare publisher: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			acked := dc.Wait()
			took := time.Since(t0)
			mu.Lock()
			if acked {
				lat = append(lat, took)
			} else if failure == nil {
				failure = fmt.Errorf("bare publisher: nack")
			}
			mu.Unlock()
			<-sem
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	select {
	case r := <-returns:
		return bareResult{}, fmt.Errorf("bare publisher: message returned (%d %s)", r.ReplyCode, r.ReplyText)
	default:
	}
	if failure != nil {
		return bareResult{}, failure
	}
	slices.Sort(lat)
	return bareResult{confirmed: int64(len(lat)), elapsed: elapsed, lat: lat}, nil
}
