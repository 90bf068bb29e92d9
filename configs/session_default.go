package configs

import (
	"fmt"
	"slices"
	"strings"
)

// sessionByDefault warns about each route that receives the portal session
// only because it has no cookies key (DefaultCookieForward: olp_auth as
// Authorization, olp_mural as a cookie), when the routes reach more than
// one upstream origin: a route added for a third party without a cookies
// key would hand every user's session to it (fresh attack pass 6 K01). A
// route that writes its cookies.forward, even the default list, is not
// warned about. Call it after validateRoutes (UpstreamURL is parsed).
func (c *Config) sessionByDefault() []string {
	origin := func(r Route) string { return strings.ToLower(r.UpstreamURL.Scheme + " " + r.UpstreamURL.Host) }
	origins := map[string]string{} // scheme and host → host, as printed
	for _, r := range c.Routes {
		if r.UpstreamURL != nil {
			origins[origin(r)] = r.UpstreamURL.Host
		}
	}
	if len(origins) < 2 {
		return nil
	}
	var out []string
	for i, r := range c.Routes {
		if !r.Cookies.defaulted || r.UpstreamURL == nil {
			continue
		}
		others := make([]string, 0, len(origins))
		for o, host := range origins {
			if o != origin(r) {
				others = append(others, host)
			}
		}
		slices.Sort(others)
		others = slices.Compact(others)
		out = append(out, fmt.Sprintf("routes[%d].cookies: absent, so route %q hands the portal session to %s (the default: olp_auth as Authorization, olp_mural as a cookie) while other routes reach %s; write cookies.forward for each route: the default list to keep it, [] for an upstream that must not see the session (docs/edge.md, \"Untrusted routes\")",
			i, r.Name, r.UpstreamURL.Host, strings.Join(others, ", ")))
	}
	return out
}
