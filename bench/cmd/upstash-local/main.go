// Command upstash-local is a local stand-in for the Upstash Redis REST API
// (internal/upstashtest in front of a real Redis), so that a config using
// the REST store (configs/production.yaml's redis.rest_url) can be tried on
// a laptop (docs/rate-limiting.md, "Trying the REST store locally"):
//
//	go run ./bench/cmd/upstash-local -listen 127.0.0.1:8079 -redis redis://127.0.0.1:6379/0 -token local-rest-token
//	export UPSTASH_REDIS_REST_URL=http://127.0.0.1:8079 UPSTASH_REDIS_REST_TOKEN=local-rest-token
//
// It listens on loopback only, needs the token (or UPSTASH_REDIS_REST_TOKEN)
// and speaks plain HTTP: it is for trying, never for production.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/upstashtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil))
}

// run serves until ctx ends; ready, when not nil, receives the address
// once it listens. Exit 2 on bad flags, 1 when it cannot listen.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, ready chan<- string) int {
	fs := flag.NewFlagSet("upstash-local", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8079", "address to listen on (loopback only)")
	redisURL := fs.String("redis", "redis://127.0.0.1:6379/0", "the Redis the REST calls run on")
	token := fs.String("token", os.Getenv("UPSTASH_REDIS_REST_TOKEN"), "the bearer token clients must send; $UPSTASH_REDIS_REST_TOKEN sets the default")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *token == "" {
		fmt.Fprintln(stderr, "upstash-local: set -token or UPSTASH_REDIS_REST_TOKEN (clients send it as Authorization: Bearer)")
		return 2
	}
	host, _, err := net.SplitHostPort(*listen)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		fmt.Fprintf(stderr, "upstash-local: -listen %q: want a loopback address such as 127.0.0.1:8079\n", *listen)
		return 2
	}
	opt, err := redis.ParseURL(*redisURL)
	if err != nil {
		fmt.Fprintf(stderr, "upstash-local: -redis: %v\n", err)
		return 2
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "upstash-local: %v\n", err)
		return 1
	}
	srv := &http.Server{Handler: upstashtest.New(rdb, *token), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 120 * time.Second}
	fmt.Fprintf(stdout, "upstash-local: serving the Upstash REST API on http://%s (Redis %s)\nexport UPSTASH_REDIS_REST_URL=http://%s\n",
		ln.Addr(), opt.Addr, ln.Addr())
	if ready != nil {
		ready <- ln.Addr().String()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return 0
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "upstash-local: %v\n", err)
			return 1
		}
		return 0
	}
}
