package restconn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/olp-edu/borda/internal/egress"
	"github.com/olp-edu/borda/internal/redact"
)

// The REST API's paths (docs/rate-limiting.md, "Upstash REST").
const (
	pathCommand   = "/"
	pathPipeline  = "/pipeline"
	pathMultiExec = "/multi-exec"
)

// maxReply bounds one reply body (a SCAN page, an MGET of a page of
// counters): 64 MiB, far above any reply Borda asks for.
const maxReply = 64 << 20

// syncTokenHeader carries Upstash's read-your-writes token: each reply
// holds the latest one, and a request that sends it back is served by a
// replica that has applied every write it covers (a global database's
// read regions).
const syncTokenHeader = "Upstash-Sync-Token"

// Client posts commands to one Upstash REST endpoint. It is safe for
// concurrent use; every connection Dial returns shares it.
type Client struct {
	base string // no trailing slash
	host string // host:port
	auth string // "Bearer <token>"
	http *http.Client
	sync atomic.Pointer[string] // the latest Upstash-Sync-Token seen
}

// NewClient returns a Client for the REST API at baseURL (an absolute
// http or https URL without query, UPSTASH_REDIS_REST_URL) authenticating with token
// (UPSTASH_REDIS_REST_TOKEN, sent as "Authorization: Bearer"). httpClient
// nil builds one whose transport keeps up to poolSize idle connections and
// bounds a new connection's dial and TLS handshake by dialTimeout; no
// client-wide timeout: each request is bounded by its context (the
// connection's read deadline). Errors: a baseURL that is not an absolute
// http(s) URL or carries a query, fragment or user, or an empty token.
func NewClient(baseURL, token string, httpClient *http.Client, poolSize int, dialTimeout time.Duration) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("parsing the upstash rest url: want an absolute http(s) URL")
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		// The token goes in its own variable: a URL's query ends up in logs.
		return nil, errors.New("parsing the upstash rest url: want no query, fragment or user; the token is UPSTASH_REDIS_REST_TOKEN")
	}
	if token == "" {
		return nil, errors.New("creating the upstash rest client: the token is empty")
	}
	if httpClient == nil {
		t := egress.Transport()
		t.MaxIdleConnsPerHost = max(poolSize, 2)
		if dialTimeout > 0 {
			t.DialContext = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
			t.TLSHandshakeTimeout = dialTimeout
		}
		httpClient = egress.Client(t, 0)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	return &Client{base: strings.TrimRight(u.String(), "/"), host: host, auth: "Bearer " + token, http: httpClient}, nil
}

// Host is the endpoint's host:port (the go-redis Addr of its clients).
func (c *Client) Host() string { return c.host }

// Error is an {"error": "…"} answer to a whole request (HTTP 400, 401, …)
// or to one command of a pipeline (Status 200).
type Error struct {
	// Status is the HTTP status of the request.
	Status int
	// Message is the server's text ("ERR …", "NOSCRIPT …", "Unauthorized").
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("upstash rest: HTTP %d: %s", e.Status, e.Message)
}

// post sends body (JSON) to path and returns the reply decoded with
// json.Number for numbers. A reply with an "error" and a status other than
// 200 is an *Error; a transport failure, a status >= 500 or a body that is
// not JSON is any other error (the connection is then unusable).
func (c *Client) post(ctx context.Context, path string, body []byte) (any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building the upstash rest request: %w", err)
	}
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Upstash-Encoding", "base64")
	if t := c.sync.Load(); t != nil {
		req.Header.Set(syncTokenHeader, *t)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// *url.Error holds the endpoint whole (redact.Error).
		return nil, fmt.Errorf("calling upstash rest: %w", redact.Error(err))
	}
	defer resp.Body.Close()
	if t := resp.Header.Get(syncTokenHeader); t != "" {
		c.sync.Store(&t)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxReply+1))
	if err != nil {
		return nil, fmt.Errorf("reading the upstash rest reply: %w", redact.Error(err))
	}
	if len(raw) > maxReply {
		return nil, fmt.Errorf("reading the upstash rest reply: longer than %d bytes", maxReply)
	}
	if err := egress.RedirectError(resp); err != nil {
		return nil, fmt.Errorf("upstash rest: %w", err)
	}
	if resp.StatusCode >= 500 {
		return nil, fmt.Errorf("upstash rest: HTTP %d", resp.StatusCode)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("upstash rest: HTTP %d with a reply that is not JSON", resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK {
		msg := http.StatusText(resp.StatusCode)
		if m, ok := v.(map[string]any); ok {
			if s, ok := m["error"].(string); ok {
				msg = s
			}
		}
		return nil, &Error{Status: resp.StatusCode, Message: msg}
	}
	return v, nil
}
