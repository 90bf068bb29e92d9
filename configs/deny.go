package configs

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// Deny is a set of deny lists (docs/edge.md, "Deny lists"): requests from
// a listed client address or with a listed user agent get 403 before any
// other work. At the top level it applies to every request, webhooks
// included (allow_ips exempts provider addresses); on a route, to that
// route's requests.
type Deny struct {
	// IPs are client addresses or CIDR prefixes, IPv4 or IPv6
	// ("203.0.113.7", "198.51.100.0/24", "2001:db8::/32").
	IPs []string `yaml:"ips"`
	// IPFiles are files of addresses, one per line, '#' comments; re-read
	// on SIGHUP.
	IPFiles []string `yaml:"ip_files"`
	// UserAgents are case-insensitive patterns: with '*' a glob over the
	// whole user agent ("curl/*"), else a substring ("sqlmap").
	UserAgents []string `yaml:"user_agents"`
	// UserAgentFiles are files of user-agent patterns, one per line;
	// re-read on SIGHUP.
	UserAgentFiles []string `yaml:"user_agent_files"`
	// Feeds are lists fetched over HTTP(S) and refreshed; a failed fetch
	// keeps the last good list.
	Feeds []DenyFeed `yaml:"feeds"`
	// AllowIPs (top level only) are addresses or prefixes the top-level
	// lists never deny, such as a webhook provider's.
	AllowIPs []string `yaml:"allow_ips"`
	// MaxCoveragePercent (top level only) is the largest share of the
	// public IPv4 or IPv6 space one list (a scope's inline entries and
	// files together, or one feed answer) may deny, in percent (default
	// 10; raise it to block large countries). A broader configured list is
	// refused at start and on reload; a broader feed answer is a failed
	// fetch. User-agent patterns that match a common browser or a webhook
	// provider are refused the same way.
	MaxCoveragePercent float64 `yaml:"max_coverage_percent"`
}

// DenyFeed is a deny list fetched from a URL.
type DenyFeed struct {
	// URL answers 200 with one entry per line; a redirect is not followed
	// (it fails the fetch: configure the final address).
	URL string `yaml:"url"`
	// Kind is ip (default) or user_agent.
	Kind string `yaml:"kind"`
	// Refresh is the interval between fetches (default 5m, at least 10s).
	Refresh Duration `yaml:"refresh"`
}

// Empty reports whether d lists nothing (MaxCoveragePercent is a bound,
// not an entry).
func (d Deny) Empty() bool {
	return len(d.IPs)+len(d.IPFiles)+len(d.UserAgents)+len(d.UserAgentFiles)+len(d.Feeds)+len(d.AllowIPs) == 0
}

func validateDeny(p *problems, path string, d Deny, top bool) {
	for i, s := range d.IPs {
		if !validDenyAddr(s) {
			p.addf(fmt.Sprintf("%s.ips[%d]", path, i), "%q is not an IP address or CIDR prefix", s)
		}
	}
	for i, s := range d.AllowIPs {
		if !top {
			p.addf(path+".allow_ips", "allow_ips is a top-level setting (deny.allow_ips): it exempts addresses from the global lists")
			break
		}
		if !validDenyAddr(s) {
			p.addf(fmt.Sprintf("%s.allow_ips[%d]", path, i), "%q is not an IP address or CIDR prefix", s)
		}
	}
	if d.MaxCoveragePercent != 0 {
		if !top {
			p.addf(path+".max_coverage_percent", "max_coverage_percent is a top-level setting (deny.max_coverage_percent)")
		} else if d.MaxCoveragePercent < 0 || d.MaxCoveragePercent > 100 {
			p.addf(path+".max_coverage_percent", "%v: want a percentage above 0 and at most 100", d.MaxCoveragePercent)
		}
	}
	for i, s := range d.UserAgents {
		if strings.TrimSpace(s) == "" {
			p.addf(fmt.Sprintf("%s.user_agents[%d]", path, i), "is empty (it would match nothing)")
		}
	}
	for i, f := range d.Feeds {
		fp := fmt.Sprintf("%s.feeds[%d]", path, i)
		if u, err := url.Parse(f.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.addf(fp+".url", "must be an http(s) URL")
		}
		switch f.Kind {
		case "", "ip", "user_agent":
		default:
			p.addf(fp+".kind", "%q: want ip or user_agent", f.Kind)
		}
		if f.Refresh != 0 && f.Refresh.D() < 10*time.Second {
			p.addf(fp+".refresh", "must be at least 10s")
		}
	}
}

func validDenyAddr(s string) bool {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		_, err := netip.ParsePrefix(s)
		return err == nil
	}
	a, err := netip.ParseAddr(s)
	return err == nil && a.Zone() == ""
}
