// Package limitprobe checks a running gateway's rate limits from the
// outside, as the rollout's staging phase asks (docs/rollout.md): for a
// rule it sends requests until the rule limits them, checks the 429 a
// client gets (status, Retry-After, the X-RateLimit-* and draft RateLimit
// headers, the application/problem+json body with the rule's PT-BR
// message for its scope), then waits Retry-After and checks the limit
// lifts. An observe-mode rule is checked for its X-RateLimit-Would-Block
// marker instead. `borda limits probe` drives it.
//
// The checks read the gateway's answers against the rule as configured
// (its limit, window, scope and message), never against the gateway's own
// code, so a gateway that drops a header fails the probe.
package limitprobe

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/olp-edu/borda/internal/egress"
)

// ProblemType is the RFC 9457 type a 429 must carry (IANA HTTP Problem
// Types registry, "quota-exceeded").
const ProblemType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// Target is one rule to probe and how to reach it.
type Target struct {
	// Rule is the rule's name, as the gateway lists it in RateLimit-Policy
	// and violated-policies.
	Rule string
	// Scope is ip, user, escola or route.
	Scope string
	// Limit is the requests allowed per Window; Window is in whole seconds.
	Limit  int64
	Window time.Duration
	// Observe is true for an observe-mode rule (never a 429: the marker).
	Observe bool
	// Message is the PT-BR detail the 429 must carry, with
	// "{retry_after}" standing for the body's retry_after.
	Message string
	// Host is the Host header (a route's host; empty: the URL's), Path the
	// path requested (under the route's prefix).
	Host, Path string
	// Header is added to every request (the credential of a user or
	// escola rule: Authorization: Bearer …).
	Header http.Header
}

// Options bound a probe. The zero value of each field takes its default.
type Options struct {
	// BaseURL is the gateway's public listener (scheme and host; its path
	// is replaced by the Target's).
	BaseURL *url.URL
	// Client sends the requests (default: a client with a 10 s timeout
	// that does not follow redirects).
	Client *http.Client
	// MaxRequests bounds the requests sent for one target (default
	// 4 × Limit + 20).
	MaxRequests int
	// MaxDuration bounds the time spent on one target, waits included
	// (default 2 × Window + 30 s).
	MaxDuration time.Duration
	// Sleep waits between bursts and for Retry-After (default: a timer
	// that honours ctx). Tests pass a recording sleep.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Check is one property of the gateway's answer.
type Check struct {
	// Name says what was checked ("status", "Retry-After", …).
	Name string
	// OK is true when the property held; Detail says what was seen.
	OK     bool
	Detail string
}

// Result is the outcome of one Target.
type Result struct {
	Rule     string
	Scope    string
	Requests int
	Checks   []Check
}

// OK reports whether every check of r held (false when there is none).
func (r Result) OK() bool {
	if len(r.Checks) == 0 {
		return false
	}
	for _, c := range r.Checks {
		if !c.OK {
			return false
		}
	}
	return true
}

// Failed returns the checks of r that did not hold.
func (r Result) Failed() []Check {
	var out []Check
	for _, c := range r.Checks {
		if !c.OK {
			out = append(out, c)
		}
	}
	return out
}

func (o Options) withDefaults(t Target) Options {
	if o.Client == nil {
		o.Client = egress.Client(nil, 10*time.Second)
	}
	if o.MaxRequests <= 0 {
		o.MaxRequests = int(min(4*t.Limit+20, 1_000_000))
	}
	if o.MaxDuration <= 0 {
		o.MaxDuration = 2*t.Window + 30*time.Second
	}
	if o.Sleep == nil {
		o.Sleep = sleepCtx
	}
	return o
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// answer is what the probe keeps of one response.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (o Options) send(ctx context.Context, t Target) (answer, error) {
	u := *o.BaseURL
	u.Path, u.RawPath, u.RawQuery = t.Path, "", ""
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return answer{}, err
	}
	if t.Host != "" {
		req.Host = t.Host
	}
	for k, vs := range t.Header {
		req.Header[k] = vs
	}
	resp, err := o.Client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return answer{status: resp.StatusCode, header: resp.Header, body: body}, err
}

// problem is the 429 body as docs/rate-limiting.md specifies it.
type problem struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies"`
	Scope            string   `json:"scope"`
	RetryAfter       int64    `json:"retry_after"`
}

