package queueguard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/internal/egress"
	"github.com/olp-edu/borda/webhook/publish"
)

// Defaults of Options.
const (
	// DefaultEvery is how often the queues are read.
	DefaultEvery = 10 * time.Second
	// DefaultTimeout bounds one GET.
	DefaultTimeout = 3 * time.Second
	// unknownEvery is the next read's delay while a queue's depth is not
	// known yet (its first statistics emission is pending).
	unknownEvery = time.Second
	// maxBody bounds a management API answer read.
	maxBody = 1 << 20
)

// Route is where this process publishes messages that reach a queue:
// Exchange and a binding pattern (topic syntax; a direct exchange's
// binding key matches itself).
type Route struct{ Exchange, Binding string }

// Queue is one queue the guard reads, with the routes that reach it.
type Queue struct {
	Name   string
	Routes []Route
}

// Options configure a Guard. ManagementURL, Vhost and Queues are required.
type Options struct {
	// ManagementURL is the management API's base
	// (http[s]://user:pass@host:15672[/prefix]); its userinfo is sent as
	// HTTP basic credentials and never logged.
	ManagementURL string
	// Vhost is the queues' virtual host.
	Vhost  string
	Queues []Queue
	// Every is the read interval (0: DefaultEvery); Timeout bounds one
	// GET (0: DefaultTimeout).
	Every, Timeout time.Duration
	// Client (nil: one on egress.Transport) and Logger (nil: discard).
	Client *http.Client
	Logger *slog.Logger
	// Clock dates reads for Stale (nil: the wall clock); the read loop's
	// timer stays on the wall clock.
	Clock clock.Clock
}

// Guard reads its queues' effective settings and admits or refuses
// publishes (publish.Guard). Its methods are safe for concurrent use.
type Guard struct {
	base   *url.URL // without userinfo
	user   *url.Userinfo
	vhost  string
	every  time.Duration
	client *http.Client
	logger *slog.Logger
	clock  clock.Clock
	queues []*queueState
	// anyUnguarded is true while some queue is unguarded: the fast path of
	// Admit when none is.
	anyUnguarded atomic.Bool
	// allRead is true once every queue's settings were read at least once:
	// until then a publish reaching an unread queue is refused (refusal).
	allRead  atomic.Bool
	readOnce chan struct{} // closed after the first round
	once     sync.Once
}

// queueState is one queue's last read and what was published since.
type queueState struct {
	Queue
	mu        sync.Mutex
	settings  Settings
	read      bool      // settings were read at least once
	readAt    time.Time // the last successful read
	unguarded bool
	readErr   string // the last read's failure ("" none), for logging a change
	// depth and depthBytes are the queue's messages and message_bytes at
	// the last read; known is false while the API had none.
	depth, depthBytes int64
	known             bool
	// cur counts publishes admitted since the last read, prev those of the
	// interval before it: the depth a read returns may be a statistics
	// sample up to 5 s older than the read, so the estimate counts both.
	cur, prev           int64
	curBytes, prevBytes int64
}

