package redisconn_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/redisconn"
)

func TestNewRefusesAnEmptyURL(t *testing.T) {
	if _, err := redisconn.New(redisconn.Options{}); !errors.Is(err, redisconn.ErrNoURL) {
		t.Errorf("err = %v, want ErrNoURL", err)
	}
}

func TestClientTalksToTheLocalRedis(t *testing.T) {
	c, err := redisconn.New(redisconn.Options{URL: servicetest.RedisURL(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

// A refused dial fails once, fast: no dial retries multiply the wait
// (go-redis dials 5 times, 100 ms apart, by default).
func TestRefusedDialIsNotRetried(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c, err := redisconn.New(redisconn.Options{URL: "redis://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if err := c.Ping(context.Background()).Err(); err == nil {
		t.Fatal("ping to a closed port succeeded")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("refused dial took %v; want well under the default 5 × 100 ms retry ladder plus slack", d)
	}
}

func TestParseErrorNeverEchoesThePassword(t *testing.T) {
	_, err := redisconn.New(redisconn.Options{URL: "redis://default:ab/cdSecret@127.0.0.1:6379/0"})
	if err == nil || strings.Contains(err.Error(), "Secret") {
		t.Errorf("err = %v, want a parse error without the password", err)
	}
}