// blockedBy returns the rules a 429 names in violated-policies (nil for
// any other answer), and false for a 429 whose body is not the problem
// (it cannot say which rule limited).
func blockedBy(a answer) ([]string, bool) {
	if a.status != http.StatusTooManyRequests {
		return nil, true
	}
	var p problem
	if json.Unmarshal(a.body, &p) != nil {
		return nil, false
	}
	return p.ViolatedPolicies, true
}

// Probe runs t against the gateway: requests until t's rule limits them
// (a 429 that names it, or for an observe rule the would-block marker),
// waiting out other rules' 429s on the way (a per-IP burst before a
// per-user limit), then the checks of the answer and of its lifting. It
// never returns an error: a transport failure or a bound reached is a
// failed check.
func Probe(ctx context.Context, o Options, t Target) Result {
	o = o.withDefaults(t)
	ctx, cancel := context.WithTimeout(ctx, o.MaxDuration)
	defer cancel()
	res := Result{Rule: t.Rule, Scope: t.Scope}
	fail := func(name, format string, args ...any) Result {
		res.Checks = append(res.Checks, Check{Name: name, Detail: fmt.Sprintf(format, args...)})
		return res
	}
	var hit answer
	for found := false; !found; {
		if res.Requests >= o.MaxRequests {
			return fail("limited", "no limit after %d requests (limit %d per %v): the rule does not apply to %s%s%s", res.Requests, t.Limit, t.Window, t.Host, t.Path, redirectHint(hit))
		}
		a, err := o.send(ctx, t)
		hit = a
		res.Requests++
		if err != nil {
			return fail("limited", "request %d: %v", res.Requests, err)
		}
		by, readable := blockedBy(a)
		switch {
		case !readable && !t.Observe:
			hit, found = a, true // a 429 without its problem: the checks say so
		case t.Observe && a.header.Get("X-RateLimit-Would-Block") == "true" && a.status != http.StatusTooManyRequests:
			hit, found = a, true
		case !t.Observe && slices.Contains(by, t.Rule):
			hit, found = a, true
		case by != nil:
			// Another rule (a burst) limited first: wait it out; the
			// target's count carries on across the wait.
			retry, _ := strconv.Atoi(a.header.Get("Retry-After"))
			if err := o.Sleep(ctx, time.Duration(max(retry, 1))*time.Second); err != nil {
				return fail("limited", "waiting out %v after request %d: %v", by, res.Requests, err)
			}
		}
	}
	res.Checks = append(res.Checks, Check{Name: "limited", OK: true, Detail: fmt.Sprintf("after %d requests", res.Requests)})
	if t.Observe {
		res.Checks = append(res.Checks, checkObserve(t, hit)...)
		return res
	}
	res.Checks = append(res.Checks, checkBlocked(t, hit)...)
	res.Checks = append(res.Checks, o.checkLifts(ctx, t, hit, &res))
	return res
}

// checkLifts waits the 429's Retry-After and expects the next request
// not to be limited by the rule.
func (o Options) checkLifts(ctx context.Context, t Target, hit answer, res *Result) Check {
	c := Check{Name: "lifts after Retry-After"}
	retry, err := strconv.Atoi(hit.header.Get("Retry-After"))
	if err != nil || retry < 1 {
		c.Detail = "no usable Retry-After to wait"
		return c
	}
	if err := o.Sleep(ctx, time.Duration(retry)*time.Second+250*time.Millisecond); err != nil {
		c.Detail = err.Error()
		return c
	}
	a, err := o.send(ctx, t)
	res.Requests++
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	if by, readable := blockedBy(a); !readable || slices.Contains(by, t.Rule) {
		c.Detail = fmt.Sprintf("still 429 %d s later (violated-policies %v)", retry, by)
		return c
	}
	c.OK, c.Detail = true, fmt.Sprintf("%d after %d s", a.status, retry)
	return c
}

func checkObserve(t Target, a answer) []Check {
	policy := a.header.Get("RateLimit-Policy")
	return []Check{
		{Name: "observe passes", OK: a.status != http.StatusTooManyRequests, Detail: strconv.Itoa(a.status)},
		{Name: "RateLimit-Policy", OK: hasMember(policy, t.Rule, t.Limit, t.Window), Detail: policy},
	}
}