// New returns a Guard; it does not read (Start does). It fails when an
// option is missing or ManagementURL is not an http(s) URL.
func New(o Options) (*Guard, error) {
	if o.ManagementURL == "" || o.Vhost == "" || len(o.Queues) == 0 {
		return nil, errors.New("queueguard: the management URL, the vhost and the queues are required")
	}
	u, err := url.Parse(o.ManagementURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("queueguard: the management URL must be an http:// or https:// URL with a host")
	}
	g := &Guard{user: u.User, vhost: o.Vhost, every: o.Every, client: o.Client, logger: o.Logger, clock: clock.Or(o.Clock), readOnce: make(chan struct{})}
	b := *u
	b.User = nil
	b.Path = strings.TrimSuffix(b.Path, "/")
	b.RawPath = ""
	b.RawQuery, b.Fragment = "", ""
	g.base = &b
	if g.every <= 0 {
		g.every = DefaultEvery
	}
	if g.client == nil {
		g.client = egress.Client(nil, 0)
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if g.client.Timeout == 0 || g.client.Timeout > timeout {
		c := *g.client
		c.Timeout = timeout
		g.client = &c
	}
	if g.logger == nil {
		g.logger = slog.New(slog.DiscardHandler)
	}
	g.logger = g.logger.With("component", "queue-guard")
	for _, q := range o.Queues {
		if q.Name != "" {
			g.queues = append(g.queues, &queueState{Queue: q})
		}
	}
	return g, nil
}

// Start reads the queues at once and then every Options.Every until ctx
// ends, in a goroutine; it returns at once.
func (g *Guard) Start(ctx context.Context) {
	go func() {
		for {
			next := g.Check(ctx)
			t := time.NewTimer(next)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
}

// Check reads every queue once and returns the delay before the next
// round (Options.Every, or 1 s while a queue's settings, or an unguarded
// queue's depth, are not known yet).
func (g *Guard) Check(ctx context.Context) time.Duration {
	next := g.every
	for _, q := range g.queues {
		info, err := g.get(ctx, q.Name)
		g.record(q, info, err)
		q.mu.Lock()
		if !q.read || q.unguarded && !q.known {
			next = min(next, unknownEvery)
		}
		q.mu.Unlock()
	}
	any, all := false, true
	for _, q := range g.queues {
		q.mu.Lock()
		any = any || q.unguarded
		all = all && q.read
		q.mu.Unlock()
	}
	g.anyUnguarded.Store(any)
	g.allRead.Store(all)
	g.once.Do(func() { close(g.readOnce) })
	return next
}

// Read returns a channel closed once the first round of reads is done.
func (g *Guard) Read() <-chan struct{} { return g.readOnce }

// errNotFound: the API answered 404 (the queue does not exist yet).
var errNotFound = errors.New("the management API does not know the queue")

// get reads one queue. Errors name the path, never the credentials.
func (g *Guard) get(ctx context.Context, name string) (QueueInfo, error) {
	u := *g.base
	u.Path = g.base.Path + "/api/queues/" + g.vhost + "/" + name
	u.RawPath = g.base.EscapedPath() + "/api/queues/" + url.PathEscape(g.vhost) + "/" + url.PathEscape(name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return QueueInfo{}, err
	}
	if g.user != nil {
		pass, _ := g.user.Password()
		req.SetBasicAuth(g.user.Username(), pass)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := g.client.Do(req)
	if err != nil {
		return QueueInfo{}, err // a *url.Error naming the URL, which has no userinfo
	}
	defer resp.Body.Close()
	if err := egress.RedirectError(resp); err != nil {
		return QueueInfo{}, fmt.Errorf("GET %s: %w", u.Path, err)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return QueueInfo{}, fmt.Errorf("GET %s: reading the answer: %w", u.Path, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return QueueInfo{}, fmt.Errorf("GET %s: %w", u.Path, errNotFound)
	case resp.StatusCode != http.StatusOK:
		return QueueInfo{}, fmt.Errorf("GET %s: HTTP %d", u.Path, resp.StatusCode)
	}
	var info QueueInfo
	if err := json.Unmarshal(body, &info); err != nil {
		return QueueInfo{}, fmt.Errorf("GET %s: %w", u.Path, err)
	}
	return info, nil
}

// record applies one read of q: on success the settings and the depth
// are replaced and the publish counts shift (prev = cur, cur = 0); on a
// failure the last settings stay and the counts keep growing, so the
// estimate only rises. Changes are logged once.
func (g *Guard) record(q *queueState, info QueueInfo, err error) {
	var s Settings
	if err == nil {
		s, err = Effective(info)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if err != nil {
		if errors.Is(err, ErrNoStatistics) {
			return // a new queue: read again in a second (Check)
		}
		if msg := err.Error(); msg != q.readErr {
			q.readErr = msg
			if q.read {
				g.logger.Warn("cannot read a queue's effective settings from the RabbitMQ management API; keeping the last ones", "queue", q.Name, "error", msg)
			} else {
				g.logger.Error("cannot read a queue's effective settings from the RabbitMQ management API, and they were never read: publishes routed to it answer 503 QUEUE_MAY_DROP and /readyz/webhook is not ready until they are (check amqp.management_url and its credentials; docs/reliability.md, \"Length limits refuse, never drop\")", "queue", q.Name, "error", msg)
			}
		}
		return
	}
	if q.readErr != "" {
		q.readErr = ""
		g.logger.Info("reading the queue's effective settings again", "queue", q.Name)
	}
	was, wasSettings, wasRead := q.unguarded, q.settings, q.read
	q.settings, q.read, q.unguarded = s, true, s.Unguarded()
	q.readAt = g.clock.Now()
	q.known = info.Messages != nil
	q.depth, q.depthBytes = deref(info.Messages), deref(info.MessageBytes)
	q.prev, q.cur = q.cur, 0
	q.prevBytes, q.curBytes = q.curBytes, 0
	switch {
	case q.unguarded && (!was || s != wasSettings):
		g.logger.Error("a broker policy makes this queue drop its oldest (confirmed) messages at its length limit: its effective overflow is not reject-publish; publishes that would bring it near the limit answer 503 QUEUE_MAY_DROP until the policy is fixed (docs/reliability.md, \"Length limits refuse, never drop\")",
			"queue", q.Name, "settings", s.String())
	case !q.unguarded && was:
		g.logger.Info("the queue refuses at its length limit again (or has none); the queue guard admits every publish", "queue", q.Name, "settings", s.String())
	case !wasRead:
		g.logger.Debug("queue settings read", "queue", q.Name, "settings", s.String())
	}
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// Headroom is what the guard keeps free below a limit: max(10, limit/10).
func Headroom(limit int64) int64 { return max(10, limit/10) }

// Admit counts a publish of size bytes to exchange with routing key key
// toward every queue it reaches, or refuses it with an error wrapping
// publish.ErrQueueMayDrop when one of those queues is unguarded and its
// estimated depth (the last read's, plus the publishes admitted since the
// read before it) has reached its limit minus Headroom; its depth unknown
// counts as at the limit. A refused publish is not counted.
func (g *Guard) Admit(exchange, key string, size int) error {
	var reach []*queueState
	for _, q := range g.queues {
		if q.reached(exchange, key) {
			reach = append(reach, q)
		}
	}
	if len(reach) == 0 {
		return nil
	}
	// Lock in the queues' order (fixed), so two publishes never deadlock.
	for _, q := range reach {
		q.mu.Lock()
	}
	defer func() {
		for _, q := range reach {
			q.mu.Unlock()
		}
	}()
	if g.anyUnguarded.Load() || !g.allRead.Load() {
		for _, q := range reach {
			if err := q.refusal(int64(size)); err != nil {
				return err
			}
		}
	}
	for _, q := range reach {
		q.cur++
		q.curBytes += int64(size)
	}
	return nil
}

// reached reports whether a publish to exchange with key reaches q.
func (q *queueState) reached(exchange, key string) bool {
	for _, r := range q.Routes {
		if r.Exchange == exchange && publish.TopicMatch(r.Binding, key) {
			return true
		}
	}
	return false
}

// refusal returns the publish.ErrQueueMayDrop refusal of one more message
// of size bytes to q, or nil. q.mu is held.
func (q *queueState) refusal(size int64) error {
	if !q.read {
		// Never read (a wrong management URL or credentials, the API
		// down since the start, a queue without statistics yet): whether
		// a policy lets it drop is not known, so no 200 rests on it
		// (fresh attack pass 9, W01: a drop-head policy and an API
		// answering 401 lost 5 of 8 acknowledged events).
		return fmt.Errorf("%w: %s (its effective settings were never read from the RabbitMQ management API: %s)", publish.ErrQueueMayDrop, q.Name, q.failure())
	}
	if !q.unguarded {
		return nil
	}
	s := q.settings
	if !q.known {
		return fmt.Errorf("%w: %s (%s; its depth is not known yet)", publish.ErrQueueMayDrop, q.Name, s)
	}
	if s.MaxLength >= 0 {
		if est := q.depth + q.prev + q.cur; est+1 > s.MaxLength-Headroom(s.MaxLength) {
			return fmt.Errorf("%w: %s holds about %d of max-length %d (%s)", publish.ErrQueueMayDrop, q.Name, est, s.MaxLength, s)
		}
	}
	if s.MaxLengthBytes >= 0 {
		room := max(s.MaxLengthBytes/10, 10*size)
		if est := q.depthBytes + q.prevBytes + q.curBytes; est+size > s.MaxLengthBytes-room {
			return fmt.Errorf("%w: %s holds about %d of max-length-bytes %d (%s)", publish.ErrQueueMayDrop, q.Name, est, s.MaxLengthBytes, s)
		}
	}
	return nil
}

// Unguarded names the queues whose effective settings drop messages at a
// length limit, sorted (publish.Guard).
func (g *Guard) Unguarded() []string {
	var names []string
	for _, q := range g.queues {
		q.mu.Lock()
		if q.unguarded {
			names = append(names, q.Name)
		}
		q.mu.Unlock()
	}
	slices.Sort(names)
	return names
}

// Unread names the queues whose effective settings were never read, each
// with the last read's failure, sorted: while one is, publishes reaching
// it are refused and the publisher is not ready (publish.Ready).
func (g *Guard) Unread() []string {
	var out []string
	for _, q := range g.queues {
		q.mu.Lock()
		if !q.read {
			out = append(out, q.Name+" ("+q.failure()+")")
		}
		q.mu.Unlock()
	}
	slices.Sort(out)
	return out
}

// staleAfter is how many read intervals a queue's last good read may age
// before Stale names it.
const staleAfter = 3

// Stale names the queues read once whose settings have not been read again
// for staleAfter intervals (the management API failing since: a rotated
// password, the API down), each with its age and the failure, sorted. The
// guard keeps deciding on those settings; a drop-head policy set since is
// not seen, so the publisher reports them as degraded and counts them in
// borda_webhook_queue_guard_stale (fresh attack pass 10, A39).
func (g *Guard) Stale() []string {
	var out []string
	now := g.clock.Now()
	for _, q := range g.queues {
		q.mu.Lock()
		if q.read && now.Sub(q.readAt) > staleAfter*g.every {
			out = append(out, fmt.Sprintf("%s (read %s ago; %s)", q.Name, now.Sub(q.readAt).Round(time.Second), q.failure()))
		}
		q.mu.Unlock()
	}
	slices.Sort(out)
	return out
}

// failure is why q's settings are not being read: the last read's error,
// or that none has answered yet. q.mu is held.
func (q *queueState) failure() string {
	if q.readErr != "" {
		return q.readErr
	}
	return "not answered yet"
}

// Settings returns queue's last read settings and whether it was read.
func (g *Guard) Settings(queue string) (Settings, bool) {
	for _, q := range g.queues {
		if q.Name == queue {
			q.mu.Lock()
			defer q.mu.Unlock()
			return q.settings, q.read
		}
	}
	return Settings{}, false
}
