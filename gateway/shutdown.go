package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Server timeouts of both listeners (see newHTTPServer).
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 120 * time.Second
	// maxHeaderBytes bounds the request line and headers a connection
	// may hold before its handler runs: 60 KiB, Envoy's
	// max_request_headers_kb default (net/http allows 4 KiB of slack on
	// top, so about 64 KiB are read before 431). Go's default, 1 MiB,
	// let one client address pin its per-IP connection cap × 1 MiB of
	// memory before any check (fresh attack pass A21: 600 connections
	// from one address took a 256 MiB pod to 354 MB).
	maxHeaderBytes = 60 << 10
)

// newHTTPServer returns an http.Server for addr and h with the timeouts a
// proxy with streams and WebSockets wants: ReadHeaderTimeout 10 s
// (slowloris), IdleTimeout 120 s (above common load-balancer idle
// timeouts of 60 s), MaxHeaderBytes 60 KiB, no ReadTimeout or WriteTimeout
// (they would cut uploads, SSE and WebSockets; the route timeout bounds
// the wait for upstreams), and the server's own errors logged at warn.
func newHTTPServer(addr string, h http.Handler, logger *slog.Logger) *http.Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// HTTPServer is an http.Server for addr and h with the timeouts a proxy
// with streams and WebSockets wants (ReadHeaderTimeout 10 s, IdleTimeout
// 120 s, MaxHeaderBytes 60 KiB, no ReadTimeout or WriteTimeout), the
// gateway's logger, and request contexts derived from the gateway's, so
// Shutdown can cancel upgraded
// connections (WebSockets) and endless streams that outlive the drain;
// http.Server.Shutdown and Close do not track hijacked connections.
func (s *Server) HTTPServer(addr string, h http.Handler) *http.Server {
	srv := newHTTPServer(addr, h, nil)
	srv.ErrorLog = s.errorLog
	srv.ConnState = trackIdle // idle connections are reclaimable (Listener)
	srv.BaseContext = func(net.Listener) context.Context { return s.base }
	srv.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, peerMemoKey{}, &peerMemo{}) // the peer parsed once per connection
	}
	return srv
}

// unwindWait bounds the wait, after the drain deadline cut everything,
// for cancelled handlers to return.
const unwindWait = time.Second

// Shutdown drains the HTTP side in the order of docs/edge.md ("Operating it"): readiness
// answers 503 at once (setDraining); after grace the servers stop
// accepting and close idle connections while in-flight requests finish
// (http.Server.Shutdown); when ctx ends, whatever still runs is cut: every
// connection is closed (http.Server.Close: a request body still
// uploading, on a route or on the webhook ingress, ends there) and
// request contexts are cancelled (WebSockets and streams, which
// http.Server does not track); cancelled handlers get at most 1 s more to
// return; finally Close. It returns ctx.Err() when the drain did not
// finish in time.
//
// ctx bounds the whole call, grace included: for shutdown.readiness_grace
// G and shutdown.drain D, pass a context with timeout G + D; the call then
// returns within G + D + 1 s. The caller then drains what is not HTTP
// (AMQP confirms, telemetry: shutdown.confirm_drain) and closes pools.
func (s *Server) Shutdown(ctx context.Context, grace time.Duration, servers ...*http.Server) error {
	s.setDraining()
	if grace > 0 {
		t := time.NewTimer(grace)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, srv := range servers {
		wg.Go(func() { errs[i] = srv.Shutdown(ctx) })
	}
	wg.Wait()
	err := errors.Join(errs...)
	if werr := s.waitIdle(ctx); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		s.log.Warn("HTTP drain did not finish in time; cutting the rest", "in_flight", s.inFlight.Load(), "error", err)
		s.cancelBase()
		for _, srv := range servers {
			_ = srv.Close() // active connections too: a blocked body read returns now
		}
		stop, cancel := context.WithTimeout(context.Background(), unwindWait)
		_ = s.waitIdle(stop)
		cancel()
	}
	s.log.Info("HTTP drained")
	return errors.Join(err, s.Close())
}

// waitIdle polls until no request is inside the chain or ctx ends; after
// the servers stopped, only upgraded connections can remain.
func (s *Server) waitIdle(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for s.inFlight.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
