package ratelimit_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/keyspace"
	"github.com/olp-edu/borda/ratelimit"
)

func ExampleLimiter_Decide() {
	opts := ratelimit.Options{
		Rules: []ratelimit.Rule{
			{Name: "burst", Scope: ratelimit.ScopeIP, Limit: 2, Window: 5 * time.Second, Routes: []string{ratelimit.AllRoutes}},
		},
		Timeout:   30 * time.Millisecond, // the store decision's deadline: past it, the request passes
		RelaxPoll: 5 * time.Second,
	}
	l, err := ratelimit.New(opts, keyspace.MustNew("olp-dev:"), ratelimit.NewMemoryStore(0), prometheus.NewRegistry(), nil)
	if err != nil {
		panic(err)
	}
	s := ratelimit.Subject{Route: "portal", IP: "203.0.113.9"}
	for range 3 {
		v := l.Decide(context.Background(), s)
		if v.Blocked() {
			rec := httptest.NewRecorder()
			ratelimit.WriteTooManyRequests(rec, v)
			fmt.Println(rec.Code, rec.Header().Get("RateLimit-Policy"), rec.Header().Get("Retry-After"))
			continue
		}
		fmt.Println("allow", v.Decisions[0].Remaining)
	}
	// Output:
	// allow 1
	// allow 0
	// 429 "burst";q=2;w=5 5
}
