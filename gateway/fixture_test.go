package gateway

import (
	"context"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/cookies"
	"github.com/olp-edu/borda/identity"
	"github.com/olp-edu/borda/keyspace"
	"github.com/olp-edu/borda/ratelimit"
)

// The gateway's tests build its typed Options directly (docs/architecture.md,
// "Options"): the mapping from the configuration file is cmd/borda's,
// tested there (cmd/borda/options_mapping_test.go).

// newServer builds the gateway of opts and deps, closed at cleanup.
func newServer(t testing.TB, opts Options, deps Deps) *Server {
	t.Helper()
	srv, err := New(opts, deps)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// routes is Options with the given route table and nothing else set.
func routes(rs ...Route) Options { return Options{Routes: rs} }

// testRoute is a route named name, on any host, for every path, to upstream
// (an absolute URL), handing the portal session over as the portal's
// routes do (sessionForward) and tunnelling websocket, as the
// configuration's routes do by default.
func testRoute(t testing.TB, name, upstream string) Route {
	t.Helper()
	return Route{Name: name, Upstream: Upstream{URL: mustURL(t, upstream)}, Cookies: RouteCookies{Forward: sessionForward()},
		Upgrades: []string{"websocket"}}
}

// sessionForward is the cookie policy of a portal route: olp_auth as
// Authorization: Bearer, olp_mural as the cookie it is.
func sessionForward() []cookies.Forward {
	return []cookies.Forward{{Cookie: cookies.AuthCookie, AsAuthorization: true}, {Cookie: "olp_mural"}}
}

func mustURL(t testing.TB, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		t.Fatalf("upstream %q is not an absolute URL (%v)", raw, err)
	}
	return u
}

// testIdentity is the verifier of the tests' HS256 tokens (testSecret):
// the user in sub, the school in app_metadata.escola_id, exp required,
// 30 s of leeway.
func testIdentity() identity.Options {
	return identity.Options{Secret: []byte(testSecret), UserClaim: "sub", EscolaClaim: "app_metadata.escola_id", Leeway: 30 * time.Second, RequireExp: true}
}

// withVerifier gives the gateway the started verifier of testIdentity,
// stopped at cleanup.
func withVerifier(t testing.TB) harnessOpt {
	v := newVerifier(t)
	return func(d *Deps) { d.Verifier = v }
}

func newVerifier(t testing.TB) *identity.Verifier {
	t.Helper()
	v, err := identity.NewVerifier(context.Background(), testIdentity(), nil)
	if err != nil {
		t.Fatalf("building identity verifier: %v", err)
	}
	if err := v.Start(context.Background()); err != nil {
		t.Fatalf("starting identity verifier: %v", err)
	}
	t.Cleanup(func() { _ = v.Stop(context.Background()) })
	return v
}

// realLimiter builds the ratelimit.Limiter of rules on an in-memory store
// (a 1 s decision deadline: a loaded machine must not fail open).
func realLimiter(t testing.TB, rules ...ratelimit.Rule) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(ratelimit.Options{Rules: rules, Timeout: time.Second, RelaxPoll: time.Minute}, keyspace.MustNew("gw-test:"),
		ratelimit.NewMemoryStore(0), prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("ratelimit.New: %v", err)
	}
	return l
}

// onHosts is rt served only for hosts.
func onHosts(rt Route, hosts ...string) Route {
	rt.Hosts = hosts
	return rt
}

// under is rt served only under the path prefix.
func under(rt Route, prefix string) Route {
	rt.PathPrefix = prefix
	return rt
}
