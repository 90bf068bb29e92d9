package ratelimit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/olp-edu/borda/internal/egress"
	"github.com/olp-edu/borda/internal/redact"
)

// RESTStore is the Store on Upstash's REST API (UPSTASH_REDIS_REST_URL,
// UPSTASH_REDIS_REST_TOKEN): every command is a JSON array POSTed to the
// base URL with "Authorization: Bearer <token>", answered with
// {"result": …} or {"error": "…"}. One Hit is one HTTP request carrying
// EVALSHA; on NOSCRIPT it is retried once as EVAL (which also caches the
// script). The protocol facts used are in docs/rate-limiting.md, "Upstash REST".
type RESTStore struct {
	base   string
	auth   string
	client *http.Client
	// pinnedMS, when not 0, replaces the script's TIME (unix ms): set only
	// by this package's tests, which need a deterministic store clock.
	pinnedMS atomic.Int64
}

// RESTError is an {"error": "…"} reply (HTTP 400) from the REST API.
type RESTError struct {
	// Status is the HTTP status (400, 401, …).
	Status int
	// Message is the server's error text ("NOSCRIPT No matching script…").
	Message string
}

func (e *RESTError) Error() string {
	return fmt.Sprintf("upstash rest: HTTP %d: %s", e.Status, e.Message)
}

// NewRESTStore returns a store for the REST API at baseURL (http or https),
// authenticating with token. httpClient nil uses a client whose transport
// keeps enough idle connections for a gateway; timeouts come from each
// call's context (rate_limits.timeout). Errors: a baseURL that is not an
// absolute http(s) URL, or an empty token.
func NewRESTStore(baseURL string, token string, httpClient *http.Client) (*RESTStore, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("parsing the upstash rest url: want an absolute http(s) URL")
	}
	if token == "" {
		return nil, errors.New("creating the upstash rest store: the token is empty")
	}
	if httpClient == nil {
		t := egress.Transport()
		t.MaxIdleConnsPerHost = 64
		httpClient = egress.Client(t, 0)
	}
	return &RESTStore{
		base:   strings.TrimRight(u.String(), "/"),
		auth:   "Bearer " + token,
		client: httpClient,
	}, nil
}

// Do sends one command (["SET","k","v","EX",10]) and returns its result
// decoded with json.Number for numbers: nil, json.Number, string or []any.
func (s *RESTStore) Do(ctx context.Context, cmd ...any) (any, error) {
	body, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("encoding the command: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building the request: %w", err)
	}
	req.Header.Set("Authorization", s.auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		// *url.Error holds redis.rest_url whole (redact.Error).
		return nil, fmt.Errorf("calling upstash rest: %w", redact.Error(err))
	}
	defer resp.Body.Close()
	if err := egress.RedirectError(resp); err != nil {
		return nil, fmt.Errorf("upstash rest: %w", err)
	}
	reply, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the upstash rest reply: %w", err)
	}
	return parseRESTReply(resp.StatusCode, reply)
}

// parseRESTReply decodes one {"result": …} / {"error": "…"} reply, numbers
// as json.Number.
func parseRESTReply(status int, body []byte) (any, error) {
	var reply struct {
		Result any     `json:"result"`
		Error  *string `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&reply); err != nil {
		return nil, &RESTError{Status: status, Message: "unreadable reply: " + err.Error()}
	}
	if reply.Error != nil || status != http.StatusOK {
		msg := ""
		if reply.Error != nil {
			msg = *reply.Error
		}
		return nil, &RESTError{Status: status, Message: msg}
	}
	return reply.Result, nil
}

// evalSHA runs a script by digest, falling back to EVAL once on NOSCRIPT.
func (s *RESTStore) evalSHA(ctx context.Context, src, sha string, keys []string, args []any) ([]any, error) {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "EVALSHA", sha, len(keys))
	for _, k := range keys {
		cmd = append(cmd, k)
	}
	cmd = append(cmd, args...)
	res, err := s.Do(ctx, cmd...)
	if re := (*RESTError)(nil); errors.As(err, &re) && strings.HasPrefix(re.Message, "NOSCRIPT") {
		cmd[0], cmd[1] = "EVAL", src
		res, err = s.Do(ctx, cmd...)
	}
	if err != nil {
		return nil, err
	}
	arr, ok := res.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: %T where an array was expected", ErrBadReply, res)
	}
	return arr, nil
}

var (
	hitScriptSHA   = sha1Hex(hitScriptSource)
	relaxScriptSHA = sha1Hex(relaxScriptSource)
)

// Hit implements Store: one POST; the script reads Upstash's TIME.
func (s *RESTStore) Hit(ctx context.Context, hits []Hit, out []Count) (time.Time, error) {
	if len(hits) == 0 {
		return time.Time{}, nil
	}
	keys, args := hitArgs(s.pinnedMS.Load(), modeDecide, hits)
	arr, err := s.evalSHA(ctx, hitScriptSource, hitScriptSHA, keys, args)
	if err != nil {
		return time.Time{}, fmt.Errorf("running the rate-limit script: %w", err)
	}
	reply := make([]int64, len(arr))
	for i, v := range arr {
		if reply[i], err = jsonInt(v); err != nil {
			return time.Time{}, err
		}
	}
	return decodeHits(hits, reply, out)
}

// ReadRelax implements Store: one POST.
func (s *RESTStore) ReadRelax(ctx context.Context, keys []string) ([]RelaxValue, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	arr, err := s.evalSHA(ctx, relaxScriptSource, relaxScriptSHA, keys, nil)
	if err != nil {
		return nil, fmt.Errorf("reading relax keys: %w", err)
	}
	for i, v := range arr {
		if n, ok := v.(json.Number); ok {
			arr[i] = n.String()
		}
	}
	return decodeRelax(len(keys), arr)
}

// WriteRelax implements Store.
func (s *RESTStore) WriteRelax(ctx context.Context, key string, factor float64, ttl time.Duration) error {
	if _, err := s.Do(ctx, "SET", key, formatFactor(factor), "PX", ttl.Milliseconds()); err != nil {
		return fmt.Errorf("writing relax key: %w", err)
	}
	return nil
}

// Ping implements Store.
func (s *RESTStore) Ping(ctx context.Context) error {
	if _, err := s.Do(ctx, "PING"); err != nil {
		return fmt.Errorf("pinging upstash rest: %w", err)
	}
	return nil
}

func jsonInt(v any) (int64, error) {
	switch x := v.(type) {
	case json.Number:
		return x.Int64()
	case string:
		return strconv.ParseInt(x, 10, 64)
	default:
		return 0, fmt.Errorf("%w: %T where an integer was expected", ErrBadReply, v)
	}
}

var _ Store = (*RESTStore)(nil)
