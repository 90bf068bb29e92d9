package forward

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Errors of a confirmed publish.
var (
	ErrNacked   = errors.New("forward: broker nacked the publish")
	ErrReturned = errors.New("forward: publish returned as unroutable")
)

// Publisher publishes on its own confirm-mode channel, mandatory, and waits
// for the broker's confirm: a publish succeeds only when acked and not
// returned. Safe for concurrent use. `borda dlq replay` uses it too.
type Publisher struct {
	ch      *amqp.Channel
	timeout time.Duration

	mu       sync.Mutex
	returns  chan amqp.Return
	returned map[string]struct{}
}

// NewPublisher opens a confirm-mode channel on conn; timeout bounds each
// Publish's wait for its confirm.
func NewPublisher(conn *amqp.Connection, timeout time.Duration) (*Publisher, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("opening publish channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		ch.Close()
		return nil, fmt.Errorf("enabling publisher confirms: %w", err)
	}
	return &Publisher{
		ch:       ch,
		timeout:  timeout,
		returns:  ch.NotifyReturn(make(chan amqp.Return, 256)),
		returned: map[string]struct{}{},
	}, nil
}

// Publish sends msg and waits up to the publish timeout for its confirm.
// It returns nil only when the broker acked it without returning it; else
// an error wrapping ErrNacked, ErrReturned or the channel's error.
// msg.CorrelationId is overwritten with a token used to match a return.
func (p *Publisher) Publish(ctx context.Context, exchange, key string, msg amqp.Publishing) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	msg.CorrelationId = newToken()
	dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, msg)
	if err != nil {
		return fmt.Errorf("publishing to %q (%s): %w", exchange, key, err)
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		return fmt.Errorf("waiting for the confirm of %q (%s): %w", exchange, key, err)
	}
	if !ok {
		return fmt.Errorf("publishing to %q (%s): %w", exchange, key, ErrNacked)
	}
	// A basic.return precedes its basic.ack on the wire and amqp091 hands
	// it to the returns channel before resolving the confirm, so it is
	// already buffered here.
	if p.wasReturned(msg.CorrelationId) {
		return fmt.Errorf("publishing to %q (%s): %w", exchange, key, ErrReturned)
	}
	return nil
}

func (p *Publisher) wasReturned(token string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
drain:
	for {
		select {
		case r, ok := <-p.returns:
			if !ok {
				break drain
			}
			p.returned[r.CorrelationId] = struct{}{}
		default:
			break drain
		}
	}
	_, found := p.returned[token]
	delete(p.returned, token)
	return found
}

// Close closes the channel.
func (p *Publisher) Close() error { return p.ch.Close() }

func newToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
