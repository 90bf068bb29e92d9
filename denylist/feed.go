package denylist

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/olp-edu/borda/internal/egress"
	"github.com/olp-edu/borda/internal/startstop"
)

// MaxFeedBytes bounds a feed's answer (16 MiB); a longer one is refused
// as a whole.
const MaxFeedBytes = 16 << 20

// FeedOptions configure a Feed.
type FeedOptions struct {
	// URL is fetched with GET; a 200 answer's body is the list, one entry
	// per line.
	URL string
	// Kind is what the entries are.
	Kind Kind
	// Every is the refresh interval (default 5 minutes, at least 10 s).
	Every time.Duration
	// Timeout bounds one fetch (default 10 s).
	Timeout time.Duration
	// Client fetches (default: egress.Client, which follows no redirect:
	// a 3xx fails the fetch with the host it pointed to).
	Client *http.Client
	// Logger receives one line per failed fetch and per change of size
	// (default slog.Default()).
	Logger *slog.Logger
	// Name labels logs and the operator page (default the URL's host).
	Name string
	// MaxShare is the largest share (0-1] of the public address space an
	// answer may cover (List.Check; default DefaultMaxShare); a broader
	// answer is a failed fetch.
	MaxShare float64
}

// Feed is a List fetched from a URL and refreshed on a timer. A failed
// fetch (transport error, a status other than 200, a body over
// MaxFeedBytes, an unparsable line, an answer that denies too much
// (List.Check), or an empty answer where the last good list had
// entries) keeps the last good list: a feed is never
// emptied by a failure, and until its first success it denies nothing.
type Feed struct {
	opts    FeedOptions
	cur     atomic.Pointer[List]
	lastErr atomic.Pointer[string]
	okAt    atomic.Int64 // unix nanos of the last good fetch, 0 for none
	runner  startstop.Runner
}

// NewFeed returns a Feed that has fetched nothing yet; Start fetches.
func NewFeed(opts FeedOptions) *Feed {
	if opts.Every <= 0 {
		opts.Every = 5 * time.Minute
	}
	opts.Every = max(opts.Every, 10*time.Second)
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Client == nil {
		opts.Client = egress.Client(nil, 0)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxShare <= 0 {
		opts.MaxShare = DefaultMaxShare
	}
	if opts.Name == "" {
		opts.Name = opts.URL
	}
	return &Feed{opts: opts}
}

// List is the last good list (nil before the first good fetch).
func (f *Feed) List() *List { return f.cur.Load() }

// Status is the feed's state for the operator page: entries in force,
// when the last good fetch was (zero: never) and the last fetch's error
// ("" when it succeeded).
func (f *Feed) Status() (entries int, okAt time.Time, lastErr string) {
	if n := f.okAt.Load(); n > 0 {
		okAt = time.Unix(0, n)
	}
	if e := f.lastErr.Load(); e != nil {
		lastErr = *e
	}
	return f.cur.Load().Len(), okAt, lastErr
}

// Refresh fetches the feed once; on success the new list is in force
// when it returns, on failure the old one stays and the error says why.
func (f *Feed) Refresh(ctx context.Context) error {
	l, err := f.fetch(ctx)
	if err == nil && l.Len() == 0 && f.cur.Load().Len() > 0 {
		err = errors.New("the feed answered no entries where it had some: kept the last list")
	}
	if err != nil {
		msg := err.Error()
		f.lastErr.Store(&msg)
		f.opts.Logger.Warn("deny-list feed: fetch failed, keeping the last good list",
			"feed", f.opts.Name, "entries", f.cur.Load().Len(), "err", msg)
		return err
	}
	if old := f.cur.Swap(l); old.Len() != l.Len() {
		f.opts.Logger.Info("deny-list feed: refreshed", "feed", f.opts.Name, "entries", l.Len())
	}
	f.lastErr.Store(nil)
	f.okAt.Store(time.Now().UnixNano())
	return nil
}

func (f *Feed) fetch(ctx context.Context) (*List, error) {
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.opts.URL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := f.opts.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if err := egress.RedirectError(resp); err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	body := io.LimitReader(resp.Body, MaxFeedBytes+1)
	counted := &countingReader{r: body}
	var b Builder
	if err := b.Read(f.opts.Kind, f.opts.Name, counted); err != nil {
		return nil, err
	}
	if counted.n > MaxFeedBytes {
		return nil, fmt.Errorf("answer larger than %d MiB", MaxFeedBytes>>20)
	}
	l := b.List()
	if err := l.Check(f.opts.MaxShare); err != nil {
		return nil, fmt.Errorf("refused the answer: %w", err)
	}
	return l, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Start fetches in the background now and then every opts.Every, until
// Stop. A second Start is a no-op.
func (f *Feed) Start(ctx context.Context) error {
	return f.runner.Start(ctx, func(ctx context.Context) {
		t := time.NewTicker(f.opts.Every)
		defer t.Stop()
		for {
			_ = f.Refresh(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
}

// Stop ends the refresh loop and waits for it (bounded by ctx).
func (f *Feed) Stop(ctx context.Context) error { return f.runner.Stop(ctx) }
