package publish

import (
	"bytes"
	"context"
	"strconv"
	"sync/atomic"
	"testing"
)

// BenchmarkPublish is the publisher's CPU and allocations per confirmed
// message (docs/performance.md): 64 publishes in flight on one publisher,
// ~1.6 KB envelopes (a 1 KB event's), each waiting for its ack, on a
// classic queue of its own. Its allocations include amqp091-go's reader
// and frames. Needs RabbitMQ.
func BenchmarkPublish(b *testing.B) {
	opts := testOptions(b)
	p := newTestPublisher(b, opts)
	body := bytes.Repeat([]byte("x"), 1600)
	var n atomic.Int64
	b.SetParallelism(32) // × GOMAXPROCS (2): 64 in flight
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := strconv.FormatInt(n.Add(1), 10)
			if err := p.Publish(context.Background(), Message{ID: id, Body: body}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
