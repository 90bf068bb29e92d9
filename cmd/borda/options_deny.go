package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/denylist"
	"github.com/olp-edu/borda/gateway"
	"github.com/olp-edu/borda/internal/redact"
)

// denyLists are the deny lists `borda serve` runs: the static lists are
// rebuilt from the file on SIGHUP (files re-read), the feeds started once
// (a feed's URL changes with a restart).
type denyLists struct {
	feeds map[string]*denylist.Feed // by "<scope>|<url>|<kind>"
}

// staticDenyList builds the list of d's inline entries and files; an
// unreadable file, a bad line or a list that denies more than maxShare
// (denylist.List.Check) is an error naming it.
func staticDenyList(d configs.Deny, maxShare float64) (*denylist.List, error) {
	var b denylist.Builder
	for _, e := range d.IPs {
		if err := b.Add(denylist.Addresses, e); err != nil {
			return nil, err
		}
	}
	for _, e := range d.UserAgents {
		if err := b.Add(denylist.Agents, e); err != nil {
			return nil, err
		}
	}
	read := func(k denylist.Kind, files []string) error {
		for _, name := range files {
			f, err := os.Open(name)
			if err != nil {
				return err
			}
			err = b.Read(k, name, f)
			f.Close()
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := read(denylist.Addresses, d.IPFiles); err != nil {
		return nil, err
	}
	if err := read(denylist.Agents, d.UserAgentFiles); err != nil {
		return nil, err
	}
	l := b.List()
	if err := l.Check(maxShare); err != nil {
		return nil, err
	}
	return l, nil
}

// build maps cfg's deny sections into the gateway's Deny, creating (not
// starting) a feed the first time its URL appears.
func (dl *denyLists) build(cfg configs.Config, logger *slog.Logger) (gateway.Deny, error) {
	if dl.feeds == nil {
		dl.feeds = map[string]*denylist.Feed{}
	}
	maxShare := denyMaxShare(cfg.Deny)
	sources := func(scope string, d configs.Deny) ([]gateway.DenySource, error) {
		static, err := staticDenyList(d, maxShare)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", scope, err)
		}
		var out []gateway.DenySource
		if static.Len() > 0 {
			out = append(out, gateway.DenySource{Name: scope, List: func() *denylist.List { return static }})
		}
		for _, fc := range d.Feeds {
			kind := denylist.Addresses
			if fc.Kind == "user_agent" {
				kind = denylist.Agents
			}
			key := scope + "|" + fc.URL + "|" + fc.Kind
			name := "feed:" + redact.URL(fc.URL)
			f := dl.feeds[key]
			if f == nil {
				f = denylist.NewFeed(denylist.FeedOptions{URL: fc.URL, Kind: kind, Every: fc.Refresh.D(), Name: name,
					Logger: logger.With("component", "deny"), MaxShare: maxShare})
				dl.feeds[key] = f
			}
			out = append(out, gateway.DenySource{Name: name, List: f.List})
		}
		return out, nil
	}
	var deny gateway.Deny
	var err error
	if deny.Global, err = sources("deny", cfg.Deny); err != nil {
		return deny, err
	}
	if len(cfg.Deny.AllowIPs) > 0 {
		var b denylist.Builder
		for _, e := range cfg.Deny.AllowIPs {
			if err := b.Add(denylist.Addresses, e); err != nil {
				return deny, fmt.Errorf("deny.allow_ips: %w", err)
			}
		}
		deny.Allow = b.List()
	}
	for _, rc := range cfg.Routes {
		if rc.Deny.Empty() {
			continue
		}
		src, err := sources("route:"+rc.Name, rc.Deny)
		if err != nil {
			return deny, err
		}
		if deny.Routes == nil {
			deny.Routes = map[string][]gateway.DenySource{}
		}
		deny.Routes[rc.Name] = src
	}
	return deny, nil
}

// denyMaxShare is deny.max_coverage_percent as a share (0-1], or
// denylist.DefaultMaxShare when unset.
func denyMaxShare(d configs.Deny) float64 {
	if d.MaxCoveragePercent > 0 {
		return d.MaxCoveragePercent / 100
	}
	return denylist.DefaultMaxShare
}

// start starts every feed (a second start of one is a no-op).
func (dl *denyLists) start(ctx context.Context) error {
	for _, f := range dl.feeds {
		if err := f.Start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// stop stops every feed.
func (dl *denyLists) stop(ctx context.Context) {
	for _, f := range dl.feeds {
		_ = f.Stop(ctx)
	}
}
