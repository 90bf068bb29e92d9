// Package upstashtest is a test server speaking the Upstash Redis REST
// protocol in front of a real Redis, so the REST store is tested against
// real Redis semantics (see docs/rate-limiting.md, "Upstash REST"):
//
//   - POST / with a JSON command array → 200 {"result": …}
//   - POST /pipeline with an array of command arrays → an array of
//     {"result": …} / {"error": …}, not atomic
//   - POST /multi-exec, same shapes, atomic (MULTI/EXEC)
//   - "Authorization: Bearer <token>" required (401 otherwise); other
//     methods than HEAD/GET/POST/PUT → 405
//   - errors → 400 {"error": "ERR …"}
//   - "Upstash-Encoding: base64" → every string in the reply base64
//     except "OK"
package upstashtest

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Server is the REST front; Handler serves the protocol.
type Server struct {
	rdb   redis.UniversalClient
	token string
}

// New returns a Server forwarding to rdb and accepting token.
func New(rdb redis.UniversalClient, token string) *Server {
	return &Server{rdb: rdb, token: token}
}

// Start runs s on an httptest server (127.0.0.1); close it when done.
func Start(rdb redis.UniversalClient, token string) *httptest.Server {
	return httptest.NewServer(New(rdb, token))
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodGet, http.MethodHead:
	default:
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": "Method not allowed"})
		return
	}
	auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(auth), []byte(s.token)) != 1 {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "Unauthorized"})
		return
	}
	b64 := strings.EqualFold(r.Header.Get("Upstash-Encoding"), "base64")
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	ctx := r.Context()
	switch strings.TrimRight(r.URL.Path, "/") {
	case "":
		var cmd []any
		if err := dec.Decode(&cmd); err != nil || len(cmd) == 0 {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "ERR failed to parse command"})
			return
		}
		res, err := s.rdb.Do(ctx, args(cmd)...).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"result": encode(res, b64)})
	case "/pipeline", "/multi-exec":
		var cmds [][]any
		if err := dec.Decode(&cmds); err != nil || len(cmds) == 0 {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "ERR failed to parse pipeline request"})
			return
		}
		s.pipeline(ctx, w, cmds, r.URL.Path == "/multi-exec", b64)
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "ERR unknown endpoint"})
	}
}

func (s *Server) pipeline(ctx context.Context, w http.ResponseWriter, cmds [][]any, atomic bool, b64 bool) {
	var p redis.Pipeliner
	if atomic {
		p = s.rdb.TxPipeline()
	} else {
		p = s.rdb.Pipeline()
	}
	out := make([]*redis.Cmd, len(cmds))
	for i, c := range cmds {
		out[i] = p.Do(ctx, args(c)...)
	}
	_, err := p.Exec(ctx)
	if atomic && err != nil && !errors.Is(err, redis.Nil) {
		var rerr redis.Error
		if !errors.As(err, &rerr) {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": err.Error()})
			return
		}
	}
	replies := make([]map[string]any, len(out))
	for i, c := range out {
		res, err := c.Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			replies[i] = map[string]any{"error": err.Error()}
			continue
		}
		replies[i] = map[string]any{"result": encode(res, b64)}
	}
	writeJSON(w, http.StatusOK, replies)
}

// args converts a JSON command array to go-redis arguments: numbers are
// sent as their decimal text, as Redis sees every argument as a string.
func args(cmd []any) []any {
	out := make([]any, len(cmd))
	for i, v := range cmd {
		switch x := v.(type) {
		case json.Number:
			out[i] = x.String()
		case string:
			out[i] = x
		default:
			out[i] = fmt.Sprint(x)
		}
	}
	return out
}

// encode maps a go-redis reply to its JSON shape.
func encode(v any, b64 bool) any {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		if b64 && x != "OK" {
			return base64.StdEncoding.EncodeToString([]byte(x))
		}
		return x
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = encode(e, b64)
		}
		return out
	case redis.Error:
		return x.Error()
	default:
		return x
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
