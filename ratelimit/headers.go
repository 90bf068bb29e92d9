package ratelimit

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Response header names.
const (
	HeaderRetryAfter = "Retry-After"
	HeaderLimit      = "X-RateLimit-Limit"
	HeaderRemaining  = "X-RateLimit-Remaining"
	HeaderReset      = "X-RateLimit-Reset"
	HeaderPolicy     = "RateLimit-Policy"
	HeaderRateLimit  = "RateLimit"
	// HeaderWouldBlock marks a request an observe-mode rule would have
	// blocked, on the response and on the request forwarded upstream (the
	// gateway strips any client-sent copy).
	HeaderWouldBlock = "X-RateLimit-Would-Block"
)

// ProblemType is the RFC 9457 problem type of a 429 (IANA HTTP Problem
// Types registry, "quota-exceeded").
const ProblemType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// problemTitle is the PT-BR title of the 429 problem.
const problemTitle = "Muitas requisições"

// ceilSeconds rounds d up to whole seconds, 0 for d ≤ 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// RetryAfterSeconds is the Retry-After of v: the longest RetryAfter of the
// rules that block, in whole seconds rounded up, at least 1 (docs/rate-limiting.md, "Responses":
// never 0, never negative, never milliseconds). 0 when v does not block.
func (v Verdict) RetryAfterSeconds() int64 {
	var longest time.Duration
	blocked := false
	for _, d := range v.Decisions {
		if d.Outcome == OutcomeBlock {
			blocked = true
			longest = max(longest, d.RetryAfter)
		}
	}
	if !blocked {
		return 0
	}
	return max(ceilSeconds(longest), 1)
}

// counted reports whether d took part in the decision (store answered or
// a local decision was made).
func (d Decision) counted() bool {
	return d.Outcome == OutcomeAllow || d.Outcome == OutcomeBlock || d.Outcome == OutcomeWouldBlock
}

// mostRestrictive returns the index of the decision that governs the
// X-RateLimit-* headers: the blocking one with the longest RetryAfter, else
// the one with the fewest remaining requests (ties: the later reset);
// -1 when no decision counted.
func (v Verdict) mostRestrictive() int {
	best := -1
	for i, d := range v.Decisions {
		if !d.counted() {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := v.Decisions[best]
		bBlock, dBlock := b.Outcome == OutcomeBlock, d.Outcome == OutcomeBlock
		switch {
		case dBlock && !bBlock:
			best = i
		case dBlock && bBlock:
			if d.RetryAfter > b.RetryAfter {
				best = i
			}
		case !dBlock && !bBlock:
			if d.Remaining < b.Remaining || (d.Remaining == b.Remaining && d.ResetAfter > b.ResetAfter) {
				best = i
			}
		}
	}
	return best
}

// WriteHeaders sets the rate-limit headers of v on h: X-RateLimit-Limit,
// -Remaining and -Reset (delta seconds) from the most restrictive rule;
// RateLimit-Policy (`"burst";q=50;w=5`) and RateLimit (`"burst";r=0;t=3`)
// listing every rule that was counted, as draft-ietf-httpapi-ratelimit-headers
// structured-field lists with quoted policy names; and
// X-RateLimit-Would-Block: true when an observe-mode rule would block.
// Retry-After is written by WriteTooManyRequests only. A Verdict with no
// counted rule writes nothing.
func WriteHeaders(h http.Header, v Verdict) {
	if v.WouldBlock() {
		h.Set(HeaderWouldBlock, "true")
	}
	best := v.mostRestrictive()
	if best < 0 {
		return
	}
	b := v.Decisions[best]
	reset := ceilSeconds(b.ResetAfter)
	if b.Outcome == OutcomeBlock {
		reset = max(ceilSeconds(b.RetryAfter), 1)
	}
	h.Set(HeaderLimit, strconv.FormatInt(b.Limit, 10))
	h.Set(HeaderRemaining, strconv.FormatInt(b.Remaining, 10))
	h.Set(HeaderReset, strconv.FormatInt(reset, 10))
	var policy, state strings.Builder
	for _, d := range v.Decisions {
		if !d.counted() {
			continue
		}
		if policy.Len() > 0 {
			policy.WriteString(", ")
			state.WriteString(", ")
		}
		policy.WriteString(strconv.Quote(d.Rule))
		policy.WriteString(";q=")
		policy.WriteString(strconv.FormatInt(d.Limit, 10))
		policy.WriteString(";w=")
		policy.WriteString(strconv.FormatInt(ceilSeconds(d.Window), 10))
		t := ceilSeconds(d.ResetAfter)
		if d.Outcome == OutcomeBlock {
			t = max(ceilSeconds(d.RetryAfter), 1)
		}
		state.WriteString(strconv.Quote(d.Rule))
		state.WriteString(";r=")
		state.WriteString(strconv.FormatInt(d.Remaining, 10))
		state.WriteString(";t=")
		state.WriteString(strconv.FormatInt(t, 10))
	}
	h.Set(HeaderPolicy, policy.String())
	h.Set(HeaderRateLimit, state.String())
}

// Problem is the RFC 9457 body of a 429 (docs/rate-limiting.md).
type Problem struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies"`
	Scope            string   `json:"scope"`
	RetryAfter       int64    `json:"retry_after"`
}

// NewProblem returns the problem body for a blocked v: detail is the PT-BR
// message of the most restrictive blocking rule with {retry_after}
// replaced, violated-policies every blocking rule.
func NewProblem(v Verdict) Problem {
	p := Problem{
		Type:             ProblemType,
		Title:            problemTitle,
		Status:           http.StatusTooManyRequests,
		RetryAfter:       max(v.RetryAfterSeconds(), 1),
		ViolatedPolicies: []string{},
	}
	for _, d := range v.Decisions {
		if d.Outcome == OutcomeBlock {
			p.ViolatedPolicies = append(p.ViolatedPolicies, d.Rule)
		}
	}
	if best := v.mostRestrictive(); best >= 0 {
		b := v.Decisions[best]
		p.Scope, p.Detail = b.Scope.String(), b.Message
		if p.Detail == "" {
			p.Detail = expandMessage(defaultMessages[b.Scope], time.Duration(p.RetryAfter)*time.Second)
		}
	}
	return p
}

// WriteTooManyRequests writes the whole 429 for a blocked v: the headers of
// WriteHeaders, Retry-After (whole seconds ≥ 1), Cache-Control: no-store,
// Content-Type application/problem+json, Content-Language pt-BR and the
// Problem body. Headers already on w (CORS, Vary) are kept.
func WriteTooManyRequests(w http.ResponseWriter, v Verdict) {
	h := w.Header()
	WriteHeaders(h, v)
	p := NewProblem(v)
	body, _ := json.Marshal(p) // plain strings and integers: cannot fail
	h.Set(HeaderRetryAfter, strconv.FormatInt(p.RetryAfter, 10))
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Language", "pt-BR")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(append(body, '\n'))
}
