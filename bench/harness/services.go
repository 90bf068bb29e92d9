package harness

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"
)

// StartRedis runs a private redis-server on addr (a free loopback port
// when empty), with no persistence, pinned to cpus when not empty: for
// faults that must not touch the shared Redis (SIGSTOP, kill), and for
// load runs that keep Redis off the proxy's CPU. It returns the process
// and its redis:// URL.
func StartRedis(ctx context.Context, dir, name, addr, cpus string) (*Process, string, error) {
	if addr == "" {
		var err error
		if addr, err = FreeAddr(); err != nil {
			return nil, "", err
		}
	}
	p, err := Start(dir, name, cpus, nil, "redis-server",
		"--bind", "127.0.0.1", "--port", fmt.Sprint(Port(addr)), "--save", "", "--appendonly", "no",
		"--dir", dir, "--dbfilename", filepath.Base(dir)+".rdb")
	if err != nil {
		return nil, "", err
	}
	if err := WaitTCP(ctx, addr, 5*time.Second); err != nil {
		p.Stop(time.Second)
		return nil, "", fmt.Errorf("starting redis-server: %w", err)
	}
	return p, "redis://" + addr + "/0", nil
}

// DeleteKeys removes every key under prefix (SCAN + UNLINK, never KEYS) and
// returns how many it removed.
func DeleteKeys(ctx context.Context, redisURL, prefix string) (int, error) {
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		return 0, fmt.Errorf("parsing redis URL: %w", err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	n := 0
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			if err := rdb.Unlink(ctx, batch...).Err(); err != nil {
				return n, fmt.Errorf("deleting keys: %w", err)
			}
			n += len(batch)
			batch = batch[:0]
		}
	}
	if err := iter.Err(); err != nil {
		return n, fmt.Errorf("scanning keys: %w", err)
	}
	if len(batch) > 0 {
		if err := rdb.Unlink(ctx, batch...).Err(); err != nil {
			return n, fmt.Errorf("deleting keys: %w", err)
		}
		n += len(batch)
	}
	return n, nil
}

// KeysWithoutTTL counts keys under prefix that have no TTL (TTL -1); Borda
// must never leave one.
func KeysWithoutTTL(ctx context.Context, redisURL, prefix string) (int, error) {
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		return 0, fmt.Errorf("parsing redis URL: %w", err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	n := 0
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if ttl, err := rdb.TTL(ctx, iter.Val()).Result(); err == nil && ttl == -1 {
			n++
		}
	}
	return n, iter.Err()
}

// QueueDepth returns the number of ready messages in queue (a passive
// declare: it never creates the queue).
func QueueDepth(amqpURL, queue string) (int, error) {
	n := 0
	err := withChannel(amqpURL, func(ch *amqp.Channel) error {
		q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
		if err != nil {
			return fmt.Errorf("inspecting queue %s: %w", queue, err)
		}
		n = q.Messages
		return nil
	})
	return n, err
}

// withChannel runs fn on a channel of a short-lived connection to amqpURL.
func withChannel(amqpURL string, fn func(*amqp.Channel) error) error {
	conn, err := amqp.DialConfig(amqpURL, amqp.Config{Dial: amqp.DefaultDial(3 * time.Second)})
	if err != nil {
		return fmt.Errorf("dialing amqp: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("opening channel: %w", err)
	}
	defer ch.Close()
	return fn(ch)
}

// cleanupDeadline bounds DeleteTopology as a whole: a bench's last step
// must not hold the terminal on a broker that stopped answering.
const cleanupDeadline = 20 * time.Second

// DeleteTopology deletes the queues and the exchange a bench run declared,
// on one connection, retrying each delete (RabbitMQ 3.10 has been seen
// failing a delete right after a quorum queue's deletion crashed its log
// writer) and checking with a passive declare that it is gone. A queue
// that never existed (serve never started) is not an error. It returns the
// names it could not show gone, and prints one warning naming them and
// why (the broker unreachable, or the delete refused), within
// cleanupDeadline.
func DeleteTopology(amqpURL string, s BordaSpec) []string {
	type result struct {
		left []string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		left, err := deleteTopology(amqpURL, s)
		done <- result{left, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(cleanupDeadline):
		r = result{[]string{"queues and exchange of " + s.Name}, fmt.Errorf("the broker did not answer within %s", cleanupDeadline)}
	}
	if len(r.left) > 0 {
		why := "still there after 3 tries"
		if r.err != nil {
			why = r.err.Error()
		}
		fmt.Printf("WARNING: could not delete %s (%s); remove by hand: rabbitmqctl delete_queue NAME, rabbitmqadmin delete exchange name=NAME\n",
			strings.Join(r.left, ", "), why)
	}
	return r.left
}

func deleteTopology(amqpURL string, s BordaSpec) ([]string, error) {
	type entity struct {
		what        string
		del, exists func(*amqp.Channel) error
	}
	var all []entity
	for _, q := range append([]string{s.ForwardQueue(), s.EventsQueue(), s.DLQ()}, s.RetryQueues()...) {
		all = append(all, entity{"queue " + q,
			func(ch *amqp.Channel) error { _, err := ch.QueueDelete(q, false, false, false); return err },
			func(ch *amqp.Channel) error {
				_, err := ch.QueueDeclarePassive(q, false, false, false, false, nil)
				return err
			}})
	}
	ex := s.Exchange()
	all = append(all, entity{"exchange " + ex,
		func(ch *amqp.Channel) error { return ch.ExchangeDelete(ex, false, false) },
		// a passive declare ignores the kind (AMQP 0-9-1)
		func(ch *amqp.Channel) error {
			return ch.ExchangeDeclarePassive(ex, "topic", false, false, false, false, nil)
		}})
	names := func(es []entity) []string {
		out := make([]string, len(es))
		for i, e := range es {
			out[i] = e.what
		}
		return out
	}
	conn, err := amqp.DialConfig(amqpURL, amqp.Config{Dial: amqp.DefaultDial(3 * time.Second)})
	if err != nil {
		return names(all), fmt.Errorf("dialing amqp: %w", err)
	}
	defer conn.Close()
	// on runs fn on a fresh channel: a refused operation closes its channel.
	on := func(fn func(*amqp.Channel) error) error {
		ch, err := conn.Channel()
		if err != nil {
			return err
		}
		defer ch.Close()
		return fn(ch)
	}
	var left []entity
	for _, e := range all {
		gone := false
		for try := 0; try < 3 && !gone && !conn.IsClosed(); try++ {
			if try > 0 {
				time.Sleep(time.Duration(try) * 500 * time.Millisecond)
			}
			_ = on(e.del)
			var ae *amqp.Error
			gone = errors.As(on(e.exists), &ae) && ae.Code == amqp.NotFound
		}
		if !gone {
			left = append(left, e)
		}
	}
	if conn.IsClosed() && len(left) > 0 {
		return names(left), errors.New("the broker closed the connection")
	}
	return names(left), nil
}

// PurgeQueue removes every ready message from queue and returns how many
// it removed (the bench's own queues only, between rounds).
func PurgeQueue(amqpURL, queue string) (int, error) {
	n := 0
	err := withChannel(amqpURL, func(ch *amqp.Channel) error {
		var err error
		if n, err = ch.QueuePurge(queue, false); err != nil {
			return fmt.Errorf("purging queue %s: %w", queue, err)
		}
		return nil
	})
	return n, err
}
