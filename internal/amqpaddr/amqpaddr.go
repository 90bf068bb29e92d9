// Package amqpaddr dials one of several RabbitMQ nodes: Borda takes a
// comma-separated list of AMQP URLs (amqp.url, AMQP_URL) for a cluster with
// no load balancer in front, as RabbitMQ's client guides recommend.
//
// Each dial tries every address once, starting from a random one and then
// in list order (the Java client shuffles its address list for the same
// reason): the processes of one deployment spread over the nodes, and
// after a node is lost the next dial does not always wait on the dead
// first entry. The caller's reconnect loop (with its backoff) retries.
package amqpaddr

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Split returns the non-empty, trimmed URLs of a comma-separated list.
func Split(list string) []string {
	var out []string
	for _, u := range strings.Split(list, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// DialConfig dials the addresses of list (Split) in turn, from a random
// start, with cfg, and returns the first connection made. The error joins
// every address's error, naming each by its position (never the URL, which
// holds credentials).
func DialConfig(list string, cfg amqp.Config) (*amqp.Connection, error) {
	urls := Split(list)
	if len(urls) == 0 {
		return nil, errors.New("amqpaddr: no AMQP URL")
	}
	start := rand.IntN(len(urls))
	var errs []error
	for i := range urls {
		k := (start + i) % len(urls)
		conn, err := amqp.DialConfig(urls[k], cfg)
		if err == nil {
			return conn, nil
		}
		if len(urls) == 1 {
			return nil, err
		}
		errs = append(errs, fmt.Errorf("AMQP address %d of %d: %w", k+1, len(urls), err))
	}
	return nil, errors.Join(errs...)
}

// Dial is DialConfig with amqp.Dial's defaults.
func Dial(list string) (*amqp.Connection, error) {
	return DialConfig(list, amqp.Config{Heartbeat: 10e9, Locale: "en_US"})
}
