// Package upstashtest is a test server speaking the Upstash Redis REST
// protocol in front of a real Redis, so the REST store is tested against
// real Redis semantics (see docs/rate-limiting.md, "Upstash REST"):
//
//   - POST / with a JSON command array → 200 {"result": …}
//   - POST /pipeline with an array of command arrays → an array of
//     {"result": …} / {"error": …}, not atomic
//   - POST /multi-exec, same shapes, atomic (MULTI/EXEC); a transaction
//     that fails as a whole (a command Redis refused to queue: EXECABORT)
//     → 400 {"error": …}
//   - "Authorization: Bearer <token>" required (401 otherwise); other
//     methods than HEAD/GET/POST/PUT → 405
//   - errors → 400 {"error": "ERR …"}
//   - "Upstash-Encoding: base64" → every string in the reply base64
//     except "OK"
//   - replies in RESP2's shapes whatever protocol the Redis client speaks:
//     a map is a flat array of keys and values, a double its text, a
//     boolean 1 or 0
//   - every reply carries an "Upstash-Sync-Token" header (read-your-writes
//     on a global database), a counter here; Stats says what clients sent
//     back
//
// Stats counts the requests and commands per endpoint, so tests measure
// what a component costs on Upstash (billed per command).
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
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Server is the REST front; Handler serves the protocol.
type Server struct {
	rdb   redis.UniversalClient
	token string

	mu     sync.Mutex
	stats  Stats
	issued int // the last sync token handed out
}

// Stats counts what a Server was sent, by endpoint.
type Stats struct {
	// Requests is the number of authorized requests to "/", "/pipeline"
	// and "/multi-exec".
	Requests map[string]int
	// Commands is the number of commands they carried (what Upstash
	// bills).
	Commands map[string]int
	// SyncTokens is the number of requests that sent back an
	// Upstash-Sync-Token this server had issued.
	SyncTokens int
}

// Stats returns the counts so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Stats{Requests: map[string]int{}, Commands: map[string]int{}, SyncTokens: s.stats.SyncTokens}
	for k, v := range s.stats.Requests {
		out.Requests[k] = v
	}
	for k, v := range s.stats.Commands {
		out.Commands[k] = v
	}
	return out
}

// TotalRequests is the sum of Requests.
func (st Stats) TotalRequests() int {
	n := 0
	for _, v := range st.Requests {
		n += v
	}
	return n
}

// TotalCommands is the sum of Commands.
func (st Stats) TotalCommands() int {
	n := 0
	for _, v := range st.Commands {
		n += v
	}
	return n
}

// count records one request of n commands to endpoint and the sync token
// it carried, and returns the token of its reply.
func (s *Server) count(endpoint string, n int, sent string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stats.Requests == nil {
		s.stats.Requests, s.stats.Commands = map[string]int{}, map[string]int{}
	}
	s.stats.Requests[endpoint]++
	s.stats.Commands[endpoint] += n
	if t, err := strconv.Atoi(sent); err == nil && t >= 1 && t <= s.issued {
		s.stats.SyncTokens++
	}
	s.issued++
	return strconv.Itoa(s.issued)
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
	sent := r.Header.Get("Upstash-Sync-Token")
	switch strings.TrimRight(r.URL.Path, "/") {
	case "":
		var cmd []any
		if err := dec.Decode(&cmd); err != nil || len(cmd) == 0 {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "ERR failed to parse command"})
			return
		}
		w.Header().Set("Upstash-Sync-Token", s.count("/", 1, sent))
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
		atomic := strings.TrimRight(r.URL.Path, "/") == "/multi-exec"
		w.Header().Set("Upstash-Sync-Token", s.count(strings.TrimRight(r.URL.Path, "/"), len(cmds), sent))
		s.pipeline(ctx, w, cmds, atomic, b64)
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
		// A transport failure, or a transaction Redis discarded (a command
		// it refused to queue): the whole request fails, as on Upstash.
		// Errors of commands that ran (WRONGTYPE…) are answered per command.
		var rerr redis.Error
		if !errors.As(err, &rerr) || strings.HasPrefix(err.Error(), "EXECABORT") {
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

// encode maps a go-redis reply to its JSON shape, in RESP2's types (what
// Upstash answers): a RESP3 map is a flat array, a double its shortest
// text, a boolean 1 or 0.
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
	case map[any]any:
		out := make([]any, 0, 2*len(x))
		for k, e := range x {
			out = append(out, encode(k, b64), encode(e, b64))
		}
		return out
	case float64:
		return encode(strconv.FormatFloat(x, 'f', -1, 64), b64)
	case bool:
		if x {
			return 1
		}
		return 0
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
