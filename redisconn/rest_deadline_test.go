package redisconn_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/internal/upstashtest"
)

// The HTTP request follows go-redis's deadlines: the command's context
// deadline (the request path's 30 ms rate-limit deadline) or, without
// one, the read timeout. Past it the command fails as a timeout, the
// request is aborted (the server sees it go), and the next command, on a
// new connection, works.
func TestTheRequestEndsAtTheCommandsDeadline(t *testing.T) {
	t.Parallel()
	rdb := servicetest.RedisClient(t, servicetest.RedisURL(t), false)
	front := upstashtest.New(rdb, servicetest.RESTToken)
	var slow atomic.Bool
	aborted := make(chan struct{}, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body) // read whole, so the server notices the client leave
		r.Body = io.NopCloser(bytes.NewReader(body))
		if slow.Load() {
			select {
			case <-r.Context().Done():
				aborted <- struct{}{}
				return
			case <-time.After(20 * time.Second):
			}
		}
		front.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name     string
		read     time.Duration
		deadline time.Duration // 0: none
	}{
		{"context deadline of 30ms under a 10s read timeout", 10 * time.Second, 30 * time.Millisecond},
		{"read timeout of 50ms without a context deadline", 50 * time.Millisecond, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := servicetest.RESTClientWith(t, srv.URL, servicetest.RESTToken, tc.read)
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.deadline)
				defer cancel()
			}
			slow.Store(true)
			err := c.Ping(ctx).Err()
			var ne net.Error
			if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("PING past its deadline: %v; want a timeout (net.Error)", err)
			}
			select {
			case <-aborted:
			case <-time.After(10 * time.Second):
				t.Fatal("the server's request was not aborted within 10 s of the deadline")
			}
			slow.Store(false)
			// The next command works: retried while the loaded machine
			// makes a 50 ms read timeout expire again.
			var err2 error
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
				if err2 = c.Ping(context.Background()).Err(); err2 == nil {
					break
				}
			}
			if err2 != nil {
				t.Fatalf("PING after the timeout: %v", err2)
			}
		})
	}
}
