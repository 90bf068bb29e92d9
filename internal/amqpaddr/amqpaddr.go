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

// Split returns the non-empty, trimmed URLs of a comma-separated list
// (Fields without its empty entries).
func Split(list string) []string {
	var out []string
	for _, u := range Fields(list) {
		if u != "" {
			out = append(out, u)
		}
	}
	return out
}

// Fields returns every entry of a comma-separated list of URLs, trimmed,
// empty entries (a stray comma) kept so that a validator can name them by
// position. A comma separates two entries only where the text after it
// (spaces skipped) is another comma, the end, or starts with a URL scheme
// ("amqp://", "amqps://", "http://": letters, digits, + - . then "://"):
// RFC 3986 lets a comma stand unencoded in userinfo, a path and a query,
// so "amqp://u:pa,ss@h/" is one URL, as it was before lists were read.
func Fields(list string) []string {
	if strings.TrimSpace(list) == "" {
		return nil
	}
	var out []string
	start := 0
	for i := 0; i < len(list); i++ {
		if list[i] == ',' && startsEntry(list[i+1:]) {
			out = append(out, strings.TrimSpace(list[start:i]))
			start = i + 1
		}
	}
	return append(out, strings.TrimSpace(list[start:]))
}

// startsEntry reports whether s, leading spaces skipped, is empty, starts
// with a comma, or starts with scheme "://".
func startsEntry(s string) bool {
	s = strings.TrimLeft(s, " \t")
	if s == "" || s[0] == ',' {
		return true
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return strings.HasPrefix(s[i:], "://")
		default:
			return false
		}
	}
	return false
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