// checkBlocked checks a 429 that names t's rule.
func checkBlocked(t Target, a answer) []Check {
	h := a.header
	window := int64((t.Window + time.Second - 1) / time.Second)
	var out []Check
	add := func(name string, ok bool, format string, args ...any) {
		out = append(out, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	}
	add("status", a.status == http.StatusTooManyRequests, "%d", a.status)
	retry, err := strconv.ParseInt(h.Get("Retry-After"), 10, 64)
	add("Retry-After", err == nil && retry >= 1 && retry <= window, "%q (whole seconds, 1..%d)", h.Get("Retry-After"), window)
	for _, name := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		v, err := strconv.ParseInt(h.Get(name), 10, 64)
		ok := err == nil && v >= 0
		switch name {
		case "X-RateLimit-Remaining":
			ok = ok && v == 0
		case "X-RateLimit-Reset":
			ok = ok && v >= 1
		case "X-RateLimit-Limit":
			ok = ok && v >= 1
		}
		add(name, ok, "%q", h.Get(name))
	}
	policy, state := h.Get("RateLimit-Policy"), h.Get("RateLimit")
	add("RateLimit-Policy", hasMember(policy, t.Rule, t.Limit, t.Window), "%q (want %q;q=%d;w=%d)", policy, t.Rule, t.Limit, window)
	add("RateLimit", hasState(state, t.Rule), "%q (want %q;r=0;t=N≥1)", state, t.Rule)
	ct := h.Get("Content-Type")
	add("Content-Type", strings.HasPrefix(ct, "application/problem+json"), "%q", ct)
	add("Content-Language", strings.EqualFold(h.Get("Content-Language"), "pt-BR"), "%q", h.Get("Content-Language"))
	var p problem
	if err := json.Unmarshal(a.body, &p); err != nil {
		add("problem body", false, "not JSON: %v", err)
		return out
	}
	add("problem type", p.Type == ProblemType && p.Status == http.StatusTooManyRequests && p.Title != "", "type %q status %d title %q", p.Type, p.Status, p.Title)
	add("problem scope", p.Scope == t.Scope || len(p.ViolatedPolicies) > 1, "%q (want %q)", p.Scope, t.Scope)
	add("problem retry_after", p.RetryAfter == retry, "%d (Retry-After %d)", p.RetryAfter, retry)
	want := strings.ReplaceAll(t.Message, "{retry_after}", strconv.FormatInt(p.RetryAfter, 10))
	// With two rules blocking, the detail is the most restrictive one's.
	add("PT-BR message", p.Detail == want || len(p.ViolatedPolicies) > 1, "%q (want %q)", p.Detail, want)
	return out
}

// hasMember reports whether a RateLimit-Policy list names rule with
// q=limit and w=window (whole seconds).
func hasMember(list, rule string, limit int64, window time.Duration) bool {
	w := int64((window + time.Second - 1) / time.Second)
	for _, params := range members(list, rule) {
		if params["q"] == strconv.FormatInt(limit, 10) && params["w"] == strconv.FormatInt(w, 10) {
			return true
		}
	}
	return false
}

// hasState reports whether a RateLimit list has rule with r=0 and t ≥ 1.
func hasState(list, rule string) bool {
	for _, params := range members(list, rule) {
		if t, err := strconv.Atoi(params["t"]); err == nil && t >= 1 && params["r"] == "0" {
			return true
		}
	}
	return false
}

// members returns the parameters of each member of a structured-field
// list (RFC 9651 §3.1) whose item is the string rule: `"burst";q=50;w=5`.
func members(list, rule string) []map[string]string {
	var out []map[string]string
	for m := range strings.SplitSeq(list, ",") {
		parts := strings.Split(strings.TrimSpace(m), ";")
		if name, err := strconv.Unquote(parts[0]); err != nil || name != rule {
			continue
		}
		params := map[string]string{}
		for _, p := range parts[1:] {
			if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok {
				params[k] = v
			}
		}
		out = append(out, params)
	}
	return out
}

// redirectHint explains a probe that found no limit when the last answer
// was a redirect (the probe follows none): "; the last answer was status
// 302, a redirect to …". Empty for any other answer.
func redirectHint(a answer) string {
	if err := egress.RedirectError(&http.Response{StatusCode: a.status, Header: a.header}); err != nil {
		return "; the last answer was " + err.Error() + " (probe the path it redirects to)"
	}
	return ""
}
