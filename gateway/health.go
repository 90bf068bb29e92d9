package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/olp-edu/borda/internal/redact"
)

// checkTimeout bounds one readiness check.
const checkTimeout = 2 * time.Second

// healthz answers 200 whenever the process serves HTTP, whatever its
// dependencies do (liveness).
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}

// readyz answers 200 {"status":"ready"} when every component (or the one
// named) is ready, else 503 naming the components that are not; 503
// {"status":"draining"} once SetDraining was called; 404 for an unknown
// component. Check errors are logged, never sent (they may name hosts).
//
// detailed (the admin listener) adds "errors": each failing check's
// message, so an operator sees why; the public listener never shows them
// (they may name internal hosts).
//
// A check whose error has a Degraded() bool method answering true (e.g.
// *publish.DegradedError: queues kept with an earlier release's
// arguments) leaves its component ready, shown as "degraded"; detailed
// adds its message under "warnings".
func (s *Server) readyz(w http.ResponseWriter, r *http.Request, component string, detailed bool) {
	if s.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "draining"})
		return
	}
	names := s.checkNames
	if component != "" {
		if _, ok := s.checks[component]; !ok {
			writeJSON(w, http.StatusNotFound, map[string]any{"status": "unknown_component", "component": component})
			return
		}
		names = []string{component}
	}
	ctx, cancel := context.WithTimeout(r.Context(), checkTimeout)
	defer cancel()
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { errs[i] = s.checks[name](ctx) })
	}
	wg.Wait()
	components := make(map[string]string, len(names))
	reasons := map[string]string{}
	warnings := map[string]string{}
	var notReady []string
	for i, name := range names {
		var dg interface{ Degraded() bool }
		if errors.As(errs[i], &dg) && dg.Degraded() {
			components[name] = "degraded"
			warnings[name] = redact.URLs(errs[i].Error())
			continue
		}
		if errs[i] != nil {
			components[name] = "not_ready"
			notReady = append(notReady, name)
			reasons[name] = redact.URLs(errs[i].Error()) // URL passwords and query values (docs/configuration.md)
			s.log.DebugContext(ctx, "readiness check failed", "check", name, "error", errs[i])
			continue
		}
		components[name] = "ready"
	}
	if len(notReady) > 0 {
		body := map[string]any{"status": "not_ready", "not_ready": notReady, "components": components}
		if detailed {
			body["errors"] = reasons
			if len(warnings) > 0 {
				body["warnings"] = warnings
			}
		}
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	body := map[string]any{"status": "ready", "components": components}
	if detailed && len(warnings) > 0 {
		body["warnings"] = warnings
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) adminMux() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{ErrorLog: s.errorLog}))
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { s.readyz(w, r, "", true) })
	mux.HandleFunc("GET /readyz/{component}", func(w http.ResponseWriter, r *http.Request) {
		s.readyz(w, r, r.PathValue("component"), true)
	})
	s.pprof.register(mux) // admin_pprof: loopback peers (default), a token, or off
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
