package ingress

import (
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Failed-authentication throttle (docs/webhooks.md §2, "Failed
// authentication is throttled"). Every refused credential (missing,
// wrong, conflicting, repeated; missing or bad signature) counts against
// the client's IP and against the source; once either is over its limit,
// further failures answer 429 AUTH_THROTTLED with Retry-After instead of
// 401. A request whose credential is valid is never throttled, whatever
// its IP has done: providers often share an egress IP with other tenants
// (one Evolution server hosts many instances, GitHub sends every
// customer's hooks from the same ranges), and a neighbour's wrong token
// must not block the right one.
//
// The counters are per process, like nginx's limit_req and Traefik's
// rateLimit middleware: with N replicas a client gets up to N times the
// limit. They are GCRA (a leaky bucket: burst = limit, then one failure
// every window/limit), bounded by an LRU of client IPs, so a spray of
// addresses costs a fixed amount of memory; the per-source counter is
// what still catches a spray that evicts its own entries.

// Auth failure reasons, the label of borda_webhook_auth_failures_total.
const (
	authMissing          = "missing"           // no credential
	authConflict         = "conflict"          // methods disagree
	authRepeated         = "repeated"          // one form given twice
	authMismatch         = "mismatch"          // not a configured token
	authSignatureMissing = "signature_missing" // a signed source's headers absent
	authSignatureInvalid = "signature_invalid" // signature does not verify
	// authSignatureRepeated: a field the signature scheme reads came on
	// two lines with different values (signatureFields): which one a
	// verifier, or the id, believes would be a guess.
	authSignatureRepeated = "signature_repeated"
)

// gcra is one counter: the theoretical arrival time of the next failure,
// in unix nanoseconds, and whether the last failure was refused (so an
// episode is logged once).
type gcra struct {
	tat       int64
	throttled bool
}

// step records one failure at now against limit per window and returns
// how long to wait when it is over the limit (0: within it). A refused
// failure does not move the counter (as nginx's limit_req), so Retry-After
// is exact.
func (g *gcra) step(now int64, limit int, window time.Duration) time.Duration {
	interval := int64(window) / int64(limit)
	tat := max(g.tat, now) + interval
	if over := tat - now - int64(window); over > 0 {
		return time.Duration(over)
	}
	g.tat = tat
	return 0
}

// authThrottle holds the counters of one ingress.
type authThrottle struct {
	perIP, perSource int
	window           time.Duration

	mu      sync.Mutex
	ips     *simplelru.LRU[string, gcra] // key: source name + "\x00" + client subject
	sources map[string]*gcra
}

func newAuthThrottle(perIP, perSource, maxClients int, window time.Duration) *authThrottle {
	ips, err := simplelru.NewLRU[string, gcra](max(maxClients, 1), nil)
	if err != nil { // only for a size < 1
		panic(err)
	}
	return &authThrottle{perIP: perIP, perSource: perSource, window: window, ips: ips, sources: map[string]*gcra{}}
}

// verdict is the throttle's answer to one failure.
type verdict struct {
	wait  time.Duration // > 0: answer 429 with Retry-After
	scope string        // "ip" or "source" when wait > 0
	first bool          // the first refusal of an episode (log it)
}

// fail records one authentication failure of client on source at now.
func (a *authThrottle) fail(src, client string, now time.Time) verdict {
	t := now.UnixNano()
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sources[src]
	if s == nil {
		s = &gcra{}
		a.sources[src] = s
	}
	key := src + "\x00" + client
	ip, _ := a.ips.Get(key)
	var v verdict
	// The IP is charged first: a client over its own limit must not use
	// up the source's allowance for everyone else.
	if w := ip.step(t, a.perIP, a.window); w > 0 {
		v = verdict{wait: w, scope: "ip", first: !ip.throttled}
		ip.throttled = true
	} else if w := s.step(t, a.perSource, a.window); w > 0 {
		v = verdict{wait: w, scope: "source", first: !s.throttled}
		s.throttled = true
		ip.tat -= int64(a.window) / int64(a.perIP) // not charged: refused by the source's limit
	} else {
		ip.throttled, s.throttled = false, false
	}
	a.ips.Add(key, ip)
	return v
}
